//! Progress reporting of the training examples, and the staging coverage they print at exit.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on a terminal; plain lines every `every` steps otherwise (CI logs, pipes).
pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    every: u64,
    start: Instant,
}

impl Progress {
    /// Progress over `total` steps.
    pub fn new(total: u64, every: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:32}] {pos}/{len} {per_sec:>12} {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar
        });
        Progress { bar, total, every: every.max(1), start: Instant::now() }
    }

    /// Reports that `done` steps are finished, with a status message.
    pub fn update(&self, done: u64, msg: impl FnOnce() -> String) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(done);
                if done.is_multiple_of(self.every) || done == self.total {
                    bar.set_message(msg());
                }
            }
            None if done.is_multiple_of(self.every) || done == self.total => {
                let rate = done as f64 / self.start.elapsed().as_secs_f64();
                eprintln!("step {done:>6}/{} {:>9.1} steps/s  {}", self.total, rate, msg());
            }
            None => {}
        }
    }

    /// Removes the bar (it leaves its last line on screen).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

/// The staging coverage of the calls since `warm`, a `janus::stats()` snapshot taken after
/// warm-up (recordings and compiles done): which share of the ops in blocks that can stage ran
/// inside compiled graphs, and the ops reported apart.
pub fn coverage_since(warm: &janus::Stats) -> String {
    format!("staging after warm-up: {}", janus::stats().since(warm).coverage_summary())
}
