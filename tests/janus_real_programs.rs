//! What real programs do around a training step (issue 52): several host reads in the tail,
//! an aliased copy of a model (a target network), optimisers whose state is made lazily. Each
//! test compares janus with eager mode call by call, with the sampled self-check off.

use janus::prelude::*;

#[derive(Module, Clone)]
struct Vae {
    enc: nn::Linear,
    mu: nn::Linear,
    logvar: nn::Linear,
    dec: nn::Linear,
}

impl Vae {
    fn new() -> Vae {
        Vae {
            enc: nn::Linear::new(16, 12),
            mu: nn::Linear::new(12, 4),
            logvar: nn::Linear::new(12, 4),
            dec: nn::Linear::new(4, 16),
        }
    }
}

/// A VAE step as pytorch/examples writes it: `randn` inside, both loss terms logged.
#[janus]
fn vae_step(m: &mut Vae, opt: &mut optim::Adam, x: &Tensor) -> (f32, f32) {
    let h = m.enc.forward(x).relu();
    let (mu, logvar) = (m.mu.forward(&h), m.logvar.forward(&h));
    let z = &mu + Tensor::randn(mu.dims()) * (&logvar * 0.5).exp();
    let recon = (m.dec.forward(&z).sigmoid() - x).square().sum_all();
    let kl = ((&logvar + 1.0 - mu.square() - logvar.exp()).sum_all()) * -0.5;
    let loss = &recon + &kl;
    let grads = loss.backward();
    opt.step(m, &grads);
    (recon.item(), kl.item())
}

#[test]
fn a_tail_of_two_reads_speculates_as_one_graph() {
    janus::set_self_check(false);
    let run = |mode: Mode| {
        janus::manual_seed(5);
        let (mut m, mut opt) = (Vae::new(), optim::Adam::new(1e-2));
        let x = Tensor::rand([8, 16]);
        janus::with_mode(mode, || (0..12).map(|_| vae_step(&mut m, &mut opt, &x)).collect::<Vec<_>>())
    };
    let (want, got) = (run(Mode::Eager), run(Mode::Janus));
    for (k, ((r0, k0), (r1, k1))) in want.iter().zip(&got).enumerate() {
        assert!((r0 - r1).abs() <= 1e-4 * r0.abs().max(1.0), "step {k}: recon {r1} vs eager {r0}");
        assert!((k0 - k1).abs() <= 1e-4 * k0.abs().max(1.0), "step {k}: kl {k1} vs eager {k0}");
    }
    let f = janus::stats().function("vae_step").find(|f| f.name == "vae_step#fn").cloned().unwrap();
    assert!(f.hits >= 8, "the step replays as one graph: {}", janus::explain());
}

/// Reads combined by casts and operators, and an array of reads.
#[janus]
fn metrics(x: &Tensor) -> (usize, [f64; 2], f32) {
    let y = (x * 2.0).tanh();
    let m = y.mean_all();
    (
        (y.gt_scalar(0.0).to_dtype(DType::F32).sum_all().item() as usize),
        [m.item_f64(), y.max_all().item_f64() * 0.5],
        -m.item(),
    )
}

#[test]
fn reads_with_casts_arrays_and_operators_speculate() {
    janus::set_self_check(false);
    for k in 0..8 {
        let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0 - k as f32, 0.25], [4]);
        let want = janus::with_mode(Mode::Eager, || metrics(&x));
        assert_eq!(metrics(&x), want, "call {k}");
    }
    let f = janus::stats().function("metrics").find(|f| f.name == "metrics#fn").cloned().unwrap();
    assert!(f.hits >= 5, "{}", janus::explain());
}

/// A block whose key changes on every call (one graph per shape, never replayed): recording
/// costs more than running the statements.
#[janus(min_ops = 1, speculate = false, dynamic_dims = false, max_variants = 100000)]
fn churned(x: &Tensor) -> Tensor {
    let y = ((x * 2.0).tanh() + 1.0).sigmoid() * 0.5;
    y
}

fn churned_stats() -> janus::rt::FragmentStats {
    janus::stats().function("churned").next().cloned().unwrap()
}

#[test]
fn a_block_slower_compiled_runs_eagerly_and_returns_when_cheaper() {
    janus::set_self_check(false);
    // Every shape twice in a row: recorded, recorded and compiled, never replayed.
    for n in 0..1500 {
        let x = Tensor::ones([1 + n / 2, 64]);
        let want = janus::with_mode(Mode::Eager, || churned(&x));
        assert_eq!(churned(&x).to_vec::<f32>(), want.to_vec::<f32>(), "call {n}");
    }
    let f = churned_stats();
    let bypassed = f.eager_runs.get(&janus::EagerKind::Cost).copied().unwrap_or(0);
    assert!(bypassed > 0, "the compiled path was slower, but nothing ran eagerly: {}", janus::explain());
    let note = f.cost.clone().unwrap_or_default();
    assert!(note.contains("against") && note.contains("slower"), "explain() says why: {note}");
    // One shape from now on: it compiles once the bypass ends, and its replays are cheaper.
    let x = Tensor::ones([32, 64]);
    let want = janus::with_mode(Mode::Eager, || churned(&x));
    let hits_before = churned_stats().hits;
    let mut calls = 0;
    loop {
        assert_eq!(churned(&x).to_vec::<f32>(), want.to_vec::<f32>());
        calls += 1;
        let f = churned_stats();
        let cheaper = f.cost.as_ref().is_some_and(|n| !n.contains("slower"));
        if cheaper && f.hits >= hits_before + 2000 {
            break;
        }
        assert!(calls < 200_000, "never returned to the compiled path: {}", janus::explain());
    }
}
