//! Per-fragment statistics, the registry of fragments, staging coverage, and
//! `explain()`/`stats()`/`reset_stats()`.
//!
//! A replay touches one relaxed atomic, its variant's replay count; the fragment's `calls`
//! counts the other calls. Calls, hits, checks and the ops of forward replays are derived from
//! the variants' counters when a snapshot is taken.

use super::coverage::{self, EagerKind};
use super::fragment::Fragment;
use crate::compile::OpSink;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one fragment, updated with relaxed atomics (no locks on the hit path).
#[derive(Default)]
pub(crate) struct Counters {
    /// Calls that did not replay (a replay is counted by its variant), and the replays of
    /// retired variants.
    pub(crate) calls: AtomicU64,
    pub(crate) traces: AtomicU64,
    pub(crate) compiles: AtomicU64,
    pub(crate) compile_us: AtomicU64,
    /// Instances of generic variants made, and the microseconds spent making them.
    pub(crate) instances: AtomicU64,
    pub(crate) instance_us: AtomicU64,
    pub(crate) check_us: AtomicU64,
    pub(crate) divergences: AtomicU64,
    /// Failed speculations: asserts that did not hold, paths that changed while profiling.
    pub(crate) assert_failures: AtomicU64,
    /// Replays, checks and staged ops of variants replaced after a failed speculation.
    pub(crate) retired_hits: AtomicU64,
    pub(crate) retired_checks: AtomicU64,
    pub(crate) retired_staged_ops: AtomicU64,
    pub(crate) staged_backward_ops: AtomicU64,
    /// Eager op calls by [`EagerKind`] (indexed as `EagerKind::ALL`).
    pub(crate) eager_ops: [AtomicU64; EagerKind::ALL.len()],
    /// Runs of the statements by [`EagerKind`], and by detailed reason.
    pub(crate) eager_runs: [AtomicU64; EagerKind::ALL.len()],
    pub(crate) eager: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one run of the statements, of `kind`, for `reason` (the message `explain()`
    /// shows).
    pub(crate) fn eager(&self, kind: EagerKind, reason: &str) {
        self.eager_runs[kind as usize].fetch_add(1, Ordering::Relaxed);
        let mut m = self.eager.lock().unwrap();
        match m.get_mut(reason) {
            Some(n) => *n += 1, // no allocation once a reason is known
            None => _ = m.insert(reason.to_string(), 1),
        }
    }

    /// The counter of eager ops run for `kind`.
    pub(crate) fn eager_ops(&self, kind: EagerKind) -> &AtomicU64 {
        &self.eager_ops[kind as usize]
    }

    pub(crate) fn clear(&self) {
        let scalars = [
            &self.calls,
            &self.traces,
            &self.compiles,
            &self.compile_us,
            &self.instances,
            &self.instance_us,
            &self.check_us,
            &self.divergences,
            &self.assert_failures,
            &self.retired_hits,
            &self.retired_checks,
            &self.retired_staged_ops,
            &self.staged_backward_ops,
        ];
        for c in scalars.into_iter().chain(&self.eager_ops).chain(&self.eager_runs) {
            c.store(0, Ordering::Relaxed);
        }
        self.eager.lock().unwrap().clear();
    }
}

impl OpSink for Counters {
    fn backward(&self, ops: u64) {
        self.staged_backward_ops.fetch_add(ops, Ordering::Relaxed);
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
    /// The line its last statement ends on.
    pub last_line: u32,
    /// Tensor ops one replay runs (of its recording, before fusion; the most replayed variant's),
    /// 0 before a graph is compiled.
    pub ops_per_replay: u64,
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
    /// Instances of a shape-polymorphic variant made for new sizes (not counted in
    /// `compiles`: no recording, derivation or optimisation ran for them).
    pub instances: u64,
    /// Milliseconds spent making instances (filling in sizes, verifying, lowering).
    pub instance_ms: f64,
    /// Which input dims the block's graphs are generalised over, or why they are not.
    pub dynamic_dims: Option<String>,
    /// The cost guard's last verdict: what the compiled path and the statements cost per
    /// call, and whether the statements run instead for a while (see `janus::set_cost_guard`).
    pub cost: Option<String>,
    /// Replays also checked against eager execution (check mode, `JANUS_CHECK_EVERY`, and the
    /// sampled self-check).
    pub checks: u64,
    /// Milliseconds spent in checked calls (replay, statements and comparison together).
    pub check_ms: f64,
    /// Checks that found a replay disagreeing with eager execution.
    pub divergences: u64,
    /// Failed speculations of a whole-function fragment (`function#fn`): asserts that did not
    /// hold (nothing was committed) and paths that changed while profiling.
    pub assert_failures: u64,
    /// Keys with a compiled graph.
    pub variants: usize,
    /// Eager runs by reason, as `explain()` words them (an opaque input's name, an unusable
    /// recording's cause).
    pub eager: BTreeMap<String, u64>,
    /// Eager runs by kind: what tests and tools match on.
    pub eager_runs: BTreeMap<EagerKind, u64>,
    /// Tensor ops run inside replayed forward graphs (each replay counts its recording's ops,
    /// before fusion).
    pub staged_ops: u64,
    /// Tensor ops run inside replayed backward graphs (each run counts its derived graph's ops).
    pub staged_backward_ops: u64,
    /// Bytes of the arenas of its compiled graphs' CPU runs, over its keys' forward graphs and
    /// the backward graphs compiled so far (a snapshot, not a count).
    pub arena_bytes: usize,
    /// Bytes of the packed copies of right factors (`janus::ExecOptions::pack`) those runs keep next to
    /// their arenas, over the same graphs (a snapshot).
    pub packed_bytes: usize,
    /// Tensor ops the block's statements ran eagerly, by why they ran.
    pub eager_ops: BTreeMap<EagerKind, u64>,
    /// Of a whole-function fragment (`function#fn`), every key as of the snapshot, the most
    /// replayed first (empty for blocks).
    pub keys: Vec<KeyStats>,
}

/// One key of a whole-function fragment (see docs/design.md, "Speculation"), as `explain()`
/// lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyStats {
    /// The key's inputs: a tensor's dims, a module's tensor count, host values.
    pub inputs: String,
    /// The host decisions of its graph's path (or of the last profiled call), in order, as
    /// `(line, taken)`: an `if`/`while` condition's answer, `true` per loop trip or `match` arm.
    pub path: Vec<(u32, bool)>,
    /// Whether a speculative graph serves the key.
    pub speculated: bool,
    /// The asserts in that graph.
    pub asserts: usize,
    /// Replays of that graph.
    pub hits: u64,
    /// Failed speculations of the key (asserts that did not hold, paths that changed).
    pub failures: u64,
    /// Why the key has no graph: `profiling`, or the reason it stays on the fragment path.
    pub not_speculated: Option<String>,
}

/// How a block run recorded into an enclosing graph is counted in `FragmentStats::eager`.
pub(crate) const INLINE: &str = "recorded inline by an enclosing graph";

/// A path as `line 12 yes x32, line 12 no`: runs of the same decision collapsed.
pub(crate) fn path_summary(path: &[crate::trace::Decision]) -> String {
    let pairs: Vec<(u32, bool)> = path.iter().map(|d| (d.line, d.taken)).collect();
    summarise_path(&pairs)
}

fn summarise_path(path: &[(u32, bool)]) -> String {
    if path.is_empty() {
        return "no decisions".into();
    }
    let mut parts: Vec<String> = Vec::new();
    let mut k = 0;
    while k < path.len() {
        let run = path[k..].iter().take_while(|d| **d == path[k]).count();
        let (line, taken) = path[k];
        let word = if taken { "yes" } else { "no" };
        parts.push(if run > 1 {
            format!("line {line} {word} x{run}")
        } else {
            format!("line {line} {word}")
        });
        k += run;
    }
    parts.join(", ")
}

impl FragmentStats {
    fn since(&self, earlier: &FragmentStats) -> FragmentStats {
        /// `now - earlier` per key, without the keys that did not grow.
        fn delta<K: Ord + Clone>(now: &BTreeMap<K, u64>, earlier: &BTreeMap<K, u64>) -> BTreeMap<K, u64> {
            (now.iter())
                .map(|(k, n)| (k.clone(), n.saturating_sub(earlier.get(k).copied().unwrap_or(0))))
                .filter(|&(_, n)| n > 0)
                .collect()
        }
        FragmentStats {
            name: self.name.clone(),
            span: self.span.clone(),
            last_line: self.last_line,
            ops_per_replay: self.ops_per_replay,
            calls: self.calls.saturating_sub(earlier.calls),
            hits: self.hits.saturating_sub(earlier.hits),
            traces: self.traces.saturating_sub(earlier.traces),
            compiles: self.compiles.saturating_sub(earlier.compiles),
            compile_ms: (self.compile_ms - earlier.compile_ms).max(0.0),
            instances: self.instances.saturating_sub(earlier.instances),
            instance_ms: (self.instance_ms - earlier.instance_ms).max(0.0),
            checks: self.checks.saturating_sub(earlier.checks),
            check_ms: (self.check_ms - earlier.check_ms).max(0.0),
            divergences: self.divergences.saturating_sub(earlier.divergences),
            assert_failures: self.assert_failures.saturating_sub(earlier.assert_failures),
            variants: self.variants,
            eager: delta(&self.eager, &earlier.eager),
            eager_runs: delta(&self.eager_runs, &earlier.eager_runs),
            staged_ops: self.staged_ops.saturating_sub(earlier.staged_ops),
            staged_backward_ops: self.staged_backward_ops.saturating_sub(earlier.staged_backward_ops),
            arena_bytes: self.arena_bytes,
            packed_bytes: self.packed_bytes,
            eager_ops: delta(&self.eager_ops, &earlier.eager_ops),
            dynamic_dims: self.dynamic_dims.clone(),
            cost: self.cost.clone(),
            keys: self.keys.clone(),
        }
    }
}

/// Statistics of every fragment that ran, and of the ops that ran outside them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// One entry per fragment, in first-run order.
    pub fragments: Vec<FragmentStats>,
    /// Tensor ops run eagerly outside every block: host statements, code outside `#[janus]`
    /// functions, and eager `backward()` walks (added by each thread when it runs a block's
    /// statements and when it calls `stats()`).
    pub outside_ops: u64,
}

/// Executed tensor ops, totalled over fragments (see [`Stats::ops`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Ops run inside replayed graphs, forward.
    pub staged_forward: u64,
    /// Ops run inside replayed graphs, backward.
    pub staged_backward: u64,
    /// Ops run eagerly in blocks that can stage, by why (warm-up, checks, failures).
    pub eager: BTreeMap<EagerKind, u64>,
    /// Ops run eagerly in blocks that stay eager by design, by why (not counted against
    /// coverage).
    pub on_purpose: BTreeMap<EagerKind, u64>,
    /// Ops run outside every block.
    pub outside: u64,
}

impl OpCounts {
    /// Ops run inside replayed graphs.
    pub fn staged(&self) -> u64 {
        self.staged_forward + self.staged_backward
    }

    /// Ops run eagerly in blocks that can stage.
    pub fn eager_stageable(&self) -> u64 {
        self.eager.values().sum()
    }
}

impl Stats {
    /// The fragments of function `name`.
    pub fn function<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a FragmentStats> + 'a {
        self.fragments.iter().filter(move |f| f.name.split('#').next() == Some(name))
    }

    /// Executed ops over all fragments, staged and eager.
    pub fn ops(&self) -> OpCounts {
        let mut c = OpCounts { outside: self.outside_ops, ..Default::default() };
        for f in &self.fragments {
            c.staged_forward += f.staged_ops;
            c.staged_backward += f.staged_backward_ops;
            for (&k, &n) in &f.eager_ops {
                let side = if k.on_purpose() { &mut c.on_purpose } else { &mut c.eager };
                *side.entry(k).or_default() += n;
            }
        }
        c
    }

    /// The staged fraction of the tensor ops executed in blocks that can stage: ops inside
    /// replayed graphs (forward and backward) over those plus the ops such blocks ran eagerly.
    /// Blocks that stay eager by design and ops outside blocks are reported apart by
    /// [`ops`](Stats::ops). 1.0 when no such op ran.
    pub fn coverage(&self) -> f64 {
        let c = self.ops();
        let total = c.staged() + c.eager_stageable();
        if total == 0 { 1.0 } else { c.staged() as f64 / total as f64 }
    }

    /// The coverage, the eager ops of stageable blocks by reason, and (on a second line) the
    /// ops reported apart: blocks eager by design, and ops outside blocks.
    pub fn coverage_summary(&self) -> String {
        let c = self.ops();
        format!(
            "coverage {:.2}%: {} ops staged ({} forward, {} backward), {} eager in stageable blocks ({})\n\
             apart: {} eager by design ({}), {} outside blocks (host statements, eager backward)",
            100.0 * self.coverage(),
            c.staged(),
            c.staged_forward,
            c.staged_backward,
            c.eager_stageable(),
            by_kind(&c.eager),
            c.on_purpose.values().sum::<u64>(),
            by_kind(&c.on_purpose),
            c.outside
        )
    }

    /// What happened between `earlier` (a snapshot of the same program) and this snapshot:
    /// counters are differences, fragments absent before count from zero.
    pub fn since(&self, earlier: &Stats) -> Stats {
        let fragments = self
            .fragments
            .iter()
            .map(|f| match earlier.fragments.iter().find(|e| e.name == f.name && e.span == f.span) {
                Some(e) => f.since(e),
                None => f.clone(),
            })
            .collect();
        Stats { fragments, outside_ops: self.outside_ops.saturating_sub(earlier.outside_ops) }
    }
}

/// A snapshot of every fragment's statistics.
pub fn stats() -> Stats {
    coverage::flush_outside();
    Stats {
        fragments: {
            // By function: the whole function first, then its blocks in source order.
            let mut all = fragments();
            all.sort_by_key(|f| {
                let s = f.site();
                (s.function, !s.speculative, s.file, s.line, s.index, s.part)
            });
            all.into_iter().map(Fragment::snapshot).collect()
        },
        outside_ops: coverage::outside(),
    }
}

/// Zeroes every statistic (calls, hits, op counts, ...) and keeps the compiled graphs, to
/// measure a window such as the calls after warm-up.
pub fn reset_stats() {
    coverage::flush_outside();
    for f in fragments() {
        f.reset_stats();
    }
    coverage::reset_outside();
}

/// Forgets every compiled graph and statistic, so the next calls profile and compile afresh.
/// A block found to be always eager (an input or output type that cannot be staged, or too
/// few ops under `min_ops`) stays so: that is a property of its code.
pub fn reset_caches() {
    for f in fragments() {
        f.reset();
    }
    coverage::reset_outside();
}

fn by_kind(m: &BTreeMap<EagerKind, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter().map(|(k, n)| format!("{}: {n}", k.label())).collect::<Vec<_>>().join(", ")
}

/// A profiler-style table of every fragment: calls, replays, recordings, checks, compile time,
/// compiled variants, executed ops (staged and eager) and why it ran eagerly when it did; then
/// the staging coverage. Rows are sorted by function: the whole function (`name#fn`, with a
/// line per key: its path, its graph or why it is not speculated), then its blocks in order.
///
/// # Examples
///
/// ```
/// // Before any #[janus] function ran: only the header and the coverage lines.
/// let table = janus_runtime::explain();
/// assert!(table.starts_with("fragment"));
/// assert!(table.contains("coverage"));
/// let stats = janus_runtime::stats(); // the same as fields
/// assert!(stats.fragments.is_empty());
/// ```
pub fn explain() -> String {
    let s = stats();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<40} {:>8} {:>8} {:>7} {:>7} {:>10} {:>8} {:>8} {:>11} {:>9}  eager runs by reason",
        "fragment",
        "lines",
        "calls",
        "hits",
        "traces",
        "checks",
        "compile ms",
        "variants",
        "ops/hit",
        "staged ops",
        "eager ops"
    );
    for f in &s.fragments {
        // Runs recorded into an enclosing function graph are not eager runs: they are that
        // graph's recording.
        let inline = f.eager_runs.get(&EagerKind::Recorded).copied().unwrap_or(0);
        let mut reasons: Vec<String> = (f.eager.iter())
            .filter(|(r, _)| inline == 0 || r.as_str() != INLINE)
            .map(|(r, n)| format!("{r}: {n}"))
            .collect();
        if f.name.ends_with("#fn") {
            // A whole function (see docs/design.md, "Speculation"): one speculative graph per key.
            reasons.insert(0, format!("speculated: {} hits, {} assert failures", f.hits, f.assert_failures));
        }
        if reasons.is_empty() {
            reasons.push("-".into());
        }
        if inline > 0 {
            reasons.push(format!("(and {inline} run(s) recorded into the function graph)"));
        }
        let first = f.span.rsplit(':').next().and_then(|l| l.parse::<u32>().ok()).unwrap_or(0);
        let lines = if f.last_line > first { format!("{}-{}", f.span, f.last_line) } else { f.span.clone() };
        let _ = writeln!(
            out,
            "{:<28} {:<40} {:>8} {:>8} {:>7} {:>7} {:>10.2} {:>8} {:>8} {:>11} {:>9}  {}",
            f.name,
            lines,
            f.calls,
            f.hits,
            f.traces,
            f.checks,
            f.compile_ms,
            f.variants,
            f.ops_per_replay,
            f.staged_ops + f.staged_backward_ops,
            f.eager_ops.values().sum::<u64>(),
            reasons.join("; ")
        );
        if let Some(d) = &f.dynamic_dims {
            let _ = writeln!(out, "    sizes: {d}; {} instance(s) in {:.2} ms", f.instances, f.instance_ms);
        }
        if let Some(c) = &f.cost {
            let _ = writeln!(out, "    {c}");
        }
        for (k, key) in f.keys.iter().enumerate() {
            let status = match &key.not_speculated {
                None => format!("one graph, {} assert(s): {} hits", key.asserts, key.hits),
                Some(why) => format!("not speculated: {why}"),
            };
            let _ = writeln!(
                out,
                "    key {k} ({}): path {}; {status}; {} failure(s)",
                key.inputs,
                summarise_path(&key.path),
                key.failures
            );
        }
    }
    let _ = writeln!(out, "{}", s.coverage_summary());
    let profile = crate::profile::report();
    if !profile.is_empty() {
        let _ = write!(out, "\nJANUS_PROFILE: CPU executor steps, heaviest first\n{profile}");
    }
    out
}
