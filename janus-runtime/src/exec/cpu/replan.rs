//! The split program's memory plan (issue 13). The arena is planned before steps split
//! (`memory::assign_buffers`), when a value is one allocation; after the split its row halves
//! are written and read by steps pinned to different workers. Reusing a range, that plan only
//! knew that the new value's writer follows every step that touched the old one, not which
//! half follows which: a `[32, 128]` value placed where a `[32, 512]` one lived has both its
//! halves in the first half of the old one, so the second worker's half of one time step then
//! waited for the first worker's (`JANUS_SCHED_DEBUG=2`), and such couplings idled a worker
//! for about 75 µs per LSTM step.
//!
//! Here each root value is cut into pieces that no step's view straddles (a value only ever
//! touched by halves becomes two pieces), and the pieces are placed again, in the split
//! program's step order, with the same rule as the whole program (`memory::place`): a range
//! is reused without a new ordering only when every step that touched its old occupant
//! precedes the new piece's writer through the values it reads, now per piece.

use crate::exec::lower::{BufRef, Lowered, StepKind, ValRef};
use crate::exec::memory::{Placed, Unit, place};
use crate::shape::{Shape, Strides};

/// A value's element range inside its root, for those that touch memory.
fn extent(v: &ValRef) -> Option<(usize, usize)> {
    (v.shape.elems() > 0).then(|| (v.offset, v.offset + v.layout().span()))
}

/// Replaces `l`'s arena plan with one placing the pieces of its arena values.
pub(crate) fn replan(l: &mut Lowered) {
    let n = l.vals.len();
    let in_arena = |i: usize| l.vals[l.roots[i]].as_ref().is_some_and(|v| matches!(v.buf, BufRef::Arena(_)));
    // Per arena root, the ranges its views touch, merged into pieces.
    let mut pieces: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for st in &l.steps {
        for v in st.kind.reads().into_iter().chain(st.kind.writes()) {
            if in_arena(v)
                && let Some(e) = l.vals[v].as_ref().and_then(extent)
            {
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
    // The units: a piece each, and every other root (and an arena root none of whose views
    // touches memory) as one unit outside the arena.
    let mut units: Vec<Unit> = Vec::new();
    let mut first_unit = vec![usize::MAX; n];
    let mut piece_of: Vec<(usize, usize)> = Vec::new(); // per unit: (root, its lo)
    for r in 0..n {
        if l.roots[r] != r {
            continue;
        }
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
    let step_unit: Vec<usize> = (0..n).map(|i| unit_of[i].unwrap_or(usize::MAX)).collect();
    // A GEMM accumulating in place keeps doing so where its addend and result are pieces at
    // the same position of the same length (`place` checks the length and that the addend
    // dies there).
    let vals = &l.vals;
    let at = |i: usize| vals[i].as_ref().map(|v| (v.buf, v.offset));
    let in_place = |s: usize, part: usize| match l.steps[s].kind {
        StepKind::MatMul { a, b, c: Some(c), out }
            if part == out
                && at(c) == at(out)
                && unit(a) != unit(c)
                && unit(b) != unit(c)
                && vals[c].as_ref()?.offset - piece_of[unit(c)].1
                    == vals[out].as_ref()?.offset - piece_of[unit(out)].1 =>
        {
            Some(unit(c))
        }
        _ => None,
    };
    let Placed { start, plan } = place(&l.steps, &units, &step_unit, |v| vals[v].as_ref().and_then(extent).map_or((0, 0), |(lo, hi)| (lo - piece_of[step_unit[v]].1, hi - piece_of[step_unit[v]].1)), in_place, std::env::var("JANUS_REPLAN").as_deref() == Ok("couple"));
    // Every piece a step touches is written by some step (else it would stay unplaced):
    // keep the whole program's plan otherwise.
    if units.iter().zip(&start).any(|(u, s)| u.arena && s.is_none()) {
        return;
    }
    let arena_val: Vec<bool> = (0..n).map(in_arena).collect();
    // A root cut in pieces (its own view lies in none) takes its first piece as a flat value;
    // each later piece becomes a root value of its own.
    let mut root_of_unit: Vec<usize> = piece_of.iter().map(|&(r, _)| r).collect();
    for (u, p) in units.iter().enumerate() {
        let (r, _) = piece_of[u];
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
        let r = l.roots[i];
        if !arena_val[i] || (i == r && unit_of[r].is_none()) {
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
    if std::env::var("JANUS_REPLAN_DEBUG").is_ok() {
        let before = l.plan.arena_len[0];
        l.plan = plan.clone();
        let cross = crate::exec::memory::false_edges(l);
        eprintln!("replan: steps {} units {} arena f32 {} -> {} false edges (all, cross-worker) {:?}", l.steps.len(), units.len(), before, l.plan.arena_len[0], cross);
    }
    l.plan = plan;
}
