//! A GAN on a 2-D mixture of 8 Gaussians on a ring. The discriminator step and the generator
//! step are two `#[janus]` functions (`examples/common/gan.rs`) with their own Adam optimisers;
//! the discriminator sees the generator's samples through `detach()`. At the end it counts the
//! modes the generator covers and plots real against generated samples.
//!
//! ```text
//! cargo run --release --example gan                      # janus, 4000 steps
//! cargo run --release --example gan -- --mode eager      # the same program, eagerly
//! cargo run --release --example gan -- --mode check --steps 50
//! ```

#[allow(dead_code)] // `--device`: the GAN runs on the CPU
#[path = "common/cli.rs"]
mod cli;
#[path = "common/gan.rs"]
mod gan;
#[path = "common/median.rs"]
mod median;
#[path = "common/progress.rs"]
mod progress;
#[path = "common/run_mode.rs"]
mod run_mode;

use run_mode::RunMode;
use std::time::Instant;

use clap::Parser;
use gan::{BATCH, MODES};
use janus::prelude::*;
use median::median;
use plotters::prelude::*;
use progress::{Progress, coverage_since};

/// Trains a GAN (MLPs 2-128-128-2 and 2-128-128-1, Adam 1e-3) on 8 Gaussians on a ring.
#[derive(Parser)]
#[command(name = "gan", override_usage = "cargo run --release --example gan -- [OPTIONS]")]
struct Cli {
    /// The mode to run in [default: JANUS_MODE, else janus].
    #[arg(long, value_enum)]
    mode: Option<RunMode>,
    /// Training steps (one discriminator and one generator step each).
    #[arg(long, default_value_t = 4000)]
    steps: usize,
    /// Learning rate of both Adam optimisers.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Seed of the initialisation and the data.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Generated samples to count modes on and to plot.
    #[arg(long, default_value_t = 2000)]
    samples: usize,
    /// Where the samples PNG goes; an empty value writes none.
    #[arg(long, value_name = "FILE", default_value = "target/gan_samples.png")]
    plot: String,
}

fn plot(
    path: &str,
    real: &[(f32, f32)],
    fake: &[(f32, f32)],
    losses: &[(f32, f32)],
    title: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| "cannot load the DejaVu font")?;
    let root = BitMapBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(580);
    let mut chart = ChartBuilder::on(&left)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(-3f32..3f32, -3f32..3f32)?;
    chart.configure_mesh().draw()?;
    chart
        .draw_series(real.iter().map(|&p| Circle::new(p, 2, BLUE.mix(0.4).filled())))?
        .label("real")
        .legend(|(x, y)| Circle::new((x + 9, y), 4, BLUE.filled()));
    chart
        .draw_series(fake.iter().map(|&p| Circle::new(p, 2, RED.mix(0.5).filled())))?
        .label("generated")
        .legend(|(x, y)| Circle::new((x + 9, y), 4, RED.filled()));
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;

    let hi = losses.iter().map(|&(d, g)| d.max(g)).fold(0.0f32, f32::max) * 1.05;
    let mut chart = ChartBuilder::on(&right)
        .caption("losses (EMA 0.98)", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0..losses.len(), 0f32..hi.max(1e-3))?;
    chart.configure_mesh().x_desc("step").draw()?;
    for (which, colour, label) in [(0, BLUE, "discriminator"), (1, RED, "generator")] {
        let mut ema = if which == 0 { losses[0].0 } else { losses[0].1 };
        let series = losses.iter().enumerate().map(|(i, &(d, g))| {
            ema = 0.98 * ema + 0.02 * if which == 0 { d } else { g };
            (i, ema)
        });
        chart
            .draw_series(LineSeries::new(series, colour))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;
    root.present()?;
    Ok(())
}

fn main() {
    let args = Cli::parse();
    let mode = args.mode.map_or_else(janus::mode, RunMode::mode);
    janus::set_mode(mode);
    janus::manual_seed(args.seed);
    let steps = args.steps;
    println!(
        "gan: 8 Gaussians on a ring (radius {}, std {}); {steps} steps of batch {BATCH}; mode {mode:?}",
        gan::RADIUS,
        gan::STD
    );
    let (mut g, mut d) = gan::models(gan::HIDDEN);
    let (mut opt_d, mut opt_g) = gan::optimisers(args.lr);

    let mut losses = Vec::with_capacity(steps);
    let mut step_secs = Vec::with_capacity(steps);
    let progress = Progress::new(steps as u64, 250);
    let warmup = 20.min(steps / 2);
    let mut warm = janus::stats();
    let start = Instant::now();
    for step in 0..steps {
        if step == warmup {
            warm = janus::stats();
        }
        let real = gan::real_batch(BATCH);
        let (z_d, z_g) = (gan::noise(BATCH), gan::noise(BATCH));
        let t = Instant::now();
        let ld = gan::d_step(&mut d, &g, &mut opt_d, &real, &z_d);
        let lg = gan::g_step(&mut g, &d, &mut opt_g, &z_g);
        step_secs.push(t.elapsed().as_secs_f64());
        if !(ld.is_finite() && lg.is_finite()) {
            cli::fail(&format!("the losses diverged at step {step} (D {ld}, G {lg}); try a smaller --lr"));
        }
        losses.push((ld, lg));
        progress.update(step as u64 + 1, || format!("D {ld:.3} G {lg:.3}"));
    }
    progress.finish();
    let wall = start.elapsed().as_secs_f64();
    let coverage = coverage_since(&warm);

    let n = args.samples.max(1);
    let fake = no_grad(|| g.forward(&gan::noise(n)));
    let fake = gan::to_points(&fake);
    let real = gan::to_points(&gan::real_batch(n));
    let (counts, good) = gan::mode_counts(&fake);
    let covered = gan::covered(&counts, n);
    let last = &losses[losses.len().saturating_sub(100)..];
    let mean = |f: fn(&(f32, f32)) -> f32| last.iter().map(f).sum::<f32>() / last.len() as f32;
    println!("losses over the last {} steps: D {:.3}, G {:.3}", last.len(), mean(|l| l.0), mean(|l| l.1));
    println!("samples per mode (within 3 std of a centre): {counts:?}");
    println!(
        "modes covered: {covered} of {MODES} (a mode holds >= 1% of {n} samples); {:.1}% of samples within 3 std of a mode",
        100.0 * good as f64 / n as f64
    );
    println!(
        "throughput: {:.1} steps/s; median step (D + G) {:.3} ms; wall {wall:.1} s",
        steps as f64 / wall,
        median(&mut step_secs) * 1e3
    );
    println!("\ntraining steps {warmup}..{steps}: {coverage}");
    println!("\n{}", janus::explain());
    let path = args.plot.as_str();
    if !path.is_empty() {
        if let Some(dir) = std::path::Path::new(path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let title = format!("gan: {covered}/{MODES} modes covered after {steps} steps");
        match plot(path, &real, &fake, &losses, &title) {
            Ok(()) => println!("samples: {path}"),
            Err(e) => eprintln!("warning: could not write the plot to {path}: {e}"),
        }
    }
}
