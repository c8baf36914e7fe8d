//! The flagship: a character-level LSTM language model trained with an imperative `#[janus]`
//! training step (host time loop, `backward()`, optimiser update), then sampled.
//!
//! ```text
//! cargo run --release --example lstm_charlm                     # janus, Adam, 2000 steps
//! cargo run --release --example lstm_charlm -- --mode eager     # the same program, eagerly
//! cargo run --release --example lstm_charlm -- --mode check --steps 50
//! cargo run --release --example lstm_charlm -- --corpus my.txt --steps 5000
//! ```
//!
//! The default corpus is Cicero's *De finibus* I (49 KB of Latin) that ships inside the
//! `lipsum` crate, so the example works offline.

#[path = "common/cli.rs"]
mod cli;
#[path = "common/loss_plot.rs"]
mod loss_plot;
#[path = "common/lstm_lm.rs"]
mod lstm_lm;
#[path = "common/median.rs"]
mod median;
#[path = "common/progress.rs"]
mod progress;
#[path = "common/run_mode.rs"]
mod run_mode;

use run_mode::RunMode;
use std::time::Instant;

use clap::Parser;
use janus::prelude::*;
use lstm_lm::{B, Batches, H, LstmLm, T};
use median::median;
use progress::{Progress, coverage_since};

/// One training step, written as ordinary imperative code. The time loop stays on the host;
/// its body (one LSTM cell and its loss) becomes one cached compiled graph, the optimiser update
/// another, and `backward()` runs compiled backward graphs of the recorded fragments.
#[janus]
fn train_step<O: Optimizer>(m: &mut LstmLm, opt: &mut O, xs: &[Tensor], ys: &[Tensor]) -> f32 {
    let mut h = Tensor::zeros_on([xs[0].dims()[0], m.wh.dims()[0]], xs[0].device());
    let mut c = h.clone();
    let mut total = Tensor::scalar(0.0);
    for t in 0..xs.len() {
        (h, c) = lstm_lm::cell(m, &xs[t], &h, &c);
        total += lstm_lm::logits(m, &h).cross_entropy(&ys[t]);
    }
    let loss = total / xs.len() as f64;
    let grads = loss.backward();
    opt.step(m, &grads);
    loss.item()
}

/// One generation step: the next character's one-hot, drawn from the model's distribution
/// sharpened by `1 / temperature`, and the new state.
#[janus]
fn sample_next(m: &LstmLm, x: &Tensor, h: &Tensor, c: &Tensor, temperature: f64) -> (Tensor, Tensor, Tensor) {
    let (h, c) = lstm_lm::cell(m, x, h, c);
    let p = (lstm_lm::logits(m, &h) / temperature).softmax(1);
    (p.multinomial().one_hot(m.by.dims()[0]), h, c)
}

/// The corpus as token ids, and the alphabet (sorted distinct characters).
fn tokenize(text: &str) -> (Vec<usize>, Vec<char>) {
    let mut alphabet: Vec<char> = text.chars().collect();
    alphabet.sort_unstable();
    alphabet.dedup();
    let ids = text.chars().map(|ch| alphabet.binary_search(&ch).expect("in alphabet")).collect();
    (ids, alphabet)
}

/// A small deterministic generator for batch offsets (SplitMix64).
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

/// `n` random `[T][B]` windows of `ids[range]`.
fn batches(ids: &[usize], vocab: usize, n: usize, rng: &mut Rng) -> Batches {
    let starts: Vec<Vec<usize>> =
        (0..n).map(|_| (0..B).map(|_| rng.below(ids.len() - T - 1)).collect()).collect();
    Batches::from_corpus(ids, &starts, vocab)
}

/// Mean loss over held-out batches, evaluated eagerly without gradients.
fn eval_loss(m: &LstmLm, data: &Batches, n: usize) -> f32 {
    no_grad(|| {
        (0..n).map(|k| lstm_lm::loss(m, data.batch(k).0, data.batch(k).1).item()).sum::<f32>() / n as f32
    })
}

fn generate(m: &LstmLm, alphabet: &[char], prompt: &str, len: usize, temperature: f64) -> String {
    let onehot = |ch: char| {
        let id = alphabet.binary_search(&ch).unwrap_or(0) as i64;
        Tensor::from_vec(vec![id], [1]).one_hot(alphabet.len())
    };
    let (mut h, mut c) = (Tensor::zeros([1, m.wh.dims()[0]]), Tensor::zeros([1, m.wh.dims()[0]]));
    let mut out = String::from(prompt);
    let mut x = onehot(' ');
    no_grad(|| {
        for ch in prompt.chars() {
            (_, h, c) = sample_next(m, &onehot(ch), &h, &c, temperature);
            x = onehot(ch);
        }
        for _ in 0..len {
            (x, h, c) = sample_next(m, &x, &h, &c, temperature);
            out.push(alphabet[x.argmax(1).to_vec::<i64>()[0] as usize]);
        }
    });
    out
}

/// Trains a character-level LSTM language model (H=128, T=32, B=32) with a #[janus] step.
#[derive(Parser)]
#[command(name = "lstm_charlm", override_usage = "cargo run --release --example lstm_charlm -- [OPTIONS]")]
struct Cli {
    /// The mode to run in [default: JANUS_MODE, else janus].
    #[arg(long, value_enum)]
    mode: Option<RunMode>,
    /// Training steps.
    #[arg(long, default_value_t = 2000)]
    steps: usize,
    #[command(flatten)]
    device: cli::DeviceArg,
    /// A UTF-8 text file to train on [default: Cicero, De finibus I, from `lipsum`].
    #[arg(long, value_name = "FILE")]
    corpus: Option<std::path::PathBuf>,
    /// The optimiser.
    #[arg(long, value_enum, default_value_t = OptimChoice::Adam)]
    optim: OptimChoice,
    /// Learning rate [default: 0.003 for adam, 0.1 for sgd].
    #[arg(long)]
    lr: Option<f64>,
    /// Seed of the initialisation, batches and sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Characters to generate at the end.
    #[arg(long, default_value_t = 400)]
    sample: usize,
    /// Where the loss-curve PNG goes; an empty value writes none.
    #[arg(long, value_name = "FILE", default_value = "target/lstm_charlm_loss.png")]
    plot: String,
}

/// `--optim`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum OptimChoice {
    Adam,
    Sgd,
}

impl OptimChoice {
    fn name(self) -> &'static str {
        match self {
            OptimChoice::Adam => "adam",
            OptimChoice::Sgd => "sgd",
        }
    }
}

fn main() {
    let args = Cli::parse();
    let (steps, device) = (args.steps, args.device.device());
    let mode = args.mode.map_or_else(janus::mode, RunMode::mode);
    janus::set_mode(mode);
    janus::manual_seed(args.seed);

    let text = match &args.corpus {
        None => lipsum::LIBER_PRIMUS.to_string(),
        Some(path) => std::fs::read_to_string(path)
            .unwrap_or_else(|e| cli::fail(&format!("cannot read `{}`: {e}", path.display()))),
    };
    let (ids, alphabet) = tokenize(&text);
    if ids.len() < 20 * (T + 1) {
        cli::fail(&format!("the corpus has {} characters; it needs at least {}", ids.len(), 20 * (T + 1)));
    }
    let split = ids.len() * 9 / 10;
    let (train, heldout) = (&ids[..split], &ids[split..]);
    let mut rng = Rng(args.seed ^ 0x5DEE_CE66);
    let val = batches(heldout, alphabet.len(), 8, &mut rng).to_device(device);
    println!(
        "corpus: {} characters, alphabet of {}; {} steps of {}x{} characters; mode {mode:?}; {}; {device}",
        ids.len(),
        alphabet.len(),
        steps,
        B,
        T,
        args.optim.name()
    );

    let mut m = LstmLm::new(alphabet.len(), H).to_device(device);

    enum Opt {
        Adam(optim::Adam),
        Sgd(optim::Sgd),
    }
    let mut opt = match args.optim {
        OptimChoice::Adam => Opt::Adam(optim::Adam::new(args.lr.unwrap_or(3e-3))),
        OptimChoice::Sgd => Opt::Sgd(optim::Sgd::new(args.lr.unwrap_or(0.1))),
    };

    let mut losses = Vec::with_capacity(steps);
    let mut val_points = vec![(0, eval_loss(&m, &val, 8))];
    let mut step_secs = Vec::with_capacity(steps);
    let progress = Progress::new(steps as u64, 100);
    let start = Instant::now();
    let warmup = 20.min(steps / 2); // recordings and compiles happen in the first steps
    let mut warm = janus::stats();
    for step in 0..steps {
        if step == warmup {
            warm = janus::stats();
        }
        let data = batches(train, alphabet.len(), 1, &mut rng).to_device(device);
        let (xs, ys) = data.batch(0);
        let t = Instant::now();
        let loss = match &mut opt {
            Opt::Adam(o) => train_step(&mut m, o, xs, ys),
            Opt::Sgd(o) => train_step(&mut m, o, xs, ys),
        };
        step_secs.push(t.elapsed().as_secs_f64());
        if !loss.is_finite() {
            cli::fail(&format!("the loss diverged at step {step} ({loss}); try a smaller --lr"));
        }
        losses.push(loss);
        if (step + 1).is_multiple_of(500) || step + 1 == steps {
            val_points.push((step + 1, eval_loss(&m, &val, 8)));
        }
        let window = &losses[losses.len().saturating_sub(50)..];
        progress.update(step as u64 + 1, || {
            format!("loss {:.3}", window.iter().sum::<f32>() / window.len() as f32)
        });
    }
    progress.finish();
    let wall = start.elapsed().as_secs_f64();
    let coverage = coverage_since(&warm);

    let temperature = 0.8;
    println!("\n--- sample (temperature {temperature}) ---");
    // Batch-1 sampling runs on the CPU, where one small step costs less than a GPU launch.
    let m_cpu = m.to_device(Device::Cpu);
    println!("{}", generate(&m_cpu, &alphabet, "Non eram nescius", args.sample, temperature));
    println!("---\n");

    let first = losses[..losses.len().min(20)].iter().sum::<f32>() / losses.len().min(20) as f32;
    let last_n = losses.len().min(100);
    let last = losses[losses.len() - last_n..].iter().sum::<f32>() / last_n as f32;
    let median_ms = median(&mut step_secs) * 1e3;
    println!(
        "training loss: first 20 steps {first:.3}, last {last_n} steps {last:.3} (uniform guess {:.3})",
        (alphabet.len() as f32).ln()
    );
    println!(
        "held-out loss: {}",
        val_points.iter().map(|(s, l)| format!("{l:.3} @ {s}")).collect::<Vec<_>>().join(", ")
    );
    println!(
        "throughput: {:.1} steps/s, {:.0} characters/s; median step {median_ms:.2} ms; wall {wall:.1} s",
        steps as f64 / wall,
        (steps * T * B) as f64 / wall
    );
    println!("\ntraining steps {warmup}..{steps}: {coverage}");
    println!("\n{}", janus::explain());
    let path = args.plot.as_str();
    if !path.is_empty() {
        if let Some(dir) = std::path::Path::new(path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        match loss_plot::plot(path, "lstm_charlm: cross-entropy per character", &losses, &val_points) {
            Ok(()) => println!("loss curve: {path}"),
            Err(e) => eprintln!("warning: could not write the loss curve to {path}: {e}"),
        }
    }
}
