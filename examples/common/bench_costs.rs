//! The bench's fixed costs: what unrolling a loop costs to compile, and what one replay of a
//! tiny block costs (the dispatch overhead).

use super::{cartpole, median::median, timed};
use janus::prelude::*;

/// A small LSTM forward whose time loop `#[janus]` unrolls into one block.
#[allow(clippy::needless_range_loop)]
#[janus]
fn unrolled_lstm(wx: &Tensor, wh: &Tensor, b: &Tensor, xs: &[Tensor]) -> Tensor {
    let (bsz, hid) = (xs[0].dims()[0], wh.dims()[0]);
    let mut h = Tensor::zeros([bsz, hid]);
    let mut c = Tensor::zeros([bsz, hid]);
    for t in 0..xs.len() {
        let g = xs[t].matmul(wx) + h.matmul(wh) + b;
        let [i, f, gg, o] = g.chunk::<4>(1);
        c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
        h = o.sigmoid() * c.tanh();
    }
    h
}

/// What unrolling costs as the trip count grows: forward + backward of [`unrolled_lstm`]
/// (B=8, input 16, H=32) per sequence length, eager against janus, including janus's first
/// calls (two profiled runs, then the forward compile; the backward graph compiles on the
/// first replay that needs it). Loops over 16,384 recorded nodes (here 1024 steps and more)
/// compile rolled, as a loop node. The sampled self-check is off: it would check replays 1
/// and 2, the second and third calls, against full eager runs, which is its cost and not the
/// compile's.
pub fn unroll_cost(lengths: &[usize]) {
    janus::manual_seed(0);
    janus::set_self_check(false);
    let wx = Tensor::randn([16, 128]).requires_grad();
    let wh = Tensor::randn([32, 128]).requires_grad();
    let b = Tensor::zeros([128]).requires_grad();
    let step = |xs: &[Tensor]| {
        let g = unrolled_lstm(&wx, &wh, &b, xs).sum_all().backward();
        _ = g.get(&wx).unwrap().to_vec::<f32>();
    };
    println!(
        "\n| time steps | eager, ms/step | janus first 3 steps, ms | compile overhead, ms | janus steady, ms/step | speed-up | forward compile, ms |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for &t in lengths {
        let xs: Vec<Tensor> = (0..t).map(|_| Tensor::randn([8, 16])).collect();
        let compiled = || janus::stats().function("unrolled_lstm").map(|f| f.compile_ms).sum::<f64>();
        let mut eager: Vec<f64> =
            (0..5).map(|_| janus::with_mode(Mode::Eager, || timed(1e3, || step(&xs)))).collect();
        let before = compiled();
        let first: f64 = (0..3).map(|_| timed(1e3, || step(&xs))).sum();
        let compile = compiled() - before;
        let mut steady: Vec<f64> = (0..5).map(|_| timed(1e3, || step(&xs))).collect();
        let (e, j) = (median(&mut eager), median(&mut steady));
        println!(
            "| {t} | {e:.2} | {first:.1} | {:.1} | {j:.2} | {:.2}x | {compile:.1} |",
            first - 3.0 * e,
            e / j
        );
    }
}

/// The smallest block worth staging: what a hit costs beyond its two tiny kernels.
#[janus(min_ops = 1)]
fn tiny(x: &Tensor) -> Tensor {
    let y = x * 2.0 + 1.0;
    y
}

/// A host scalar passed in: keyed by its value. (Both this and [`tiny_guarded`] stay on the
/// fragment path, a function with a helper's value being never speculated: their difference is
/// the guard's.)
#[janus(min_ops = 1, speculate = false)]
fn tiny_scaled(x: &Tensor, s: f64) -> Tensor {
    let y = x * s + 1.0;
    y
}

/// What [`scale`] returns: a value the key cannot see.
static SCALE_BITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0x4000_0000_0000_0000);

/// A helper reading a global: run on every call, its value a guard of the block after it.
fn scale() -> f64 {
    f64::from_bits(SCALE_BITS.load(std::sync::atomic::Ordering::Relaxed))
}

/// [`tiny_scaled`] with the scalar read by a helper (the block is split around the call).
#[janus(min_ops = 1, speculate = false)]
fn tiny_guarded(x: &Tensor) -> Tensor {
    let y = x * scale() + 1.0;
    y
}

/// A block whose graph runs no kernel (the reshape is a view): a replay is dispatch (probe,
/// key, lookup, sampling decision), the executor's entry and the rebuild of the output.
#[janus(min_ops = 1)]
fn no_kernel(x: &Tensor) -> Tensor {
    let y = x.reshape([1, 1]);
    y
}

/// Nanoseconds per call of [`tiny`], [`no_kernel`], [`tiny_scaled`] and [`tiny_guarded`] on a
/// one-element tensor (median of 15 blocks of 200k calls) and of CartPole's `act` (15 blocks of
/// 50k calls), eager and replayed: the cost of the hit path, and of a helper's guard. The difference between the two blocks' replays is what running
/// a one-kernel graph adds to dispatch.
pub fn hit_cost() {
    let x = Tensor::ones([1]);
    for _ in 0..4 {
        tiny(&x); // recorded, compiled, first replays
        no_kernel(&x);
    }
    let per_call = |mode: Mode, f: fn(&Tensor) -> Tensor| {
        let mut blocks: Vec<f64> = (0..15)
            .map(|_| {
                janus::with_mode(mode, || timed(1e9, || (0..200_000).for_each(|_| _ = f(&x)))) / 200_000.0
            })
            .collect();
        median(&mut blocks)
    };
    let (e, j) = (per_call(Mode::Eager, tiny), per_call(Mode::Janus, tiny));
    let (ne, nj) = (per_call(Mode::Eager, no_kernel), per_call(Mode::Janus, no_kernel));
    // The guard of a helper's host value against the same scalar passed as an argument.
    for _ in 0..4 {
        tiny_scaled(&x, 2.0);
        tiny_guarded(&x);
    }
    let (se, sj) =
        (per_call(Mode::Eager, |x| tiny_scaled(x, 2.0)), per_call(Mode::Janus, |x| tiny_scaled(x, 2.0)));
    let (ge, gj) = (per_call(Mode::Eager, tiny_guarded), per_call(Mode::Janus, tiny_guarded));
    // `act` of the CartPole example: batch-1 inference and sampling, one replay per call.
    let policy = cartpole::Policy::new();
    let obs = Tensor::from_vec(vec![0.01f32, -0.02, 0.03, 0.01], [1, 4]);
    let act_ns = |mode: Mode| {
        let mut blocks: Vec<f64> = (0..15)
            .map(|_| {
                janus::with_mode(mode, || {
                    timed(1e9, || (0..50_000).for_each(|_| _ = no_grad(|| cartpole::act(&policy, &obs))))
                }) / 50_000.0
            })
            .collect();
        median(&mut blocks)
    };
    let (ae, aj) = (act_ns(Mode::Eager), act_ns(Mode::Janus));
    println!("\n| block | eager, ns/call | janus (replay), ns/call |\n|---|---:|---:|");
    println!("| dispatch only: `x.reshape([1, 1])`, a graph with no kernel | {ne:.0} | {nj:.0} |");
    println!("| `x * 2.0 + 1.0`, 1 element: one fused kernel | {e:.0} | {j:.0} |");
    println!("| `x * s + 1.0`, `s: f64` an argument (keyed by value) | {se:.0} | {sj:.0} |");
    println!(
        "| `x * scale() + 1.0`, `scale()` a helper reading a global: read and guarded per call | {ge:.0} | {gj:.0} |"
    );
    println!("| CartPole `act` (batch-1 inference and sampling, no environment) | {ae:.0} | {aj:.0} |");
}
