//! Tests of the row split: bits against eager and either worker count, the chains' independence,
//! and which steps split.

use super::super::CpuPlan;
use crate::exec::lower::{Lowered, ReduceKind, StepKind, lower};
use crate::exec::memory::tests::Rng;
use crate::exec::memory::{check, validate};
use crate::passes::testing::trace;
use crate::tensor::Tensor;

/// A random program over `[r, c]` values: row-aligned GEMM chains (with bias rows, full
/// addends and in-place accumulation), fused elementwise groups with broadcast operands,
/// concatenations along columns feeding a GEMM (of existing values, or of fresh results
/// written in place), rows stacked by a concatenation its parts write in place, batched
/// products, and steps that need every row (reductions over the batch, softmaxes).
fn program(x: &[Tensor], choices: &[usize]) -> Vec<Tensor> {
    let (r, c) = (x[0].sizes()[0], x[0].sizes()[1]);
    let mut vals = vec![x[0].clone(), x[4].clone()];
    for k in 0..choices.len() / 3 {
        let pick = |j: usize| vals[choices[3 * k + j] % vals.len()].clone();
        let a = pick(0);
        let v = match choices[3 * k + 2] % 14 {
            // A linear layer's relu, which the product applies in its closing pass
            // (`lower::relu_of_product`), with a bias row or none; the second also read as a
            // mask, as its gradient reads it.
            13 => (a.matmul(&x[1]) + &x[3]).relu(),
            12 => {
                let h = a.matmul(&x[1]).relu();
                h.gt_scalar(0.0).to_dtype(h.dtype()) * pick(1)
            }
            // Columns joined from fresh elementwise results, which their program writes in
            // place as strided rows of the join.
            11 => Tensor::cat(&[&a.tanh(), &(pick(1) * 3.0)], 1).matmul(&x[2]),
            // Rows stacked (written in place into the stack), read across the seam.
            10 => Tensor::cat(&[&a.tanh(), &(pick(1) * 3.0)], 0).narrow(0, r / 2, r).matmul(&x[1]),
            // A weight gradient: the contraction runs over the rows.
            9 => x[4].matmul(&(a.t().matmul(&pick(1)) + &x[1])).sigmoid(),
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
    let (mut split_steps, mut packing) = (0, 0);
    for seed in 0..200u64 {
        let mut rng = Rng(seed);
        // Up to 40 rows: a product contracting them (case 9) then splits by its contraction.
        // One program in four is 16 to 20 wide, so that its shared right factors (`x[1]`,
        // `x[2]`) are packed (`packed_factors.rs`).
        let c = if seed % 4 == 0 { 16 + rng.below(5) } else { 1 + rng.below(7) };
        let r = 2 + rng.below(39);
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
        // Packing forced on, whatever `config::pack` says (where the CPU has the kernel).
        let plan = CpuPlan::with_options(&l, Some(0), true);
        let s = plan.split.as_ref().unwrap_or(&l);
        validate(s);
        check(s).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        split_steps += s.steps.len() - l.steps.len();
        packing += usize::from(!plan.packs.is_empty());
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
            // Within rounding of each element, or of the output's scale as check mode has it
            // (`rt::check::mismatch`): a chain of products can cancel to a value far smaller
            // than its terms (seed 92: an element of 16 in an output up to 3.6e4, where the
            // packed kernel's order was 3x closer to the f64 result than eager's).
            let e = e.to_vec::<f32>();
            let scale = e.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            for (i, (x, y)) in a.to_vec::<f32>().iter().zip(&e).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-4 * (1.0 + y.abs()) || (x - y).abs() <= 1e-5 * scale,
                    "seed {seed}, output {k}[{i}]: split {x} vs eager {y}"
                );
            }
        }
    }
    assert!(split_steps > 400, "only {split_steps} steps were split over all programs");
    if janus_kernels::matmul::packed::available() {
        assert!(packing >= 10, "only {packing} programs packed a right factor");
    }
}

/// A weight gradient `xᵀ·dy` over a batch splits along the batch: two partial products and
/// their sum, the same bits on either worker count, and the product within rounding.
#[test]
fn a_weight_gradient_splits_along_its_contraction() {
    crate::random::manual_seed(5);
    let inputs = [Tensor::randn([64, 4]), Tensor::randn([64, 8]), Tensor::randn([4, 8])];
    let f = |x: &[Tensor]| vec![x[0].t().matmul(&x[1]) + &x[2]];
    let g = trace(&inputs, f);
    let (g, _) = crate::passes::optimize(g);
    let l = lower(&g);
    let plan = CpuPlan::with_split(&l, Some(0));
    let s = plan.split.as_ref().expect("the product splits");
    validate(s);
    check(s).unwrap();
    let gemms: Vec<_> = s.steps.iter().filter(|st| matches!(st.kind, StepKind::MatMul { .. })).collect();
    assert_eq!(gemms.len(), 2, "two partial products");
    for st in gemms {
        let StepKind::MatMul { a, .. } = &st.kind else { unreachable!() };
        assert_eq!(s.vals[*a].as_ref().unwrap().shape.sizes(), [4, 32], "halves of the contraction");
    }
    let one = plan.run_as(&l, &inputs, Some(false));
    let two = plan.run_as(&l, &inputs, Some(true));
    assert_eq!(one[0].to_vec::<f32>(), two[0].to_vec::<f32>());
    let want = f(&inputs)[0].to_vec::<f32>();
    for (x, y) in one[0].to_vec::<f32>().iter().zip(&want) {
        assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{x} vs {y}");
    }
}

/// Sums fused into their elementwise programs give the bits of eager sums, whole or split
/// between the workers by their fixed parts (sums over the first dimension) or by rows.
#[test]
fn fused_sums_give_eager_bits_whole_and_split() {
    let inputs = [Tensor::randn([64, 16, 8, 9]), Tensor::randn([1, 16, 1, 1])];
    let program = |x: &[Tensor]| {
        let y = (&x[0] * &x[1] + 1.0).tanh();
        vec![
            y.sum_dims(&[0, 2, 3], true),
            (&y * &x[0]).sum_dims(&[0, 2, 3], true),
            y.sum_dims(&[3], false),
            y.sum_dims(&[0, 1, 2, 3], false),
            (&y * 2.0).exp(),
        ]
    };
    let summing = |l: &Lowered| {
        l.steps.iter().filter(|s| matches!(&s.kind, StepKind::Fused { sums, .. } if !sums.is_empty())).count()
    };
    for split in [None, Some(0)] {
        assert_eager_bits(&inputs, program, split, |l, s| {
            assert!(summing(l) >= 1, "no sum was fused: {:?}", l.steps);
            if let Some(s) = s {
                let spans =
                    s.steps.iter().filter(|st| matches!(&st.kind, StepKind::Fused { span: Some(_), .. }));
                assert_eq!(spans.count(), 2 * summing(l), "every summing step splits in two");
            }
        });
    }
    // Sums that keep the first dimension (a layer norm's row sums) split with the rows.
    let rows = |x: &[Tensor]| {
        let z = (&x[0] * &x[1]).exp();
        vec![z.sum_dims(&[3], false), z.sum_dims(&[1, 2, 3], true), (&z * 3.0).sum_dims(&[2], true)]
    };
    for split in [None, Some(0)] {
        assert_eager_bits(&inputs, rows, split, |l, s| {
            assert!(summing(l) >= 1, "no sum was fused: {:?}", l.steps);
            if let Some(s) = s {
                let halves = s.steps.iter().filter(
                    |st| matches!(&st.kind, StepKind::Fused { sums, span: None, .. } if !sums.is_empty()),
                );
                assert_eq!(halves.count(), 2 * summing(l), "every summing step splits by rows");
            }
        });
    }
}

/// Max pooling and its backward split by samples, with the bits of eager execution.
#[test]
fn pooling_splits_by_samples_with_eager_bits() {
    use crate::eager::apply;
    use crate::ops::Op;
    use crate::ops::conv::Window2d;
    let inputs = [Tensor::randn([8, 3, 10, 10]), Tensor::randn([8, 3, 4, 4])];
    let program = |x: &[Tensor]| {
        let w = Window2d { kernel: [3, 3], stride: [2, 2], padding: [1, 1], dilation: [1, 1] };
        let y = x[0].max_pool2d([3, 3], [2, 2], [1, 1]);
        // [8, 3, 5, 5] windows; the cotangent is padded from [8, 3, 4, 4].
        let g = x[1].reshape([8, 3, 16]).pad(2, 0, 9).reshape([8, 3, 5, 5]);
        vec![y, apply(Op::MaxPool2dBackward(w), &[&x[0], &g])]
    };
    let pools = |l: &Lowered| {
        let pool = |k: &StepKind| {
            matches!(k, StepKind::Generic { op: Op::MaxPool2d(_) | Op::MaxPool2dBackward(_), .. })
        };
        l.steps.iter().filter(|st| pool(&st.kind)).count()
    };
    assert_eager_bits(&inputs, program, Some(0), |l, s| {
        assert_eq!((pools(l), s.map(pools)), (2, Some(4)), "{:?}", s.map(|s| &s.steps));
    });
}

/// `unfold` (im2col, one input channel as in a first convolution) and `fold` split into
/// parts of their rows and image planes, with the bits of eager execution.
#[test]
fn unfold_and_fold_split_in_parts_with_eager_bits() {
    use crate::eager::apply;
    use crate::ops::conv::{Fold, Unfold, Window2d};
    use crate::ops::{F64Bits, Op};
    let w = Window2d { kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1] };
    let inputs = [Tensor::randn([5, 1, 6, 7]), Tensor::randn([2, 3, 3, 5, 6, 7])];
    let program = |x: &[Tensor]| {
        let unfold = Op::Unfold(Unfold { window: w, pad_value: F64Bits::new(0.0) });
        let fold = Op::Fold(Fold { window: w, size: [6, 7] });
        vec![apply(unfold, &[&x[0]]), apply(fold, &[&x[1]])]
    };
    assert_eager_bits(&inputs, program, Some(0), |_, s| {
        let s = s.expect("unfold and fold split");
        let parts = s.steps.iter().filter(|st| matches!(st.kind, StepKind::WindowPart { .. })).count();
        assert_eq!(parts, 4, "{:?}", s.steps);
    });
}

/// Softmaxes, maxima, argmaxima and log-sum-exps over later dimensions split by rows, with
/// the bits of eager execution.
#[test]
fn row_reductions_split_by_rows_with_eager_bits() {
    let inputs = [Tensor::randn([6, 5, 7])];
    let program = |x: &[Tensor]| {
        let a = x[0].tanh();
        vec![
            a.softmax(2),
            a.log_softmax(1),
            a.max(2),
            a.argmax(1).to_dtype(crate::DType::F32),
            a.logsumexp_keepdim(2),
        ]
    };
    let reduce = |l: &Lowered| l.steps.iter().filter(|st| matches!(st.kind, StepKind::Reduce { .. })).count();
    assert_eager_bits(&inputs, program, Some(0), |l, s| {
        assert_eq!(s.map(reduce), Some(2 * reduce(l)), "every reduction splits: {:?}", l.steps);
    });
}

/// Compiles `program` on `inputs` with steps costing at least `split` split in halves,
/// checks the split plan, lets `inspect` look at the whole and the split steps, and asserts
/// the bits of eager execution on one and on two workers.
fn assert_eager_bits(
    inputs: &[Tensor],
    program: impl Fn(&[Tensor]) -> Vec<Tensor>,
    split: Option<u64>,
    inspect: impl Fn(&Lowered, Option<&Lowered>),
) {
    let eager = program(inputs);
    let (g, _) = crate::passes::optimize(trace(inputs, &program));
    let l = lower(&g);
    let plan = CpuPlan::with_split(&l, split);
    assert_eq!(plan.split.is_some(), split.is_some(), "whether the plan splits");
    if let Some(s) = &plan.split {
        validate(s);
        check(s).unwrap();
    }
    inspect(&l, plan.split.as_ref());
    let bits = |t: &Tensor| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for two in [false, true] {
        let got = plan.run_as(&l, inputs, Some(two));
        for (k, (a, e)) in got.iter().zip(&eager).enumerate() {
            assert_eq!(bits(a), bits(e), "output {k}, split {split:?}, two workers {two}");
        }
    }
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

/// A small step between split steps (a `tanh` and a scale between the products of a
/// recurrence, below the split threshold) splits too, so the chains do not meet at it;
/// without `joins`, or where nothing split reads its result, it stays whole.
#[test]
fn small_steps_between_split_steps_split_with_them() {
    let inputs = [Tensor::randn([8, 16]), Tensor::randn([16, 16])];
    let g = trace(&inputs, |x| {
        let mut h = x[0].clone();
        for _ in 0..3 {
            h = h.matmul(&x[1]).tanh() * 2.0;
        }
        vec![h]
    });
    let (g, _) = crate::passes::optimize(g);
    let l = lower(&g);
    let cost = |k: &StepKind| if matches!(k, StepKind::MatMul { .. }) { 100 } else { 1 };
    let products = l.steps.iter().filter(|st| cost(&st.kind) == 100).count();
    assert_eq!(products, 3, "{:?}", l.steps);
    let small: Vec<usize> = (0..l.steps.len()).filter(|&s| cost(&l.steps[s].kind) == 1).collect();
    // Every small step but the last feeds the next product.
    let last = *small.last().unwrap();
    assert_eq!(
        super::wanted(&l, 10, &cost, false),
        l.steps.iter().map(|st| cost(&st.kind) == 100).collect::<Vec<_>>()
    );
    let joined = super::wanted(&l, 10, &cost, true);
    for &s in &small {
        assert_eq!(joined[s], s != last, "step {s} of {:?}", l.steps);
    }
}

/// A fused program's small sum over its rows of one of its outputs (a cross-entropy
/// backward's bias gradient) leaves the program: row halves without the sum, then the sum
/// as a reduction, with eager's bits. A sum of a register the program does not output
/// keeps the step whole.
#[test]
fn small_row_sums_of_outputs_leave_their_program() {
    let inputs = [Tensor::randn([32, 65]), Tensor::randn([1, 65])];
    let program = |x: &[Tensor]| {
        let y = (&x[0] * &x[1]).exp() - 1.0;
        vec![y.sum_dims(&[0], true), y]
    };
    assert_eager_bits(&inputs, program, Some(0), |l, s| {
        assert!(
            l.steps.iter().any(|st| matches!(&st.kind, StepKind::Fused { sums, .. } if !sums.is_empty()))
        );
        let s = s.expect("the program splits");
        let fused =
            s.steps.iter().filter(|st| matches!(&st.kind, StepKind::Fused { sums, .. } if sums.is_empty()));
        assert_eq!(fused.count(), 2, "{:?}", s.steps);
        let sums =
            s.steps.iter().filter(|st| matches!(st.kind, StepKind::Reduce { kind: ReduceKind::Sum, .. }));
        assert_eq!(sums.count(), 1, "{:?}", s.steps);
    });
    let inputs = [inputs[0].clone(), inputs[1].clone(), Tensor::randn([65, 8])];
    let hidden = |x: &[Tensor]| vec![((&x[0] * &x[1]).exp() * 3.0).sum_dims(&[0], true), x[0].matmul(&x[2])];
    assert_eager_bits(&inputs, hidden, Some(0), |l, s| {
        let summing = |l: &Lowered| {
            l.steps
                .iter()
                .filter(|st| matches!(&st.kind, StepKind::Fused { sums, .. } if !sums.is_empty()))
                .count()
        };
        assert_eq!(summing(l), 1, "{:?}", l.steps);
        assert_eq!(s.map_or(1, summing), 1, "the summing step stays whole");
    });
}

/// A relu of a product read nowhere else is the product's closing pass: no fused step is left
/// for it, its gradient's mask is recomputed from the relu's result (`passes/fuse.rs`), and
/// the bits are eager's, whole and in row halves, with a bias row and with none. A product
/// read elsewhere too keeps its own result and a separate relu.
#[test]
fn a_relu_of_a_product_is_its_closing_pass_with_eager_bits() {
    crate::random::manual_seed(3);
    // Sizes of the narrow kernel (a contraction of 4) and of gemm (64).
    for k in [4, 64] {
        let inputs = [
            Tensor::randn([40, k]),
            Tensor::randn([k, 24]),
            Tensor::randn([24]),
            Tensor::randn([40, 24]),
            Tensor::randn([k, 24]),
            Tensor::randn([24, 24]),
        ];
        let program = |x: &[Tensor]| {
            let h = (x[0].matmul(&x[1]) + &x[2]).relu();
            let plain = x[0].matmul(&x[4]).relu();
            // A relu gradient's form: the mask of the result times a gradient that a product
            // of the result computes (so the mask's reader cannot join the relu's group).
            let o = h.matmul(&x[5]);
            let g = h.gt_scalar(0.0).to_dtype(h.dtype()) * o.matmul(&x[5].t());
            vec![o, g, plain]
        };
        let relus = |l: &Lowered| {
            l.steps.iter().filter(|s| matches!(s.kind, StepKind::MatMul { relu: true, .. })).count()
        };
        for split in [None, Some(0)] {
            assert_eager_bits(&inputs, program, split, |l, s| {
                assert_eq!(relus(l), 2, "both products apply their relu: {:?}", l.steps);
                let fused: Vec<_> = l
                    .steps
                    .iter()
                    .filter_map(
                        |s| if let StepKind::Fused { prog, .. } = &s.kind { Some(prog) } else { None },
                    )
                    .collect();
                assert!(
                    fused.iter().all(|p| !p.ops.contains(&"relu")),
                    "a relu left in a program: {fused:?}"
                );
                if let Some(s) = s {
                    assert_eq!(relus(s), 4, "each half applies the relu");
                }
            });
        }
        // The product also read as itself: nothing to fold.
        let both = |x: &[Tensor]| {
            let z = x[0].matmul(&x[1]);
            vec![z.relu(), &z * 2.0]
        };
        assert_eager_bits(&inputs, both, None, |l, _| assert_eq!(relus(l), 0, "{:?}", l.steps));
    }
}
