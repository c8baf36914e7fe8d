//! The split program's memory plan (issue 13). The arena is planned before steps split
//! (`memory::assign_buffers`), when a value is one allocation; after the split its row halves
//! are written and read by steps pinned to different workers. Reusing a range, that plan only
//! knew that the new value's writer follows every step that touched the old one, not which
//! half follows which: a `[32, 128]` value placed where a `[32, 512]` one lived has both its
//! halves in the first half of the old one, so the second worker's half of one time step
//! waited for the first worker's (`JANUS_SCHED_DEBUG=2`).
//!
//! Here each root value is cut into pieces that no step's view straddles (a value only ever
//! touched by halves becomes two pieces), and the pieces are placed again in the split
//! program's step order (`memory::place`): a range is reused where each writer of the new
//! piece already follows every step that touched the old occupant of the elements it writes,
//! through the elements it reads, or where those steps ran on its own worker, or long enough
//! before it, counting the steps it depends on ([`SETTLED_WORK`]); else the piece takes fresh
//! space. The plan is kept only if its arena is no larger than the whole program's: on this
//! 2-core machine a larger footprint cost the CNN and Transformer steps more than the
//! couplings did (docs/perf/2026-11-28.md).

use crate::exec::free::Fallback;
use crate::exec::lower::{BufRef, Lowered, StepKind, ValRef};
use crate::exec::memory::{Placed, Unit, place};
use crate::shape::{Shape, Strides};

/// Estimated work (`schedule::cost`) between the last user of a range and the first writer of
/// a new piece, in step order, counting only steps that writer depends on (`free::settled`),
/// past which reusing the range orders nothing that has not
/// already happened: about 20 µs of GEMM per worker. In-process alternations of the LSTM step
/// (`cargo run --release --example bench -- --only replan`) ran as fast with 4M as with no
/// such reuse at all (and its arena shrank by a fifth); 1M was slower.
const SETTLED_WORK: u64 = 4 << 20;

/// A value's element range inside its root, for those that touch memory.
fn extent(v: &ValRef) -> Option<(usize, usize)> {
    (v.shape.elems() > 0).then(|| (v.offset, v.offset + v.layout().span()))
}

/// Per root value in an arena, the element ranges its views touch, merged into pieces.
fn pieces(l: &Lowered, in_arena: &[bool]) -> Vec<Vec<(usize, usize)>> {
    let mut pieces: Vec<Vec<(usize, usize)>> = vec![Vec::new(); l.vals.len()];
    for st in &l.steps {
        for v in st.kind.reads().into_iter().chain(st.kind.writes()) {
            if let Some(e) = l.vals[v].as_ref().and_then(extent).filter(|_| in_arena[v]) {
                pieces[l.roots[v]].push(e);
            }
        }
    }
    for p in &mut pieces {
        p.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(p.len());
        for &(lo, hi) in p.iter() {
            match merged.last_mut() {
                Some(last) if lo < last.1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        *p = merged;
    }
    pieces
}

/// Replaces `l`'s arena plan with one placing the pieces of its arena values, unless that
/// plan's arena would be larger.
pub(crate) fn replan(l: &mut Lowered) {
    let n = l.vals.len();
    let in_arena: Vec<bool> = (0..n)
        .map(|i| l.vals[l.roots[i]].as_ref().is_some_and(|v| matches!(v.buf, BufRef::Arena(_))))
        .collect();
    let pieces = pieces(l, &in_arena);
    // The units: a piece each, and every other root (and an arena root none of whose views
    // touches memory) as one unit outside the arena.
    let mut units: Vec<Unit> = Vec::new();
    let mut first_unit = vec![usize::MAX; n];
    let mut piece_of: Vec<(usize, usize)> = Vec::new(); // per unit: its root, and where in it
    for r in (0..n).filter(|&r| l.roots[r] == r) {
        let Some(v) = l.vals[r].as_ref() else { continue };
        first_unit[r] = units.len();
        if pieces[r].is_empty() {
            units.push(Unit { dtype: v.dtype, len: 0, arena: false });
            piece_of.push((r, 0));
        }
        for &(lo, hi) in &pieces[r] {
            units.push(Unit { dtype: v.dtype, len: hi - lo, arena: true });
            piece_of.push((r, lo));
        }
    }
    // The unit of each value: the piece holding its extent (none for a view that no step
    // touches and that straddles pieces, or a whole root cut in pieces).
    let unit_of: Vec<Option<usize>> = (0..n)
        .map(|i| {
            let r = l.roots[i];
            let first = *first_unit.get(r).filter(|&&f| f != usize::MAX)?;
            match l.vals[i].as_ref().and_then(extent) {
                Some((lo, hi)) if !pieces[r].is_empty() => {
                    pieces[r].iter().position(|&(a, b)| a <= lo && hi <= b).map(|k| first + k)
                }
                _ => Some(first),
            }
        })
        .collect();
    let unit = |i: usize| unit_of[i].expect("a value a step touches lies in one piece");
    let step_unit: Vec<usize> = unit_of.iter().map(|u| u.unwrap_or(usize::MAX)).collect();
    // A value's elements inside its piece.
    let vals = &l.vals;
    let within = |i: usize| {
        let base = piece_of[unit(i)].1;
        vals[i].as_ref().and_then(extent).map_or((0, 0), |(lo, hi)| (lo - base, hi - base))
    };
    // A GEMM accumulating in place keeps doing so where its addend and result are pieces at
    // the same position of the same length (`place` checks the length and that the addend
    // dies there).
    let at = |i: usize| vals[i].as_ref().map(|v| (v.buf, v.offset));
    let in_place = |s: usize, part: usize| match l.steps[s].kind {
        StepKind::MatMul { a, b, c: Some(c), out, .. }
            if part == out
                && at(c) == at(out)
                && unit(a) != unit(c)
                && unit(b) != unit(c)
                && within(c) == within(out) =>
        {
            Some(unit(c))
        }
        _ => None,
    };
    let mut work = vec![0u64; l.steps.len() + 1];
    for (s, st) in l.steps.iter().enumerate() {
        work[s + 1] = work[s] + super::schedule::cost(l, &st.kind);
    }
    let settled = Fallback::Settled { work: &work, min: SETTLED_WORK };
    let Placed { start, plan } = place(&l.steps, &units, &step_unit, within, in_place, settled);
    // Every piece a step touches is written by some step (else it would stay unplaced).
    if plan.planned_bytes > l.plan.planned_bytes
        || units.iter().zip(&start).any(|(u, s)| u.arena && s.is_none())
    {
        return;
    }
    // A root cut in pieces (its own view lies in none) takes its first piece as a flat value;
    // each later piece becomes a root value of its own.
    let mut root_of_unit: Vec<usize> = piece_of.iter().map(|&(r, _)| r).collect();
    for (u, p) in units.iter().enumerate() {
        let r = piece_of[u].0;
        if !p.arena || unit_of[r].is_some() {
            continue;
        }
        let flat = Some(ValRef {
            buf: BufRef::Arena(start[u].expect("placed")),
            len: p.len,
            dtype: p.dtype,
            shape: Shape::from(&[p.len][..]),
            strides: Strides::from_slice(&[1]),
            offset: 0,
        });
        if u == first_unit[r] {
            l.vals[r] = flat;
        } else {
            root_of_unit[u] = l.vals.len();
            l.vals.push(flat);
            l.roots.push(root_of_unit[u]);
        }
    }
    // Every view of a piece moves with it.
    for i in 0..n {
        if !in_arena[i] || (i == l.roots[i] && unit_of[i].is_none()) {
            continue;
        }
        let Some(u) = unit_of[i] else {
            l.vals[i] = None; // no step touches it
            continue;
        };
        let Some(v) = l.vals[i].as_mut() else { continue };
        v.buf = BufRef::Arena(start[u].unwrap_or(0));
        v.len = units[u].len;
        v.offset = if extent(v).is_some() { v.offset - piece_of[u].1 } else { 0 };
        l.roots[i] = root_of_unit[u];
    }
    l.plan = plan;
}

#[cfg(test)]
mod tests {
    use super::replan;
    use crate::exec::free::Ancestry;
    use crate::exec::lower::{Lowered, lower};
    use crate::exec::memory::{check, dependencies, validate};
    use crate::passes::testing::trace;
    use crate::tensor::Tensor;

    /// Orderings between steps pinned to different workers that the data flow does not imply:
    /// a step waiting for a step of the other worker only because it reuses memory that step
    /// touched.
    fn couplings(l: &Lowered) -> usize {
        let at = |v: usize| {
            let x = l.vals[v].as_ref().expect("steps' values");
            let span = if x.shape.elems() == 0 { 0 } else { x.layout().span() };
            (l.roots[v], x.offset, x.offset + span)
        };
        let flow = Ancestry::new(&l.steps, l.vals.len(), at).expect("a short program");
        let worker = |s: usize| l.steps[s].worker;
        let deps = dependencies(l);
        (deps.iter().enumerate())
            .flat_map(|(s, d)| d.iter().map(move |&p| (s, p)))
            .filter(|&(s, p)| worker(s) != 0 && worker(p) != 0 && worker(s) != worker(p))
            .filter(|&(s, p)| !flow.precedes(p, s))
            .count()
    }

    /// An LSTM-like recurrence (gates four times the state's width, so a state reuses part of
    /// a freed gate block), split in row halves: the whole program's plan couples the two
    /// workers' chains, the pieces' plan does not, keeps the plan's invariants and an arena
    /// no larger, and the program still computes the same bits.
    #[test]
    fn pieces_of_split_values_reuse_memory_without_coupling_the_workers() {
        crate::random::manual_seed(3);
        let (b, h) = (8, 4);
        let inputs = [
            Tensor::randn([b, h]),
            Tensor::randn([h, 4 * h]),
            Tensor::randn([b, 4 * h]),
            Tensor::randn([h, 3]),
        ];
        let program = |x: &[Tensor]| {
            let (mut hs, mut c) = (x[0].clone(), x[0].clone());
            let mut loss = Tensor::zeros([b]);
            for _ in 0..6 {
                let g = hs.matmul(&x[1]) + &x[2];
                let (i, f) = (g.narrow(1, 0, h).sigmoid(), g.narrow(1, h, h).sigmoid());
                let (o, u) = (g.narrow(1, 2 * h, h).sigmoid(), g.narrow(1, 3 * h, h).tanh());
                c = &f * &c + &i * &u;
                hs = &o * c.tanh();
                loss += hs.matmul(&x[3]).log_softmax(1).sum_dims(&[1], false);
            }
            vec![loss]
        };
        let (g, _) = crate::passes::optimize(trace(&inputs, program));
        let l = lower(&g);
        let whole = super::super::split::split_rows(&l, 0, |_| 1).expect("the recurrence splits");
        let mut pieces = super::super::split::split_rows(&l, 0, |_| 1).expect("the recurrence splits");
        replan(&mut pieces);
        validate(&pieces);
        check(&pieces).unwrap();
        let (before, after) = (couplings(&whole), couplings(&pieces));
        assert!(before > 0, "the whole program's plan no longer couples the workers: nothing to test");
        assert_eq!(after, 0, "the pieces' plan couples the workers ({before} couplings before)");
        assert!(pieces.plan.planned_bytes <= whole.plan.planned_bytes);
        assert_eq!(pieces.plan.planned_bytes, pieces.plan.arena_bytes());
        let plan = super::super::CpuPlan::with_split(&l, Some(0));
        let bits = |t: &[Tensor]| t[0].to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let serial = plan.run_as(&l, &inputs, Some(false));
        assert_eq!(bits(&serial), bits(&plan.run_as(&l, &inputs, Some(true))));
        for (x, y) in serial[0].to_vec::<f32>().iter().zip(program(&inputs)[0].to_vec::<f32>()) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{x} vs eager {y}");
        }
    }
}
