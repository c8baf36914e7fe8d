//! REINFORCE on CartPole-v1 (dynamics written below, in `common/cartpole.rs`): a `#[janus]`
//! `act()` runs batch-1 inference and sampling on every environment step, a `#[janus]`
//! `update()` one policy-gradient step at the end of each episode. Trains in eager mode and in
//! janus mode from the same seed and prints the throughput of each.
//!
//! ```text
//! cargo run --release --example cartpole
//! cargo run --release --example cartpole -- --mode janus --episodes 300
//! ```

#[path = "common/cartpole.rs"]
mod cartpole;
#[path = "common/cli.rs"]
mod cli;
#[path = "common/median.rs"]
mod median;
#[path = "common/modes.rs"]
mod modes;
#[path = "common/progress.rs"]
mod progress;

use std::time::Instant;

use cartpole::{CartPole, MAX_STEPS, Policy};
use clap::Parser;
use janus::prelude::*;
use median::median;
use progress::{Progress, coverage_since};

/// What one training run measured.
struct Run {
    mode: Mode,
    episodes: usize,
    steps: usize,
    solved_at: Option<usize>,
    wall_s: f64,
    rollout_us_per_step: f64,
    update_ms_500: Option<f64>,
    last20: f64,
    /// Staging coverage after the first `WARMUP` episodes.
    coverage: String,
}

/// Episodes before the coverage window starts (the first update shapes have compiled).
const WARMUP: usize = 10;

/// Training with `envs` environments in lockstep, the update on `device` (see
/// [`cartpole::run_round`]); reports per-step rollout time and per-round update time.
fn train_batched(
    mode: Mode,
    seed: u64,
    max_episodes: usize,
    target: f64,
    envs: usize,
    device: Device,
) -> Run {
    janus::set_mode(mode);
    janus::manual_seed(seed);
    let mut acting = Policy::new();
    let mut policy = acting.to_device(device);
    let mut opt = optim::Adam::new(1e-2);
    let mut envs: Vec<CartPole> =
        (0..envs).map(|k| CartPole::new(seed.wrapping_add(k as u64 * 7919))).collect();
    let (mut returns, mut rollout_us, mut update_ms) = (Vec::new(), Vec::new(), Vec::new());
    let avg20 =
        |r: &[usize]| r[r.len().saturating_sub(20)..].iter().sum::<usize>() as f64 / r.len().min(20) as f64;
    let start = Instant::now();
    let (mut solved_at, mut warm) = (None, janus::stats());
    let mut rounds = 0;
    while returns.len() < max_episodes {
        if rounds == 2 {
            warm = janus::stats();
        }
        let (lens, rollout_s, update_s, loss) =
            cartpole::run_round(&mut policy, &mut acting, &mut opt, &mut envs);
        rounds += 1;
        if !loss.is_finite() {
            cli::fail(&format!("the loss diverged in round {rounds} ({loss})"));
        }
        rollout_us.push(rollout_s * 1e6 / lens.iter().max().copied().unwrap_or(1) as f64);
        update_ms.push(update_s * 1e3);
        returns.extend(lens);
        println!(
            "round {rounds}: mean return {:.1} over {} episodes; update {:.2} ms",
            avg20(&returns),
            envs.len(),
            update_s * 1e3
        );
        if returns.len() >= 20 && avg20(&returns) >= target {
            solved_at = Some(returns.len());
            break;
        }
    }
    Run {
        mode,
        episodes: returns.len(),
        steps: returns.iter().sum(),
        solved_at,
        wall_s: start.elapsed().as_secs_f64(),
        rollout_us_per_step: median(&mut rollout_us),
        update_ms_500: Some(median(&mut update_ms)),
        last20: avg20(&returns),
        coverage: coverage_since(&warm),
    }
}

fn train(mode: Mode, seed: u64, max_episodes: usize, target: f64) -> Run {
    janus::set_mode(mode);
    janus::manual_seed(seed);
    let mut policy = Policy::new();
    let mut opt = optim::Adam::new(1e-2);
    let mut env = CartPole::new(seed);
    let (mut returns, mut rollout_us, mut update_ms_500) = (Vec::new(), Vec::new(), Vec::new());
    let progress = Progress::new(max_episodes as u64, 25);
    let avg20 =
        |r: &[usize]| r[r.len().saturating_sub(20)..].iter().sum::<usize>() as f64 / r.len().min(20) as f64;
    let start = Instant::now();
    let mut solved_at = None;
    let mut warm = janus::stats();
    while returns.len() < max_episodes {
        if returns.len() == WARMUP {
            warm = janus::stats();
        }
        let ep = cartpole::run_episode(&mut policy, &mut opt, &mut env);
        if !ep.loss.is_finite() {
            cli::fail(&format!("the loss diverged in episode {} ({})", returns.len(), ep.loss));
        }
        returns.push(ep.len);
        rollout_us.push(ep.rollout_s * 1e6 / ep.len as f64);
        if ep.len == MAX_STEPS {
            update_ms_500.push(ep.update_s * 1e3);
        }
        progress.update(returns.len() as u64, || {
            format!("return {:>3}, last 20: {:.1}", ep.len, avg20(&returns))
        });
        if returns.len() >= 20 && avg20(&returns) >= target {
            solved_at = Some(returns.len());
            break;
        }
    }
    progress.finish();
    Run {
        mode,
        episodes: returns.len(),
        steps: returns.iter().sum(),
        solved_at,
        wall_s: start.elapsed().as_secs_f64(),
        rollout_us_per_step: median(&mut rollout_us),
        update_ms_500: (!update_ms_500.is_empty()).then(|| median(&mut update_ms_500)),
        last20: avg20(&returns),
        coverage: coverage_since(&warm),
    }
}

/// REINFORCE on CartPole-v1 with a #[janus] act() and update().
#[derive(Parser)]
#[command(name = "cartpole", override_usage = "cargo run --release --example cartpole -- [OPTIONS]")]
struct Cli {
    #[command(flatten)]
    modes: modes::Modes,
    /// Stop after this many episodes if not solved.
    #[arg(long, default_value_t = DEFAULT_EPISODES)]
    episodes: usize,
    /// Solved when the mean return of 20 consecutive episodes reaches this.
    #[arg(long, default_value_t = 475.0)]
    target: f64,
    /// Seed of the initialisation, the environment and the sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    device: cli::DeviceArg,
    /// Environments stepped in lockstep; > 1 (or a CUDA --device) trains in rounds, one batched
    /// update per round.
    #[arg(long, default_value_t = 1)]
    envs: usize,
}

/// Episodes before giving up; a run with this budget that does not solve the task fails.
const DEFAULT_EPISODES: usize = 1000;

fn main() {
    let args = Cli::parse();
    let device = args.device.device();
    let (envs, modes) = (args.envs, args.modes.modes());
    let (seed, episodes, target) = (args.seed, args.episodes, args.target);
    let mut runs = Vec::new();
    for mode in modes {
        println!("training in {mode:?} mode (seed {seed}, at most {episodes} episodes)");
        let run = if envs > 1 || device != Device::Cpu {
            train_batched(mode, seed, episodes, target, envs, device)
        } else {
            train(mode, seed, episodes, target)
        };
        match run.solved_at {
            Some(e) => println!("solved after {e} episodes: mean return of the last 20 is {:.1}", run.last20),
            None => {
                println!("not solved in {episodes} episodes: mean return of the last 20 is {:.1}", run.last20)
            }
        }
        runs.push(run);
    }

    println!(
        "\n| mode | episodes | env steps | wall s | env steps/s | episodes/s | act+env µs/step | update ms (500-step episode) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &runs {
        println!(
            "| {:?} | {} | {} | {:.2} | {:.0} | {:.1} | {:.2} | {} |",
            r.mode,
            r.episodes,
            r.steps,
            r.wall_s,
            r.steps as f64 / r.wall_s,
            r.episodes as f64 / r.wall_s,
            r.rollout_us_per_step,
            r.update_ms_500.map_or("-".into(), |v| format!("{v:.3}")),
        );
    }
    if let [e, j] = &runs[..] {
        println!(
            "\njanus vs eager: {:.2}x env steps/s (the runs may differ in episodes: sampling draws the same \
             random numbers, but compiled kernels round differently)",
            (j.steps as f64 / j.wall_s) / (e.steps as f64 / e.wall_s)
        );
    }
    for r in runs.iter().filter(|r| r.mode != Mode::Eager) {
        println!("\n{:?} mode, episodes {WARMUP}..{}: {}", r.mode, r.episodes, r.coverage);
    }
    println!("\n{}", janus::explain());
    if runs.iter().any(|r| r.solved_at.is_none()) && episodes == DEFAULT_EPISODES {
        std::process::exit(1);
    }
}
