//! F64 central-difference gradient checks for every differentiable op, including broadcasting
//! and reductions over each axis. Relative error must stay within 1e-6.

// Inputs are written as `&[x.clone()]` so every case reads the same way.
#![allow(clippy::cloned_ref_to_slice_refs)]

mod common;
use common::{assert_grads, rand64};
use janus::prelude::*;

#[test]
fn unary_ops() {
    let x = rand64(&[3, 4], 1, -2.0, 2.0);
    let pos = rand64(&[3, 4], 2, 0.5, 3.0);
    // Away from the kinks of abs/relu/recip.
    let away = Tensor::from_vec(
        common::values(12, 3, 0.2, 2.0)
            .iter()
            .enumerate()
            .map(|(i, v)| if i % 2 == 0 { *v } else { -v })
            .collect::<Vec<_>>(),
        [3, 4],
    );
    assert_grads("neg", &[x.clone()], &|t| t[0].neg());
    assert_grads("exp", &[x.clone()], &|t| t[0].exp());
    assert_grads("log", &[pos.clone()], &|t| t[0].log());
    assert_grads("sqrt", &[pos.clone()], &|t| t[0].sqrt());
    assert_grads("abs", &[away.clone()], &|t| t[0].abs());
    assert_grads("tanh", &[x.clone()], &|t| t[0].tanh());
    assert_grads("sigmoid", &[x.clone()], &|t| t[0].sigmoid());
    assert_grads("relu", &[away.clone()], &|t| t[0].relu());
    assert_grads("square", &[x.clone()], &|t| t[0].square());
    assert_grads("recip", &[away.clone()], &|t| t[0].recip());
    assert_grads("powf", &[pos.clone()], &|t| t[0].powf(2.5));
    assert_grads("clamp", &[away.clone()], &|t| t[0].clamp(-1.0, 1.0));
    assert_grads("sign (zero gradient)", &[away.clone()], &|t| t[0].sign() * &t[0]);
}

#[test]
fn pytorch_unary_ops() {
    let x = rand64(&[3, 4], 5, -2.0, 2.0);
    let pos = rand64(&[3, 4], 6, 0.5, 3.0);
    // Away from integers and half-integers, where rounding jumps.
    let frac = Tensor::from_vec(
        common::values(12, 7, -3.0, 3.0)
            .iter()
            .map(|v| v.floor() + 0.1 + 0.3 * (v - v.floor()))
            .collect::<Vec<_>>(),
        [3, 4],
    );
    assert_grads("sin", &[x.clone()], &|t| t[0].sin());
    assert_grads("cos", &[x.clone()], &|t| t[0].cos());
    assert_grads("tan", &[(&x * 0.6)], &|t| t[0].tan());
    assert_grads("exp2", &[x.clone()], &|t| t[0].exp2());
    assert_grads("log2", &[pos.clone()], &|t| t[0].log2());
    assert_grads("log1p", &[pos.clone() - 0.4], &|t| t[0].log1p());
    assert_grads("expm1", &[x.clone()], &|t| t[0].expm1());
    assert_grads("erf", &[x.clone()], &|t| t[0].erf());
    assert_grads("gelu", &[x.clone()], &|t| t[0].gelu());
    assert_grads("silu", &[x.clone()], &|t| t[0].silu());
    assert_grads("softplus", &[&x * 5.0], &|t| t[0].softplus());
    assert_grads("rsqrt", &[pos.clone()], &|t| t[0].rsqrt());
    assert_grads("floor (zero gradient)", &[frac.clone()], &|t| t[0].floor() * &t[0]);
    assert_grads("ceil (zero gradient)", &[frac.clone()], &|t| t[0].ceil() * &t[0]);
    assert_grads("round (zero gradient)", &[frac.clone()], &|t| t[0].round() * &t[0]);
    let shapes: [(&[usize], &[usize]); 3] = [(&[2, 3], &[2, 3]), (&[2, 3], &[3]), (&[2, 1], &[1, 3])];
    for (i, (sa, sb)) in shapes.iter().enumerate() {
        let a = rand64(sa, 60 + i as u64, -2.0, 2.0);
        let b = rand64(sb, 70 + i as u64, -2.0, 2.0);
        assert_grads(&format!("atan2 {sa:?} {sb:?}"), &[a, b], &|t| t[0].atan2(&t[1]));
    }
}

#[test]
fn cast_passes_gradients_through() {
    let x = rand64(&[5], 4, -1.0, 1.0).requires_grad();
    let y = x.to_dtype(DType::F32).to_dtype(DType::F64) * 3.0;
    let g = y.sum_all().backward();
    assert_eq!(g.get(&x).unwrap().to_vec::<f64>(), vec![3.0; 5]);
}

#[test]
fn binary_ops_with_broadcasting() {
    let shapes: [(&[usize], &[usize]); 5] =
        [(&[2, 3], &[2, 3]), (&[2, 3], &[3]), (&[2, 1], &[1, 3]), (&[4, 1, 3], &[2, 1]), (&[2, 3], &[])];
    for (i, (sa, sb)) in shapes.iter().enumerate() {
        let a = rand64(sa, 10 + i as u64, -2.0, 2.0);
        let b = rand64(sb, 20 + i as u64, 0.5, 2.0);
        let both = [a.clone(), b.clone()];
        assert_grads(&format!("add {sa:?} {sb:?}"), &both, &|t| &t[0] + &t[1]);
        assert_grads(&format!("sub {sa:?} {sb:?}"), &both, &|t| &t[0] - &t[1]);
        assert_grads(&format!("mul {sa:?} {sb:?}"), &both, &|t| &t[0] * &t[1]);
        assert_grads(&format!("div {sa:?} {sb:?}"), &both, &|t| &t[0] / &t[1]);
        assert_grads(&format!("maximum {sa:?} {sb:?}"), &both, &|t| t[0].maximum(&t[1]));
        assert_grads(&format!("minimum {sa:?} {sb:?}"), &both, &|t| t[0].minimum(&t[1]));
    }
    let a = rand64(&[2, 3], 30, -1.0, 1.0);
    assert_grads("scalar operands", &[a], &|t| (2.0 * &t[0] - 1.5) / 3.0 + (1.0 / (&t[0] + 4.0)));
}

#[test]
fn where_cond_routes_gradients() {
    let c = rand64(&[2, 3], 40, -1.0, 1.0).gt_scalar(0.0);
    let a = rand64(&[2, 3], 41, -1.0, 1.0);
    let b = rand64(&[3], 42, -1.0, 1.0);
    assert_grads("where", &[a, b], &|t| c.where_cond(&t[0], &t[1]));
}

#[test]
fn reductions_over_each_axis() {
    let x = rand64(&[2, 3, 4], 50, -2.0, 2.0);
    for d in 0..3isize {
        for dim in [d, d - 3] {
            assert_grads(&format!("sum {dim}"), &[x.clone()], &|t| t[0].sum(dim));
            assert_grads(&format!("sum_keepdim {dim}"), &[x.clone()], &|t| t[0].sum_keepdim(dim));
            assert_grads(&format!("mean {dim}"), &[x.clone()], &|t| t[0].mean(dim));
            assert_grads(&format!("max {dim}"), &[x.clone()], &|t| t[0].max(dim));
            assert_grads(&format!("min {dim}"), &[x.clone()], &|t| t[0].min_keepdim(dim));
            assert_grads(&format!("logsumexp {dim}"), &[x.clone()], &|t| t[0].logsumexp(dim));
            assert_grads(&format!("softmax {dim}"), &[x.clone()], &|t| t[0].softmax(dim));
            assert_grads(&format!("log_softmax {dim}"), &[x.clone()], &|t| t[0].log_softmax(dim));
        }
    }
    assert_grads("sum_dims [0, 2]", &[x.clone()], &|t| t[0].sum_dims(&[0, 2], false));
    assert_grads("sum_all", &[x.clone()], &|t| t[0].sum_all());
    assert_grads("mean_all", &[x.clone()], &|t| t[0].mean_all());
    assert_grads("max_all", &[x.clone()], &|t| t[0].max_all());
}

#[test]
fn matmul_shapes_and_transposes() {
    let a = rand64(&[3, 4], 60, -1.0, 1.0);
    let b = rand64(&[4, 5], 61, -1.0, 1.0);
    assert_grads("matmul 2d", &[a.clone(), b.clone()], &|t| t[0].matmul(&t[1]));
    assert_grads("matmul transposed operands", &[a.clone(), b.clone()], &|t| t[1].t().matmul(&t[0].t()));
    let ba = rand64(&[2, 3, 4], 62, -1.0, 1.0);
    let bb = rand64(&[2, 4, 5], 63, -1.0, 1.0);
    assert_grads("matmul batched", &[ba.clone(), bb.clone()], &|t| t[0].matmul(&t[1]));
    assert_grads("matmul 3d @ 2d", &[ba.clone(), b.clone()], &|t| t[0].matmul(&t[1]));
    assert_grads("matmul 2d @ 3d", &[a.clone(), bb.clone()], &|t| t[0].matmul(&t[1]));
    let b1 = rand64(&[1, 4, 5], 64, -1.0, 1.0);
    assert_grads("matmul batch-1 broadcast", &[ba, b1], &|t| t[0].matmul(&t[1]));
    let v = rand64(&[1, 4], 65, -1.0, 1.0);
    assert_grads("matmul m=1 (gemv)", &[v, b], &|t| t[0].matmul(&t[1]));
}

#[test]
fn shape_ops() {
    let x = rand64(&[2, 3, 4], 70, -1.0, 1.0);
    assert_grads("reshape", &[x.clone()], &|t| t[0].reshape([4, -1]));
    assert_grads("permute", &[x.clone()], &|t| t[0].permute(&[2, 0, 1]) * rand64(&[4, 2, 3], 71, 0.0, 1.0));
    assert_grads("transpose+reshape (copy)", &[x.clone()], &|t| t[0].transpose(0, 2).reshape([-1]));
    assert_grads("narrow", &[x.clone()], &|t| t[0].narrow(1, 1, 2));
    assert_grads("pad", &[x.clone()], &|t| t[0].pad(2, 1, 2));
    assert_grads("broadcast_to", &[rand64(&[3, 1], 72, -1.0, 1.0)], &|t| t[0].broadcast_to([2, 3, 4]));
    assert_grads("unsqueeze/squeeze", &[x.clone()], &|t| t[0].unsqueeze(1).squeeze(1).unsqueeze(-1));
    assert_grads("chunk", &[x.clone()], &|t| {
        let [a, b] = t[0].chunk::<2>(2);
        &a * 2.0 + b.exp()
    });
    let y = rand64(&[2, 5, 4], 73, -1.0, 1.0);
    assert_grads("cat", &[x.clone(), y], &|t| Tensor::cat(&[&t[0], &t[1]], 1));
    assert_grads("stack", &[x.clone(), x.clone() * 2.0], &|t| Tensor::stack(&[&t[0], &t[1]], -1));
    assert_grads("contiguous", &[x.clone()], &|t| t[0].t_last().contiguous());
}

trait LastTranspose {
    fn t_last(&self) -> Tensor;
}
impl LastTranspose for Tensor {
    fn t_last(&self) -> Tensor {
        self.transpose(-1, -2)
    }
}

#[test]
fn indexing_ops() {
    let x = rand64(&[4, 3], 80, -1.0, 1.0);
    let idx = Tensor::from_vec(vec![2i64, 0, 2, 3], [4]);
    assert_grads("index_select dim 0 (repeated index)", &[x.clone()], &|t| t[0].index_select(0, &idx));
    let idx1 = Tensor::from_vec(vec![1i64, 1], [2]);
    assert_grads("index_select dim 1", &[x.clone()], &|t| t[0].index_select(1, &idx1));
    let gidx = Tensor::from_vec(vec![0i64, 2, 1, 1, 0, 0, 2, 2], [4, 2]);
    assert_grads("gather", &[x.clone()], &|t| t[0].gather(1, &gidx));
    let src = rand64(&[4, 2], 81, -1.0, 1.0);
    assert_grads("scatter_add_into", &[src.clone()], &|t| t[0].scatter_add_into(1, &gidx, [4, 3]));
    assert_grads("index_add_into", &[src], &|t| {
        t[0].index_add_into(0, &Tensor::from_vec(vec![1i64, 0, 1, 2], [4]), 3)
    });
}

#[test]
fn losses() {
    let logits = rand64(&[4, 5], 90, -2.0, 2.0);
    let targets = Tensor::from_vec(vec![0i64, 4, 2, 2], [4]);
    assert_grads("cross_entropy", &[logits.clone()], &|t| t[0].cross_entropy(&targets));
    let target = rand64(&[4, 5], 91, -1.0, 1.0);
    assert_grads("mse", &[logits, target], &|t| t[0].mse(&t[1]));
}

#[test]
fn gradients_accumulate_over_uses_and_stop_at_detach() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], [3]).requires_grad();
    let y = (&x * &x + &x * 3.0 + x.detach() * 100.0).sum_all();
    let g = y.backward();
    assert_eq!(g.get(&x).unwrap().to_vec::<f64>(), vec![5.0, 7.0, 9.0]);
    let z = no_grad(|| (&x * 2.0).sum_all());
    assert!(!z.needs_grad());
}

#[test]
fn convolution_and_pooling() {
    use janus::Conv2dOptions;
    let x = rand64(&[2, 4, 5, 6], 31, -1.0, 1.0);
    let b = rand64(&[4], 33, -1.0, 1.0);
    for (k, opts) in [
        Conv2dOptions::default(),
        Conv2dOptions { stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 1 },
        Conv2dOptions { stride: [1, 2], padding: [1, 0], dilation: [2, 1], groups: 2 },
    ]
    .into_iter()
    .enumerate()
    {
        let w = rand64(&[4, 4 / opts.groups, 2, 3], 32 + k as u64, -1.0, 1.0);
        let bias = k != 1;
        assert_grads(&format!("conv2d {opts:?}"), &[x.clone(), w, b.clone()], &|t| {
            t[0].conv2d(&t[1], bias.then_some(&t[2]), opts)
        });
    }
    // Distinct values, so no window has a tie for its maximum.
    let distinct: Vec<f64> = (0..240).map(|i| ((i * 97 % 240) as f64) / 60.0 - 2.0).collect();
    let xp = Tensor::from_vec(distinct, [2, 4, 5, 6]);
    assert_grads("max_pool2d", &[xp.clone()], &|t| t[0].max_pool2d([3, 2], [2, 2], [1, 1]));
    assert_grads("max_pool2d overlapping", &[xp.clone()], &|t| t[0].max_pool2d([2, 2], [1, 1], [0, 0]));
    assert_grads("avg_pool2d", &[x.clone()], &|t| t[0].avg_pool2d([3, 3], [2, 1], [1, 1]));
}

#[test]
fn normalisation_dropout_and_masks() {
    let x = rand64(&[3, 4, 5], 41, -1.0, 1.0);
    let w = rand64(&[4, 5], 42, 0.5, 1.5);
    let b = rand64(&[4, 5], 43, -1.0, 1.0);
    assert_grads("layer_norm", &[x.clone(), w.clone(), b.clone()], &|t| {
        t[0].layer_norm(&[4, 5], Some(&t[1]), Some(&t[2]), 1e-5)
    });
    assert_grads("layer_norm last dim", &[x.clone()], &|t| t[0].layer_norm(&[5], None, None, 1e-5));
    let (rm, rv) = (rand64(&[4], 44, -1.0, 1.0), rand64(&[4], 45, 0.5, 2.0));
    let (wc, bc) = (rand64(&[4], 46, 0.5, 1.5), rand64(&[4], 47, -1.0, 1.0));
    for training in [true, false] {
        assert_grads(
            &format!("batch_norm training={training}"),
            &[x.clone(), wc.clone(), bc.clone()],
            &|t| t[0].batch_norm(&rm, &rv, Some(&t[1]), Some(&t[2]), training, 0.1, 1e-5).0,
        );
    }
    assert_grads("batch_norm 4-D", &[rand64(&[2, 3, 2, 2], 48, -1.0, 1.0)], &|t| {
        t[0].batch_norm(&rm.narrow(0, 0, 3), &rv.narrow(0, 0, 3), None, None, true, 0.1, 1e-5).0
    });
    // The same seed before every evaluation: the mask is a constant of the function.
    assert_grads("dropout", &[x.clone()], &|t| {
        janus::manual_seed(9);
        t[0].dropout(0.3, true)
    });
    let mask = rand64(&[4, 1], 49, -1.0, 1.0).gt_scalar(0.0);
    assert_grads("masked_fill", &[x.clone()], &|t| t[0].masked_fill(&mask, 2.5));
    assert_grads("tril", &[x.clone()], &|t| t[0].tril(1));
    assert_grads("triu", &[x.clone()], &|t| t[0].triu(-1));
    assert_grads(
        "matmul 4-D",
        &[rand64(&[2, 3, 2, 4], 50, -1.0, 1.0), rand64(&[3, 4, 2], 51, -1.0, 1.0)],
        &|t| t[0].matmul(&t[1]),
    );
}
