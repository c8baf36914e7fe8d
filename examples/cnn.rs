//! A small CNN (conv-BN-ReLU-pool x2, then linear; the `shared/refbench` sizes) trained on
//! MNIST-sized digits rendered offline from the DejaVu fonts with random distortions
//! (`examples/common/digits.rs`). The held-out set is drawn from fonts training never sees.
//! The training step is `#[janus]`; evaluation runs the same network in eval mode, where batch
//! norm uses its running statistics (a separate cache key).
//!
//! ```text
//! cargo run --release --example cnn                       # janus, 1500 steps
//! cargo run --release --example cnn -- --mode eager
//! cargo run --release --example cnn -- --mode check --steps 20
//! ```

#[path = "common/cli.rs"]
#[allow(dead_code)] // `--device`: the CNN runs on the CPU
mod cli;
#[path = "common/cnn.rs"]
mod cnn;
#[path = "common/digits.rs"]
mod digits;
#[path = "common/median.rs"]
mod median;
#[path = "common/progress.rs"]
mod progress;
#[path = "common/run_mode.rs"]
mod run_mode;

use run_mode::RunMode;
use std::time::Instant;

use clap::Parser;
use cnn::BATCH;
use digits::{Digits, Rng};
use janus::prelude::*;
use median::median;
use plotters::prelude::*;
use progress::{Progress, coverage_since};

/// Trains a CNN on rendered digits and reports held-out accuracy on unseen fonts.
#[derive(Parser)]
#[command(name = "cnn", override_usage = "cargo run --release --example cnn -- [OPTIONS]")]
struct Cli {
    /// The mode to run in [default: JANUS_MODE, else janus].
    #[arg(long, value_enum)]
    mode: Option<RunMode>,
    /// Training steps (batches of 64).
    #[arg(long, default_value_t = 1500)]
    steps: usize,
    /// Training images generated.
    #[arg(long, default_value_t = 30000)]
    train: usize,
    /// Held-out images generated (from unseen fonts).
    #[arg(long, default_value_t = 5000)]
    heldout: usize,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Seed of the initialisation, the data and the batches.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the loss/accuracy PNG goes; an empty value writes none.
    #[arg(long, value_name = "FILE", default_value = "target/cnn_training.png")]
    plot: String,
}

/// Accuracy of `m` (in eval mode) on `data`, in batches of 500.
fn accuracy(m: &mut janus::nn::Sequential, data: &Digits) -> f64 {
    m.eval();
    let mut correct = 0;
    let idx: Vec<usize> = (0..data.len()).collect();
    for chunk in idx.chunks(500) {
        let (x, y) = data.batch(chunk);
        let pred = no_grad(|| cnn::predict(m, &x));
        correct += pred.eq(&y).to_dtype(DType::F64).sum_all().item_f64() as usize;
    }
    m.train();
    correct as f64 / data.len() as f64
}

fn plot(path: &str, losses: &[f32], acc: &[(usize, f64)]) -> Result<(), Box<dyn std::error::Error>> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| "cannot load the DejaVu font")?;
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let hi = losses.iter().copied().fold(0.0f32, f32::max).min(3.0) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption("cnn: training loss and held-out accuracy (unseen fonts)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .right_y_label_area_size(50)
        .build_cartesian_2d(0..losses.len(), 0f32..hi)?
        .set_secondary_coord(0..losses.len(), 0f64..1.0);
    chart.configure_mesh().x_desc("step").y_desc("cross-entropy").draw()?;
    chart.configure_secondary_axes().y_desc("held-out accuracy").draw()?;
    let mut ema = losses[0];
    let smooth = losses.iter().enumerate().map(|(i, &l)| {
        ema = 0.95 * ema + 0.05 * l;
        (i, ema)
    });
    chart
        .draw_series(LineSeries::new(smooth, &BLUE))?
        .label("training loss (EMA 0.95)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE));
    chart
        .draw_secondary_series(LineSeries::new(acc.iter().copied(), RED.stroke_width(2)))?
        .label("held-out accuracy")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
    chart.draw_secondary_series(acc.iter().map(|&p| Circle::new(p, 4, RED.filled())))?;
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;
    root.present()?;
    Ok(())
}

fn main() {
    let args = Cli::parse();
    let mode = args.mode.map_or_else(janus::mode, RunMode::mode);
    janus::set_mode(mode);
    janus::manual_seed(args.seed);
    let t0 = Instant::now();
    let train = Digits::train(args.train.max(BATCH), args.seed);
    let heldout = Digits::heldout(args.heldout.max(1), args.seed);
    println!(
        "cnn: {} training digits (11 DejaVu fonts), {} held-out (4 unseen fonts), generated in {:.1} s; {} steps of {BATCH}; mode {mode:?}",
        train.len(),
        heldout.len(),
        t0.elapsed().as_secs_f64(),
        args.steps
    );
    let mut m = cnn::model();
    let mut opt = optim::Adam::new(args.lr);
    let mut rng = Rng(args.seed ^ 0xBA7C);
    let steps = args.steps;
    let mut losses = Vec::with_capacity(steps);
    let mut acc = Vec::new();
    let mut step_secs = Vec::with_capacity(steps);
    let progress = Progress::new(steps as u64, 100);
    let warmup = 20.min(steps / 2);
    let mut warm = janus::stats();
    let start = Instant::now();
    let eval_every = (steps / 6).max(1);
    for step in 0..steps {
        if step == warmup {
            warm = janus::stats();
        }
        let idx: Vec<usize> = (0..BATCH).map(|_| rng.below(train.len())).collect();
        let (x, y) = train.batch(&idx);
        let t = Instant::now();
        let loss = cnn::train_step(&mut m, &mut opt, &x, &y);
        step_secs.push(t.elapsed().as_secs_f64());
        if !loss.is_finite() {
            cli::fail(&format!("the loss diverged at step {step} ({loss}); try a smaller --lr"));
        }
        losses.push(loss);
        if (step + 1) % eval_every == 0 && step + 1 != steps {
            acc.push((step + 1, accuracy(&mut m, &heldout)));
        }
        let window = &losses[losses.len().saturating_sub(50)..];
        progress.update(step as u64 + 1, || {
            format!("loss {:.3}", window.iter().sum::<f32>() / window.len() as f32)
        });
    }
    progress.finish();
    let wall = start.elapsed().as_secs_f64();
    let coverage = coverage_since(&warm);
    let final_acc = accuracy(&mut m, &heldout);
    acc.push((steps, final_acc));
    let last = &losses[losses.len().saturating_sub(100)..];
    println!("training loss, last {} steps: {:.4}", last.len(), last.iter().sum::<f32>() / last.len() as f32);
    let train_idx: Vec<usize> = (0..2000.min(train.len())).collect();
    let train_acc = {
        let sub = Digits {
            images: train.images[..train_idx.len() * 784].to_vec(),
            labels: train.labels[..train_idx.len()].to_vec(),
        };
        accuracy(&mut m, &sub)
    };
    println!(
        "training accuracy (first {} training digits, eval mode): {:.2}%",
        train_idx.len(),
        100.0 * train_acc
    );
    println!("held-out accuracy (unseen fonts, eval mode): {:.2}%", 100.0 * final_acc);
    println!(
        "throughput: {:.1} steps/s, {:.0} images/s; median step {:.2} ms; wall {wall:.1} s (evaluations included)",
        steps as f64 / wall,
        (steps * BATCH) as f64 / wall,
        median(&mut step_secs) * 1e3
    );
    println!("\ntraining steps {warmup}..{steps}: {coverage}");
    println!("\n{}", janus::explain());
    let path = args.plot.as_str();
    if !path.is_empty() {
        if let Some(dir) = std::path::Path::new(path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        match plot(path, &losses, &acc) {
            Ok(()) => println!("loss and accuracy: {path}"),
            Err(e) => eprintln!("warning: could not write the plot to {path}: {e}"),
        }
    }
}
