//! Memory planning: liveness of every computed value, and their placement in one arena per
//! dtype, reusing a range once its previous occupant's last reader has run; a `matmul_add`
//! whose addend dies at that step accumulates in place. [`check`] states the invariants every
//! `unsafe` access of the executor's steps relies on, and the tests check them on random
//! graphs.

use super::free::{Ancestry, Fallback, FreeList};
use super::lower::{BufRef, Lowered, Placement, Step, StepKind, ValRef, is_dense};
use crate::DType;
use crate::graph::Graph;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap};

/// Planned memory: arena sizes per dtype and the byte counts a report needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Arena elements for f32, f64, i64, bool.
    pub arena_len: [usize; 4],
    /// Bytes of the planned arenas (the peak of intermediate storage).
    pub planned_bytes: usize,
    /// Bytes if every intermediate had a buffer of its own.
    pub naive_bytes: usize,
    /// Intermediates placed in a range another value used before.
    pub buffers_reused: usize,
    /// `matmul_add` steps that accumulate into their addend's buffer.
    pub in_place: usize,
}

impl MemoryPlan {
    /// Bytes of the arenas `arena_len` describes.
    pub(crate) fn arena_bytes(&self) -> usize {
        let sizes = [DType::F32, DType::F64, DType::I64, DType::Bool].map(|d| d.size_in_bytes());
        self.arena_len.iter().zip(sizes).map(|(n, s)| n * s).sum()
    }
}

pub(crate) fn dtype_slot(d: DType) -> usize {
    match d {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::I64 => 2,
        DType::Bool => 3,
    }
}

/// One allocation of the arena plan: a root value (`assign_buffers`), or after the CPU
/// backend's split a piece of one that no step's view straddles (`cpu/split.rs`). Units that
/// are not `arena` (inputs, constants, outputs) are never placed, but the steps writing them
/// still order their readers in the [`Ancestry`].
pub(crate) struct Unit {
    pub(crate) dtype: DType,
    pub(crate) len: usize,
    pub(crate) arena: bool,
}

/// Where [`place`] put the arena units: per unit its start in its dtype's arena, and the plan.
pub(crate) struct Placed {
    pub(crate) start: Vec<Option<usize>>,
    pub(crate) plan: MemoryPlan,
}

/// Liveness of `units` over `steps` (value `v` lies in unit `unit_of[v]`, at its elements
/// `extent_of(v)`) and their placement in one arena per dtype, in step order. A unit written at
/// step `s` whose `in_place(s, v)` names an addend unit that dies at `s`, of its length, takes
/// the addend's range (a GEMM accumulating in place); else free ranges its writers can reuse
/// without a new ordering (`FreeList::find`), else as `fallback` says, else fresh space.
// Long by design: liveness, the free lists and the reuse order are one sweep over the steps.
pub(crate) fn place(
    steps: &[Step],
    units: &[Unit],
    unit_of: &[usize],
    extent_of: impl Fn(usize) -> (usize, usize),
    in_place: impl Fn(usize, usize) -> Option<usize>,
    fallback: Fallback,
) -> Placed {
    let n = units.len();
    let mut def_step = vec![usize::MAX; n];
    let mut last_use = vec![0usize; n];
    // Per unit, the steps touching it (those a reuse of its range must follow).
    let mut users: Vec<SmallVec<[u32; 8]>> = vec![SmallVec::new(); n];
    for (s, st) in steps.iter().enumerate() {
        // By unit: the parts of a concatenation written in place (`lower::alias_cats`) are
        // views of it, so it lives from its first part's write.
        for w in st.kind.writes() {
            let w = unit_of[w];
            def_step[w] = def_step[w].min(s);
            last_use[w] = last_use[w].max(s);
            users[w].push(s as u32);
        }
        for r in st.kind.reads() {
            let r = unit_of[r];
            last_use[r] = last_use[r].max(s);
            users[r].push(s as u32);
        }
    }
    let ancestry = Ancestry::new(steps, n, |v| {
        let (lo, hi) = extent_of(v);
        (unit_of[v], lo, hi)
    });
    // Per unit, the steps writing it and the elements each writes.
    let mut writers: Vec<SmallVec<[(usize, usize, usize); 2]>> = vec![SmallVec::new(); n];
    for (s, st) in steps.iter().enumerate() {
        for w in st.kind.writes() {
            let (lo, hi) = extent_of(w);
            writers[unit_of[w]].push((s, lo, hi.min(units[unit_of[w]].len)));
        }
    }
    let mut plan = MemoryPlan::default();
    let mut start: Vec<Option<usize>> = vec![None; n];
    let mut free: [FreeList; 4] = Default::default();
    let mut dying: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (u, &d) in def_step.iter().enumerate() {
        if d != usize::MAX && units[u].arena {
            dying[last_use[u].max(d)].push(u);
        }
    }
    for (s, st) in steps.iter().enumerate() {
        for part in st.kind.writes() {
            let w = unit_of[part];
            if !units[w].arena || start[w].is_some() {
                continue;
            }
            let (slot, need) = (dtype_slot(units[w].dtype), units[w].len);
            plan.naive_bytes += need * units[w].dtype.size_in_bytes();
            if need == 0 {
                start[w] = Some(0); // touches no memory
                continue;
            }
            if let Some(c) = in_place(s, part)
                && let Some(at) = start[c]
                && last_use[c] == s
                && units[c].len == need
                && units[c].dtype == units[w].dtype
            {
                start[w] = Some(at);
                dying[s].retain(|&v| v != c);
                plan.in_place += 1;
                continue;
            }
            // Over free ranges reusable without a new ordering, the tightest first; else as
            // `fallback` says (the whole program's plan: over those freed first, whose users are
            // the likeliest to have run; a step reading only inputs, such as a one-hot of the
            // targets, follows nothing); else in fresh space, or, over a free range that ends the
            // arena, in part. Without the ancestry (a very long program), the tightest fit.
            let at = match free[slot].find(
                need,
                plan.arena_len[slot],
                &writers[w],
                ancestry.as_ref(),
                steps,
                fallback,
            ) {
                Some(p) => {
                    free[slot].take(p, need);
                    plan.buffers_reused += 1;
                    plan.arena_len[slot] = plan.arena_len[slot].max(p + need);
                    p
                }
                None => {
                    let at = plan.arena_len[slot];
                    plan.arena_len[slot] += need;
                    at
                }
            };
            start[w] = Some(at);
        }
        for &u in &dying[s] {
            if let Some(at) = start[u] {
                free[dtype_slot(units[u].dtype)].release(at, units[u].len, std::mem::take(&mut users[u]), s);
            }
        }
    }
    plan.planned_bytes = plan.arena_bytes();
    Placed { start, plan }
}

/// Liveness and buffer assignment: every root value is a unit of [`place`].
pub(crate) fn assign_buffers(
    g: &Graph,
    steps: Vec<Step>,
    layout: Vec<Option<Placement>>,
    consts: Vec<Tensor>,
    const_of: Vec<Option<usize>>,
    input_of: Vec<Option<usize>>,
    memo_of: &[Option<usize>],
) -> Lowered {
    let n = g.nodes.len();
    let root = |i: usize| layout[i].as_ref().map_or(i, |l| l.root);
    // Roots reaching the outputs get output buffers.
    let mut out_slot: Vec<Option<usize>> = vec![None; n];
    let mut output_bufs: Vec<(DType, usize)> = Vec::new();
    let mut written = vec![false; n];
    steps.iter().flat_map(|st| st.kind.writes()).for_each(|w| written[root(w)] = true);
    for o in &g.outputs {
        let r = root(o.index());
        if written[r] && out_slot[r].is_none() {
            out_slot[r] = Some(output_bufs.len());
            output_bufs.push((g.nodes[r].ty.dtype, g.nodes[r].ty.shape.elems()));
        }
    }
    let units: Vec<Unit> = (0..n)
        .map(|i| Unit {
            dtype: g.nodes[i].ty.dtype,
            len: g.nodes[i].ty.shape.elems(),
            arena: out_slot[i].is_none(),
        })
        .collect();
    let unit_of: Vec<usize> = (0..n).map(root).collect();
    // In place: the addend of a GEMM, dense, of the result's shape, and not also one of the
    // factors (`place` checks that it dies there).
    let in_place = |s: usize, part: usize| match steps[s].kind {
        StepKind::MatMul { a, b, c: Some(c), .. }
            if part == root(part)
                && c == root(c)
                && root(a) != c
                && root(b) != c
                && g.nodes[c].ty == g.nodes[part].ty
                && is_dense(layout[c].as_ref().unwrap(), &g.nodes[c].ty.shape) =>
        {
            Some(c)
        }
        _ => None,
    };
    let Placed { start: arena_start, plan } =
        place(&steps, &units, &unit_of, |_| (0, usize::MAX), in_place, Fallback::FreedFirst);
    // Values.
    let vals: Vec<Option<ValRef>> = (0..n)
        .map(|i| {
            let l = layout[i].as_ref()?;
            let r = l.root;
            let rty = &g.nodes[r].ty;
            let buf = if let Some(k) = input_of[r] {
                BufRef::Input(k)
            } else if let Some(k) = const_of[r] {
                BufRef::Const(k)
            } else if let Some(k) = memo_of[r] {
                BufRef::Memo(k)
            } else if let Some(k) = out_slot[r] {
                BufRef::Output(k)
            } else {
                BufRef::Arena(arena_start[r]?)
            };
            Some(ValRef {
                buf,
                len: rty.shape.elems(),
                dtype: g.nodes[i].ty.dtype,
                shape: g.nodes[i].ty.shape.clone(),
                strides: l.strides.clone(),
                offset: l.offset,
            })
        })
        .collect();
    let outputs = g.outputs.iter().map(|o| o.index()).collect();
    let roots = (0..n).map(|i| layout[i].as_ref().map_or(i, |l| l.root)).collect();
    Lowered { steps, vals, consts, outputs, output_bufs, plan, roots, memos: Vec::new() }
}

/// Checks the plan's safety invariant: no step writes a region it also reads or writes twice,
/// unless it is an in-place GEMM accumulation into its own addend.
pub(crate) fn validate(l: &Lowered) {
    // The element range each value may touch: a step may write one block of a buffer while it
    // reads another (the parts of a concatenation written in place, `lower::alias_cats`).
    let value = |i: usize| l.vals[i].as_ref().expect("value");
    let region = |i: usize| extent(value(i)).map(|e| (e, i));
    let overlap = |(a, i): (Extent, usize), (b, j): (Extent, usize)| {
        a.0 == b.0 && a.1 < b.2 && b.1 < a.2 && !interleaved(value(i), value(j))
    };
    for st in &l.steps {
        let writes: Vec<_> = st.kind.writes().iter().filter_map(|&w| region(w)).collect();
        for (i, w) in writes.iter().enumerate() {
            for w2 in &writes[i + 1..] {
                assert!(!overlap(*w, *w2), "executor plan: a step writes overlapping regions");
            }
        }
        let in_place = match st.kind {
            StepKind::MatMul { c: Some(c), out, .. } => {
                region(c).zip(region(out)).filter(|(a, b)| a.0 == b.0).map(|_| c)
            }
            _ => None,
        };
        for r in st.kind.reads() {
            if Some(r) == in_place {
                continue;
            }
            if let Some(rr) = region(r) {
                assert!(
                    !writes.iter().any(|w| overlap(*w, rr)),
                    "executor plan: a step reads a region it writes"
                );
            }
        }
    }
}

/// Whether two values whose extents overlap still share no element: rows at one stride whose
/// columns within the stride are apart (two parts of a concatenation along a later dimension,
/// written in place by one step, `lower::alias_cats`).
fn interleaved(a: &ValRef, b: &ValRef) -> bool {
    let (Some((_, ra, sa)), Some((_, rb, sb))) = (a.layout().rows(), b.layout().rows()) else { return false };
    // Columns within the stride, from the start of their shared region.
    let (ca, cb) = (a.offset % sa, b.offset % sb);
    a.buf == b.buf && sa == sb && ca + ra <= sa && cb + rb <= sb && (ca + ra <= cb || cb + rb <= ca)
}

/// A buffer's key (see [`extent`]) and a range of its elements.
pub(crate) type Extent = (usize, usize, usize);

/// The element range a value may touch in a buffer steps write (an arena, keyed by its dtype
/// slot, or output buffer `k`, keyed `4 + k`): the bounding range of its layout. Inputs,
/// constants and memos are never written, so reading them orders nothing.
pub(crate) fn extent(v: &ValRef) -> Option<Extent> {
    if v.shape.elems() == 0 {
        return None;
    }
    let (key, base) = match v.buf {
        BufRef::Arena(start) => (dtype_slot(v.dtype), start),
        BufRef::Output(k) => (4 + k, 0),
        _ => return None,
    };
    Some((key, base + v.offset, base + v.offset + v.layout().span()))
}

/// Who last wrote, and who read since, each element range of one buffer: disjoint segments
/// `start -> (end, writer, readers)`.
#[derive(Default)]
struct Accesses(BTreeMap<usize, Segment>);

/// One segment of [`Accesses`]: its end, its last writer and the steps that read it since.
type Segment = (usize, Option<usize>, SmallVec<[usize; 4]>);

impl Accesses {
    /// Makes `x` a segment boundary.
    fn cut(&mut self, x: usize) {
        if let Some((&a, seg)) = self.0.range(..x).next_back()
            && seg.0 > x
        {
            let mut tail = seg.clone();
            self.0.get_mut(&a).expect("listed").0 = x;
            tail.0 = tail.0.max(x);
            self.0.insert(x, tail);
        }
    }

    /// Step `s` reads `lo..hi`: it waits for the last writers there.
    fn read(&mut self, lo: usize, hi: usize, s: usize, deps: &mut SmallVec<[usize; 8]>) {
        self.cut(lo);
        self.cut(hi);
        for (_, (_, writer, readers)) in self.0.range_mut(lo..hi) {
            deps.extend(*writer);
            readers.push(s);
        }
    }

    /// Step `s` writes `lo..hi`: it waits for the last writers there and every reader since.
    fn write(&mut self, lo: usize, hi: usize, s: usize, deps: &mut SmallVec<[usize; 8]>) {
        self.cut(lo);
        self.cut(hi);
        let inside: SmallVec<[usize; 8]> = self.0.range(lo..hi).map(|(&a, _)| a).collect();
        for a in inside {
            let (_, writer, readers) = self.0.remove(&a).expect("listed");
            deps.extend(writer);
            deps.extend(readers);
        }
        self.0.insert(lo, (hi, Some(s), SmallVec::new()));
    }
}

/// For each step, the earlier steps it must wait for when steps run in parallel, from the
/// element ranges every step reads and writes: the last writers of what it reads, and the
/// last writers and readers since of what it overwrites (a range reused by a later value, or
/// an addend accumulated in place). By range rather than by value, so that a step writing one
/// half of a value waits only for the steps that touched that half (`cpu/split.rs`).
pub(crate) fn dependencies(l: &Lowered) -> Vec<SmallVec<[usize; 8]>> {
    let mut mem: HashMap<usize, Accesses> = HashMap::new();
    let val = |i: usize| l.vals[i].as_ref().and_then(extent);
    l.steps
        .iter()
        .enumerate()
        .map(|(s, st)| {
            let mut p: SmallVec<[usize; 8]> = SmallVec::new();
            for (key, lo, hi) in st.kind.reads().into_iter().filter_map(val) {
                mem.entry(key).or_default().read(lo, hi, s, &mut p);
            }
            for (key, lo, hi) in st.kind.writes().into_iter().filter_map(val) {
                mem.entry(key).or_default().write(lo, hi, s, &mut p);
            }
            p.retain(|x| *x != s);
            p.sort_unstable();
            p.dedup();
            p
        })
        .collect()
}

/// The invariants every `unsafe` access of the steps relies on, beyond [`validate`]'s
/// per-step ones: two arena values whose regions overlap are never live at once (a value is
/// live from the first step that writes it, or part of it, to the last step reading it or a
/// view of it), except a GEMM accumulating in place into an addend that dies there; and under
/// the two-worker schedule, every step touching the earlier occupant of a region is ordered
/// before each step that writes the later one (through [`dependencies`]).
pub(crate) fn check(l: &Lowered) -> Result<(), String> {
    let n = l.vals.len();
    // Per root value: the steps writing it (or a part of it), and every step touching it, with
    // the element range it touches.
    let mut writers: Vec<SmallVec<[usize; 2]>> = vec![SmallVec::new(); n];
    let mut users: Vec<Vec<(usize, Option<Extent>)>> = vec![Vec::new(); n];
    let extent_of = |i: usize| l.vals[i].as_ref().and_then(extent);
    for (s, st) in l.steps.iter().enumerate() {
        for w in st.kind.writes() {
            writers[l.roots[w]].push(s);
            users[l.roots[w]].push((s, extent_of(w)));
        }
        for r in st.kind.reads() {
            users[l.roots[r]].push((s, extent_of(r)));
        }
    }
    let def = |i: usize| writers[i].iter().copied().min().unwrap_or(usize::MAX);
    let preds = dependencies(l);
    let before = |a: usize, b: usize| -> bool {
        // Whether step `a` is a (transitive) predecessor of step `b`.
        let mut stack = vec![b];
        let mut seen = vec![false; l.steps.len()];
        while let Some(x) = stack.pop() {
            for &p in &preds[x] {
                if p == a {
                    return true;
                }
                if !seen[p] {
                    seen[p] = true;
                    stack.push(p);
                }
            }
        }
        false
    };
    let arena: Vec<(usize, usize, usize, usize, usize)> = (0..n)
        .filter(|&i| l.roots[i] == i && !writers[i].is_empty())
        .filter_map(|i| {
            let v = l.vals[i].as_ref()?;
            match v.buf {
                BufRef::Arena(start) if v.len > 0 => {
                    let last = users[i].iter().map(|u| u.0).max().unwrap_or(def(i));
                    Some((i, dtype_slot(v.dtype), start, start + v.len, last))
                }
                _ => None,
            }
        })
        .collect();
    for (x, &(a, sa, a0, a1, a_last)) in arena.iter().enumerate() {
        for &(b, sb, b0, b1, b_last) in &arena[x + 1..] {
            if sa != sb || a1 <= b0 || b1 <= a0 {
                continue;
            }
            let (first, f_last, second) = if def(a) <= def(b) { (a, a_last, b) } else { (b, b_last, a) };
            let ws = &writers[second];
            let accumulates = |w: &usize| matches!(l.steps[*w].kind, StepKind::MatMul { c: Some(c), .. } if l.roots[c] == first);
            // Every use of `first` from the first write of `second` on is one of those writes.
            let in_place = ws.iter().all(accumulates)
                && users[first].iter().all(|u| u.0 < def(second) || ws.contains(&u.0));
            if f_last >= def(second) && !in_place {
                return Err(format!("values {first} and {second} share arena memory while both are live"));
            }
            // Each step touching `first` is ordered before each other step writing elements of
            // `second` that it touched (a step split in halves writes only some of them).
            // (A view of no elements touches no memory: a zero-size read of an arena value
            // orders nothing, as in [`dependencies`].)
            let meets = |a: Option<Extent>, b: Option<Extent>| match (a, b) {
                (Some(a), Some(b)) => a.0 == b.0 && a.1 < b.2 && b.1 < a.2,
                _ => false,
            };
            for &w in ws {
                for we in
                    l.steps[w].kind.writes().into_iter().filter(|&x| l.roots[x] == second).map(extent_of)
                {
                    for &(u, ue) in &users[first] {
                        if u != w && meets(ue, we) && !before(u, w) {
                            return Err(format!(
                                "step {u} (using value {first}) is not ordered before step {w} overwriting its memory"
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::passes::testing::trace;

    /// A small deterministic generator (SplitMix64).
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % n as u64) as usize
        }
    }

    /// A random program over `[r, c]` matrices: elementwise chains, products (with and without
    /// addends), reductions, softmaxes and stacked rows, reusing earlier values at random; optimised and
    /// lowered, its plan must satisfy [`check`].
    fn random_plan(seed: u64) -> Result<(), String> {
        let mut rng = Rng(seed);
        let (r, c) = (1 + rng.below(9), 1 + rng.below(9));
        let inputs = [Tensor::ones([r, c]), Tensor::ones([c, c]), Tensor::ones([c])];
        let steps = 4 + rng.below(24);
        let choices: Vec<usize> = (0..steps * 3).map(|_| rng.below(1000)).collect();
        let g = trace(&inputs, |x| {
            let mut vals = vec![x[0].clone()];
            for k in 0..steps {
                let pick = |j: usize| vals[choices[3 * k + j] % vals.len()].clone();
                let a = pick(0);
                let v = match choices[3 * k + 2] % 8 {
                    // Parts written in place into their stack (`lower::alias_cats`).
                    6 => Tensor::cat(&[&a.exp(), &pick(1).matmul(&x[1])], 0).narrow(0, r / 2, r) + &a,
                    0 => (&a * 2.0 + &x[2]).tanh(),
                    1 => a.matmul(&x[1]),
                    2 => a.matmul(&x[1]) + pick(1),
                    3 => a.softmax(1) * pick(1),
                    4 => (a.sum_keepdim(1) + pick(1)).sigmoid(),
                    5 => a.exp().clamp(-3.0, 3.0) - pick(1),
                    _ => a.max_keepdim(1).broadcast_to([r, c]) + &a,
                };
                vals.push(v);
            }
            let n = vals.len();
            vec![vals[n - 1].clone(), vals[n / 2].clone()]
        });
        let (g, _) = crate::passes::optimize(g);
        let l = super::super::lower::lower(&g);
        validate(&l);
        check(&l)
    }

    #[test]
    fn random_plans_never_overlap_live_values() {
        for seed in 0..300 {
            random_plan(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }

    #[test]
    fn the_check_catches_an_overlap() {
        let g = trace(&[Tensor::ones([4, 4])], |x| {
            let a = x[0].exp();
            let b = a.matmul(&x[0]);
            let c = b.matmul(&x[0]) + &a; // `a` is live until here
            vec![c.tanh()]
        });
        let (g, _) = crate::passes::optimize(g);
        let mut l = super::super::lower::lower(&g);
        assert!(check(&l).is_ok());
        // Put every arena value at offset 0: some live ones now share memory.
        for v in l.vals.iter_mut().flatten() {
            if let BufRef::Arena(_) = v.buf {
                v.buf = BufRef::Arena(0);
            }
        }
        assert!(check(&l).is_err(), "an overlap of live values went unnoticed");
    }

    /// A concatenation of computed rows has no copy step: each part's writer writes its block
    /// of the stack, a part that is an input is not written in place (the copy stays), and
    /// the plan keeps its invariants.
    #[test]
    fn stacked_parts_are_written_in_place() {
        let inputs = [Tensor::ones([3, 4]), Tensor::ones([4, 4])];
        let cats = |stack_input: bool| {
            let g = trace(&inputs, |x| {
                let a = x[0].matmul(&x[1]);
                let b = if stack_input { x[0].clone() } else { x[0].exp() };
                vec![Tensor::cat(&[&a, &b], 0).sigmoid()]
            });
            let (g, _) = crate::passes::optimize(g);
            let l = super::super::lower::lower(&g);
            validate(&l);
            check(&l).unwrap();
            let cat_steps = l.steps.iter().filter(|s| matches!(s.kind, StepKind::Cat { .. })).count();
            let roots: Vec<usize> =
                l.steps.iter().flat_map(|s| s.kind.writes()).map(|w| l.roots[w]).collect();
            (cat_steps, roots)
        };
        let (steps, roots) = cats(false);
        assert_eq!(steps, 0, "the stack of computed rows is still copied");
        // The product, the exp and the sigmoid write two values: the stack (both parts) and
        // the result.
        let mut distinct = roots.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 2, "parts are not views of their stack: roots {roots:?}");
        assert_eq!(cats(true).0, 1, "a stacked input must be copied");
    }
}
