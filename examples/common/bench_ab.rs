//! The bench's A/Bs of compile-time switches (issue 13), on the LSTM, CNN and Transformer
//! training steps, alternated within one process:
//! - `--only replan`: split programs' arenas planned again by pieces of values
//!   (`ExecOptions::replan`, on by default) against the whole program's plan;
//! - `--only pack`: right factors shared by several products packed once per run
//!   (`ExecOptions::pack`, on by default on AVX2 machines) against gemm for every product;
//! - `--only joins`: small steps between split steps split too, so the two workers' chains
//!   do not meet at them (`ExecOptions::split_joins`, on by default), against left whole;
//! - `--only long`: long steps (weight gradients' products) taken by whichever worker is free
//!   first (`ExecOptions::share_long`, on by default), against kept on the worker their
//!   split assigned.
//!
//! (Prefetching fused steps' operands and huge-page arenas had A/Bs here too; both measured
//! as not paying and were deleted with their switches: `docs/perf/`.)
//!
//! Each round recompiles (caches reset) and times its last steps, after the two-worker tuner
//! has chosen; the rounds' median ratios are what to read, as this machine's speed drifts by
//! more than the difference between the settings.

use super::{bench_models, cnn, lstm_lm, median::median, timed, transformer_lm};
use janus::prelude::*;

/// One workload's step, called with the step's index.
type Step<'a> = Box<dyn FnMut(usize) + 'a>;

/// A switch compared: its name and its setter (`true`: learner 0, the switch on).
#[derive(Clone, Copy)]
pub struct Switch {
    name: &'static str,
    set: fn(&mut janus::ExecOptions, bool),
    /// The table's two setting columns.
    on: &'static str,
    off: &'static str,
}

/// Split programs' memory planned by pieces of values, or the whole program's plan.
pub const REPLAN: Switch =
    Switch { name: "Split programs' memory", set: |o, on| o.replan = on, on: "pieces", off: "whole plan" };

/// Shared right factors packed once per run, or gemm for every product.
pub const PACK: Switch =
    Switch { name: "Shared right factors", set: |o, on| o.pack = on, on: "packed", off: "gemm" };

/// Small steps between split steps split too, or left whole.
pub const SPLIT_JOINS: Switch = Switch {
    name: "Small steps joining split chains",
    set: |o, on| o.split_joins = on,
    on: "split",
    off: "whole",
};

/// Long steps taken by the first free worker, or kept where their split put them.
pub const SHARE_LONG: Switch =
    Switch { name: "Long steps", set: |o, on| o.share_long = on, on: "first free worker", off: "pinned" };

/// Alternates `rounds` rounds of `warm` untimed and `timed_steps` timed calls of the step of
/// learner 0 (the switch on) and learner 1 (off), in turns first; prints the medians, the
/// per-round ratios and the arenas' sizes and the packed factors' (over every compiled graph,
/// forward and backward, as `janus::stats()` reports them after the last round of each setting).
/// Returns the rounds' medians, per setting, as a line for below the table.
fn alternate(
    sw: Switch,
    name: &str,
    rounds: usize,
    warm: usize,
    timed_steps: usize,
    mut steps: [Step; 2],
) -> String {
    let before = janus::exec_options();
    let (mut all, mut ratios): ([Vec<f64>; 2], Vec<f64>) = Default::default();
    let mut per_round: [Vec<String>; 2] = Default::default();
    let (mut arena_mb, mut packed_mb) = ([0.0; 2], [0.0; 2]);
    let mut next = 0;
    for round in 0..rounds {
        let mut medians = [0.0; 2];
        // Rounds alternate which setting runs first: the first of a round measured slower.
        for k in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
            let step = &mut steps[k];
            let mut o = before;
            (sw.set)(&mut o, k == 0);
            janus::set_exec_options(o);
            janus::reset_caches();
            let mut times = Vec::with_capacity(timed_steps);
            for i in 0..warm + timed_steps {
                let ms = timed(1e3, || step(next));
                next += 1;
                if i >= warm {
                    times.push(ms);
                }
            }
            all[k].extend(&times);
            medians[k] = median(&mut times);
            per_round[k].push(format!("{:.2}", medians[k]));
            let stats = janus::stats();
            arena_mb[k] = stats.fragments.iter().map(|f| f.arena_bytes).sum::<usize>() as f64 / 1e6;
            packed_mb[k] = stats.fragments.iter().map(|f| f.packed_bytes).sum::<usize>() as f64 / 1e6;
        }
        // The first round also warms the allocator and the helper thread.
        if round > 0 {
            ratios.push(medians[0] / medians[1]);
        }
    }
    janus::set_exec_options(before);
    let faster = ratios.iter().filter(|&&r| r < 1.0).count();
    let n = ratios.len();
    let [mut a, mut b] = all;
    println!(
        "| {name} | {:.3} | {:.3} | {:.3} | {faster} of {n} | {:.2} / {:.2} | {:.2} / {:.2} |",
        median(&mut a),
        median(&mut b),
        median(&mut ratios),
        arena_mb[0],
        arena_mb[1],
        packed_mb[0],
        packed_mb[1]
    );
    format!(
        "{name}, each round's median, ms: {}: {}; {}: {}",
        sw.on,
        per_round[0].join(" "),
        sw.off,
        per_round[1].join(" ")
    )
}

/// The two learners' steps of a model trained with Adam at `lr` on `batches` (`step` runs one).
fn adam_steps<M: Clone + 'static>(
    model: M,
    lr: f64,
    batches: Vec<(Tensor, Tensor)>,
    step: impl Fn(&mut M, &mut optim::Adam, &(Tensor, Tensor)) + Copy + 'static,
) -> [Step<'static>; 2] {
    let batches = std::rc::Rc::new(batches);
    [model.clone(), model].map(|mut m| {
        let (batches, mut opt) = (batches.clone(), optim::Adam::new(lr));
        Box::new(move |i: usize| step(&mut m, &mut opt, &batches[i % batches.len()])) as Step
    })
}

/// The A/B table of `sw` for the three workloads (`quick`: a few rounds, a smoke run).
pub fn ab(sw: Switch, quick: bool) {
    let rounds = if quick { 2 } else { 12 };
    let Switch { name, on, off, .. } = sw;
    let mut probe = janus::exec_options();
    let default = probe;
    (sw.set)(&mut probe, true);
    let (on_d, off_d) = if probe == default { (" (default)", "") } else { ("", " (default)") };
    println!(
        "\n{name}: {on}{on_d} vs {off}{off_d}, alternated in one process ({rounds} rounds; the first not counted)\n"
    );
    println!(
        "| step, ms | {on} | {off} | per-round ratio, median | rounds faster {on} | arenas, MB: {on} / {off} | packed factors, MB: {on} / {off} |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(16);
    let init = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let mut lstms = [init.clone(), init];
    let [m0, m1] = &mut lstms;
    let steps: [Step; 2] = [m0, m1].map(|m| {
        let data = &data;
        Box::new(move |i: usize| {
            let (xs, ys) = data.batch(i);
            _ = lstm_lm::janus_sgd_step(m, xs, ys, 0.1);
        }) as Step
    });
    let mut lines =
        vec![alternate(sw, "LSTM LM (T=32, B=32, H=128)", rounds, 60, if quick { 5 } else { 30 }, steps)];
    let cnn_steps = |m: &mut nn::Sequential, opt: &mut optim::Adam, (x, y): &(Tensor, Tensor)| {
        _ = cnn::train_step(m, opt, x, y);
    };
    let steps = adam_steps(cnn::model(), 1e-3, bench_models::cnn_batches(), cnn_steps);
    lines.push(alternate(sw, "CNN (batch 64)", rounds.min(8), 45, if quick { 3 } else { 15 }, steps));
    let lm_steps =
        |m: &mut transformer_lm::CharTransformer, opt: &mut optim::Adam, (x, y): &(Tensor, Tensor)| {
            _ = transformer_lm::train_step(m, opt, x, y);
        };
    let lm = transformer_lm::CharTransformer::refbench();
    let steps = adam_steps(lm, 3e-4, bench_models::transformer_batches(), lm_steps);
    lines.push(alternate(
        sw,
        "Transformer (32x64 tokens)",
        rounds.min(8),
        45,
        if quick { 3 } else { 15 },
        steps,
    ));
    println!();
    for l in lines {
        println!("{l}");
    }
}
