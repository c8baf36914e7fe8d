//! `Grads` arithmetic: accumulation, iteration in leaf order, scaling, the global norm and
//! clipping by it (as `torch.nn.utils.clip_grad_norm_`), eager and staged.

use super::assert_close;
use janus::prelude::*;

fn leaves() -> (Tensor, Tensor, Tensor) {
    let a = Tensor::from_vec(vec![0.5f64, -1.5, 2.0], [3]).requires_grad();
    let b = Tensor::from_vec(vec![1.0f64, 3.0, -2.0, 0.25], [2, 2]).requires_grad();
    let c = Tensor::from_vec(vec![-0.75f64], [1]).requires_grad();
    (a, b, c)
}

fn loss1(a: &Tensor, b: &Tensor) -> Tensor {
    (a.square().sum_all() + b.sum(1).tanh().sum_all()) * 3.0
}

fn loss2(b: &Tensor, c: &Tensor) -> Tensor {
    b.exp().sum_all() + (c * b.sum_all()).sum_all()
}

#[test]
fn adding_grads_equals_the_gradient_of_the_summed_loss() {
    let (a, b, c) = leaves();
    let (g1, g2) = (loss1(&a, &b).backward(), loss2(&b, &c).backward());
    let want = (loss1(&a, &b) + loss2(&b, &c)).backward();
    let by_ref = &g1 + &g2;
    let mut acc = g1.clone();
    acc += &g2;
    for sum in [by_ref, acc, g1 + &g2] {
        assert_eq!(sum.len(), 3);
        for leaf in [&a, &b, &c] {
            assert_close("accumulated", sum.get(leaf).unwrap(), want.get(leaf).unwrap(), 1e-14);
        }
    }
}

#[test]
fn iteration_follows_leaf_creation_order() {
    let (a, b, c) = leaves();
    let grads = (loss2(&b, &c) + loss1(&a, &b)).backward();
    let ids: Vec<u64> = grads.iter().map(|(id, _)| id).collect();
    assert_eq!(ids, vec![a.id(), b.id(), c.id()]);
    for (id, g) in &grads {
        let leaf = [&a, &b, &c].into_iter().find(|l| l.id() == id).unwrap();
        assert_eq!(g.dims(), leaf.dims());
        assert_eq!(g.to_vec::<f64>(), grads.get(leaf).unwrap().to_vec::<f64>());
    }
}

/// The norm and the clipping coefficient, computed on the host from the gradients' values.
fn host_norm(grads: &Grads) -> f64 {
    grads.iter().flat_map(|(_, g)| g.to_vec::<f64>()).map(|v| v * v).sum::<f64>().sqrt()
}

#[test]
fn scale_norm_and_clip_follow_pytorch() {
    let (a, b, c) = leaves();
    let grads = (loss1(&a, &b) + loss2(&b, &c)).backward();
    let norm = host_norm(&grads);
    assert!((grads.total_norm().item_f64() - norm).abs() < 1e-12 * norm);
    let half = grads.scale(0.5);
    for leaf in [&a, &b, &c] {
        let want: Vec<f64> = grads.get(leaf).unwrap().to_vec::<f64>().iter().map(|v| v * 0.5).collect();
        assert_eq!(half.get(leaf).unwrap().to_vec::<f64>(), want);
    }
    for max_norm in [0.5, 2.0, norm * 0.99, norm * 2.0] {
        let (clipped, before) = grads.clip_norm(max_norm);
        assert!((before.item_f64() - norm).abs() < 1e-12 * norm);
        let coef = (max_norm / (norm + 1e-6)).min(1.0);
        for leaf in [&a, &b, &c] {
            let want: Vec<f64> = grads.get(leaf).unwrap().to_vec::<f64>().iter().map(|v| v * coef).collect();
            assert_close(
                &format!("clip {max_norm}"),
                clipped.get(leaf).unwrap(),
                &Tensor::from_vec(want, leaf.dims()),
                1e-14,
            );
        }
        assert!(host_norm(&clipped) <= max_norm + 1e-9, "clip {max_norm}: {}", host_norm(&clipped));
    }
}

#[test]
fn empty_grads_and_mixed_dtypes() {
    let none = Grads::default();
    assert_eq!(none.total_norm().item(), 0.0);
    assert!(none.clip_norm(1.0).0.is_empty() && (&none + &none).is_empty());
    let x = Tensor::from_vec(vec![3.0f32], [1]).requires_grad();
    let y = Tensor::from_vec(vec![4.0f64], [1]).requires_grad();
    let grads = ((&x * 1.0).sum_all().to_dtype(DType::F64) + (&y * 1.0).sum_all()).backward();
    let n = grads.total_norm();
    assert_eq!((n.dtype(), n.to_vec::<f64>()), (DType::F32, vec![2f32.sqrt() as f64]));
    let msg = super::panic_message(|| drop(grads.clip_norm(-1.0)));
    assert!(msg.contains("clip_norm") && msg.contains("-1"), "{msg}");
}

#[derive(Module)]
struct Pair {
    w: Tensor,
    v: Tensor,
}

/// A training step with gradient clipping, as users write it.
#[janus(min_ops = 1)]
fn clipped_step(m: &Pair, x: &Tensor, max_norm: f64) -> (Tensor, Tensor, Tensor) {
    let loss = (x.matmul(&m.w).tanh() * &m.v).sum_all();
    let grads = loss.backward();
    let (clipped, _) = grads.clip_norm(max_norm);
    let norm = clipped.total_norm();
    let (gw, gv) = (clipped.get(&m.w).unwrap().clone(), clipped.get(&m.v).unwrap().clone());
    (norm, gw, gv)
}

#[test]
fn clipping_inside_a_janus_function_equals_eager() {
    janus::set_self_check(false);
    let m = Pair {
        w: Tensor::from_vec((0..12).map(|i| 0.3 * i as f32 - 1.5).collect::<Vec<_>>(), [4, 3])
            .requires_grad(),
        v: Tensor::from_vec(vec![2.0f32, -1.0, 0.5], [3]).requires_grad(),
    };
    for call in 0..16 {
        let x = Tensor::from_vec((0..8).map(|i| 0.1 * (i + call) as f32).collect::<Vec<_>>(), [2, 4]);
        let max_norm = [0.5, 100.0][call % 2];
        let want = janus::with_mode(Mode::Eager, || clipped_step(&m, &x, max_norm));
        let got = clipped_step(&m, &x, max_norm);
        assert_close("norm", &got.0, &want.0, 1e-6);
        assert_close("d/dw", &got.1, &want.1, 1e-6);
        assert_close("d/dv", &got.2, &want.2, 1e-6);
    }
    let f = janus::stats().function("clipped_step").next().cloned().unwrap();
    assert!(f.hits - f.checks > 0, "{}", janus::explain());
}
