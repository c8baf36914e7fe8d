//! `janus::trace`: compiled graphs agree with eager execution, values and gradients.

mod common;
#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;

use janus::prelude::*;

fn max_rel(a: &Tensor, b: &Tensor) -> f64 {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    assert_eq!(x.len(), y.len());
    let scale = y.iter().fold(1e-6f64, |m, v| m.max(v.abs()));
    x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max) / scale
}

#[test]
fn replay_matches_eager_values_and_gradients() {
    janus::passes::set_verify_graphs(true);
    let f = |x: &[Tensor]| {
        let h = (x[0].matmul(&x[1]) + &x[2]).tanh();
        let [a, b] = h.chunk::<2>(1);
        vec![(a.sigmoid() * b).sum_all(), h.softmax(1)]
    };
    let traced = trace(f);
    let inputs = [
        common::rand64(&[4, 3], 1, -1.0, 1.0),
        common::rand64(&[3, 6], 2, -1.0, 1.0),
        common::rand64(&[6], 3, -1.0, 1.0),
    ];
    for call in 0..3 {
        let leaves: Vec<Tensor> = inputs.iter().map(|t| t.clone().requires_grad()).collect();
        let got = traced.run(&leaves);
        let want = f(&leaves);
        for (g, w) in got.iter().zip(&want) {
            assert!(max_rel(g, w) < 1e-12, "call {call}");
        }
        let (gg, gw) = ((&got[0] + got[1].sum_all()).backward(), (&want[0] + want[1].sum_all()).backward());
        for l in &leaves {
            assert!(max_rel(gg.get(l).unwrap(), gw.get(l).unwrap()) < 1e-12, "gradient, call {call}");
        }
    }
    let c = traced.compiled().expect("compiled");
    assert!(c.pass_stats().get("fuse.groups") > 0, "{}", c.graph());
}

#[test]
fn lstm_training_step_as_one_graph_matches_eager() {
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(2);
    let init = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let traced = trace(lstm_lm::flat_sgd_step);
    let (mut eager, mut compiled) = (init.params(), init.params());
    for k in 0..4 {
        let (xs, ys) = data.batch(k);
        let e = lstm_lm::flat_sgd_step(&lstm_lm::flat_args(&eager, xs, ys));
        let c = traced.run(&lstm_lm::flat_args(&compiled, xs, ys));
        assert!(max_rel(&c[0], &e[0]) < 1e-5, "loss at step {k}: {} vs {}", c[0].item(), e[0].item());
        for i in 1..6 {
            assert!(max_rel(&c[i], &e[i]) < 1e-5, "param {i} at step {k}");
            assert!(c[i].is_leaf());
        }
        (eager, compiled) = (e[1..].to_vec(), c[1..].to_vec());
    }
    let c = traced.compiled().unwrap();
    println!("{:?}\n{:?}", c.pass_stats(), c.memory_plan());
}

/// The addend of a compiled `matmul + c` broadcast every way it can be: a row (the bias fast
/// path), a column with as many rows as columns (which must not take it), a scalar, a full
/// matrix, and through a single-row GEMV with few columns.
#[test]
fn matmul_addend_broadcasts() {
    let f = |x: &[Tensor]| vec![x[0].matmul(&x[1]) + &x[2]];
    for (m, k, n, c) in [
        (3, 5, 3, vec![3]),
        (3, 5, 3, vec![3, 1]),
        (3, 5, 3, vec![1, 3]),
        (3, 5, 3, vec![]),
        (3, 5, 3, vec![3, 3]),
        (1, 128, 2, vec![2]),
        (1, 4, 1, vec![1, 1]),
    ] {
        let traced = trace(f);
        let args = [
            common::rand64(&[m, k], 1, -1.0, 1.0),
            common::rand64(&[k, n], 2, -1.0, 1.0),
            common::rand64(&c, 3, -1.0, 1.0),
        ];
        for _ in 0..3 {
            let (got, want) = (traced.run(&args), f(&args));
            assert!(max_rel(&got[0], &want[0]) < 1e-12, "m={m} k={k} n={n} addend {c:?}");
        }
    }
}

/// An input that the outputs receiving cotangents do not depend on gets no gradient, as in
/// eager mode (not zeros).
#[test]
fn inputs_unreached_by_the_cotangents_get_no_gradient() {
    let f = |x: &[Tensor]| vec![x[0].tanh(), (&x[1] * 2.0).exp()];
    let traced = trace(f);
    let (x, y) = (Tensor::randn([3]).requires_grad(), Tensor::randn([3]).requires_grad());
    for call in 0..3 {
        let outs = traced.run(&[x.clone(), y.clone()]);
        let grads = outs[1].sum_all().backward();
        assert!(grads.get(&x).is_none(), "call {call}: x got a gradient through an output it does not reach");
        assert!(grads.get(&y).is_some(), "call {call}");
        let grads = (&outs[0].sum_all() + &outs[1].sum_all()).backward();
        assert!(grads.get(&x).is_some() && grads.get(&y).is_some(), "call {call}");
    }
}

#[test]
fn ops_on_two_large_constants_compile() {
    // Folding stops at 65,536 elements, so `zeros * 2.0` and `full > 0.5` reach fusion with
    // both operands constant.
    let f = |x: &[Tensor]| {
        let big = Tensor::zeros_dtype([300, 300], DType::F64) * 2.0;
        let mask = Tensor::full_dtype([300, 300], 0.75, DType::F64).gt_scalar(0.5).to_dtype(DType::F64);
        vec![(big + mask) * &x[0]]
    };
    let x = [Tensor::full_dtype([300, 300], 3.0, DType::F64)];
    let want = f(&x);
    let traced = trace(f);
    for _ in 0..3 {
        assert!(max_rel(&traced.run(&x)[0], &want[0]) == 0.0);
    }
    assert!(traced.compiled().is_some());
}

#[test]
fn large_i64_constants_keep_their_exact_values() {
    // Past 2^53 neighbouring i64 values share an f64: folding must not round a folded fill,
    // and CSE must not merge two constants that differ only there.
    let big = 1i64 << 53;
    let f = move |x: &[Tensor]| {
        let fill = Tensor::from_vec(vec![big + 1; 4], [4]) * 1.0; // folds to a uniform value
        let a = Tensor::from_vec(vec![big + 1, big + 3], [2]);
        let b = Tensor::from_vec(vec![big, big + 4], [2]);
        vec![fill + &x[0], a, b]
    };
    let x = [Tensor::from_vec(vec![0i64, 1, 2, 3], [4])];
    let traced = trace(f);
    for _ in 0..3 {
        let out = traced.run(&x);
        assert_eq!(out[0].to_vec::<i64>(), [big + 1, big + 2, big + 3, big + 4]);
        assert_eq!(out[1].to_vec::<i64>(), [big + 1, big + 3]);
        assert_eq!(out[2].to_vec::<i64>(), [big, big + 4]);
    }
    assert!(traced.compiled().is_some());
}

/// Sums over the leading dimension of 2^16 elements and more add four fixed parts pairwise in
/// eager mode (`strided::sum_dims`); a compiled sum must give the same bits, not one
/// sequential chain: a bias gradient over a large batch, with and without other dimensions.
#[test]
fn large_sums_over_the_batch_give_eager_bits() {
    for shape in [vec![1100, 64], vec![300, 4, 60], vec![20, 128]] {
        let f = |x: &[Tensor]| vec![x[0].sum_dims(&[0], false), (&x[0] * 2.0).sum_dims(&[0], true)];
        let traced = trace(f);
        let x = [common::rand64(&shape, 7, -1.0, 1.0).to_dtype(DType::F32) * 1e3];
        let bits = |t: &Tensor| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for call in 0..3 {
            for (k, (got, want)) in traced.run(&x).iter().zip(&f(&x)).enumerate() {
                assert_eq!(bits(got), bits(want), "{shape:?}, output {k}, call {call}");
            }
        }
        assert!(traced.compiled().is_some(), "{shape:?}: the later calls replayed a compiled graph");
    }
}
