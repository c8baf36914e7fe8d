//! Command-line flags and progress reporting shared by the examples.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use janus::prelude::*;

/// `--name value` flags with defaults; `--help` prints the usage and exits.
pub struct Args {
    values: BTreeMap<&'static str, String>,
}

/// One flag: name (without `--`), default value, help text.
pub type Flag = (&'static str, &'static str, &'static str);

/// `--device`, which every example takes.
pub const DEVICE_FLAG: Flag = ("device", "cpu", "cpu | cuda | cuda:N | best");

/// `--mode` of the examples that compare modes (see [`Args::modes`]).
pub const MODES_FLAG: Flag =
    ("mode", "both", "eager | janus | check | both (eager, then janus, from the same seed)");

impl Args {
    /// Parses `std::env::args()` against `flags`; exits with a usage message on bad input.
    pub fn parse(program: &str, about: &str, flags: &[Flag]) -> Args {
        let usage = || {
            let mut u = format!("{about}\n\nUsage: cargo run --release --example {program} -- [FLAGS]\n\n");
            for (name, default, help) in flags {
                u += &format!("  --{name:<10} {help} (default: {default})\n");
            }
            u
        };
        let mut values: BTreeMap<&'static str, String> =
            flags.iter().map(|(n, d, _)| (*n, d.to_string())).collect();
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            if a == "--help" || a == "-h" {
                print!("{}", usage());
                std::process::exit(0);
            }
            let (name, inline) = match a.strip_prefix("--") {
                Some(rest) => match rest.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (rest.to_string(), None),
                },
                None => fail(&format!("unexpected argument `{a}`\n\n{}", usage())),
            };
            let Some((key, default, _)) = flags.iter().find(|(n, _, _)| *n == name) else {
                fail(&format!("unknown flag `--{name}`\n\n{}", usage()))
            };
            // A switch (default `false`) takes no value: `--quick`.
            let v = if *default == "false" && inline.is_none() {
                "true".to_string()
            } else {
                inline
                    .or_else(|| it.next())
                    .unwrap_or_else(|| fail(&format!("flag `--{name}` needs a value")))
            };
            values.insert(key, v);
        }
        Args { values }
    }

    /// Whether a switch (a flag whose default is `false`) was given.
    pub fn switch(&self, name: &str) -> bool {
        self.str(name) == "true"
    }

    /// The flag's value as text.
    pub fn str(&self, name: &str) -> &str {
        self.values.get(name).unwrap_or_else(|| panic!("no flag `--{name}` declared"))
    }

    /// The flag's value parsed as `T`; exits with a message naming the flag when it does not parse.
    pub fn get<T: std::str::FromStr>(&self, name: &str) -> T
    where
        T::Err: std::fmt::Display,
    {
        let s = self.str(name);
        s.parse().unwrap_or_else(|e| fail(&format!("bad value `{s}` for `--{name}`: {e}")))
    }

    /// `--mode eager|janus|check` as a [`Mode`]; empty: `JANUS_MODE`, else janus.
    pub fn mode(&self) -> Mode {
        match self.str("mode") {
            "" => janus::mode(),
            m => parse_mode(m).unwrap_or_else(|e| fail(&e)),
        }
    }

    /// `--mode` of [`MODES_FLAG`]: one mode, or eager then janus for `both`.
    pub fn modes(&self) -> Vec<Mode> {
        match self.str("mode") {
            "both" => vec![Mode::Eager, Mode::Janus],
            m => vec![parse_mode(m).unwrap_or_else(|e| fail(&e))],
        }
    }

    /// `--device`, which must be available on this machine.
    pub fn device(&self) -> Device {
        let d: Device = self.get("device");
        if !d.is_available() {
            fail(&format!("device `{d}` is not available: {}", janus::cuda::info()));
        }
        d
    }
}

/// Parses a mode name.
pub fn parse_mode(s: &str) -> Result<Mode, String> {
    match s {
        "eager" => Ok(Mode::Eager),
        "janus" => Ok(Mode::Janus),
        "check" => Ok(Mode::Check),
        _ => Err(format!("unknown mode `{s}` (expected eager, janus or check)")),
    }
}

/// Prints `msg` and exits with status 2.
pub fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}

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

/// Median of `xs` (which it sorts).
pub fn median(xs: &mut [f64]) -> f64 {
    assert!(!xs.is_empty(), "median of no samples");
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 { xs[n / 2] } else { 0.5 * (xs[n / 2 - 1] + xs[n / 2]) }
}

/// The staging coverage of the calls since `warm`, a `janus::stats()` snapshot taken after
/// warm-up (recordings and compiles done): which share of the ops in blocks that can stage ran
/// inside compiled graphs, and the ops reported apart.
pub fn coverage_since(warm: &janus::Stats) -> String {
    format!("staging after warm-up: {}", janus::stats().since(warm).coverage_summary())
}
