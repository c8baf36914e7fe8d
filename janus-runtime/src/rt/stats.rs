//! Per-fragment statistics, the registry of fragments, and `explain()`/`stats()`.

use super::fragment::Fragment;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one fragment, updated with relaxed atomics (no locks on the hit path).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) calls: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) traces: AtomicU64,
    pub(crate) compiles: AtomicU64,
    pub(crate) compile_us: AtomicU64,
    pub(crate) checks: AtomicU64,
    pub(crate) eager: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn eager(&self, reason: &str) {
        let mut m = self.eager.lock().unwrap();
        match m.get_mut(reason) {
            Some(n) => *n += 1, // no allocation once a reason is known
            None => _ = m.insert(reason.to_string(), 1),
        }
    }

    pub(crate) fn clear(&self) {
        for c in [&self.calls, &self.hits, &self.traces, &self.compiles, &self.compile_us, &self.checks] {
            c.store(0, Ordering::Relaxed);
        }
        self.eager.lock().unwrap().clear();
    }
}

static REGISTRY: Mutex<Vec<&'static Fragment>> = Mutex::new(Vec::new());

pub(crate) fn register(f: &'static Fragment) {
    REGISTRY.lock().unwrap().push(f);
}

fn fragments() -> Vec<&'static Fragment> {
    REGISTRY.lock().unwrap().clone()
}

/// A snapshot of one fragment's statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct FragmentStats {
    /// `function#block`.
    pub name: String,
    /// `file:line` of the block's first statement.
    pub span: String,
    /// Times the block was reached.
    pub calls: u64,
    /// Replays of a compiled graph.
    pub hits: u64,
    /// Runs recorded while profiling.
    pub traces: u64,
    /// Graphs compiled.
    pub compiles: u64,
    /// Milliseconds spent optimising and compiling.
    pub compile_ms: f64,
    /// Replays also checked against eager execution.
    pub checks: u64,
    /// Keys with a compiled graph.
    pub variants: usize,
    /// Eager runs by reason.
    pub eager: BTreeMap<String, u64>,
}

/// Statistics of every fragment that ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// One entry per fragment, in first-run order.
    pub fragments: Vec<FragmentStats>,
}

impl Stats {
    /// The fragments of function `name`.
    pub fn function<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a FragmentStats> + 'a {
        self.fragments.iter().filter(move |f| f.name.split('#').next() == Some(name))
    }
}

/// A snapshot of every fragment's statistics.
pub fn stats() -> Stats {
    Stats { fragments: fragments().into_iter().map(Fragment::snapshot).collect() }
}

/// Forgets every compiled graph and statistic, so the next calls profile and compile afresh.
/// A block found to be always eager (an input or output type that cannot be staged, or too
/// few ops under `min_ops`) stays so: that is a property of its code.
pub fn reset_caches() {
    for f in fragments() {
        f.reset();
    }
}

/// A profiler-style table of every fragment: calls, replays, recordings, compile time, compiled
/// variants, and why it ran eagerly when it did.
pub fn explain() -> String {
    let s = stats();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<34} {:>8} {:>8} {:>7} {:>10} {:>8}  eager runs by reason",
        "fragment", "span", "calls", "hits", "traces", "compile ms", "variants"
    );
    for f in &s.fragments {
        let reasons: Vec<String> = f.eager.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        let _ = writeln!(
            out,
            "{:<28} {:<34} {:>8} {:>8} {:>7} {:>10.2} {:>8}  {}",
            f.name,
            f.span,
            f.calls,
            f.hits,
            f.traces,
            f.compile_ms,
            f.variants,
            if reasons.is_empty() { "-".to_string() } else { reasons.join("; ") }
        );
    }
    out
}
