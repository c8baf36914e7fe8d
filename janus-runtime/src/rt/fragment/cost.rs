//! Never slower than eager: a block (or whole function) whose compiled path costs more per call
//! than running its statements runs them instead, for a while, and then tries again.
//!
//! In janus mode every call of a fragment is one of: a replay, a run of the statements that
//! records, checks or compiles, or a plain run of the statements (profiling over, a variant
//! limit, an unusable key). The *compiled path's cost* is the wall time of all of them, per
//! call, over a window of calls: one replay in [`SAMPLE`] is timed and stands for that many,
//! every other call is timed. The *eager cost* is the time of the
//! statements alone in plain runs (an exponential average). When the compiled path costs more
//! than [`MARGIN`] times the eager cost, and a microsecond more, in two windows in a row, the
//! next calls run the statements
//! (`EagerKind::Cost`); how many doubles while the verdict holds, from [`FIRST_BYPASS`] up
//! to [`LAST_BYPASS`], and falls back when it does not. Compiled variants are kept meanwhile,
//! so a key that compiled replays again as soon as the bypass ends. A fragment that has never
//! run plain measures its eager cost by running its statements once per [`PROBE_EVERY`]
//! windows.
//!
//! Nothing here changes a result: a plain run is what eager mode does. The decision only
//! moves time, and `explain()` shows the two costs that made it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One replay in this many is timed (every `SAMPLE`th of a variant's).
pub(super) const SAMPLE: u64 = 16;
/// What a timed replay adds for its dispatch, which starts before the timer (probing, the
/// key's match): about what `bench --only hit` measures for a replay without a kernel.
pub(super) const DISPATCH_NS: u64 = 200;
/// Calls (replays counted by their sample weight) per window: the most, the fewest, and the
/// time a window should last at the statements' eager cost (fragments that take milliseconds
/// per call decide within tens of calls).
const WINDOW: u64 = 512;
const MIN_WINDOW: u64 = 16;
const WINDOW_NS: u64 = 50_000_000;
/// How much slower than eager the compiled path must be for a bypass.
const MARGIN: f64 = 1.05;
/// The first bypass's length in calls, and the longest.
const FIRST_BYPASS: u64 = 1024;
const LAST_BYPASS: u64 = 1 << 16;
/// Windows between plain runs that measure the eager cost of a fragment that never runs plain.
const PROBE_EVERY: u64 = 8;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the cost guard on or off (on by default). Off, every fragment keeps its compiled
/// path whatever it costs; tests that count replays exactly turn it off.
pub fn set_cost_guard(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether the cost guard is on.
pub fn cost_guard() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A fragment's costs and its bypass state.
#[derive(Default)]
pub(super) struct Cost {
    /// Calls in the current window (replays by their sample weight), and the nanoseconds of
    /// those that did not record.
    window_calls: AtomicU64,
    window_ns: AtomicU64,
    windows: AtomicU64,
    /// The nanoseconds of this window's calls that recorded (and compiled), and the last
    /// window's per call.
    recording_ns: AtomicU64,
    last_recording: AtomicU64,
    /// This fragment's window length in calls.
    window: AtomicU64,
    /// Consecutive windows whose compiled path was slower.
    slower_windows: AtomicU64,
    /// Exponential average of the statements' plain run time, nanoseconds, and its samples.
    eager_ns: AtomicU64,
    eager_samples: AtomicU64,
    /// The same of recorded runs (an upper bound of the eager cost: recording adds to it).
    recorded_ns: AtomicU64,
    recorded_samples: AtomicU64,
    /// Calls left to run plain: a bypass, or a probe of the eager cost.
    bypass_left: AtomicU64,
    /// Whether the current plain calls are a bypass (`false`: a probe).
    bypassing: AtomicBool,
    next_bypass: AtomicU64,
    /// The last verdict: `(compiled, eager)` nanoseconds per call, and whether the compiled
    /// path was slower.
    pub(super) last: Mutex<Option<(f64, f64, bool)>>,
}

impl Cost {
    /// Whether this call runs the statements plainly (a bypass or a probe); `Some(true)` for
    /// a bypass.
    #[inline]
    pub(super) fn plain_now(&self) -> Option<bool> {
        if self.bypass_left.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.plain_call()
    }

    #[cold]
    fn plain_call(&self) -> Option<bool> {
        let left =
            self.bypass_left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).ok()?;
        (left > 0).then(|| self.bypassing.load(Ordering::Relaxed))
    }

    /// A plain run of the statements took `ns` (statements only).
    pub(super) fn eager_run(&self, ns: u64) {
        average(&self.eager_ns, &self.eager_samples, ns);
    }

    /// A recorded run of the statements took `ns` (statements only).
    pub(super) fn recorded_run(&self, ns: u64) {
        average(&self.recorded_ns, &self.recorded_samples, ns);
    }

    /// A janus-mode call of this fragment took `ns`, standing for `weight` calls; `recorded`:
    /// it recorded (a one-time cost, amortised over every call).
    pub(super) fn call(&self, ns: u64, weight: u64, recorded: bool) {
        if !cost_guard() {
            return;
        }
        let to = if recorded { &self.recording_ns } else { &self.window_ns };
        to.fetch_add(ns * weight, Ordering::Relaxed);
        let window = self.window.load(Ordering::Relaxed);
        if self.window_calls.fetch_add(weight, Ordering::Relaxed) + weight
            >= if window == 0 { WINDOW } else { window }
        {
            self.judge();
        }
    }

    /// Ends a window: bypasses the compiled path if it cost more than eager.
    #[cold]
    fn judge(&self) {
        let calls = self.window_calls.swap(0, Ordering::Relaxed);
        let ns = self.window_ns.swap(0, Ordering::Relaxed);
        if calls == 0 {
            return;
        }
        let windows = self.windows.fetch_add(1, Ordering::Relaxed) + 1;
        // Compiles already made are sunk: what counts going forward is how often the fragment
        // keeps recording. A window's recording time stands only if the window before it
        // recorded as much (the smaller of the two), so a first compile does not count
        // against a graph that then replays.
        let recorded = self.recording_ns.swap(0, Ordering::Relaxed) / calls;
        let previous = self.last_recording.swap(recorded, Ordering::Relaxed);
        let churn = if windows == 1 { recorded } else { recorded.min(previous) };
        let compiled = (ns / calls + churn) as f64;
        // Windows of about `WINDOW_NS` at the statements' cost (an upper bound of it while
        // only recorded runs were seen).
        let per_call = match self.eager_ns.load(Ordering::Relaxed) {
            0 => self.recorded_ns.load(Ordering::Relaxed),
            e => e,
        };
        if let Some(n) = WINDOW_NS.checked_div(per_call) {
            self.window.store(n.clamp(MIN_WINDOW, WINDOW), Ordering::Relaxed);
        }
        if self.eager_samples.load(Ordering::Relaxed) < 2 {
            // No plain run yet: measure one, unless the compiled path costs far less than a
            // recorded run of the statements (which bounds their eager cost from above).
            let recorded = self.recorded_ns.load(Ordering::Relaxed) as f64;
            let cheap = self.recorded_samples.load(Ordering::Relaxed) > 0 && compiled * 2.0 < recorded;
            if !cheap && windows % PROBE_EVERY == 1 {
                self.bypassing.store(false, Ordering::Relaxed);
                self.bypass_left.store(2, Ordering::Relaxed);
            }
            return;
        }
        let eager = self.eager_ns.load(Ordering::Relaxed) as f64;
        // Slower by the margin and by a microsecond, in two windows in a row: one-time costs
        // settle and noise does not flip a fragment.
        let slower = compiled > eager * MARGIN && compiled > eager + 1e3;
        let streak = if slower { self.slower_windows.fetch_add(1, Ordering::Relaxed) + 1 } else { 0 };
        if !slower {
            self.slower_windows.store(0, Ordering::Relaxed);
        }
        *self.last.lock().unwrap() = Some((compiled, eager, slower));
        if streak >= 2 {
            self.slower_windows.store(0, Ordering::Relaxed);
            let n = self.next_bypass.load(Ordering::Relaxed).clamp(FIRST_BYPASS, LAST_BYPASS);
            self.next_bypass.store((n * 2).min(LAST_BYPASS), Ordering::Relaxed);
            self.bypassing.store(true, Ordering::Relaxed);
            self.bypass_left.store(n, Ordering::Relaxed);
        } else {
            self.next_bypass.store(FIRST_BYPASS, Ordering::Relaxed);
            if windows.is_multiple_of(PROBE_EVERY) {
                // Refresh the eager cost now and then (inputs grow, the machine changes).
                self.bypassing.store(false, Ordering::Relaxed);
                self.bypass_left.store(1, Ordering::Relaxed);
            }
        }
    }

    /// Forgets everything (`reset_caches`).
    pub(super) fn reset(&self) {
        for a in [
            &self.window_calls,
            &self.window_ns,
            &self.windows,
            &self.eager_ns,
            &self.eager_samples,
            &self.recorded_ns,
            &self.recorded_samples,
            &self.last_recording,
            &self.recording_ns,
            &self.window,
            &self.slower_windows,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        self.bypass_left.store(0, Ordering::Relaxed);
        self.next_bypass.store(FIRST_BYPASS, Ordering::Relaxed);
        *self.last.lock().unwrap() = None;
    }

    /// `explain()`'s line: the last verdict's two costs.
    pub(super) fn note(&self) -> Option<String> {
        let (compiled, eager, slower) = (*self.last.lock().unwrap())?;
        let left = self.bypass_left.load(Ordering::Relaxed);
        let now = if left > 0 && self.bypassing.load(Ordering::Relaxed) {
            format!(": runs eagerly for {left} more call(s), then tries again")
        } else if slower {
            ": slower; runs eagerly if it stays so".to_string()
        } else {
            String::new()
        };
        Some(format!(
            "cost: compiled path {:.1} µs/call against {:.1} µs eagerly{now}",
            compiled / 1e3,
            eager / 1e3
        ))
    }
}

/// Why a call ran its statements plainly because of the cost guard (`explain()`'s words).
pub(super) const BYPASS: &str = "the compiled path was slower than the statements (see the cost line)";
pub(super) const PROBE: &str = "measuring what the statements cost eagerly";

/// Accounts one janus-mode run of a fragment's statements when dropped (at the end of
/// `Scope::exit`, after any compile).
pub(super) struct Exit<'a> {
    cost: &'a Cost,
    call: Instant,
    /// The statements' own time, and whether they ran plainly (an eager sample) or recorded.
    statements: Duration,
    plain: bool,
    recorded: bool,
    /// Whether the call bypassed the compiled path (not a compiled-path call).
    bypassed: bool,
}

impl<'a> Exit<'a> {
    /// `statements`: how long they ran; `plain`: they ran neither recording nor checked;
    /// `recorded`: they recorded; `bypassed`: because of the cost guard.
    pub(super) fn new(
        cost: &'a Cost,
        call: Instant,
        statements: Duration,
        (plain, recorded): (bool, bool),
        bypassed: bool,
    ) -> Self {
        Exit { cost, call, statements, plain, recorded, bypassed }
    }
}

impl Drop for Exit<'_> {
    fn drop(&mut self) {
        let ns = self.statements.as_nanos() as u64;
        if self.plain {
            self.cost.eager_run(ns);
        } else if self.recorded {
            self.cost.recorded_run(ns);
        }
        if !self.bypassed {
            self.cost.call(self.call.elapsed().as_nanos() as u64, 1, self.recorded);
        }
    }
}

/// Folds `ns` into an exponential average (the first sample sets it).
fn average(avg: &AtomicU64, samples: &AtomicU64, ns: u64) {
    let n = samples.fetch_add(1, Ordering::Relaxed);
    let old = avg.load(Ordering::Relaxed);
    avg.store(if n == 0 { ns } else { (old * 7 + ns) / 8 }, Ordering::Relaxed);
}
