//! A recursive network (TreeRNN) over random binary "sentences" with synthetic sentiment labels
//! that depend on negation, so the tree structure matters. `encode` recurses through a
//! `#[janus]` function: the recursion stays host code, each leaf and each inner node runs as a
//! cached compiled graph, and `backward()` runs their compiled backward graphs.
//!
//! ```text
//! cargo run --release --example tree_rnn
//! cargo run --release --example tree_rnn -- --mode janus --epochs 10
//! ```

#[path = "common/cli.rs"]
mod cli;
#[path = "common/modes.rs"]
mod modes;
#[path = "common/progress.rs"]
mod progress;
#[path = "common/tree_rnn.rs"]
mod tree_rnn;

use std::time::Instant;

use clap::Parser;
use janus::prelude::*;
use progress::{Progress, coverage_since};
use tree_rnn::{Rng, TreeRnn};

struct Run {
    mode: Mode,
    trees: usize,
    nodes: usize,
    train_s: f64,
    accuracy: f64,
    last_loss: f32,
    /// Staging coverage after the first epoch.
    coverage: String,
}

fn train(mode: Mode, seed: u64, epochs: usize, batch: usize, device: Device) -> Run {
    janus::set_mode(mode);
    janus::manual_seed(seed);
    let mut rng = Rng(seed);
    let (train, test) = (tree_rnn::dataset(&mut rng, 2000), tree_rnn::dataset(&mut rng, 500));
    let train: Vec<_> = train.iter().map(|e| tree_rnn::example_on(e, device)).collect();
    let test: Vec<_> = test.iter().map(|e| tree_rnn::example_on(e, device)).collect();
    let mut p = TreeRnn::new().to_device(device);
    let mut opt = optim::Adam::new(3e-3);
    let steps_per_epoch = train.len() / batch;
    let progress = Progress::new((epochs * steps_per_epoch) as u64, steps_per_epoch as u64);
    let (mut train_s, mut nodes, mut last_loss) = (0.0, 0, f32::NAN);
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut warm = janus::stats();
    for epoch in 0..epochs {
        if epoch == 1 {
            warm = janus::stats(); // after one epoch of warm-up
        }
        // A fresh shuffle each epoch; minibatches of whole trees.
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut sum = 0.0;
        for s in 0..steps_per_epoch {
            let idx = &order[s * batch..(s + 1) * batch];
            let mb: Vec<(tree_rnn::Tree, Tensor)> = idx.iter().map(|&i| clone_example(&train[i])).collect();
            nodes += mb.iter().map(|(t, _)| t.size()).sum::<usize>();
            let t = Instant::now();
            let loss = tree_rnn::train_step(&mut p, &mut opt, &mb);
            train_s += t.elapsed().as_secs_f64();
            if !loss.is_finite() {
                cli::fail(&format!("the loss diverged in epoch {epoch} ({loss})"));
            }
            sum += loss;
            progress.update((epoch * steps_per_epoch + s + 1) as u64, || {
                format!("epoch {epoch}, loss {:.3}", sum / (s + 1) as f32)
            });
        }
        last_loss = sum / steps_per_epoch as f32;
    }
    progress.finish();
    Run {
        mode,
        trees: epochs * steps_per_epoch * batch,
        nodes,
        train_s,
        coverage: coverage_since(&warm),
        accuracy: tree_rnn::accuracy(&p, &test),
        last_loss,
    }
}

/// Trees hold their index tensors, which are immutable handles: a cheap structural copy.
fn clone_example((t, y): &(tree_rnn::Tree, Tensor)) -> (tree_rnn::Tree, Tensor) {
    fn go(t: &tree_rnn::Tree) -> tree_rnn::Tree {
        match t {
            tree_rnn::Tree::Leaf(w, x) => tree_rnn::Tree::Leaf(*w, x.clone()),
            tree_rnn::Tree::Node(l, r) => tree_rnn::Tree::Node(Box::new(go(l)), Box::new(go(r))),
        }
    }
    (go(t), y.clone())
}

/// Trains a TreeRNN sentiment classifier with a recursive #[janus] encoder.
#[derive(Parser)]
#[command(name = "tree_rnn", override_usage = "cargo run --release --example tree_rnn -- [OPTIONS]")]
struct Cli {
    #[command(flatten)]
    modes: modes::Modes,
    /// Passes over the 2000 training trees.
    #[arg(long, default_value_t = 6)]
    epochs: usize,
    /// Trees per optimiser step.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Seed of the data, the initialisation and the shuffles.
    #[arg(long, default_value_t = 3)]
    seed: u64,
    #[command(flatten)]
    device: cli::DeviceArg,
}

fn main() {
    let args = Cli::parse();
    let device = args.device.device();
    let modes = args.modes.modes();
    let (seed, epochs, batch) = (args.seed, args.epochs, args.batch);
    let runs: Vec<Run> = modes
        .into_iter()
        .map(|mode| {
            println!("training in {mode:?} mode ({epochs} epochs of 2000 trees, batches of {batch})");
            train(mode, seed, epochs, batch, device)
        })
        .collect();
    println!("\n| mode | trees | training s | trees/s | nodes/s | final loss | test accuracy |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in &runs {
        println!(
            "| {:?} | {} | {:.2} | {:.0} | {:.0} | {:.3} | {:.1}% |",
            r.mode,
            r.trees,
            r.train_s,
            r.trees as f64 / r.train_s,
            r.nodes as f64 / r.train_s,
            r.last_loss,
            100.0 * r.accuracy
        );
    }
    if let [e, j] = &runs[..] {
        println!("\njanus vs eager: {:.2}x trees/s", e.train_s / j.train_s);
    }
    println!("(chance is 50%: the test set has as many positive as negative trees)\n");
    for r in runs.iter().filter(|r| r.mode != Mode::Eager) {
        println!("{:?} mode, training epochs 1..{epochs}: {}\n", r.mode, r.coverage);
    }
    println!("{}", janus::explain());
}
