//! The issue-15 ops (convolution, pooling, normalisation, dropout, masks, batched matmul)
//! staged: `janus::trace` replays and a `#[janus]` function give eager's values and gradients,
//! and something really ran compiled.

mod common;

use janus::Conv2dOptions;
use janus::prelude::*;

fn max_rel(a: &Tensor, b: &Tensor) -> f64 {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    assert_eq!(x.len(), y.len());
    let scale = y.iter().fold(1e-6f64, |m, v| m.max(v.abs()));
    x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max) / scale
}

/// Traces `f`, runs it three times on `inputs` (as gradient leaves), and checks values and the
/// gradients of a weighted sum against eager, each within `tol`; returns the compiled graph's
/// op names.
fn compare(f: fn(&[Tensor]) -> Vec<Tensor>, inputs: &[Tensor], tol: f64) -> Vec<String> {
    janus::passes::set_verify_graphs(true);
    let traced = trace(f);
    for call in 0..3 {
        let leaves: Vec<Tensor> = inputs.iter().map(|t| t.clone().requires_grad()).collect();
        janus::manual_seed(11);
        let got = traced.run(&leaves);
        janus::manual_seed(11);
        let want = f(&leaves);
        let loss = |outs: &[Tensor]| {
            let mut total = Tensor::scalar_dtype(0.0, inputs[0].dtype());
            for (k, o) in outs.iter().enumerate() {
                if o.needs_grad() {
                    total += (o * (0.5 + k as f64)).sum_all();
                }
            }
            total
        };
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(max_rel(g, w) <= tol, "output {k}, call {call}: {}", max_rel(g, w));
        }
        let (gg, gw) = (loss(&got).backward(), loss(&want).backward());
        for (i, l) in leaves.iter().enumerate() {
            match (gg.get(l), gw.get(l)) {
                (Some(a), Some(b)) => assert!(max_rel(a, b) <= tol, "gradient {i}, call {call}"),
                (a, b) => assert_eq!(a.is_some(), b.is_some(), "gradient {i}, call {call}"),
            }
        }
    }
    let c = traced.compiled().expect("the function compiled");
    c.graph().nodes.iter().map(|n| n.op.name().to_string()).collect()
}

#[test]
fn convolution_and_pooling_replay_like_eager() {
    fn f(x: &[Tensor]) -> Vec<Tensor> {
        let opts = Conv2dOptions { padding: [1, 1], ..Default::default() };
        let h = x[0].conv2d(&x[1], Some(&x[2]), opts).relu().max_pool2d([2, 2], [2, 2], [0, 0]);
        let grouped = Conv2dOptions { stride: [2, 1], padding: [1, 0], dilation: [1, 2], groups: 2 };
        let g = h.conv2d(&x[3], None, grouped).avg_pool2d([3, 3], [1, 1], [1, 1]);
        vec![h, g]
    }
    let inputs = [
        common::rand64(&[3, 2, 8, 8], 1, -1.0, 1.0),
        common::rand64(&[4, 2, 3, 3], 2, -1.0, 1.0),
        common::rand64(&[4], 3, -1.0, 1.0),
        common::rand64(&[6, 2, 2, 2], 4, -1.0, 1.0),
    ];
    let ops = compare(f, &inputs, 1e-12);
    assert!(ops.iter().any(|o| o == "unfold"), "{ops:?}");
    let f32s: Vec<Tensor> = inputs.iter().map(|t| t.to_dtype(DType::F32)).collect();
    compare(f, &f32s, 1e-5);
}

#[test]
fn normalisation_and_dropout_replay_like_eager() {
    fn f(x: &[Tensor]) -> Vec<Tensor> {
        let ln = x[0].layer_norm(&[5], Some(&x[1]), Some(&x[2]), 1e-5);
        let img = x[0].reshape([2, 3, 2, 5]);
        let (y, m, v) = img.batch_norm(&x[3], &x[4], Some(&x[5]), None, true, 0.1, 1e-5);
        let (e, _, _) = img.batch_norm(&m, &v, Some(&x[5]), None, false, 0.1, 1e-5);
        let d = ln.dropout(0.4, true);
        vec![ln, y, m, v, e, d]
    }
    let inputs = [
        common::rand64(&[3, 4, 5], 5, -1.0, 1.0),
        common::rand64(&[5], 6, 0.5, 1.5),
        common::rand64(&[5], 7, -1.0, 1.0),
        common::rand64(&[3], 8, -1.0, 1.0),
        common::rand64(&[3], 9, 0.5, 2.0),
        common::rand64(&[3], 10, 0.5, 1.5),
    ];
    let ops = compare(f, &inputs, 1e-12);
    assert!(ops.iter().any(|o| o == "rand"), "{ops:?}");
    // The dropout mask is the same bits compiled and eager.
    let f32s: Vec<Tensor> = inputs.iter().map(|t| t.to_dtype(DType::F32)).collect();
    compare(f, &f32s, 1e-5);
}

#[test]
fn masks_and_attention_replay_like_eager() {
    fn f(x: &[Tensor]) -> Vec<Tensor> {
        // Causal attention over [B, H, T, d].
        let (q, k, v) = (&x[0], &x[1], &x[2]);
        let t = q.dims()[2];
        let causal = Tensor::ones([t, t]).triu(1).gt_scalar(0.0);
        let att = q.matmul(&k.transpose(-2, -1)).masked_fill(&causal, f64::NEG_INFINITY).softmax(-1);
        vec![att.matmul(v), q.tril(-1) + k.triu(2)]
    }
    let inputs = [
        common::rand64(&[2, 3, 4, 5], 12, -1.0, 1.0),
        common::rand64(&[2, 3, 4, 5], 13, -1.0, 1.0),
        common::rand64(&[2, 3, 4, 5], 14, -1.0, 1.0),
    ];
    compare(f, &inputs, 1e-12);
}

#[derive(Module, Clone)]
struct TinyCnn {
    conv: Tensor,
    bias: Tensor,
    gamma: Tensor,
    beta: Tensor,
    mean: Tensor,
    var: Tensor,
    fc: nn::Linear,
}

#[janus]
fn cnn_step(m: &mut TinyCnn, x: &Tensor, y: &Tensor, training: bool) -> f32 {
    let opts = Conv2dOptions { padding: [1, 1], ..Default::default() };
    let h = x.conv2d(&m.conv, Some(&m.bias), opts);
    let (h, mean, var) = h.batch_norm(&m.mean, &m.var, Some(&m.gamma), Some(&m.beta), training, 0.1, 1e-5);
    m.mean = mean;
    m.var = var;
    let h = h.relu().max_pool2d([2, 2], [2, 2], [0, 0]).dropout(0.2, training);
    let logits = m.fc.forward(&h.reshape([x.dims()[0], 4 * 4 * 4]).layer_norm(&[64], None, None, 1e-5));
    let loss = logits.cross_entropy(y);
    let grads = loss.backward();
    m.conv = (&m.conv - grads.get(&m.conv).unwrap() * 0.1).detach().requires_grad();
    m.gamma = (&m.gamma - grads.get(&m.gamma).unwrap() * 0.1).detach().requires_grad();
    loss.item()
}

#[test]
fn a_cnn_step_under_janus_matches_eager() {
    janus::set_self_check(false);
    janus::manual_seed(2);
    let init = TinyCnn {
        conv: Tensor::randn([4, 1, 3, 3]).requires_grad(),
        bias: Tensor::zeros([4]).requires_grad(),
        gamma: Tensor::ones([4]).requires_grad(),
        beta: Tensor::zeros([4]).requires_grad(),
        mean: Tensor::zeros([4]),
        var: Tensor::ones([4]),
        fc: nn::Linear::new(64, 3),
    };
    let x = Tensor::randn([6, 1, 8, 8]);
    let y = Tensor::from_vec((0..6).map(|i| (i % 3) as i64).collect::<Vec<_>>(), [6]);
    let (mut a, mut b) = (init.clone(), init);
    for step in 0..12 {
        let training = step < 9;
        janus::manual_seed(100 + step);
        let la = janus::with_mode(Mode::Eager, || cnn_step(&mut a, &x, &y, training));
        janus::manual_seed(100 + step);
        let lb = cnn_step(&mut b, &x, &y, training);
        assert!((la - lb).abs() <= 1e-5 * la.abs().max(1.0), "step {step}: eager {la} vs janus {lb}");
        for ((name, p), (_, q)) in a.named_tensors().iter().zip(b.named_tensors()) {
            let err = max_rel(&q.to_dtype(DType::F64), &p.to_dtype(DType::F64));
            assert!(err <= 1e-5, "step {step}: {name} differs by {err}");
        }
    }
    let s = janus::stats();
    assert!(s.function("cnn_step").any(|f| f.hits > 0), "{}", janus::explain());
}
