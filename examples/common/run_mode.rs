//! `--mode eager|janus|check`, for the examples that train one way per run.

use janus::Mode;

/// `--mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum RunMode {
    /// Op by op, with tape autograd.
    Eager,
    /// Cached compiled graphs.
    Janus,
    /// Compiled and eager side by side, panicking on the first mismatch.
    Check,
}

impl RunMode {
    /// The runtime mode it selects.
    pub fn mode(self) -> Mode {
        match self {
            RunMode::Eager => Mode::Eager,
            RunMode::Janus => Mode::Janus,
            RunMode::Check => Mode::Check,
        }
    }
}
