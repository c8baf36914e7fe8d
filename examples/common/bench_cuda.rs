//! The bench's CUDA rows (`bench -- --device cuda`): the LSTM LM step eager, `#[janus]` and
//! traced on the GPU; the host time of one CUDA-graph replay; fused elementwise bandwidth
//! against a device-to-device copy; and GEMM time on the LSTM's shapes. Every timing waits for
//! the device before the clock stops.
#![allow(dead_code)]

use super::lstm_lm;
use janus::Traced;
use janus::prelude::*;
use std::time::Instant;

fn sync(dev: Device) {
    if let Device::Cuda(n) = dev {
        janus::cuda::synchronize(n).expect("device work succeeded");
    }
}

/// Median over `blocks` of the time per call of `f` (`calls` calls per block, then a sync).
fn per_call(dev: Device, blocks: usize, calls: usize, unit: f64, f: impl FnMut()) -> f64 {
    per_call_and_host(dev, blocks, calls, unit, f).0
}

/// [`per_call`], and the median host time per call: the block's calls enqueued, before the
/// sync that waits for the device.
fn per_call_and_host(dev: Device, blocks: usize, calls: usize, unit: f64, mut f: impl FnMut()) -> (f64, f64) {
    f();
    sync(dev);
    let (mut wall, mut host): (Vec<f64>, Vec<f64>) = (0..blocks)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            let enqueued = t.elapsed().as_secs_f64();
            sync(dev);
            (t.elapsed().as_secs_f64() * unit / calls as f64, enqueued * unit / calls as f64)
        })
        .unzip();
    (super::median::median(&mut wall), super::median::median(&mut host))
}

/// `((a + b) * (c - d) + (e * f).tanh()) * g.sigmoid() + h`: one fused group over 8 inputs.
#[allow(clippy::too_many_arguments)] // eight inputs is what it measures
#[janus(min_ops = 1)]
fn eight_inputs(
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    d: &Tensor,
    e: &Tensor,
    f: &Tensor,
    g: &Tensor,
    h: &Tensor,
) -> Tensor {
    let y = ((a + b) * (c - d) + (e * f).tanh()) * g.sigmoid() + h;
    y
}

#[janus(min_ops = 1)]
fn axpb(x: &Tensor) -> Tensor {
    let y = (x * 2.0 + 1.0).relu();
    y
}

/// The steps of the traced LSTM LM step's CUDA plan, by kind, as one line: `(total, line)`.
/// Each step is one launch or more (a `cat` copies each part, a split reduction runs twice).
fn plan_line(traced: &Traced<impl Fn(&[Tensor]) -> Vec<Tensor>>) -> Option<(usize, String)> {
    let (kinds, memos) = traced.compiled()?.cuda_step_counts();
    let total = kinds.iter().map(|k| k.1).sum::<usize>() + memos;
    let parts: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    Some((total, format!("{total} steps of one launch or more: {}, {memos} memo copies", parts.join(", "))))
}

/// Prints the traced LSTM LM step's CUDA plan (`bench -- --only cuda-plan`): traced and run on
/// the CPU, then lowered as a CUDA run would lower it.
pub fn print_plan() {
    janus::manual_seed(0);
    let m = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let data = lstm_lm::Batches::synthetic(1);
    let (xs, ys) = data.batch(0);
    let traced = trace(lstm_lm::flat_sgd_step);
    let args = lstm_lm::flat_args(&m.params(), xs, ys);
    for _ in 0..2 {
        traced.run(&args);
    }
    match plan_line(&traced) {
        Some((_, line)) => println!("LSTM LM training step (T=32, B=32, V=65, H=128) on CUDA: {line}"),
        None => println!("the LSTM LM step did not compile"),
    }
}

/// Prints the CUDA rows.
pub fn run(dev: Device, quick: bool) {
    println!("\njanus bench on {}: {}\n", dev, janus::cuda::info());
    let (blocks, scale) = if quick { (3, 1) } else { (9, 10) };
    janus::set_self_check(false);
    println!("| workload | eager | janus | janus::trace (one graph) | janus speed-up |");
    println!("|---|---:|---:|---:|---:|");
    // The LSTM LM step (refbench sizes, SGD 0.1).
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(8).to_device(dev);
    let init = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H).to_device(dev);
    let step_ms = |mode: Mode| {
        let mut m = init.clone();
        let mut k = 0;
        janus::with_mode(mode, || {
            for _ in 0..3 {
                let (xs, ys) = data.batch(k);
                lstm_lm::janus_sgd_step(&mut m, xs, ys, 0.1);
                k += 1;
            }
            per_call(dev, blocks, 2 * scale, 1e3, || {
                let (xs, ys) = data.batch(k);
                lstm_lm::janus_sgd_step(&mut m, xs, ys, 0.1);
                k += 1;
            })
        })
    };
    let (e, j) = (step_ms(Mode::Eager), step_ms(Mode::Janus));
    let traced = trace(lstm_lm::flat_sgd_step);
    let mut p = init.params();
    let mut k = 0;
    let t = per_call(dev, blocks, 2 * scale, 1e3, || {
        let (xs, ys) = data.batch(k);
        p = traced.run(&lstm_lm::flat_args(&p, xs, ys))[1..].to_vec();
        k += 1;
    });
    println!(
        "| LSTM LM training step (T=32, B=32, V=65, H=128), ms | {e:.3} | {j:.3} | {t:.3} | {:.2}x |",
        e / j
    );
    // The traced step's host time alone: enqueueing a block of steps, before the sync that
    // waits for the GPU. Near the step's wall time, the host bounds it; far below, the GPU.
    let mut host: Vec<f64> = (0..blocks)
        .map(|_| {
            let (calls, t0) = (2 * scale, Instant::now());
            for _ in 0..calls {
                let (xs, ys) = data.batch(k);
                p = traced.run(&lstm_lm::flat_args(&p, xs, ys))[1..].to_vec();
                k += 1;
            }
            let enqueue = t0.elapsed().as_secs_f64() * 1e3 / calls as f64;
            sync(dev);
            enqueue
        })
        .collect();
    let host_ms = super::median::median(&mut host);
    if let Some(c) = traced.compiled() {
        let (graphs, plain) = c.cuda_runs();
        println!(
            "\n(traced step: {graphs} CUDA-graph replays, {plain} step-by-step runs; host time to enqueue \
             one step {host_ms:.3} ms of its {t:.3})"
        );
    }
    if let Some((total, line)) = plan_line(&traced) {
        println!("(its plan: {line}; {:.2} µs of the step per step)", t * 1e3 / total as f64);
    }

    // Host time of one replay of an 8-input fragment: enqueue only (the GPU's work is tiny and
    // overlaps the next call's host work); the sync at the end of each block is amortised.
    let x: Vec<Tensor> = (0..8).map(|i| (Tensor::randn([32, 128]) + i as f64).to_device(dev)).collect();
    let replay_us = |mode: Mode| {
        janus::with_mode(mode, || {
            per_call(dev, blocks, 2000 * scale, 1e6, || {
                _ = eight_inputs(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6], &x[7]);
            })
        })
    };
    let (re, rj) = (replay_us(Mode::Eager), replay_us(Mode::Janus));
    println!(
        "\n| 8-input elementwise fragment, µs per call | eager (11 launches) | janus (one CUDA-graph replay) |"
    );
    println!("|---|---:|---:|\n| host time per call | {re:.2} | {rj:.2} |");

    // Fused elementwise bandwidth on a large tensor against a device-to-device copy.
    let n = if quick { 1 << 22 } else { 1 << 26 };
    let big = Tensor::randn([n]).to_device(dev);
    let bytes = 2.0 * 4.0 * n as f64;
    let gbs = |ms: f64| bytes / (ms * 1e-3) / 1e9;
    let d2d_ms = {
        let Device::Cuda(o) = dev else { unreachable!() };
        let kdev = janus_kernels::cuda::device(o).expect("device");
        let dst = kdev.alloc(n * 4).expect("memory");
        let src = janus::cuda::device_ptr(&big).expect("a CUDA tensor");
        per_call(dev, blocks, 20, 1e3, || kdev.copy_dtod(dst.ptr(), src, n * 4).expect("copy"))
    };
    let fused_ms = janus::with_mode(Mode::Janus, || per_call(dev, blocks, 20, 1e3, || _ = axpb(&big)));
    let eager_ms = janus::with_mode(Mode::Eager, || per_call(dev, blocks, 20, 1e3, || _ = axpb(&big)));
    println!("\n| {n} f32 elements, read + write | ms | GB/s | of copy bandwidth |\n|---|---:|---:|---:|");
    println!("| device-to-device copy | {d2d_ms:.3} | {:.0} | 100% |", gbs(d2d_ms));
    println!(
        "| `relu(x * 2 + 1)` fused (janus) | {fused_ms:.3} | {:.0} | {:.0}% |",
        gbs(fused_ms),
        100.0 * d2d_ms / fused_ms
    );
    println!(
        "| the same, eager (3 kernels) | {eager_ms:.3} | {:.0} | {:.0}% |",
        gbs(eager_ms),
        100.0 * d2d_ms / eager_ms
    );

    // GEMM on the LSTM's shapes.
    // The same shapes and timing as `scripts/gemm_torch.py` (the suite's `gemm_torch` stage).
    println!("\n| GEMM (f32, TF32 off) | µs | host µs | GFLOP/s |\n|---|---:|---:|---:|");
    for (m, k, n) in [(32, 65, 512), (32, 128, 512), (32, 128, 65), (128, 32, 512), (1024, 1024, 1024)] {
        let a = Tensor::randn([m, k]).to_device(dev);
        let b = Tensor::randn([k, n]).to_device(dev);
        let (us, host) = per_call_and_host(dev, blocks, 200, 1e6, || _ = a.matmul(&b));
        let gflops = 2.0 * (m * k * n) as f64 / (us * 1e-6) / 1e9;
        println!("| [{m}x{k}] @ [{k}x{n}] | {us:.2} | {host:.2} | {gflops:.0} |");
    }
    let s = janus::cuda::memory_stats();
    println!(
        "\nCUDA memory: {:.1} MiB allocated, {:.1} MiB reserved, peak {:.1} MiB; NVRTC: {:?} (compiled, from disk, ms)",
        s.allocated as f64 / 1048576.0,
        s.reserved as f64 / 1048576.0,
        s.peak_allocated as f64 / 1048576.0,
        janus::cuda::compile_stats()
    );
}
