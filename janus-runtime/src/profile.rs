//! `JANUS_PROFILE=1`: the time of every CPU executor step and eager kernel, summed by what it
//! computes (step kind or op, and shapes), so "where does a step's time go" has an answer
//! without a sampling profiler. Profiled executor runs are serial. [`report`] formats the
//! table, heaviest first; `janus::explain()` appends it when profiling is on.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static TOTALS: Mutex<Option<HashMap<String, (u64, Duration)>>> = Mutex::new(None);

thread_local! {
    static IN_STEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether `JANUS_PROFILE=1`.
pub(crate) fn on() -> bool {
    crate::config::config().profile
}

/// Runs one executor step, timed under `label()`.
pub(crate) fn step<R>(label: impl FnOnce() -> String, run: impl FnOnce() -> R) -> R {
    let t0 = Instant::now();
    IN_STEP.set(true);
    let r = run();
    IN_STEP.set(false);
    add(label(), t0.elapsed());
    r
}

/// Runs one eager kernel, timed under `eager <label()>`, unless an executor step runs it
/// (that step is timed).
pub(crate) fn eager<R>(label: impl FnOnce() -> String, run: impl FnOnce() -> R) -> R {
    if IN_STEP.get() {
        return run();
    }
    let t0 = Instant::now();
    let r = run();
    add(format!("eager {}", label()), t0.elapsed());
    r
}

fn add(key: String, took: Duration) {
    let mut t = TOTALS.lock().unwrap();
    let e = t.get_or_insert_with(HashMap::new).entry(key).or_default();
    e.0 += 1;
    e.1 += took;
}

/// Forgets the profile so far (to profile one phase of a program, after its warm-up).
pub fn reset() {
    *TOTALS.lock().unwrap() = None;
}

/// The profile so far, heaviest first (empty unless `JANUS_PROFILE=1`).
pub fn report() -> String {
    let t = TOTALS.lock().unwrap();
    let Some(t) = t.as_ref() else { return String::new() };
    let mut rows: Vec<_> = t.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1.1));
    let total: Duration = rows.iter().map(|r| r.1.1).sum();
    let mut out = String::new();
    let _ = writeln!(out, "{:>10} {:>6} {:>9} {:>10}  step", "total ms", "share", "runs", "mean µs");
    for (k, (n, d)) in rows {
        let _ = writeln!(
            out,
            "{:>10.2} {:>5.1}% {:>9} {:>10.1}  {k}",
            d.as_secs_f64() * 1e3,
            100.0 * d.as_secs_f64() / total.as_secs_f64().max(1e-12),
            n,
            d.as_secs_f64() * 1e6 / *n as f64
        );
    }
    out
}
