//! Running independent steps in parallel on two workers (see docs/design.md, "CPU executor"):
//! a step becomes ready when the steps producing its operands, and the readers of any arena
//! range it reuses, are done. Ready steps are taken longest-remaining-path first, so the
//! critical chain (an RNN's recurrence) is never starved by off-path work such as
//! weight-gradient GEMMs.

use crate::exec::lower::{Lowered, ReduceKind, StepKind};
use smallvec::SmallVec;
use std::collections::BinaryHeap;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

/// Dependencies and priorities of a lowered program's steps.
pub(crate) struct Schedule {
    preds: Vec<u32>,
    succs: Vec<SmallVec<[u32; 4]>>,
    rank: Vec<u64>,
    /// Per step, the worker that should run it (`Step::worker`).
    worker: Vec<u8>,
    /// Per step, whether it runs long (see [`long`]).
    long: Vec<bool>,
    /// Whether parallel execution is worth its handoffs for this program.
    pub(crate) parallel: bool,
}

/// Rough cost of a step in element-operations.
pub(crate) fn cost(l: &Lowered, kind: &StepKind) -> u64 {
    let numel = |i: usize| l.vals[i].as_ref().map_or(0, |v| v.shape.elems()) as u64;
    match kind {
        StepKind::MatMul { a, out, .. } => {
            let va = l.vals[*a].as_ref().unwrap();
            numel(*out) * va.shape[va.shape.rank() - 1] as u64
        }
        StepKind::Fused { prog, span, .. } => {
            let whole = prog.shape.elems() as u64 * prog.program.instrs.len() as u64;
            // A span runs some of the program's fixed parts (four, when a step is split).
            span.as_ref().map_or(whole, |s| whole * s.len() as u64 / 4)
        }
        k => {
            let moved = k.writes().iter().map(|&w| numel(w)).sum::<u64>()
                + k.reads().iter().map(|&r| numel(r)).sum::<u64>();
            // An `exp` per element and a row's reductions: a `[32, 57]` log-softmax took 4.4 µs
            // in the LSTM step, 1.8 ns per element, over ten times a copy's cost per element.
            let transcendental = matches!(
                k,
                StepKind::Reduce {
                    kind: ReduceKind::Softmax | ReduceKind::LogSoftmax | ReduceKind::LogSumExp,
                    ..
                }
            );
            if transcendental { moved * 16 } else { moved }
        }
    }
}

/// Whether a step runs long: tens of microseconds, a weight gradient's GEMM (about 2M
/// multiply-adds and up, ~20 µs on one core) or another step of at least 512K
/// element-operations (an Adam update's program; the cost of steps other than GEMMs counts
/// operations that take 0.03-0.5 ns each). While a worker runs such a step, the other takes
/// that worker's ready steps at once instead of waiting [`STEAL_SPINS`] for it: in the LSTM
/// step, one worker ran a 470 µs weight-gradient product while the other ran both halves'
/// backward chains alone, waiting ~7 µs before each step of the busy worker's half
/// (`JANUS_TIMELINE`).
fn long(l: &Lowered, kind: &StepKind) -> bool {
    let c = cost(l, kind);
    match kind {
        StepKind::MatMul { .. } => c >= 1 << 21,
        _ => c >= 1 << 19,
    }
}

/// Below this much estimated work a program runs on the calling thread: handing steps between
/// threads costs more than it saves.
const PARALLEL_MIN_COST: u64 = 1_000_000;

/// Whether a program is large enough for two workers to pay, on a machine with two threads.
/// (`JANUS_PARALLEL=force`: whatever its size.)
pub(crate) fn may_use_two_workers(l: &Lowered) -> bool {
    rayon::current_num_threads() >= 2
        && !has_loop(l)
        && (crate::config::config().force_parallel
            || l.steps.iter().map(|s| cost(l, &s.kind)).sum::<u64>() >= PARALLEL_MIN_COST)
}

/// Whether a program runs a loop step. Such a program runs on the calling thread (also under
/// `JANUS_PARALLEL=force`): the loop's body runs its own plan per trip, which may use the
/// helper thread itself, so the helper must not be busy with this program's other worker
/// (a body plan posting to the helper while the outer program's job held it deadlocked).
fn has_loop(l: &Lowered) -> bool {
    l.steps.iter().any(|s| matches!(s.kind, StepKind::Loop { .. }))
}

pub(crate) fn build(l: &Lowered) -> Schedule {
    let n = l.steps.len();
    let preds_of = crate::exec::memory::dependencies(l);
    let mut succs: Vec<SmallVec<[u32; 4]>> = vec![SmallVec::new(); n];
    for (s, p) in preds_of.iter().enumerate() {
        for &q in p {
            succs[q].push(s as u32);
        }
    }
    let costs: Vec<u64> = l.steps.iter().map(|st| cost(l, &st.kind)).collect();
    let mut rank = vec![0u64; n];
    for s in (0..n).rev() {
        rank[s] = costs[s] + succs[s].iter().map(|&t| rank[t as usize]).max().unwrap_or(0);
    }
    let total: u64 = costs.iter().sum();
    let critical = rank.iter().copied().max().unwrap_or(0);
    if std::env::var("JANUS_SCHED_DEBUG").is_ok_and(|v| v == "2") {
        for s in 0..n {
            // Its worker (0: either), and the steps it waits for: the values it reads, and the
            // readers and writers of any arena range it reuses (`memory::dependencies`).
            eprintln!(
                "step {s:4} w{} cost {:9} rank {:10} {} <- {:?}",
                l.steps[s].worker,
                costs[s],
                rank[s],
                super::profile::label(l, &l.steps[s]),
                preds_of[s]
            );
        }
    }
    if std::env::var("JANUS_SCHED_DEBUG").is_ok() {
        eprintln!(
            "schedule: {n} steps, total cost {total}, critical path {critical} ({:.0}%)",
            100.0 * critical as f64 / total.max(1) as f64
        );
    }
    let long: Vec<bool> = l.steps.iter().map(|st| long(l, &st.kind)).collect();
    Schedule {
        preds: preds_of.iter().map(|p| p.len() as u32).collect(),
        succs,
        rank,
        // A long step goes to whichever worker is free first, even the half of a split step:
        // pinned, the slower core ran both of its weight-gradient halves at the LSTM step's
        // end (~0.5 and ~0.8 ms) while the other idled ~0.8 ms (`JANUS_TIMELINE`;
        // `ExecOptions::share_long` off keeps them pinned). Which worker runs a step changes no bits,
        // and a long step's time dwarfs the cost of writing lines the other core held (the
        // reason halves are pinned, see `STEAL_SPINS`).
        worker: {
            let share = crate::config::share_long();
            l.steps.iter().zip(&long).map(|(st, &long)| if long && share { 0 } else { st.worker }).collect()
        },
        long,
        // Only when the work is large and the critical path leaves a tenth of it to overlap;
        // the tuner then measures whether two workers beat the calling thread.
        parallel: rayon::current_num_threads() >= 2
            && !has_loop(l)
            && (crate::config::config().force_parallel
                || (total >= PARALLEL_MIN_COST && critical * 10 <= total * 9)),
    }
}

/// Per-run scratch, pooled with the arenas so runs do not allocate it.
#[derive(Default)]
pub(crate) struct Scratch {
    remaining: Vec<AtomicU32>,
    /// Ready steps by the worker that should run them (`Schedule::worker`).
    ready: Mutex<[BinaryHeap<(u64, u32)>; 3]>,
    /// Entries in `ready`, read without the lock so idle workers do not contend for it.
    queued: AtomicUsize,
}

/// Idle spins before a worker takes a step meant for the other one. The halves of split steps
/// go to the same worker on every run, so the arena ranges a worker writes stay in its own
/// cache: taken by whichever worker came first, about half of CartPole's update wrote lines
/// the other core held, and two workers ran it no faster than one. A worker still takes the
/// other's steps when it has waited this long with nothing of its own (the other may be busy),
/// and at once while the other has not started (see `helper`).
const STEAL_SPINS: u32 = 256;

/// The next step for worker `w` (1 or 2): the higher-ranked of its own and the shared ones, or,
/// when `steal`, one of the other worker's.
fn pop(ready: &mut [BinaryHeap<(u64, u32)>; 3], w: usize, steal: bool) -> Option<(u64, u32)> {
    let top = |h: &BinaryHeap<(u64, u32)>| h.peek().map(|e| e.0);
    match (top(&ready[w]), top(&ready[0])) {
        (Some(a), Some(b)) if a >= b => ready[w].pop(),
        (_, Some(_)) => ready[0].pop(),
        (Some(_), None) => ready[w].pop(),
        (None, None) if steal => ready[3 - w].pop(),
        (None, None) => None,
    }
}

/// Runs every step with `run`, on two workers, respecting the schedule. A panic in a step stops
/// both workers and is re-raised here.
pub(crate) fn run_parallel(sched: &Schedule, scratch: &mut Scratch, run: &(dyn Fn(usize) + Sync)) {
    let n = sched.preds.len();
    scratch.remaining.resize_with(n, || AtomicU32::new(0));
    {
        let mut ready = scratch.ready.lock().unwrap();
        ready.iter_mut().for_each(BinaryHeap::clear);
        for (s, &p) in sched.preds.iter().enumerate() {
            scratch.remaining[s].store(p, Ordering::Relaxed);
            if p == 0 {
                ready[sched.worker[s] as usize].push((sched.rank[s], s as u32));
            }
        }
        scratch.queued.store(ready.iter().map(BinaryHeap::len).sum(), Ordering::Release);
    }
    let done = AtomicUsize::new(0);
    // Whether worker 1, 2 (at 0, 1) has started: one that does not (the helper busy with another
    // caller's job) leaves its steps to the other.
    let started = [AtomicBool::new(false), AtomicBool::new(false)];
    // Whether worker 1, 2 (at 0, 1) is running a long step: the other takes its steps at once.
    let in_long = [AtomicBool::new(false), AtomicBool::new(false)];
    let failed = AtomicBool::new(false);
    let panic: Mutex<Option<Box<dyn std::any::Any + Send>>> = Mutex::new(None);
    let scratch = &*scratch;
    // Kernels run single-threaded inside the workers: the two workers are the parallelism.
    // Worker `w`: 1 the calling thread, 2 the helper.
    let worker = |w: usize| {
        janus_kernels::parallel::serial(|| {
            // The ready successor with the longest remaining path, run next by this worker
            // without a round trip through the shared queue (a chain stays on one worker).
            let mut mine: Option<u32> = None;
            let mut idle = 0u32;
            started[w - 1].store(true, Ordering::Release);
            while done.load(Ordering::Acquire) < n && !failed.load(Ordering::Acquire) {
                // Until the other worker starts (the helper waking up, or busy with another
                // caller's job), this one takes its steps at once, successors included: the
                // LSTM step's first ~35 us went to idle spins on steps meant for a helper that
                // was still waking (JANUS_TIMELINE). The same while the other runs a long step.
                let alone = !started[2 - w].load(Ordering::Acquire) || in_long[2 - w].load(Ordering::Acquire);
                let s = match mine.take() {
                    Some(s) => s as usize,
                    None => {
                        if scratch.queued.load(Ordering::Acquire) == 0 {
                            std::hint::spin_loop();
                            continue;
                        }
                        let next = {
                            let mut ready = scratch.ready.lock().unwrap();
                            let next = pop(&mut ready, w, idle >= STEAL_SPINS || alone);
                            scratch.queued.store(ready.iter().map(BinaryHeap::len).sum(), Ordering::Release);
                            next
                        };
                        let Some((_, s)) = next else {
                            idle += 1;
                            std::hint::spin_loop();
                            continue;
                        };
                        idle = 0;
                        s as usize
                    }
                };
                let long = sched.long[s];
                if long {
                    in_long[w - 1].store(true, Ordering::Release);
                }
                if let Err(p) = std::panic::catch_unwind(AssertUnwindSafe(|| run(s))) {
                    *panic.lock().unwrap() = Some(p);
                    failed.store(true, Ordering::Release);
                    return;
                }
                if long {
                    in_long[w - 1].store(false, Ordering::Release);
                }
                let mut others: SmallVec<[(u64, u32); 4]> = SmallVec::new();
                for &t in &sched.succs[s] {
                    if scratch.remaining[t as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                        let entry = (sched.rank[t as usize], t);
                        let theirs = sched.worker[t as usize] as usize == 3 - w && !alone;
                        match mine {
                            _ if theirs => others.push(entry),
                            Some(m) if sched.rank[m as usize] >= entry.0 => others.push(entry),
                            Some(m) => {
                                others.push((sched.rank[m as usize], m));
                                mine = Some(t);
                            }
                            None => mine = Some(t),
                        }
                    }
                }
                if !others.is_empty() {
                    let mut ready = scratch.ready.lock().unwrap();
                    for e in others {
                        ready[sched.worker[e.1 as usize] as usize].push(e);
                    }
                    scratch.queued.store(ready.iter().map(BinaryHeap::len).sum(), Ordering::Release);
                }
                done.fetch_add(1, Ordering::Release);
            }
        })
    };
    helper::with_second(&|| worker(1), &|| worker(2));
    if let Some(p) = panic.into_inner().unwrap() {
        std::panic::resume_unwind(p);
    }
}

/// The second worker: one persistent thread per process, woken for each parallel run (issue 13:
/// no rayon join per run, whose second half only runs if another pool thread steals it in time).
mod helper {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Condvar, Mutex, OnceLock};
    use std::time::{Duration, Instant};

    /// A job lent to the helper for the duration of one [`with_second`] call.
    struct Job(*const (dyn Fn() + Sync));
    // SAFETY: the job is a `Sync` closure, and `with_second` does not return while the helper
    // may still call it.
    unsafe impl Send for Job {}

    #[derive(Default)]
    struct Slot {
        job: Option<Job>,
        busy: bool,
    }

    #[derive(Default)]
    struct Helper {
        slot: Mutex<Slot>,
        posted: Condvar,
        finished: Condvar,
        /// A job is posted (read without the lock while the helper spins).
        pending: AtomicBool,
        /// The helper is running a job (read without the lock while the poster spins).
        running: AtomicBool,
        /// The helper sleeps on `posted` (the poster then wakes it).
        asleep: AtomicBool,
    }

    /// How long the helper, done with a job, and a poster, done with its own half, wait
    /// awake for the other before sleeping. Per-step replays of a rolled loop come microseconds
    /// apart; waking a sleeping thread costs tens of microseconds, more than such a replay's
    /// parallel gain. And a training loop's host code between two steps (batches, the loss
    /// read) takes a few hundred: with 100 µs the helper slept through it, and waking it cost
    /// the LSTM step ~38 µs before the caller's first step ran (the woken thread preempted
    /// the poster on its core; `JANUS_TIMELINE` showed the first step at 36-45 µs, now ~1 µs).
    /// The waiting yields the core to any other runnable thread (OpenMP runtimes spin for
    /// 0.2-200 ms by default).
    const SPIN: Duration = Duration::from_millis(1);

    /// Spins (yielding the core) until `ready()` or [`SPIN`] passed.
    fn spin_until(ready: impl Fn() -> bool) {
        let t0 = Instant::now();
        loop {
            for _ in 0..64 {
                if ready() {
                    return;
                }
                std::hint::spin_loop();
            }
            if t0.elapsed() > SPIN {
                return;
            }
            std::thread::yield_now();
        }
    }

    fn helper() -> &'static Helper {
        static HELPER: OnceLock<&'static Helper> = OnceLock::new();
        HELPER.get_or_init(|| {
            let h: &'static Helper = Box::leak(Box::default());
            std::thread::Builder::new()
                .name("janus-worker".into())
                .spawn(move || {
                    loop {
                        spin_until(|| h.pending.load(Ordering::Acquire));
                        let job = {
                            let mut s = h.slot.lock().unwrap();
                            loop {
                                if let Some(j) = s.job.take() {
                                    h.pending.store(false, Ordering::Relaxed);
                                    h.running.store(true, Ordering::Relaxed);
                                    s.busy = true;
                                    break j;
                                }
                                h.asleep.store(true, Ordering::Relaxed);
                                s = h.posted.wait(s).unwrap();
                                h.asleep.store(false, Ordering::Relaxed);
                            }
                        };
                        // SAFETY: the poster waits for `busy` to clear before its closure dies.
                        unsafe { (*job.0)() };
                        let mut s = h.slot.lock().unwrap();
                        s.busy = false;
                        h.running.store(false, Ordering::Release);
                        drop(s);
                        h.finished.notify_all();
                    }
                })
                .expect("spawning the janus worker thread");
            h
        })
    }

    /// Runs `mine` here and `theirs` on the helper thread, if it is idle, and returns when both
    /// are done. Each must finish on its own (the schedule's workers do: either runs every step
    /// when the other never starts).
    pub(super) fn with_second(mine: &(dyn Fn() + Sync), theirs: &(dyn Fn() + Sync)) {
        let h = helper();
        let (posted, wake) = {
            let mut s = h.slot.lock().unwrap();
            let idle = !s.busy && s.job.is_none();
            if idle {
                // SAFETY: only the lifetime is erased; this function does not return, nor
                // unwind, while the helper may still call the job (`Reclaim`, below).
                let job: *const (dyn Fn() + Sync + '_) = theirs;
                s.job = Some(Job(unsafe {
                    std::mem::transmute::<*const (dyn Fn() + Sync + '_), *const (dyn Fn() + Sync + 'static)>(
                        job,
                    )
                }));
                h.pending.store(true, Ordering::Release);
            }
            // Read under the lock: the helper sets it under the lock before it sleeps.
            (idle, idle && h.asleep.load(Ordering::Relaxed))
        };
        if wake {
            h.posted.notify_one();
        }
        let _reclaim = posted.then_some(Reclaim(h));
        mine();
    }

    /// When dropped (also when `mine` unwinds), takes a posted job back if the helper has not
    /// picked it up, and waits until the helper is done with one it has: the helper never calls a
    /// closure whose frame is gone. (A job another caller posted meanwhile may be taken back
    /// too; that caller's own worker then runs every step.)
    struct Reclaim(&'static Helper);

    impl Drop for Reclaim {
        fn drop(&mut self) {
            let h = self.0;
            // This thread's worker returns once every step has run: a job the helper has not
            // picked up has nothing left to do (waiting for the helper to wake and find that
            // out cost up to the whole `SPIN`).
            {
                let mut s = h.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if s.job.take().is_some() {
                    h.pending.store(false, Ordering::Relaxed);
                }
            }
            // Mostly the helper finishes its half about when this thread does.
            spin_until(|| !h.running.load(Ordering::Acquire));
            let mut s = h.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            while s.busy {
                s = h.finished.wait(s).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
    }
}

/// Chooses between the two-worker schedule and the calling thread by timing both on a plan's
/// first replays, alternating, and keeping the faster by median. The static rule in [`build`]
/// cannot see that a chain of large kernels runs faster serially, where each kernel may use
/// both cores through rayon, than on two workers that run every kernel single-threaded.
///
/// The choice is measured again after [`RECHECK_FIRST`] more runs, then after four times as
/// many each time (at most [`RECHECK_MAX`]): the first replays run while caches, the allocator
/// and the helper thread settle, and a choice made then stuck for the process (CartPole's
/// update measured two workers at 213 µs against 121 serial in one process, 145 against 148
/// in another; forced, the two ran 115 and 116 µs).
#[derive(Default)]
pub(crate) struct Tuner {
    /// 0 while measuring, 1 serial, 2 parallel.
    choice: std::sync::atomic::AtomicU8,
    trials: Mutex<[Vec<std::time::Duration>; 2]>,
    /// Runs of the current measurement (warm-up included).
    runs: AtomicUsize,
    /// Runs since the last choice.
    since: AtomicUsize,
    /// Choices made so far.
    rounds: AtomicUsize,
}

/// Runs after the first choice before it is measured again.
const RECHECK_FIRST: usize = 256;
/// The longest interval between measurements, in runs.
const RECHECK_MAX: usize = RECHECK_FIRST << 8;

/// Timed replays per mode before choosing (after [`TUNE_SKIP`] untimed warm-up replays). With 5,
/// the per-trip bodies of a rolled loop (tens of µs, where the two modes are close) often chose
/// wrongly on this noisy 2-core machine, and the choice sticks: the LSTM stream's rolled steady
/// state measured 1.18x the per-shape graphs with 5; with 15, 1.09-1.13x in three runs of five
/// and 1.26x, 1.29x in the other two (docs/perf/2026-11-24.md), so it is narrowed, not settled.
const TUNE_RUNS: usize = 15;
/// The first replays touch fresh pages and cold caches: not timed.
const TUNE_SKIP: usize = 2;
/// Runs per mode in a row while measuring; the first of each block is not timed. Strictly
/// alternating, every two-worker run followed a serial one, after which the helper had gone to
/// sleep: each paid its wake-up, which a run of only two-worker runs does not (CartPole's
/// update tuned 126-149 µs two workers vs 118-144 serial, and chose serial, where forced
/// runs measured 100-103 vs 107-113).
const TUNE_BLOCK: usize = 4;

impl Tuner {
    /// The mode of the next run: alternating while measuring, then the choice
    /// (`JANUS_PARALLEL=force` bypasses the tuner: `CpuPlan::run_as`).
    pub(crate) fn wants_parallel(&self) -> bool {
        match self.choice.load(Ordering::Relaxed) {
            1 => false,
            2 => true,
            _ => (self.runs.load(Ordering::Relaxed) / TUNE_BLOCK).is_multiple_of(2),
        }
    }

    /// Records a run's wall time; chooses once both modes have [`TUNE_RUNS`] timings, and
    /// starts measuring again when a re-check is due.
    pub(crate) fn record(&self, parallel: bool, took: std::time::Duration) {
        if self.choice.load(Ordering::Relaxed) != 0 {
            let since = self.since.fetch_add(1, Ordering::Relaxed) + 1;
            if since >= self.recheck_due() {
                let mut t = self.trials.lock().unwrap();
                // One caller restarts the measurement (another may have just done so, and a
                // measurement just finished may have chosen again).
                if self.choice.load(Ordering::Relaxed) != 0
                    && self.since.load(Ordering::Relaxed) >= self.recheck_due()
                {
                    t.iter_mut().for_each(Vec::clear);
                    // No warm-up this time: the plan has run many times.
                    self.runs.store(TUNE_SKIP, Ordering::Relaxed);
                    self.since.store(0, Ordering::Relaxed);
                    self.choice.store(0, Ordering::Relaxed);
                }
            }
            return;
        }
        let run = self.runs.fetch_add(1, Ordering::Relaxed);
        if run < TUNE_SKIP || run.is_multiple_of(TUNE_BLOCK) {
            return;
        }
        let mut t = self.trials.lock().unwrap();
        // Another caller may have chosen since this one read `choice`.
        if self.choice.load(Ordering::Relaxed) != 0 {
            return;
        }
        t[parallel as usize].push(took);
        if t.iter().all(|v| v.len() >= TUNE_RUNS) {
            let median = |v: &mut Vec<std::time::Duration>| {
                v.sort_unstable();
                v[v.len() / 2]
            };
            let [s, p] = &mut *t;
            let (serial, par) = (median(s), median(p));
            let choice = if par < serial { 2 } else { 1 };
            log::debug!(
                target: "janus::schedule",
                "two workers {par:?} vs serial {serial:?} (medians of {TUNE_RUNS}): {}",
                if choice == 2 { "two workers" } else { "serial" }
            );
            if std::env::var("JANUS_SCHED_DEBUG").is_ok() {
                eprintln!("schedule: two workers {par:?} vs serial {serial:?} (medians of {TUNE_RUNS})");
            }
            self.rounds.fetch_add(1, Ordering::Relaxed);
            self.since.store(0, Ordering::Relaxed);
            self.choice.store(choice, Ordering::Relaxed);
        }
    }

    /// Runs after a choice before it is measured again: [`RECHECK_FIRST`], four times as many
    /// after each later choice, at most [`RECHECK_MAX`].
    fn recheck_due(&self) -> usize {
        let round = self.rounds.load(Ordering::Relaxed).clamp(1, 5);
        (RECHECK_FIRST << (2 * (round - 1))).min(RECHECK_MAX)
    }

    /// Whether a choice has been made, and which: `Some(true)` for two workers.
    pub(crate) fn chosen(&self) -> Option<bool> {
        match self.choice.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::lower::lower;
    use crate::passes::testing::trace;
    use crate::tensor::Tensor;
    use std::time::Duration;

    /// The halves of a long split step (a weight gradient's product, split by its contraction)
    /// go to whichever worker is free first; the halves of short steps stay on the worker their
    /// split chose.
    #[test]
    fn long_halves_go_to_either_worker_and_short_ones_stay_pinned() {
        if !crate::config::share_long() {
            eprintln!("skipped: ExecOptions::share_long is off");
            return;
        }
        crate::random::manual_seed(3);
        let inputs = [Tensor::randn([256, 128]), Tensor::randn([256, 512]), Tensor::randn([256, 512])];
        let g = trace(&inputs, |x| vec![x[0].t().matmul(&x[1]), (&x[1] * 2.0 + &x[2]).tanh()]);
        let (g, _) = crate::passes::optimize(g);
        let l = lower(&g);
        let plan = super::super::CpuPlan::with_options(&l, Some(0), false);
        let split = plan.split.as_ref().expect("the program splits");
        let sched = &plan.schedule;
        let (mut long, mut short) = (0, 0);
        for (s, step) in split.steps.iter().enumerate().filter(|(_, st)| st.worker != 0) {
            if sched.long[s] {
                assert_eq!(sched.worker[s], 0, "long half {s} is pinned");
                long += 1;
            } else {
                assert_eq!(sched.worker[s], step.worker, "short half {s} moved");
                short += 1;
            }
        }
        assert!(long >= 2 && short >= 2, "{long} long and {short} short halves");
    }

    /// The tuner alternates while it measures, skips the warm-up runs, and keeps the mode with
    /// the lower median.
    #[test]
    fn the_tuner_keeps_the_faster_schedule() {
        for (par_ms, serial_ms, want) in [(1, 2, true), (3, 2, false)] {
            let t = Tuner::default();
            let mut modes = Vec::new();
            while t.chosen().is_none() {
                let p = t.wants_parallel();
                modes.push(p);
                // The warm-up runs, and the first run after each switch of mode, are slow
                // whatever the mode; they must not count.
                let switched = modes.len() >= 2 && modes[modes.len() - 2] != p;
                let ms = if modes.len() <= TUNE_SKIP || switched {
                    100
                } else if p {
                    par_ms
                } else {
                    serial_ms
                };
                t.record(p, Duration::from_millis(ms));
            }
            assert_eq!(t.chosen(), Some(want));
            for (i, w) in modes.windows(2).enumerate() {
                assert_eq!(w[0] != w[1], (i + 1) % TUNE_BLOCK == 0, "blocks of {TUNE_BLOCK}: {modes:?}");
            }
            let per_mode = |m: bool| modes.iter().filter(|&&p| p == m).count();
            assert!(per_mode(true) > TUNE_RUNS && per_mode(false) > TUNE_RUNS, "{modes:?}");
            assert_eq!(t.wants_parallel(), want);
        }
    }

    /// A choice is measured again after `RECHECK_FIRST` runs (then four times as many), and
    /// follows the timings when they change.
    #[test]
    fn the_tuner_measures_again_and_follows_a_change() {
        let t = Tuner::default();
        let run = |t: &Tuner, par_ms: u64, serial_ms: u64| {
            let p = t.wants_parallel();
            t.record(p, Duration::from_millis(if p { par_ms } else { serial_ms }));
        };
        while t.chosen().is_none() {
            run(&t, 1, 2);
        }
        assert_eq!(t.chosen(), Some(true));
        // The two modes trade places: the choice holds until the re-check is due.
        for _ in 0..RECHECK_FIRST - 1 {
            run(&t, 3, 2);
            assert_eq!(t.chosen(), Some(true));
        }
        run(&t, 3, 2);
        assert_eq!(t.chosen(), None, "measuring again");
        let mut measured = 0;
        while t.chosen().is_none() {
            run(&t, 3, 2);
            measured += 1;
        }
        // No warm-up the second time; a timed run per mode in each block but the first.
        let timed = (TUNE_BLOCK - 1) as f64 / TUNE_BLOCK as f64;
        assert!(measured as f64 <= (2 * TUNE_RUNS) as f64 / timed + TUNE_BLOCK as f64, "{measured}");
        assert_eq!(t.chosen(), Some(false));
        // The next re-check comes four times later.
        for _ in 0..4 * RECHECK_FIRST - 1 {
            run(&t, 3, 2);
        }
        assert_eq!(t.chosen(), Some(false));
        run(&t, 3, 2);
        assert_eq!(t.chosen(), None);
    }
}
