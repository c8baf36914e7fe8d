//! A character-level Transformer language model (2 pre-norm layers, 4 heads, d=128, ff 512,
//! T=64, B=32, Adam 3e-4: the `shared/refbench` sizes) on the flagship's corpus, Cicero's
//! *De finibus* I from the `lipsum` crate. The training step is `#[janus]`; held-out loss is
//! measured in eval mode (dropout off) on the last 10% of the text.
//!
//! ```text
//! cargo run --release --example transformer_lm                   # janus, 1500 steps
//! cargo run --release --example transformer_lm -- --seconds 60   # stop after 60 s of training
//! cargo run --release --example transformer_lm -- --mode check --steps 20
//! ```

#[path = "common/cli.rs"]
#[allow(dead_code)] // `--device`: this example runs on the CPU
mod cli;
#[path = "common/loss_plot.rs"]
mod loss_plot;
#[path = "common/median.rs"]
mod median;
#[path = "common/progress.rs"]
mod progress;
#[path = "common/run_mode.rs"]
mod run_mode;
#[path = "common/transformer_lm.rs"]
mod transformer_lm;

use run_mode::RunMode;
use std::time::Instant;

use clap::Parser;
use janus::prelude::*;
use median::median;
use progress::{Progress, coverage_since};
use transformer_lm::{B, CharTransformer, T};

/// Trains a character Transformer on Cicero and reports the held-out loss.
#[derive(Parser)]
#[command(
    name = "transformer_lm",
    override_usage = "cargo run --release --example transformer_lm -- [OPTIONS]"
)]
struct Cli {
    /// The mode to run in [default: JANUS_MODE, else janus].
    #[arg(long, value_enum)]
    mode: Option<RunMode>,
    /// Training steps.
    #[arg(long, default_value_t = 1500)]
    steps: usize,
    /// Stop training after this many seconds (for comparisons at equal wall time).
    #[arg(long)]
    seconds: Option<f64>,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 3e-4)]
    lr: f64,
    /// Dropout in the encoder layers (0 is the refbench model).
    #[arg(long, default_value_t = 0.1)]
    dropout: f64,
    /// Seed of the initialisation, batches and sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Characters to generate at the end.
    #[arg(long, default_value_t = 300)]
    sample: usize,
    /// Where the loss-curve PNG goes; an empty value writes none.
    #[arg(long, value_name = "FILE", default_value = "target/transformer_lm_loss.png")]
    plot: String,
}

/// SplitMix64, for batch offsets.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// Mean loss over the held-out batches, in eval mode.
fn heldout_loss(m: &mut CharTransformer, val: &[(Tensor, Tensor)]) -> f32 {
    m.eval();
    let l = no_grad(|| val.iter().map(|(x, y)| transformer_lm::eval_loss(m, x, y)).sum::<f32>())
        / val.len() as f32;
    m.train();
    l
}

/// `len` characters after `prompt`, sampled at `temperature` from the last `T` characters'
/// context, in eval mode.
fn generate(
    m: &mut CharTransformer,
    alphabet: &[char],
    prompt: &str,
    len: usize,
    temperature: f64,
) -> String {
    m.eval();
    let mut ids: Vec<i64> =
        prompt.chars().map(|ch| alphabet.binary_search(&ch).unwrap_or(0) as i64).collect();
    no_grad(|| {
        for _ in 0..len {
            let ctx = &ids[ids.len().saturating_sub(T)..];
            let x = Tensor::from_vec(ctx.to_vec(), [1, ctx.len()]);
            let logits = m.logits(&x).narrow(1, ctx.len() - 1, 1).reshape([1, alphabet.len()]);
            let next = (logits / temperature).softmax(1).multinomial();
            ids.push(next.to_vec::<i64>()[0]);
        }
    });
    m.train();
    ids.iter().map(|&i| alphabet[i as usize]).collect()
}

fn main() {
    let args = Cli::parse();
    let mode = args.mode.map_or_else(janus::mode, RunMode::mode);
    janus::set_mode(mode);
    janus::manual_seed(args.seed);
    let text = lipsum::LIBER_PRIMUS;
    let mut alphabet: Vec<char> = text.chars().collect();
    alphabet.sort_unstable();
    alphabet.dedup();
    let ids: Vec<usize> = text.chars().map(|ch| alphabet.binary_search(&ch).expect("in alphabet")).collect();
    let split = ids.len() * 9 / 10;
    let (train, heldout) = (&ids[..split], &ids[split..]);
    let mut rng = Rng(args.seed ^ 0x5DEE_CE66);
    let val: Vec<(Tensor, Tensor)> = (0..8)
        .map(|_| {
            let starts: Vec<usize> = (0..B).map(|_| rng.below(heldout.len() - T - 1)).collect();
            transformer_lm::windows(heldout, &starts, T)
        })
        .collect();
    println!(
        "corpus: {} characters, alphabet of {}; up to {} steps of {B}x{T} characters; dropout {}; mode {mode:?}",
        ids.len(),
        alphabet.len(),
        args.steps,
        args.dropout
    );
    let mut m = CharTransformer::new(
        alphabet.len(),
        T,
        transformer_lm::D,
        transformer_lm::HEADS,
        transformer_lm::FF,
        transformer_lm::LAYERS,
        args.dropout,
    );
    let mut opt = optim::Adam::new(args.lr);
    let mut losses = Vec::with_capacity(args.steps);
    let mut val_points = vec![(0, heldout_loss(&mut m, &val))];
    let mut step_secs = Vec::with_capacity(args.steps);
    let progress = Progress::new(args.steps as u64, 100);
    let warmup = 20.min(args.steps / 2);
    let mut warm = janus::stats();
    let start = Instant::now();
    let mut train_secs = 0.0;
    for step in 0..args.steps {
        if step == warmup {
            warm = janus::stats();
        }
        let starts: Vec<usize> = (0..B).map(|_| rng.below(train.len() - T - 1)).collect();
        let (x, y) = transformer_lm::windows(train, &starts, T);
        let t = Instant::now();
        let loss = transformer_lm::train_step(&mut m, &mut opt, &x, &y);
        let dt = t.elapsed().as_secs_f64();
        step_secs.push(dt);
        train_secs += dt;
        if !loss.is_finite() {
            cli::fail(&format!("the loss diverged at step {step} ({loss}); try a smaller --lr"));
        }
        losses.push(loss);
        let done = args.seconds.is_some_and(|s| start.elapsed().as_secs_f64() >= s);
        if (step + 1).is_multiple_of(250) || step + 1 == args.steps || done {
            val_points.push((step + 1, heldout_loss(&mut m, &val)));
        }
        let window = &losses[losses.len().saturating_sub(50)..];
        progress.update(step as u64 + 1, || {
            format!("loss {:.3}", window.iter().sum::<f32>() / window.len() as f32)
        });
        if done {
            break;
        }
    }
    progress.finish();
    let wall = start.elapsed().as_secs_f64();
    let steps = losses.len();
    let coverage = coverage_since(&warm);
    println!("\n--- sample (temperature 0.8) ---");
    println!("{}", generate(&mut m, &alphabet, "Non eram nescius", args.sample, 0.8));
    println!("---\n");
    let last_n = losses.len().min(100);
    let last = losses[losses.len() - last_n..].iter().sum::<f32>() / last_n as f32;
    println!(
        "training loss: last {last_n} steps {last:.3} (uniform guess {:.3})",
        (alphabet.len() as f32).ln()
    );
    println!(
        "held-out loss: {}",
        val_points.iter().map(|(s, l)| format!("{l:.3} @ {s}")).collect::<Vec<_>>().join(", ")
    );
    println!(
        "throughput: {steps} steps in {wall:.1} s wall ({train_secs:.1} s in training steps), {:.0} characters/s; median step {:.2} ms",
        (steps * T * B) as f64 / wall,
        median(&mut step_secs) * 1e3
    );
    println!("\ntraining steps {warmup}..{steps}: {coverage}");
    println!("\n{}", janus::explain());
    let path = args.plot.as_str();
    if !path.is_empty() {
        if let Some(dir) = std::path::Path::new(path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        match loss_plot::plot(path, "transformer_lm: cross-entropy per character", &losses, &val_points) {
            Ok(()) => println!("loss curve: {path}"),
            Err(e) => eprintln!("warning: could not write the loss curve to {path}: {e}"),
        }
    }
}
