//! Configuration, read once from the environment into a typed `Config`.
//!
//! | variable | meaning |
//! |---|---|
//! | `JANUS_DUMP=DIR` | write every compiled graph (text, DOT, JSON) and a summary to `DIR` |
//! | `JANUS_VERIFY=1` | verify graphs between passes (on by default in debug builds) |
//! | `JANUS_SERIAL=1` | run compiled steps on the calling thread only (no two-worker schedule) |

use std::path::PathBuf;
use std::sync::OnceLock;

/// The environment's settings.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Where to dump compiled graphs, if anywhere.
    pub dump_dir: Option<PathBuf>,
    /// Verify graphs between passes.
    pub verify: bool,
    /// Never run compiled steps on two workers.
    pub serial: bool,
}

/// The configuration, read from the environment on first use.
pub fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config {
        dump_dir: std::env::var_os("JANUS_DUMP").filter(|v| !v.is_empty()).map(PathBuf::from),
        verify: cfg!(debug_assertions) || std::env::var("JANUS_VERIFY").is_ok_and(|v| v == "1"),
        serial: std::env::var("JANUS_SERIAL").is_ok_and(|v| v == "1"),
    })
}
