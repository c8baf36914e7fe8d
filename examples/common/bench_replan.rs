//! The bench's A/B of the split programs' memory plans (issue 13): the LSTM, CNN and
//! Transformer training steps with the arena planned again by pieces of values
//! (`janus::set_replan(true)`, the default) and with the whole program's plan, alternated
//! within one process. Each round recompiles (caches reset) and times its last steps, after
//! the two-worker tuner has chosen; the rounds' median ratios are what to read, as this
//! machine's speed drifts by more than the difference between the plans.

use super::{bench_models, cnn, lstm_lm, median::median, timed, transformer_lm};
use janus::prelude::*;

/// One workload's step, called with the step's index.
type Step<'a> = Box<dyn FnMut(usize) + 'a>;

/// Alternates `rounds` rounds of `warm` untimed and `timed_steps` timed calls of the step of
/// learner 0 (pieces) and learner 1 (the whole program's plan), in turns first; prints the
/// medians, the per-round ratios and the arenas' sizes (over every compiled graph, forward and
/// backward, as `janus::stats()` reports them after the last round of each plan).
fn alternate(name: &str, rounds: usize, warm: usize, timed_steps: usize, mut steps: [Step; 2]) {
    let (mut all, mut ratios): ([Vec<f64>; 2], Vec<f64>) = Default::default();
    let mut arena_mb = [0.0; 2];
    let mut next = 0;
    for round in 0..rounds {
        let mut medians = [0.0; 2];
        // Rounds alternate which plan runs first: the first of a round measured slower.
        for k in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
            let step = &mut steps[k];
            janus::set_replan(k == 0);
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
            arena_mb[k] = janus::stats().fragments.iter().map(|f| f.arena_bytes).sum::<usize>() as f64 / 1e6;
        }
        // The first round also warms the allocator and the helper thread.
        if round > 0 {
            ratios.push(medians[0] / medians[1]);
        }
    }
    janus::set_replan(true);
    let faster = ratios.iter().filter(|&&r| r < 1.0).count();
    let n = ratios.len();
    let [mut a, mut b] = all;
    println!(
        "| {name} | {:.3} | {:.3} | {:.3} | {faster} of {n} | {:.2} / {:.2} |",
        median(&mut a),
        median(&mut b),
        median(&mut ratios),
        arena_mb[0],
        arena_mb[1]
    );
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

/// The A/B table for the three workloads (`quick`: a few rounds, a smoke run).
pub fn replan_ab(quick: bool) {
    let rounds = if quick { 2 } else { 12 };
    println!("\nSplit programs' memory: planned by pieces of values (default) vs the whole program's plan,");
    println!("alternated in one process ({rounds} rounds; the first not counted)\n");
    println!(
        "| step, ms | pieces | whole plan | per-round ratio, median | rounds faster with pieces | arenas, MB: pieces / whole |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
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
    alternate("LSTM LM (T=32, B=32, H=128)", rounds, 60, if quick { 5 } else { 30 }, steps);
    let cnn_steps = |m: &mut nn::Sequential, opt: &mut optim::Adam, (x, y): &(Tensor, Tensor)| {
        _ = cnn::train_step(m, opt, x, y);
    };
    let steps = adam_steps(cnn::model(), 1e-3, bench_models::cnn_batches(), cnn_steps);
    alternate("CNN (batch 64)", rounds.min(8), 45, if quick { 3 } else { 15 }, steps);
    let lm_steps =
        |m: &mut transformer_lm::CharTransformer, opt: &mut optim::Adam, (x, y): &(Tensor, Tensor)| {
            _ = transformer_lm::train_step(m, opt, x, y);
        };
    let lm = transformer_lm::CharTransformer::refbench();
    let steps = adam_steps(lm, 3e-4, bench_models::transformer_batches(), lm_steps);
    alternate("Transformer (32x64 tokens)", rounds.min(8), 45, if quick { 3 } else { 15 }, steps);
}
