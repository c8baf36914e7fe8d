//! Splitting large steps into two halves along their leading dimension, so that the two workers
//! can share one step's work (issue 13). The halves of a GEMM take half of the rows of the left
//! factor and of the result each; the halves of a fused elementwise program, or of a
//! concatenation along a later dimension, half of every row-indexed operand. Row-aligned
//! chains then split into two independent chains: the next step's lower half reads only the
//! rows the previous step's lower half wrote, and the schedule orders steps by the element
//! ranges they read and write (`memory::dependencies`), so the two halves of an RNN's
//! recurrence run side by side, one per worker, and meet only where a step needs every row
//! (a weight gradient's reduction over the batch).
//!
//! Splitting changes no arithmetic except the GEMM's blocking, and the split program is the
//! one that runs whatever the worker count, so results do not depend on it.

use crate::exec::lower::{Lowered, Step, StepKind, ValRef};
use crate::graph::fused::FusedProgram;
use crate::ops::TensorType;
use crate::shape::{Shape, Strides};
use smallvec::SmallVec;
use std::sync::Arc;

/// Steps estimated below this much work (see `schedule::cost`) stay whole: a handoff between
/// the workers costs about as much as a microsecond of work.
pub(crate) const SPLIT_MIN_COST: u64 = 32_768;

/// The least cost of a step to split: [`SPLIT_MIN_COST`], or none under `JANUS_PARALLEL=force`.
pub(crate) fn min_cost() -> u64 {
    if crate::config::config().force_parallel { 0 } else { SPLIT_MIN_COST }
}

/// The program with every splittable step costing at least `min` in two halves, or `None`
/// when no step splits.
pub(crate) fn split_rows(l: &Lowered, min: u64, cost: impl Fn(&StepKind) -> u64) -> Option<Lowered> {
    let mut v = Values { old: l, vals: l.vals.clone(), roots: l.roots.clone() };
    let mut steps = Vec::with_capacity(l.steps.len());
    for st in &l.steps {
        let halves = (cost(&st.kind) >= min).then(|| halves(&st.kind, &mut v)).flatten();
        match halves {
            Some([lo, hi]) => steps.extend([Step { kind: lo }, Step { kind: hi }]),
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
        plan: l.plan.clone(),
        roots: v.roots,
        memos: l.memos.clone(),
    })
}

/// The values of the split program: the old ones, then the halves made for the split steps.
struct Values<'l> {
    old: &'l Lowered,
    vals: Vec<Option<ValRef>>,
    roots: Vec<usize>,
}

impl Values<'_> {
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

    /// Rows of value `i` in its own layout.
    fn own(&mut self, i: usize, part: (usize, usize)) -> usize {
        let v = self.old.vals[i].as_ref().expect("operands and results have values");
        let (dims, strides) = (SmallVec::<[usize; 6]>::from_slice(v.shape.sizes()), v.strides.clone());
        self.rows(i, &dims, &strides, part)
    }
}

/// The two halves of a step, when it splits: a rank-2 or batched GEMM, a fused elementwise
/// program, or a concatenation along a dimension after the first, with at least two leading
/// rows and dense results.
fn halves(kind: &StepKind, v: &mut Values) -> Option<[StepKind; 2]> {
    let l = v.old;
    let val = |i: usize| l.vals[i].as_ref();
    let dense = |i: usize| val(i).is_some_and(|v| v.layout().is_dense());
    let leads = |i: usize, lead: usize| val(i).is_some_and(|v| v.shape.sizes().first() == Some(&lead));
    let writes = kind.writes();
    let lead = val(writes[0])?.shape.sizes().first().copied()?;
    if lead < 2 || !writes.iter().all(|&w| dense(w) && leads(w, lead)) {
        return None;
    }
    let cut = [(0, lead / 2), (lead / 2, lead - lead / 2)];
    let kinds = match kind {
        StepKind::MatMul { a, b, c, out } => {
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
                StepKind::MatMul { a: ha, b: hb, c: hc, out: v.own(*out, part) }
            })
        }
        StepKind::Fused { prog, inputs, outputs, reads } => {
            if prog.shape.sizes().first() != Some(&lead) {
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
                StepKind::Fused { prog, inputs: ins, outputs: outs, reads: reads.clone() }
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
mod tests {
    use super::super::CpuPlan;
    use crate::exec::lower::{StepKind, lower};
    use crate::exec::memory::tests::Rng;
    use crate::exec::memory::{check, validate};
    use crate::passes::testing::trace;
    use crate::tensor::Tensor;

    /// A random program over `[r, c]` values: row-aligned GEMM chains (with bias rows, full
    /// addends and in-place accumulation), fused elementwise groups with broadcast operands,
    /// concatenations along columns feeding a GEMM, batched products, and steps that need
    /// every row (reductions over the batch, softmaxes).
    fn program(x: &[Tensor], choices: &[usize]) -> Vec<Tensor> {
        let (r, c) = (x[0].sizes()[0], x[0].sizes()[1]);
        let mut vals = vec![x[0].clone(), x[4].clone()];
        for k in 0..choices.len() / 3 {
            let pick = |j: usize| vals[choices[3 * k + j] % vals.len()].clone();
            let a = pick(0);
            let v = match choices[3 * k + 2] % 9 {
                0 => (&a * 2.0 + &x[3]).tanh(),
                1 => a.matmul(&x[1]),
                2 => a.matmul(&x[1]) + pick(1),
                3 => a.matmul(&x[1]) + &x[3],
                4 => Tensor::cat(&[&a, &pick(1)], 1).matmul(&x[2]).sigmoid(),
                5 => a.softmax(1) * pick(1),
                6 => a.sigmoid() * pick(1) + a.tanh(),
                7 => a.sum_keepdim(0) + pick(1),
                _ => a.reshape([r, c, 1]).matmul(&pick(1).reshape([r, 1, c])).sum_dims(&[2], false),
            };
            vals.push(v);
        }
        let n = vals.len();
        vec![vals[n - 1].clone(), vals[n / 2].clone()]
    }

    /// Split programs keep the memory plan's invariants, give the same bits on two workers as on
    /// one, and match eager execution; the whole program's results are unchanged by the split.
    #[test]
    fn split_programs_match_eager_on_either_worker_count() {
        let mut split_steps = 0;
        for seed in 0..200u64 {
            let mut rng = Rng(seed);
            let (r, c) = (2 + rng.below(9), 1 + rng.below(7));
            let choices: Vec<usize> = (0..3 * (3 + rng.below(14))).map(|_| rng.below(1000)).collect();
            crate::random::manual_seed(seed);
            let inputs = [
                Tensor::randn([r, c]),
                Tensor::randn([c, c]),
                Tensor::randn([2 * c, c]),
                Tensor::randn([c]),
                Tensor::randn([r, c]),
            ];
            let eager = program(&inputs, &choices);
            let g = trace(&inputs, |x| program(x, &choices));
            let (g, _) = crate::passes::optimize(g);
            let l = lower(&g);
            let plan = CpuPlan::with_split(&l, Some(0));
            let s = plan.split.as_ref().unwrap_or(&l);
            validate(s);
            check(s).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            split_steps += s.steps.len() - l.steps.len();
            let one = plan.run_as(&l, &inputs, Some(false));
            for run in 0..3 {
                let two = plan.run_as(&l, &inputs, Some(true));
                for (k, (a, b)) in one.iter().zip(&two).enumerate() {
                    assert_eq!(
                        a.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        b.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "seed {seed}, output {k}, parallel run {run}: the bits depend on the worker count"
                    );
                }
            }
            for (k, (a, e)) in one.iter().zip(&eager).enumerate() {
                for (i, (x, y)) in a.to_vec::<f32>().iter().zip(e.to_vec::<f32>()).enumerate() {
                    assert!(
                        (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                        "seed {seed}, output {k}[{i}]: split {x} vs eager {y}"
                    );
                }
            }
        }
        assert!(split_steps > 400, "only {split_steps} steps were split over all programs");
    }

    /// An RNN-like chain splits into two row chains: each half of a step waits only for the
    /// same half of the step before it.
    #[test]
    fn a_recurrence_splits_into_two_independent_row_chains() {
        let inputs = [Tensor::randn([8, 16]), Tensor::randn([16, 16]), Tensor::randn([16])];
        let g = trace(&inputs, |x| {
            let mut h = x[0].clone();
            for _ in 0..4 {
                h = (h.matmul(&x[1]) + &x[2]).tanh();
            }
            vec![h]
        });
        let (g, _) = crate::passes::optimize(g);
        let l = lower(&g);
        let s = super::split_rows(&l, 0, |_| 1).expect("the chain splits");
        assert_eq!(s.steps.len(), 2 * l.steps.len(), "{:?}", s.steps);
        let deps = crate::exec::memory::dependencies(&s);
        for (i, st) in s.steps.iter().enumerate() {
            // Halves alternate lower, upper; each waits only for steps of its own half, and at
            // least for the one just before it in that half.
            assert!(matches!(st.kind, StepKind::MatMul { .. } | StepKind::Fused { .. }));
            assert!(deps[i].iter().all(|&d| d % 2 == i % 2), "step {i}: {:?}", deps[i]);
            assert_eq!(deps[i].contains(&i.wrapping_sub(2)), i >= 2, "step {i}: {:?}", deps[i]);
        }
    }
}
