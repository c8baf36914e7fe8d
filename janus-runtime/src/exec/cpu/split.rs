//! Splitting large steps into two halves along their leading dimension, so that the two workers
//! can share one step's work (issue 13). The halves of a GEMM take half of the rows of the left
//! factor and of the result each; the halves of a fused elementwise program, of a
//! concatenation along a later dimension, of a copy, of a reduction over later dimensions or
//! of a max pooling, half of every row-indexed operand. A fused program whose sums reduce the
//! leading dimension splits by its sums' fixed parts instead, with a third step adding the two
//! partial sums; `unfold` and `fold` split into parts of their rows and image planes. Row-aligned
//! chains then split into two independent chains: the next step's lower half reads only the
//! rows the previous step's lower half wrote, and the schedule orders steps by the element
//! ranges they read and write (`memory::dependencies`), so the two halves of an RNN's
//! recurrence run side by side, one per worker, and meet only where a step needs every row
//! (a weight gradient's reduction over the batch).
//!
//! Small steps split too where they sit between split steps (`wanted`): left whole, each would
//! make the two chains meet (an RNN's per-step loss backward). A fused program's small sum of
//! its own output over the rows leaves it for a whole reduction (`sums_apart`).
//!
//! A weight gradient `xᵀ·dy` splits along its contraction instead (`contraction_halves`): two
//! partial products over the row halves and an add, so each worker reads the rows its own
//! chain wrote.
//!
//! Splitting changes no arithmetic except the GEMM's blocking (sums split where they add
//! anyway: `janus_kernels::strided::SumPlan::parts`; a contraction split adds its two halves),
//! and the split program is the one that runs whatever the worker count, so results do not
//! depend on it.

use crate::exec::lower::{BufRef, FusedSum, Lowered, ReduceKind, Step, StepKind, ValRef};
use crate::exec::memory::{MemoryPlan, dtype_slot};
use crate::graph::fused::FusedProgram;
use crate::ops::{BinaryOp, Op, TensorType};
use crate::shape::{Shape, Strides};
use janus_kernels::fused::{FBinary, Program};
use smallvec::SmallVec;
use std::sync::Arc;

/// Steps estimated below this much work (see `schedule::cost`) stay whole, unless they sit
/// between split steps (see `wanted`): a handoff between the workers costs about as much as a
/// microsecond of work.
pub(crate) const SPLIT_MIN_COST: u64 = 32_768;

/// The least cost of a step to split: [`SPLIT_MIN_COST`], or none under `JANUS_PARALLEL=force`.
pub(crate) fn min_cost() -> u64 {
    if crate::config::config().force_parallel { 0 } else { SPLIT_MIN_COST }
}

/// The program with every splittable step costing at least `min` in two halves, or `None`
/// when no step splits.
pub(crate) fn split_rows(l: &Lowered, min: u64, cost: impl Fn(&StepKind) -> u64) -> Option<Lowered> {
    let mut v = Values { old: l, vals: l.vals.clone(), roots: l.roots.clone(), plan: l.plan.clone() };
    let mut steps = Vec::with_capacity(l.steps.len());
    let wanted = wanted(l, min, &cost, crate::config::split_joins());
    for (st, &wanted) in l.steps.iter().zip(&wanted) {
        let reduce_rows = |s: &FusedSum| s.strides.first() == Some(&0);
        let parts: Option<SmallVec<[StepKind; 4]>> = match &st.kind {
            _ if !wanted => None,
            StepKind::Fused { sums, .. } if sums.iter().any(reduce_rows) => {
                summing_halves(&st.kind, &mut v).or_else(|| sums_apart(&st.kind, &mut v))
            }
            StepKind::MatMul { .. } if contracts_rows(&st.kind, &v) => contraction_halves(&st.kind, &mut v),
            StepKind::Generic { op: Op::Unfold(_) | Op::Fold(_), .. } => window_halves(&st.kind, &mut v),
            kind => halves(kind, &mut v).map(SmallVec::from_iter),
        };
        match parts {
            // The two halves (always the first two parts) go to a worker each; the steps
            // adding partial sums to either.
            Some(parts) => steps.extend(
                parts
                    .into_iter()
                    .enumerate()
                    .map(|(h, kind)| Step { kind, worker: if h < 2 { h as u8 + 1 } else { 0 } }),
            ),
            None => steps.push(st.clone()),
        }
    }
    if steps.len() == l.steps.len() {
        return None;
    }
    Some(Lowered {
        steps,
        vals: v.vals,
        consts: l.consts.clone(),
        outputs: l.outputs.clone(),
        output_bufs: l.output_bufs.clone(),
        plan: v.plan,
        roots: v.roots,
        memos: l.memos.clone(),
    })
}

/// Per step, whether to split it: when it costs at least `min`, or, with `joins`, when it
/// would otherwise join the workers' chains: a split step reads what it writes, and it reads a
/// value a split step wrote or feeds split steps only (found again as steps join in, so a run
/// of such small steps splits whole). Left whole, such a step needs both halves done before
/// either chain goes on: the LSTM step's cross-entropy backward (a `[32, 65]` row sum and a
/// six-instruction program, each below `min`) made both workers meet at every time step, so
/// whenever one ran slower (a neighbour on its core) the other waited out the difference 32
/// times (`JANUS_TIMELINE`: 65-128 µs per time step with one worker at half speed).
fn wanted(l: &Lowered, min: u64, cost: &impl Fn(&StepKind) -> u64, joins: bool) -> Vec<bool> {
    let mut wanted: Vec<bool> = l.steps.iter().map(|st| cost(&st.kind) >= min).collect();
    if !joins {
        return wanted;
    }
    // Per root value, the steps writing and reading it (or views of it).
    let mut writers: Vec<SmallVec<[usize; 2]>> = vec![SmallVec::new(); l.vals.len()];
    let mut readers: Vec<SmallVec<[usize; 4]>> = vec![SmallVec::new(); l.vals.len()];
    for (s, st) in l.steps.iter().enumerate() {
        st.kind.writes().into_iter().for_each(|w| writers[l.roots[w]].push(s));
        st.kind.reads().into_iter().for_each(|r| readers[l.roots[r]].push(s));
    }
    loop {
        let mut grew = false;
        for (s, st) in l.steps.iter().enumerate() {
            if wanted[s] {
                continue;
            }
            let fed =
                st.kind.reads().into_iter().any(|r| writers[l.roots[r]].iter().any(|&w| w != s && wanted[w]));
            let later = |w: usize| readers[l.roots[w]].iter().copied().filter(move |&t| t > s);
            let feeds = st.kind.writes().into_iter().any(|w| later(w).any(|t| wanted[t]));
            let feeds_only = || st.kind.writes().into_iter().all(|w| later(w).all(|t| wanted[t]));
            if feeds && (fed || feeds_only()) {
                wanted[s] = true;
                grew = true;
            }
        }
        if !grew {
            return wanted;
        }
    }
}

/// The values of the split program: the old ones, then the halves made for the split steps.
struct Values<'l> {
    old: &'l Lowered,
    vals: Vec<Option<ValRef>>,
    roots: Vec<usize>,
    /// The memory plan, grown by the partial sums of split steps.
    plan: MemoryPlan,
}

impl Values<'_> {
    /// Adds `v` as a new value with root `root`.
    fn push(&mut self, v: ValRef, root: Option<usize>) -> usize {
        self.vals.push(Some(v));
        self.roots.push(root.unwrap_or(self.vals.len() - 1));
        self.vals.len() - 1
    }

    /// A fresh dense value shaped like value `like`, in arena space of its own past the end
    /// of the plan's arena (never reused, so it overlaps nothing).
    fn fresh(&mut self, like: usize) -> usize {
        let v = self.old.vals[like].as_ref().expect("results have values");
        let (slot, len) = (dtype_slot(v.dtype), v.shape.elems());
        let start = self.plan.arena_len[slot];
        self.plan.arena_len[slot] += len;
        self.plan.planned_bytes = self.plan.arena_bytes();
        let fresh = ValRef {
            buf: BufRef::Arena(start),
            len,
            dtype: v.dtype,
            shape: v.shape.clone(),
            strides: v.shape.contiguous_strides(),
            offset: 0,
        };
        self.push(fresh, None)
    }

    /// Positions `lo..hi` of dense value `i`, as a new flat value.
    fn flat(&mut self, i: usize, lo: usize, hi: usize) -> usize {
        let v = self.old.vals[i].as_ref().expect("results have values");
        let part = ValRef {
            shape: Shape::from(&[hi - lo][..]),
            strides: Strides::from_slice(&[1]),
            offset: v.offset + lo,
            ..v.clone()
        };
        self.push(part, Some(self.old.roots[i]))
    }

    /// Rows `r0..r0 + rows` of value `i` read through `strides` over a shape with `dims` after
    /// its first (its own layout, or a broadcast one), as a new value.
    fn rows(&mut self, i: usize, dims: &[usize], strides: &Strides, (r0, rows): (usize, usize)) -> usize {
        let v = self.old.vals[i].as_ref().expect("operands and results have values");
        let mut d: SmallVec<[usize; 6]> = SmallVec::from_slice(dims);
        d[0] = rows;
        self.vals.push(Some(ValRef {
            buf: v.buf,
            len: v.len,
            dtype: v.dtype,
            shape: Shape::from(&d[..]),
            strides: strides.clone(),
            offset: v.offset + r0 * strides[0],
        }));
        self.roots.push(self.old.roots[i]);
        self.vals.len() - 1
    }

    /// Columns `c0..c0 + cols` of rank-2 value `i`, in its own layout.
    fn cols(&mut self, i: usize, (c0, cols): (usize, usize)) -> usize {
        let v = self.old.vals[i].as_ref().expect("operands have values");
        let shape = Shape::from(&[v.shape[0], cols][..]);
        let part = ValRef { shape, offset: v.offset + c0 * v.strides[1], ..v.clone() };
        self.push(part, Some(self.old.roots[i]))
    }

    /// Rows of value `i` in its own layout.
    fn own(&mut self, i: usize, part: (usize, usize)) -> usize {
        let v = self.old.vals[i].as_ref().expect("operands and results have values");
        let (dims, strides) = (SmallVec::<[usize; 6]>::from_slice(v.shape.sizes()), v.strides.clone());
        self.rows(i, &dims, &strides, part)
    }
}

/// A fused step with sums, in two halves that each run two of the sums' four fixed parts
/// (`janus_kernels::fused::run_summing`), storing their parts' positions of the results and
/// a partial sum each; then, per sum, a step adding the two partials. The halves add their
/// parts as the whole step would, so the bits are the whole step's.
fn summing_halves(kind: &StepKind, v: &mut Values) -> Option<SmallVec<[StepKind; 4]>> {
    let StepKind::Fused { prog, inputs, outputs, reads, sums, span: None } = kind else { return None };
    let n = prog.shape.elems();
    let (count, chunk) = janus_kernels::strided::SumPlan::parts(n, None);
    let dense = |i: usize| v.old.vals[i].as_ref().is_some_and(|x| x.layout().is_dense());
    let reduce_rows = sums.iter().all(|s| s.strides.first() == Some(&0));
    if count != 4 || !reduce_rows || !outputs.iter().all(|&o| dense(o)) || !sums.iter().all(|s| dense(s.out))
    {
        return None;
    }
    let partials: Vec<[usize; 2]> = sums.iter().map(|s| [v.fresh(s.out), v.fresh(s.out)]).collect();
    let mut steps: SmallVec<[StepKind; 4]> = SmallVec::new();
    for h in 0..2 {
        let (lo, hi) = ((2 * h * chunk).min(n), ((2 * h + 2) * chunk).min(n));
        let outs = outputs.iter().map(|&o| v.flat(o, lo, hi)).collect();
        let sums = sums.iter().zip(&partials).map(|(s, p)| FusedSum { out: p[h], ..s.clone() }).collect();
        steps.push(StepKind::Fused {
            prog: prog.clone(),
            inputs: inputs.clone(),
            outputs: outs,
            reads: reads.clone(),
            sums,
            span: Some(2 * h..2 * h + 2),
        });
    }
    steps.extend(sums.iter().zip(&partials).map(|(s, p)| add_partials(v, s.out, p[0], p[1])));
    Some(steps)
}

/// A fused step whose sums reduce its rows but are too small for fixed parts
/// (`SumPlan::parts`: one part below 64K elements, whose bits a split would change), each sum
/// over one of the program's outputs: the program in row halves without its sums, then each
/// sum as a reduction of that output, whole (the same sum, row by row in order, as the fused
/// one and eager's: `janus_kernels::reduce::sum`). The halves keep the workers' chains apart
/// (a cross-entropy backward's logit gradient and its bias sum); the sums read both halves but
/// nothing in the chains waits for them.
fn sums_apart(kind: &StepKind, v: &mut Values) -> Option<SmallVec<[StepKind; 4]>> {
    let StepKind::Fused { prog, inputs, outputs, reads, sums, span: None } = kind else { return None };
    // The reduction kernel sums floating-point values.
    if !prog.dtype.is_float() {
        return None;
    }
    let dims = prog.shape.sizes();
    let mut reductions: SmallVec<[StepKind; 4]> = SmallVec::new();
    for s in sums {
        let k = prog.program.outputs.iter().position(|&r| r == s.reg)?;
        let x = outputs[k];
        let dense = |i: usize| v.old.vals[i].as_ref().is_some_and(|x| x.layout().is_dense());
        // The summed dimensions, one run from the first: `ReduceDims` sums `n` positions
        // between `outer` = 1 and `inner`.
        let summed = s.strides.iter().take_while(|&&st| st == 0).count();
        if summed == 0 || s.strides[summed..].contains(&0) || !dense(x) || !dense(s.out) {
            return None;
        }
        let dims = janus_kernels::reduce::ReduceDims {
            outer: 1,
            n: dims[..summed].iter().product(),
            inner: dims[summed..].iter().product(),
        };
        reductions.push(StepKind::Reduce { kind: ReduceKind::Sum, x, dims, out: s.out });
    }
    let whole = StepKind::Fused {
        prog: prog.clone(),
        inputs: inputs.clone(),
        outputs: outputs.clone(),
        reads: reads.clone(),
        sums: Vec::new(),
        span: None,
    };
    let mut steps: SmallVec<[StepKind; 4]> = SmallVec::from_iter(halves(&whole, v)?);
    steps.extend(reductions);
    Some(steps)
}

/// Whether a GEMM splits along its contraction rather than its result's rows: a rank-2
/// weight gradient `xᵀ·dy` over a batch, its left factor read transposed (the contraction
/// runs down the stored rows of both factors) and its contraction at least twice its result's
/// rows (see [`contraction_halves`]). Forward products keep their row halves, whose bits are
/// eager's.
fn contracts_rows(kind: &StepKind, v: &Values) -> bool {
    let StepKind::MatMul { a, b, out, .. } = kind else { return false };
    let val = |i: usize| v.old.vals[i].as_ref();
    let (Some(va), Some(vb), Some(vo)) = (val(*a), val(*b), val(*out)) else { return false };
    if va.shape.rank() != 2 || vb.shape.rank() != 2 || !vo.layout().is_dense() {
        return false;
    }
    let (m, k) = (va.shape[0], va.shape[1]);
    let transposed = va.strides[0] == 1 && va.strides[1] >= m && m > 1;
    transposed && k >= 16 && k >= 2 * m
}

/// A GEMM in two halves of its contraction, each writing a partial product of the whole result
/// (the first with the addend, if any), then a step adding the partials. A weight gradient's
/// operands come from row-split chains, one half per worker: split by contraction, each worker
/// reads the rows its own chain wrote, where halves of the result's rows would each read every
/// row of both operands from both workers' caches (CartPole's `[4, 500] @ [500, 128]`: 7.8 µs
/// of work on one worker, about 40 µs on two split by result rows). The sum is the two halves'
/// products added: a GEMM blocking like any other (the split program runs whatever the worker
/// count).
fn contraction_halves(kind: &StepKind, v: &mut Values) -> Option<SmallVec<[StepKind; 4]>> {
    // A relu applies to the whole sum, which no partial product holds.
    let StepKind::MatMul { a, b, c, out, relu: false } = kind else { return None };
    let k = v.old.vals[*a].as_ref()?.shape[1];
    let cut = [(0, k / 2), (k / 2, k - k / 2)];
    let partials = [v.fresh(*out), v.fresh(*out)];
    let mut steps: SmallVec<[StepKind; 4]> = SmallVec::new();
    for (h, part) in cut.into_iter().enumerate() {
        steps.push(StepKind::MatMul {
            a: v.cols(*a, part),
            b: v.own(*b, part),
            c: if h == 0 { *c } else { None },
            out: partials[h],
            relu: false,
        });
    }
    steps.push(add_partials(v, *out, partials[0], partials[1]));
    Some(steps)
}

/// An `unfold` in two halves of its rows `(c, i, j, b)`, or a `fold` in two halves of its
/// image planes `(b, c)`: each half reads the whole input and writes its own range of the
/// result, with the whole step's arithmetic.
fn window_halves(kind: &StepKind, v: &mut Values) -> Option<SmallVec<[StepKind; 4]>> {
    let StepKind::Generic { op, inputs, out } = kind else { return None };
    let dense =
        |i: usize| v.old.vals[i].as_ref().is_some_and(|x| x.layout().is_dense() && x.dtype.is_float());
    if inputs.len() != 1 || !dense(inputs[0]) || !dense(*out) {
        return None;
    }
    let (xs, os) = (v.old.vals[inputs[0]].as_ref()?.shape.sizes(), v.old.vals[*out].as_ref()?.shape.sizes());
    // Units: unfold's rows ([C, kh, kw, N] of [C, kh, kw, N, OH, OW]), fold's planes ([N, C]).
    let (units, unit) = match op {
        Op::Unfold(_) => (os[..4].iter().product::<usize>(), os[4] * os[5]),
        Op::Fold(_) => (os[0] * os[1], os[2] * os[3]),
        _ => return None,
    };
    if units < 2 || unit == 0 || xs.len() != if matches!(op, Op::Unfold(_)) { 4 } else { 6 } {
        return None;
    }
    let half = units / 2;
    let total = units * unit;
    Some(
        [(0, half * unit), (half * unit, total)]
            .into_iter()
            .zip([0, half])
            .map(|((lo, hi), first)| StepKind::WindowPart {
                op: op.clone(),
                x: inputs[0],
                out: v.flat(*out, lo, hi),
                first,
            })
            .collect(),
    )
}

/// The step writing `out = a + b`, the two halves' partial sums.
fn add_partials(v: &Values, out: usize, a: usize, b: usize) -> StepKind {
    let vo = v.old.vals[out].as_ref().expect("results have values");
    let program = Program::binary(FBinary::Op(BinaryOp::Add));
    let ty = TensorType { shape: vo.shape.clone(), dtype: vo.dtype };
    let prog = FusedProgram {
        program,
        dtype: vo.dtype,
        shape: vo.shape.clone(),
        inputs: vec![vo.dtype; 2],
        outputs: vec![ty],
        ops: vec!["add"],
    };
    let dense = vo.shape.contiguous_strides();
    StepKind::Fused {
        prog: Arc::new(prog),
        inputs: SmallVec::from_slice(&[a, b]),
        outputs: SmallVec::from_slice(&[out]),
        reads: SmallVec::from_iter([dense.clone(), dense]),
        sums: Vec::new(),
        span: None,
    }
}

/// The two halves of a step, when it splits: a rank-2 or batched GEMM, a fused elementwise
/// program, a concatenation along a dimension after the first, a copy, a reduction or softmax
/// over later dimensions, or a max pooling (or its backward) over dense samples, with at least
/// two leading rows and dense results.
fn halves(kind: &StepKind, v: &mut Values) -> Option<[StepKind; 2]> {
    let l = v.old;
    let val = |i: usize| l.vals[i].as_ref();
    let dense = |i: usize| val(i).is_some_and(|v| v.layout().is_dense());
    let leads = |i: usize, lead: usize| val(i).is_some_and(|v| v.shape.sizes().first() == Some(&lead));
    let writes = kind.writes();
    let lead = val(writes[0])?.shape.sizes().first().copied()?;
    // A fused program may also write strided rows (parts of a concatenation): its halves
    // write half of the rows each.
    let fused = matches!(kind, StepKind::Fused { .. });
    let writable = |w: usize| dense(w) || (fused && val(w).is_some_and(|v| v.layout().rows().is_some()));
    if lead < 2 || !writes.iter().all(|&w| writable(w) && leads(w, lead)) {
        return None;
    }
    let cut = [(0, lead / 2), (lead / 2, lead - lead / 2)];
    let kinds = match kind {
        StepKind::MatMul { a, b, c, out, relu } => {
            let (va, vb, vo) = (val(*a)?, val(*b)?, val(*out)?);
            let rank = vo.shape.rank();
            // The left factor's leading dimension is the result's (rows, or batches); the
            // right factor shares it only when batched like the result.
            if va.shape.rank() != rank || !(rank == 2 || rank == 3) {
                return None;
            }
            let split_b = rank == 3 && vb.shape.rank() == 3;
            if split_b && vb.shape[0] != lead {
                return None;
            }
            let n = vo.shape[rank - 1];
            let out_dims = SmallVec::<[usize; 6]>::from_slice(vo.shape.sizes());
            let addend = c.map(|c| {
                let vc = val(c).expect("addends have values");
                // A bias row is the same for every result row: both halves read it whole.
                (c, (!super::steps::bias_row(vc, n)).then(|| vc.layout().broadcast_to(&vo.shape)))
            });
            cut.map(|part| {
                let ha = v.own(*a, part);
                let hb = if split_b { v.own(*b, part) } else { *b };
                let hc = addend.as_ref().map(|(c, st)| match st {
                    Some(st) => v.rows(*c, &out_dims, st, part),
                    None => *c,
                });
                StepKind::MatMul { a: ha, b: hb, c: hc, out: v.own(*out, part), relu: *relu }
            })
        }
        StepKind::Fused { prog, inputs, outputs, reads, sums, span: None } => {
            // Sums that keep the rows split with them, with the same bits (`SumPlan::parts`);
            // those over the rows split by parts (`summing_halves`).
            if prog.shape.sizes().first() != Some(&lead) || sums.iter().any(|s| s.strides[0] == 0) {
                return None;
            }
            let dims = SmallVec::<[usize; 6]>::from_slice(prog.shape.sizes());
            cut.map(|part| {
                let mut d = dims.clone();
                d[0] = part.1;
                let shape = Shape::from(&d[..]);
                let outputs_ty = prog
                    .outputs
                    .iter()
                    .map(|t| TensorType { shape: shape.clone(), dtype: t.dtype })
                    .collect();
                let prog = Arc::new(FusedProgram { shape, outputs: outputs_ty, ..(**prog).clone() });
                // Each operand through its broadcast strides over the program's shape.
                let ins: SmallVec<[usize; 4]> =
                    inputs.iter().zip(reads).map(|(&i, st)| v.rows(i, &dims, st, part)).collect();
                let outs = outputs.iter().map(|&o| v.own(o, part)).collect();
                let sums = sums.iter().map(|s| FusedSum { out: v.own(s.out, part), ..s.clone() }).collect();
                StepKind::Fused { prog, inputs: ins, outputs: outs, reads: reads.clone(), sums, span: None }
            })
        }
        // A reduction, softmax or argmax over later dimensions works row by row of the
        // leading one (`janus_kernels::reduce`: per outer row): each half takes its rows.
        StepKind::Reduce { kind, x, dims, out } => {
            if !leads(*x, lead) || !dense(*x) || dims.outer < lead || dims.outer % lead != 0 {
                return None;
            }
            let per_row = dims.outer / lead;
            cut.map(|part| StepKind::Reduce {
                kind: *kind,
                x: v.own(*x, part),
                dims: janus_kernels::reduce::ReduceDims { outer: per_row * part.1, ..*dims },
                out: v.own(*out, part),
            })
        }
        // A copy (a transpose, a permutation made dense): each half copies its own rows.
        StepKind::Copy { x, out } => {
            if !leads(*x, lead) {
                return None;
            }
            cut.map(|part| StepKind::Copy { x: v.own(*x, part), out: v.own(*out, part) })
        }
        // Pooling works sample by sample: each half pools its own samples.
        StepKind::Generic { op: op @ (Op::MaxPool2d(_) | Op::MaxPool2dBackward(_)), inputs, out } => {
            if !inputs.iter().all(|&i| dense(i) && leads(i, lead)) {
                return None;
            }
            cut.map(|part| StepKind::Generic {
                op: op.clone(),
                inputs: inputs.iter().map(|&i| v.own(i, part)).collect(),
                out: v.own(*out, part),
            })
        }
        StepKind::Cat { dim, parts, out } if *dim > 0 => {
            if !parts.iter().all(|&p| dense(p) && leads(p, lead)) {
                return None;
            }
            cut.map(|part| StepKind::Cat {
                dim: *dim,
                parts: parts.iter().map(|&p| v.own(p, part)).collect(),
                out: v.own(*out, part),
            })
        }
        _ => return None,
    };
    Some(kinds)
}

#[cfg(test)]
mod tests;
