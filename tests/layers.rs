//! The layers of issue 15 (`Conv2d`, `BatchNorm2d`, `LayerNorm`, `Dropout`,
//! `MultiheadAttention`, `TransformerEncoderLayer`, `Sequential`): shapes, values against hand
//! computations, PyTorch's initialisations, train/eval behaviour; and, for the three examples'
//! models (`examples/common/{cnn,transformer_lm,gan}.rs`) at small sizes, 20 `#[janus]` training
//! steps against eager mode (losses and every tensor, batch norm's running statistics
//! included), staging coverage after warm-up, and check mode.
//!
//! The statistics are process-wide, so every test takes `LOCK`: a window of `janus::stats()`
//! then sees one test's calls only.

#[path = "../examples/common/cnn.rs"]
mod cnn;
#[path = "../examples/common/gan.rs"]
mod gan;
#[path = "../examples/common/transformer_lm.rs"]
mod transformer_lm;

use std::sync::Mutex;

use janus::nn::{self, Layer};
use janus::prelude::*;

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).to_vec::<f32>()
}

fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())), "{what}[{i}]: {x} vs {y}");
    }
}

/// Every tensor of `a` against `b`'s, by name.
fn assert_same_module<M: Module>(a: &M, b: &M, tol: f32, what: &str) {
    let (na, nb) = (a.named_tensors(), b.named_tensors());
    assert_eq!(na.len(), nb.len(), "{what}: tensor counts");
    for ((name, x), (name_b, y)) in na.iter().zip(&nb) {
        assert_eq!(name, name_b);
        assert_close(&vals(x), &vals(y), tol, &format!("{what}: {name}"));
    }
}

// ---------------------------------------------------------------- shapes, values, inits

#[test]
fn conv2d_matches_a_hand_computed_convolution() {
    let _g = lock();
    let x = Tensor::from_vec((1..=16).map(|v| v as f32).collect::<Vec<_>>(), [1, 1, 4, 4]);
    let mut conv = nn::Conv2d::new(1, 2, 2);
    conv.weight = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0], [2, 1, 2, 2]);
    conv.bias = Some(Tensor::from_vec(vec![0.5f32, -1.0], [2]));
    let y = conv.forward(&x);
    assert_eq!(y.dims(), [1, 2, 3, 3]);
    // channel 0: x[i][j] + x[i+1][j+1] + 0.5; channel 1: the 2x2 sum - 1.
    let at = |i: usize, j: usize| (i * 4 + j + 1) as f32;
    let mut want = Vec::new();
    for c in 0..2 {
        for i in 0..3 {
            for j in 0..3 {
                want.push(if c == 0 {
                    at(i, j) + at(i + 1, j + 1) + 0.5
                } else {
                    at(i, j) + at(i, j + 1) + at(i + 1, j) + at(i + 1, j + 1) - 1.0
                });
            }
        }
    }
    assert_close(&vals(&y), &want, 1e-6, "conv2d");
    // Padding 1, stride 2: output [2, 2] per channel; corners see the padded zeros.
    let y = conv.clone().padding(1).stride(2).forward(&x);
    assert_eq!(y.dims(), [1, 2, 3, 3]);
    assert_close(&vals(&y)[..1], &[at(0, 0) + 0.5], 1e-6, "padded corner");
    // PyTorch's init: uniform in ±1/sqrt(fan_in), fan_in = 16 * 3 * 3.
    let c = nn::Conv2d::new(16, 32, 3);
    let bound = 1.0 / (16.0f32 * 9.0).sqrt();
    assert!(vals(&c.weight).iter().all(|w| w.abs() <= bound));
    assert!(vals(c.bias.as_ref().unwrap()).iter().all(|w| w.abs() <= bound));
    assert_eq!(c.weight.dims(), [32, 16, 3, 3]);
}

#[test]
fn pools_and_flatten_in_a_sequential() {
    let _g = lock();
    let x = Tensor::from_vec((0..16).map(|v| v as f32).collect::<Vec<_>>(), [1, 1, 4, 4]);
    let mut seq = nn::Sequential::new(vec![nn::MaxPool2d::new(2).into(), Layer::Flatten]);
    assert_eq!(vals(&seq.forward(&x)), vec![5.0, 7.0, 13.0, 15.0]);
    let mut seq = nn::Sequential::new(vec![nn::AvgPool2d::new(2).into(), Layer::Relu, Layer::Flatten]);
    assert_eq!(vals(&seq.forward(&x)), vec![2.5, 4.5, 10.5, 12.5]);
    assert_eq!(seq.forward(&x).dims(), [1, 4]);
}

#[test]
fn batch_norm_train_and_eval_by_hand() {
    let _g = lock();
    // Two channels, batch 2, 1x2 images.
    let x = Tensor::from_vec(vec![1.0f32, 3.0, 10.0, 20.0, 5.0, 7.0, 30.0, 40.0], [2, 2, 1, 2]);
    let mut bn = nn::BatchNorm2d::new(2);
    bn.weight = Tensor::from_vec(vec![2.0f32, 1.0], [2]).requires_grad();
    bn.bias = Tensor::from_vec(vec![0.0f32, 1.0], [2]).requires_grad();
    let y = bn.forward(&x);
    // channel 0: values 1, 3, 5, 7: mean 4, biased var 5, unbiased 20/3.
    // channel 1: values 10, 20, 30, 40: mean 25, biased var 125, unbiased 500/3.
    let n = |v: f32, m: f32, var: f32| (v - m) / (var + 1e-5).sqrt();
    let want = vec![
        2.0 * n(1.0, 4.0, 5.0),
        2.0 * n(3.0, 4.0, 5.0),
        n(10.0, 25.0, 125.0) + 1.0,
        n(20.0, 25.0, 125.0) + 1.0,
        2.0 * n(5.0, 4.0, 5.0),
        2.0 * n(7.0, 4.0, 5.0),
        n(30.0, 25.0, 125.0) + 1.0,
        n(40.0, 25.0, 125.0) + 1.0,
    ];
    assert_close(&vals(&y), &want, 1e-5, "train-mode output");
    assert_close(&vals(&bn.running_mean), &[0.4, 2.5], 1e-6, "running mean");
    assert_close(
        &vals(&bn.running_var),
        &[0.9 + 0.1 * 20.0 / 3.0, 0.9 + 0.1 * 500.0 / 3.0],
        1e-5,
        "running var",
    );
    assert!(!bn.running_mean.needs_grad(), "running statistics carry no gradient");
    bn.eval();
    let y = bn.forward(&x);
    let (rm, rv) = ([0.4f32, 2.5], [0.9 + 0.1 * 20.0 / 3.0, 0.9 + 0.1 * 500.0 / 3.0f32]);
    let want: Vec<f32> = [1.0f32, 3.0, 10.0, 20.0, 5.0, 7.0, 30.0, 40.0]
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = (i / 2) % 2;
            let (w, b) = ([2.0f32, 1.0][c], [0.0f32, 1.0][c]);
            w * (v - rm[c]) / (rv[c] + 1e-5).sqrt() + b
        })
        .collect();
    assert_close(&vals(&y), &want, 1e-5, "eval-mode output");
    assert_close(&vals(&bn.running_mean), &[0.4, 2.5], 1e-6, "eval leaves the running mean");
}

#[test]
fn layer_norm_by_hand() {
    let _g = lock();
    let mut ln = nn::LayerNorm::new(&[3]);
    ln.weight = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]);
    ln.bias = Tensor::from_vec(vec![0.0f32, 0.0, 1.0], [3]);
    let y = ln.forward(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 0.0, 0.0, 6.0], [2, 3]));
    let s1 = (2.0f32 / 3.0 + 1e-5).sqrt();
    let s2 = (8.0f32 + 1e-5).sqrt();
    let want = [-1.0 / s1, 0.0, 3.0 / s1 + 1.0, -2.0 / s2, -4.0 / s2, 3.0 * 4.0 / s2 + 1.0];
    assert_close(&vals(&y), &want, 1e-5, "layer_norm");
}

#[test]
fn dropout_drops_in_train_mode_only() {
    let _g = lock();
    janus::manual_seed(7);
    let mut d = nn::Dropout::new(0.25);
    let x = Tensor::ones([100, 100]);
    let y = vals(&d.forward(&x));
    let zeros = y.iter().filter(|&&v| v == 0.0).count();
    assert!((2200..2800).contains(&zeros), "{zeros} of 10000 dropped at p = 0.25");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
    d.eval();
    assert_eq!(vals(&d.forward(&x)), vals(&x));
}

/// Attention computed head by head with plain ops, for comparison.
fn attention_by_hand(m: &nn::MultiheadAttention, x: &Tensor, causal: bool) -> Tensor {
    let (b, t, e) = (x.dims()[0], x.dims()[1], x.dims()[2]);
    let dh = e / m.num_heads;
    let w = &m.in_proj_weight;
    let proj = |i: usize| x.matmul(&w.narrow(0, i * e, e).t()) + m.in_proj_bias.narrow(0, i * e, e);
    let (q, k, v) = (proj(0), proj(1), proj(2));
    let mut outs = Vec::new();
    for h in 0..m.num_heads {
        let (qh, kh, vh) = (q.narrow(2, h * dh, dh), k.narrow(2, h * dh, dh), v.narrow(2, h * dh, dh));
        let mut s = qh.matmul(&kh.transpose(1, 2)) / (dh as f64).sqrt();
        if causal {
            let mask: Vec<f32> = (0..t * t).map(|i| if i % t > i / t { -1e9 } else { 0.0 }).collect();
            s += Tensor::from_vec(mask, [t, t]);
        }
        outs.push(s.softmax(2).matmul(&vh));
    }
    let refs: Vec<&Tensor> = outs.iter().collect();
    let o = Tensor::cat(&refs, 2);
    assert_eq!(o.dims(), [b, t, e]);
    m.out_proj.forward(&o)
}

#[test]
fn multihead_attention_matches_a_per_head_computation() {
    let _g = lock();
    janus::manual_seed(11);
    let mut m = nn::MultiheadAttention::new(8, 2);
    let x = Tensor::randn([3, 5, 8]);
    // PyTorch's init has zero biases; random ones check that the key bias, which the layer
    // leaves out, changes nothing (the hand computation adds it, as PyTorch does).
    let zero_bias = m.in_proj_bias.clone();
    m.in_proj_bias = (Tensor::randn([24]) * 0.5).requires_grad();
    for causal in [false, true] {
        let y = m.self_attention(&x, causal);
        assert_eq!(y.dims(), [3, 5, 8]);
        assert_close(&vals(&y), &vals(&attention_by_hand(&m, &x, causal)), 1e-5, "attention");
        let general = m.forward(&x, &x, &x, causal.then(|| nn::MultiheadAttention::causal_mask(5)).as_ref());
        assert_close(&vals(&y), &vals(&general), 1e-5, "forward(q, k, v) against self_attention");
    }
    // Causal: position 0 sees only itself, so changing later positions leaves it alone.
    let x2 = Tensor::cat(&[&x.narrow(1, 0, 1), &Tensor::randn([3, 4, 8])], 1);
    let (y, y2) = (m.self_attention(&x, true), m.self_attention(&x2, true));
    assert_close(&vals(&y.narrow(1, 0, 1)), &vals(&y2.narrow(1, 0, 1)), 1e-6, "causal position 0");
    // The key bias's gradient is exactly zero (its true value); the others are not.
    let g = m.self_attention(&x, true).square().sum_all().backward();
    let gb = vals(g.get(&m.in_proj_bias).expect("a gradient for in_proj_bias"));
    assert!(gb[8..16].iter().all(|&v| v == 0.0), "{gb:?}");
    assert!(gb[..8].iter().chain(&gb[16..]).any(|&v| v != 0.0), "{gb:?}");
    // PyTorch's init: Xavier-uniform in_proj, zero biases.
    let bound = (6.0f32 / 32.0).sqrt();
    assert!(vals(&m.in_proj_weight).iter().all(|w| w.abs() <= bound));
    assert!(vals(&zero_bias).iter().all(|&b| b == 0.0));
    assert!(vals(m.out_proj.bias.as_ref().unwrap()).iter().all(|&b| b == 0.0));
}

#[test]
fn transformer_encoder_layer_is_pre_norm() {
    let _g = lock();
    janus::manual_seed(12);
    let mut layer = nn::TransformerEncoderLayer::new(8, 2, 16, 0.1);
    layer.eval(); // dropout off: the formula below has none
    let x = Tensor::randn([2, 4, 8]);
    let h = &x + layer.self_attn.self_attention(&layer.norm1.forward(&x), true);
    let want = &h + layer.linear2.forward(&layer.linear1.forward(&layer.norm2.forward(&h)).gelu());
    assert_close(&vals(&layer.forward(&x, true)), &vals(&want), 1e-5, "pre-norm layer");
    layer.train();
    assert!(layer.dropout.training && layer.self_attn.training);
    assert_eq!(layer.forward(&x, true).dims(), [2, 4, 8]);
}

// ---------------------------------------------------------------- the examples' models

/// Coverage of the calls since `warm`.
fn coverage_since(warm: &janus::Stats) -> f64 {
    janus::stats().since(warm).coverage()
}

fn hits_since(warm: &janus::Stats, name: &str) -> u64 {
    janus::stats().since(warm).function(name).map(|f| f.hits).sum()
}

#[test]
fn cnn_twenty_steps_janus_equals_eager_with_running_stats() {
    let _g = lock();
    janus::set_self_check(false);
    janus::manual_seed(21);
    let init = cnn::model();
    let data: Vec<(Tensor, Tensor)> = (0..20)
        .map(|_| {
            let y = (Tensor::rand([8]) * 10.0).floor().to_dtype(DType::I64);
            (Tensor::randn([8, 1, 28, 28]), y)
        })
        .collect();
    let run = |mode: Mode, steps: &[(Tensor, Tensor)]| {
        janus::with_mode(mode, || {
            let (mut m, mut opt) = (init.clone(), optim::Adam::new(1e-3));
            let mut warm = janus::stats();
            let losses: Vec<f32> = steps
                .iter()
                .enumerate()
                .map(|(i, (x, y))| {
                    if i == 5 {
                        warm = janus::stats();
                    }
                    cnn::train_step(&mut m, &mut opt, x, y)
                })
                .collect();
            (m, opt, losses, warm)
        })
    };
    let (me, oe, le, _) = run(Mode::Eager, &data);
    let (mj, oj, lj, warm) = run(Mode::Janus, &data);
    let coverage = coverage_since(&warm);
    assert!(hits_since(&warm, "train_step") >= 15, "{}", janus::explain());
    assert!(coverage >= 0.99, "coverage {coverage}: {}", janus::explain());
    assert_close(&le, &lj, 1e-4, "cnn losses");
    assert_same_module(&me, &mj, 1e-4, "cnn model (running statistics included)");
    assert_same_module(&oe, &oj, 1e-4, "cnn Adam state");
    // The running statistics did move: they are part of what was compared.
    let Layer::BatchNorm2d(bn) = &mj.layers[1] else { panic!("layer 1 is a batch norm") };
    assert!(vals(&bn.running_mean).iter().any(|&m| m != 0.0));

    // Eval mode after train mode: a key of its own, eager's results.
    let (mut a, mut b) = (mj.clone(), mj);
    a.eval();
    b.eval();
    let x = &data[0].0;
    let before: usize = janus::stats().function("predict").map(|f| f.variants).sum();
    for _ in 0..4 {
        let staged = no_grad(|| cnn::predict(&mut a, x));
        let eager = janus::with_mode(Mode::Eager, || no_grad(|| cnn::predict(&mut b, x)));
        assert_eq!(staged.to_vec::<i64>(), eager.to_vec::<i64>());
    }
    assert_same_module(&a, &b, 0.0, "eval mode changes no running statistic");
    let after: usize = janus::stats().function("predict").map(|f| f.variants).sum();
    assert_eq!(after, before + 1, "{}", janus::explain());

    // Check mode passes (it panics on a mismatch).
    janus::with_mode(Mode::Check, || {
        let (mut m, mut opt) = (init.clone(), optim::Adam::new(1e-3));
        for (x, y) in &data[..6] {
            cnn::train_step(&mut m, &mut opt, x, y);
        }
    });
}

/// The train-mode step in train mode, then the same function in eval mode: the cache key holds
/// batch norm's mode, so the eval-mode calls compile a variant of their own and update nothing.
#[test]
fn batch_norm_mode_is_in_the_cache_key() {
    let _g = lock();
    janus::set_self_check(false);
    janus::manual_seed(22);
    #[janus]
    fn normalise(bn: &mut nn::BatchNorm2d, x: &Tensor) -> Tensor {
        let y = bn.forward(x) * 2.0 + 1.0;
        y
    }
    let x = Tensor::randn([4, 3, 2, 2]) * 3.0 + 1.0;
    let (mut a, mut b) = (nn::BatchNorm2d::new(3), nn::BatchNorm2d::new(3));
    for _ in 0..5 {
        let (ya, yb) = (normalise(&mut a, &x), janus::with_mode(Mode::Eager, || normalise(&mut b, &x)));
        assert_close(&vals(&ya), &vals(&yb), 1e-6, "train mode");
    }
    assert_same_module(&a, &b, 1e-6, "running statistics after 5 train-mode calls");
    let variants = || janus::stats().function("normalise").map(|f| f.variants).sum::<usize>();
    let train_variants = variants();
    assert!(train_variants >= 1, "{}", janus::explain());
    a.eval();
    b.eval();
    for _ in 0..5 {
        let (ya, yb) = (normalise(&mut a, &x), janus::with_mode(Mode::Eager, || normalise(&mut b, &x)));
        assert_close(&vals(&ya), &vals(&yb), 1e-6, "eval mode");
    }
    assert_same_module(&a, &b, 0.0, "eval mode updates nothing");
    assert_eq!(variants(), train_variants + 1, "{}", janus::explain());
    assert!(janus::explain().contains("normalise"));
}

#[test]
fn transformer_twenty_steps_janus_equals_eager_with_dropout() {
    let _g = lock();
    janus::set_self_check(false);
    janus::manual_seed(31);
    let (v, t, b) = (20, 16, 4);
    let init = transformer_lm::CharTransformer::new(v, t, 32, 4, 64, 2, 0.1);
    let data: Vec<(Tensor, Tensor)> = (0..20)
        .map(|_| {
            let tok = (Tensor::rand([b, t + 1]) * v as f64).floor().to_dtype(DType::I64);
            (tok.narrow(1, 0, t).contiguous(), tok.narrow(1, 1, t).contiguous())
        })
        .collect();
    let run = |mode: Mode| {
        janus::with_mode(mode, || {
            janus::manual_seed(99); // the same dropout masks in both modes
            let (mut m, mut opt) = (init.clone(), optim::Adam::new(3e-4));
            let mut warm = janus::stats();
            let losses: Vec<f32> = data
                .iter()
                .enumerate()
                .map(|(i, (x, y))| {
                    if i == 5 {
                        warm = janus::stats();
                    }
                    transformer_lm::train_step(&mut m, &mut opt, x, y)
                })
                .collect();
            (m, opt, losses, warm)
        })
    };
    let (me, oe, le, _) = run(Mode::Eager);
    let (mj, oj, lj, warm) = run(Mode::Janus);
    let coverage = coverage_since(&warm);
    assert!(hits_since(&warm, "train_step") >= 15, "{}", janus::explain());
    assert!(coverage >= 0.99, "coverage {coverage}: {}", janus::explain());
    assert_close(&le, &lj, 1e-4, "transformer losses");
    assert_same_module(&me, &mj, 1e-4, "transformer model");
    assert_same_module(&oe, &oj, 1e-4, "transformer Adam state");

    // Eval mode (dropout off) after train mode gives eager's losses.
    let (mut a, mut c) = (mj.clone(), mj);
    a.eval();
    c.eval();
    for (x, y) in &data[..4] {
        let staged = no_grad(|| transformer_lm::eval_loss(&a, x, y));
        let eager = janus::with_mode(Mode::Eager, || no_grad(|| transformer_lm::eval_loss(&c, x, y)));
        assert!((staged - eager).abs() <= 1e-5 * eager.abs(), "eval loss {staged} vs {eager}");
    }

    janus::with_mode(Mode::Check, || {
        let (mut m, mut opt) = (init.clone(), optim::Adam::new(3e-4));
        for (x, y) in &data[..6] {
            transformer_lm::train_step(&mut m, &mut opt, x, y);
        }
    });
}

#[test]
fn gan_twenty_steps_janus_equals_eager() {
    let _g = lock();
    janus::set_self_check(false);
    janus::manual_seed(41);
    let (g0, d0) = gan::models(32);
    let data: Vec<(Tensor, Tensor, Tensor)> =
        (0..20).map(|_| (gan::real_batch(64), gan::noise(64), gan::noise(64))).collect();
    let run = |mode: Mode| {
        janus::with_mode(mode, || {
            let (mut g, mut d) = (g0.clone(), d0.clone());
            let (mut od, mut og) = gan::optimisers(1e-3);
            let mut warm = janus::stats();
            let mut losses = Vec::new();
            for (i, (real, zd, zg)) in data.iter().enumerate() {
                if i == 5 {
                    warm = janus::stats();
                }
                losses.push(gan::d_step(&mut d, &g, &mut od, real, zd));
                losses.push(gan::g_step(&mut g, &d, &mut og, zg));
            }
            ((g, d, od, og), losses, warm)
        })
    };
    let (e, le, _) = run(Mode::Eager);
    let (j, lj, warm) = run(Mode::Janus);
    let coverage = coverage_since(&warm);
    assert!(hits_since(&warm, "d_step") >= 15 && hits_since(&warm, "g_step") >= 15, "{}", janus::explain());
    assert!(coverage >= 0.99, "coverage {coverage}: {}", janus::explain());
    assert_close(&le, &lj, 1e-4, "gan losses");
    assert_same_module(&e, &j, 1e-4, "generator, discriminator and both Adams");

    janus::with_mode(Mode::Check, || {
        let (mut g, mut d) = (g0.clone(), d0.clone());
        let (mut od, mut og) = gan::optimisers(1e-3);
        for (real, zd, zg) in &data[..6] {
            gan::d_step(&mut d, &g, &mut od, real, zd);
            gan::g_step(&mut g, &d, &mut og, zg);
        }
    });
}
