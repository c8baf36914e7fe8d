//! `JANUS_DUMP=DIR`: every compiled graph is written as text, DOT and JSON, and a line per graph
//! is appended to `DIR/summary.txt`.

use crate::graph::Graph;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// Appends `line` to `DIR/summary.txt` if dumping is on (what a graph's outputs mean, say).
pub(crate) fn note(line: &str) {
    let Some(dir) = &crate::config::config().dump_dir else { return };
    let result = std::fs::create_dir_all(dir).and_then(|_| {
        let mut summary =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("summary.txt"))?;
        writeln!(summary, "     {line}")
    });
    if let Err(e) = result {
        log::warn!("janus: could not write to {}: {e}", dir.display());
    }
}

/// Writes `g` under `name` if dumping is on; errors are logged, never raised.
pub(crate) fn dump(name: &str, g: &Graph) {
    let Some(dir) = &crate::config::config().dump_dir else { return };
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let stem: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let base = dir.join(format!("{seq:04}-{stem}"));
    let result = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(base.with_extension("txt"), g.to_string())?;
        std::fs::write(base.with_extension("dot"), g.to_dot())?;
        std::fs::write(base.with_extension("json"), g.to_json())?;
        let mut summary =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("summary.txt"))?;
        writeln!(
            summary,
            "{seq:04} {name}: {} inputs, {} ops, {} outputs",
            g.inputs.len(),
            g.op_count(),
            g.outputs.len()
        )
    })();
    if let Err(e) = result {
        log::warn!("janus: could not dump graph {name} to {}: {e}", dir.display());
    }
}
