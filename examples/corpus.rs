//! The corpus of real programs (issue 52): six training programs written the way a PyTorch
//! user writes them, each a port of a named public PyTorch example (see each file's header),
//! timed in janus mode against eager mode in the same process.
//!
//! ```text
//! cargo run --release --example corpus                  # every program, 3 rounds
//! cargo run --release --example corpus -- --only vae    # one program
//! cargo run --release --example corpus -- --rounds 1 --scale 0.1   # a smoke run
//! ```
//!
//! Each round runs a program eagerly, then in janus mode from empty caches (compiles
//! included), then eagerly again, and takes the janus time against the mean of the two eager
//! runs. The table gives the median ratio over the rounds, the staging coverage and the graphs
//! compiled (forward graphs of every block and whole function, summed) of the last janus run.
//! The sampled self-check stays on, as a user runs it.

#[path = "corpus/char_transformer.rs"]
mod char_transformer;
#[path = "corpus/dqn.rs"]
mod dqn;
#[path = "corpus/reinforce.rs"]
mod reinforce;
#[path = "corpus/resnet.rs"]
mod resnet;
#[path = "corpus/seq2seq.rs"]
mod seq2seq;
#[path = "corpus/vae.rs"]
mod vae;

use clap::Parser;
use janus::prelude::*;
use std::time::Instant;

/// One program: its name, what one step is, the steps of a timed run (about 2 s or more
/// eagerly here), and its entry point.
type Program = (&'static str, &'static str, usize, fn(usize, u64) -> Vec<f64>);

const PROGRAMS: [Program; 6] = [
    ("seq2seq", "step", 200, seq2seq::train),
    ("vae", "step", 600, vae::train),
    ("dqn", "step", 4000, dqn::train),
    ("resnet", "step", 100, resnet::train),
    ("char_transformer", "step", 100, char_transformer::train),
    ("reinforce", "episode", 600, reinforce::train),
];

#[derive(Parser)]
#[command(about = "The corpus of real programs: janus against eager mode, side by side")]
struct Args {
    /// Only this program (seq2seq, vae, dqn, resnet, char_transformer, reinforce).
    #[arg(long)]
    only: Option<String>,
    /// Rounds per program (the ratio is their median).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Multiplies every program's steps (0.1 for a smoke run).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Prints `janus::explain()` after each program's last janus run.
    #[arg(long)]
    explain: bool,
}

fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    println!(
        "| program | steps | eager, s | janus, s | speed-up, eager s ÷ janus s (each round) | median | coverage | graphs compiled |"
    );
    println!("|---|---:|---:|---:|---|---:|---:|---:|");
    let mut medians = Vec::new();
    for (name, unit, steps, train) in PROGRAMS {
        if args.only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let steps = ((steps as f64 * args.scale).round() as usize).max(2);
        let (mut ratios, mut eager_s, mut janus_s) = (Vec::new(), Vec::new(), Vec::new());
        let mut last = None;
        for round in 0..args.rounds {
            let seed = 1 + round as u64;
            let e1 = timed(|| _ = janus::with_mode(Mode::Eager, || train(steps, seed)));
            janus::reset_caches();
            janus::reset_stats();
            let j = timed(|| _ = janus::with_mode(Mode::Janus, || train(steps, seed)));
            last = Some(janus::stats());
            if args.explain && round + 1 == args.rounds {
                eprintln!("{}", janus::explain());
            }
            let e2 = timed(|| _ = janus::with_mode(Mode::Eager, || train(steps, seed)));
            let e = (e1 + e2) / 2.0;
            ratios.push(e / j);
            eager_s.push(e);
            janus_s.push(j);
        }
        let stats = last.expect("at least one round");
        let compiled: u64 = stats.fragments.iter().map(|f| f.compiles).sum();
        let each = ratios.iter().map(|r| format!("{r:.2}x")).collect::<Vec<_>>().join(", ");
        let m = median(&mut ratios.clone());
        medians.push(m);
        println!(
            "| {name} | {steps} {unit}s | {:.2} | {:.2} | {each} | **{m:.2}x** | {:.1}% | {compiled} |",
            median(&mut eager_s),
            median(&mut janus_s),
            stats.coverage() * 100.0
        );
    }
    if medians.len() > 1 {
        println!("\nmedian program: {:.2}x", median(&mut medians));
    }
}
