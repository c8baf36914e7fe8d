//! `--mode` of the examples that train in several modes and compare them.

use janus::prelude::*;

/// Which modes to train in.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ModeChoice {
    /// Op by op, with tape autograd.
    Eager,
    /// Cached compiled graphs.
    Janus,
    /// Compiled and eager side by side, panicking on the first mismatch.
    Check,
    /// Eager, then janus, from the same seed.
    Both,
}

/// `--mode eager|janus|check|both`.
#[derive(clap::Args, Debug)]
pub struct Modes {
    /// The modes to train in.
    #[arg(long = "mode", value_enum, default_value_t = ModeChoice::Both)]
    mode: ModeChoice,
}

impl Modes {
    /// One mode, or eager then janus for `both`.
    pub fn modes(&self) -> Vec<Mode> {
        match self.mode {
            ModeChoice::Eager => vec![Mode::Eager],
            ModeChoice::Janus => vec![Mode::Janus],
            ModeChoice::Check => vec![Mode::Check],
            ModeChoice::Both => vec![Mode::Eager, Mode::Janus],
        }
    }
}
