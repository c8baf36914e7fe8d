//! Compiled graphs and `#[janus]` fragments on CUDA tensors: equal to eager CUDA and to the
//! CPU, and replayed as CUDA graphs.

use super::{cuda, rel_error, tol};
use janus::prelude::*;

#[derive(Module, Clone)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

impl Mlp {
    fn to_device(&self, d: Device) -> Mlp {
        let mv = |t: &Tensor| no_grad(|| t.to_device(d)).requires_grad();
        Mlp {
            l1: nn::Linear { weight: mv(&self.l1.weight), bias: self.l1.bias.as_ref().map(mv) },
            l2: nn::Linear { weight: mv(&self.l2.weight), bias: self.l2.bias.as_ref().map(mv) },
        }
    }
}

#[janus]
fn train_step(net: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let logits = net.l2.forward(&net.l1.forward(x).relu());
    let loss = logits.cross_entropy(y);
    let grads = loss.backward();
    opt.step(net, &grads);
    loss.item()
}

/// The README's MLP trained 30 steps with Adam on CUDA under `#[janus]` matches the CPU trained
/// eagerly, and its blocks replay (as CUDA graphs).
#[test]
fn janus_training_on_cuda_matches_the_cpu() {
    let Some(dev) = cuda() else { return };
    janus::set_self_check(false);
    janus::manual_seed(0);
    let x = Tensor::randn([64, 4]);
    let y = x.sum(1).gt_scalar(0.0).to_dtype(DType::I64);
    let cpu_net = Mlp { l1: nn::Linear::new(4, 32), l2: nn::Linear::new(32, 2) };
    let mut gpu_net = cpu_net.to_device(dev);
    let mut cpu_net = cpu_net;
    let (mut oc, mut og) = (optim::Adam::new(0.01), optim::Adam::new(0.01));
    let (xg, yg) = (x.to_device(dev), y.to_device(dev));
    janus::reset_stats();
    for step in 0..30 {
        let lc = janus::with_mode(Mode::Eager, || train_step(&mut cpu_net, &mut oc, &x, &y));
        let lg = train_step(&mut gpu_net, &mut og, &xg, &yg);
        assert!(((lc - lg) / lc.abs().max(1e-3)).abs() < 1e-4, "step {step}: cpu {lc} cuda {lg}");
    }
    assert_eq!(gpu_net.l1.weight.device(), dev);
    let e = rel_error(&gpu_net.l2.weight, &cpu_net.l2.weight).unwrap();
    assert!(e < 1e-4, "weights differ by {e}");
    let hits: u64 = janus::stats().fragments.iter().map(|f| f.hits).sum();
    assert!(hits > 20, "the blocks replayed: {}", janus::explain());
}

/// `janus::trace` of a small step on CUDA: replays equal eager CUDA bit for bit-ish, the
/// executor switches to a CUDA graph after one plain run, and gradients flow through it.
#[test]
fn traced_graph_replays_as_a_cuda_graph() {
    let Some(dev) = cuda() else { return };
    for d in [DType::F32, DType::F64] {
        let w = Tensor::randn_dtype([16, 8], d).to_device(dev).requires_grad();
        let b = Tensor::randn_dtype([8], d).to_device(dev);
        let f = trace(|x: &[Tensor]| {
            let h = (x[0].matmul(&x[1]) + &x[2]).tanh();
            let p = h.softmax(1);
            vec![p.sum(0), h.max(1) * 2.0, (p.log() * &h).sum_all()]
        });
        for k in 0..6 {
            let x = Tensor::randn_dtype([5, 16], d).to_device(dev);
            let args = [x.clone(), w.clone(), b.clone()];
            let want = janus::with_mode(Mode::Eager, || {
                let h = (x.matmul(&w) + &b).tanh();
                let p = h.softmax(1);
                vec![p.sum(0), h.max(1) * 2.0, (p.log() * &h).sum_all()]
            });
            let got = f.run(&args);
            for (g, e) in got.iter().zip(&want) {
                assert_eq!(g.device(), dev);
                let err = rel_error(g, e).unwrap();
                assert!(err <= tol(d), "call {k} {d}: {err}");
            }
            let gw = got[2].backward();
            let ew = want[2].backward();
            let err = rel_error(gw.get(&w).unwrap(), ew.get(&w).unwrap()).unwrap();
            assert!(err <= 10.0 * tol(d), "gradient, call {k} {d}: {err}");
        }
        let (graphs, plain) = f.compiled().expect("compiled").cuda_runs();
        assert!(graphs >= 3, "{d}: {graphs} CUDA-graph replays, {plain} plain runs");
    }
}

/// A traced convolution with max and average pooling on CUDA. Through the host (the default),
/// the plan is never captured as a CUDA graph (a capture would record an upload from a host
/// buffer that is gone by the replay); with the device kernels (`JANUS_CUDA_WINDOWS=device`) it
/// is, and replays. Every call, values and gradients, equals the CPU.
#[test]
fn windows_on_cuda_run_step_by_step_and_match_the_cpu() {
    let Some(dev) = cuda() else { return };
    let opts = janus::Conv2dOptions { padding: [1, 1], ..Default::default() };
    let body = move |x: &[Tensor]| {
        let h = x[0].conv2d(&x[1], Some(&x[2]), opts).relu();
        vec![h.max_pool2d([2, 2], [2, 2], [0, 0]), h.avg_pool2d([2, 2], [1, 1], [0, 0]).sum_all()]
    };
    let f = trace(body);
    let w = Tensor::randn([4, 3, 3, 3]).requires_grad();
    let b = Tensor::randn([4]);
    let (wg, bg) = (no_grad(|| w.to_device(dev)).requires_grad(), b.to_device(dev));
    for call in 0..5 {
        let x = Tensor::randn([2, 3, 6, 6]);
        let want = body(&[x.clone(), w.clone(), b.clone()]);
        let got = f.run(&[x.to_device(dev), wg.clone(), bg.clone()]);
        for (k, (g, e)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.device(), dev);
            let err = rel_error(g, e).unwrap();
            assert!(err <= 10.0 * tol(DType::F32), "call {call} output {k}: {err}");
        }
        let (gw, ew) = ((&got[0].sum_all() + &got[1]).backward(), (&want[0].sum_all() + &want[1]).backward());
        let err = rel_error(gw.get(&wg).unwrap(), ew.get(&w).unwrap()).unwrap();
        assert!(err <= 10.0 * tol(DType::F32), "call {call} weight gradient: {err}");
    }
    let (graphs, plain) = f.compiled().expect("compiled").cuda_runs();
    if janus::cuda::windows_on_device() {
        assert!(graphs >= 3, "device windows: {graphs} CUDA-graph replays, {plain} plain runs");
    } else {
        assert_eq!(graphs, 0, "windows through the host: {plain} plain runs");
    }
}

/// A graph of one kernel over large tensors is not captured: staging its 32 MB of input and
/// output through stable buffers would cost more device time than the one launch it saves
/// (`worth_capturing`), so every call runs the kernel on the caller's buffers. Values match
/// the CPU on every call.
#[test]
fn large_bandwidth_bound_graphs_run_without_stage_copies() {
    let Some(dev) = cuda() else { return };
    let f = trace(|x: &[Tensor]| vec![(&x[0] * 2.0 + 1.0).relu()]);
    let x = Tensor::randn([1 << 22]);
    let want = (&x * 2.0 + 1.0).relu();
    let xg = x.to_device(dev);
    for call in 0..4 {
        let got = f.run(std::slice::from_ref(&xg));
        assert_eq!(got[0].device(), dev);
        assert!(rel_error(&got[0], &want).unwrap() <= tol(DType::F32), "call {call}");
    }
    let (graphs, plain) = f.compiled().expect("compiled").cuda_runs();
    // (The first call may record and run eagerly, so 3 or 4 plain runs.)
    assert!(graphs == 0 && plain >= 3, "{graphs} CUDA-graph replays, {plain} plain runs");
}
