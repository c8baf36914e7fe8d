//! Configuration, read once from the environment into a typed `Config`, and the execution
//! [`Mode`] of `#[janus]` functions (the default from `JANUS_MODE`, overridden per thread, so
//! tests running in parallel threads do not interfere).
//!
//! | variable | meaning |
//! |---|---|
//! | `JANUS_DUMP=DIR` | write every compiled graph (text, DOT, JSON) and a summary to `DIR` |
//! | `JANUS_VERIFY=1` | verify graphs between passes (on by default in debug builds) |
//! | `JANUS_SERIAL=1` | run compiled steps on the calling thread only (no two-worker schedule) |
//! | `JANUS_PARALLEL=force` | testing: split every splittable step in halves and run every compiled program on two workers |
//! | `JANUS_REPLAN=0` | keep the whole program's memory plan for its split steps (see [`set_replan`]) |
//! | `JANUS_SPLIT_JOINS=0` | leave small steps between split steps whole, joining the two workers' chains (see [`set_split_joins`]) |
//! | `JANUS_SHARE_LONG=0` | keep each long step on the worker its split assigned, instead of the first free one (see [`set_share_long`]) |
//! | `JANUS_PACK=0\|1` | pack the right factors that several products share, once per run: `1` on, `0` off; unset, on where the CPU has AVX2 but not AVX-512 (see [`set_pack`]) |
//! | `JANUS_PROFILE=1` | time every CPU executor step (serially); [`crate::profile_report`] prints the table |
//! | `JANUS_TIMELINE=FILE` | append one two-worker run in 500 to FILE, step by step: worker, start, end, what, `#` step, `w` worker meant for |
//! | `JANUS_MODE=eager\|janus\|check` | how `#[janus]` functions run (default `janus`) |
//! | `JANUS_CHECK_EVERY=N` | in `janus` mode, also check every N-th replay of each variant against eager execution |
//! | `JANUS_SELF_CHECK=0` | turn off the sampled self-check (replays 1, 2, 4, ..., 4096, then every 4096th) |
//! | `JANUS_CUDA_WINDOWS=device` | run `unfold`, `fold` and max pooling on CUDA tensors as device kernels, not through the host |
//! | `JANUS_LOG=info\|explain\|debug` | log staging decisions to stderr (installs a logger if none is set) |
//! | `JANUS_MALLOC=0` | leave glibc's malloc thresholds as they are (see [`tune_malloc`]) |

use std::cell::Cell;
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
    /// Split every splittable step and run every program on two workers, however small
    /// (`JANUS_PARALLEL=force`, for tests of the parallel executor).
    pub force_parallel: bool,
    /// Plan the memory of split programs again by pieces of values (on unless
    /// `JANUS_REPLAN=0`; see [`set_replan`]).
    pub replan: bool,
    /// Split small steps that would join the two workers' row chains (on unless
    /// `JANUS_SPLIT_JOINS=0`; see [`set_split_joins`]).
    pub split_joins: bool,
    /// Let either worker take a long step, even the half of a split one (on unless
    /// `JANUS_SHARE_LONG=0`; see [`set_share_long`]).
    pub share_long: bool,
    /// Pack right factors that several `f32` products of a program share, once per run
    /// (`JANUS_PACK=1` or `0`; `None`, unset: see [`pack`]).
    pub pack: Option<bool>,
    /// Fetch the cold operands of the fused steps after long products into the caches while
    /// the products run (off unless `JANUS_PREFETCH=1`; `exec/cpu/prefetch.rs`).
    pub prefetch: bool,
    /// Put CPU arenas of at least 2 MiB in mappings of their own marked for transparent huge pages
    /// (off unless `JANUS_HUGEPAGES=1`; `exec/cpu/pages.rs`, Linux only).
    pub hugepages: bool,
    /// Time every CPU executor step (`JANUS_PROFILE=1`); profiled runs are serial.
    pub profile: bool,
    /// Where sampled two-worker runs are written step by step (`JANUS_TIMELINE=FILE`).
    pub timeline: Option<PathBuf>,
    /// The default mode of `#[janus]` functions.
    pub mode: Mode,
    /// Check every N-th replay of each variant against eager execution (0: never).
    pub check_every: u64,
    /// The sampled self-check (see `rt::check`): on unless `JANUS_SELF_CHECK=0`.
    pub self_check: bool,
    /// Run `unfold`, `fold` and max pooling on CUDA tensors as device kernels
    /// (`JANUS_CUDA_WINDOWS=device`) instead of through the host.
    pub cuda_windows: bool,
    /// Requested log level, if any.
    pub log: Option<log::LevelFilter>,
}

/// The configuration, read from the environment on first use.
pub fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        if std::env::var("JANUS_MALLOC").map_or(true, |v| v != "0") {
            tune_malloc();
        }
        from_env()
    })
}

/// Keeps the memory of freed tensors in glibc's heap: allocations up to 32 MiB come from the
/// heap instead of fresh mappings, and up to 64 MiB of free space at its top stays mapped.
/// With glibc's adaptive defaults, every eager op's `[500, 128]` output (256 KiB) touched pages
/// the previous op's free had given back: CartPole's eager update took 167 page faults and
/// 410-590 µs per call in a fresh process, against 120-140 µs with these thresholds
/// (`/usr/bin/time -v`; the bench, whose earlier workloads had raised glibc's adaptive
/// thresholds, measured 121 µs). PyTorch users get the same advice as `LD_PRELOAD` of another
/// allocator. Process-wide; `JANUS_MALLOC=0` leaves glibc's settings alone, and a program with
/// its own `#[global_allocator]` is not affected (glibc's malloc then serves C code only).
fn tune_malloc() {
    // (Not under Miri, which has no `mallopt`.)
    #[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
    // SAFETY: `mallopt` only sets two of glibc's allocator parameters; it is thread-safe and
    // takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

fn from_env() -> Config {
    Config {
        dump_dir: std::env::var_os("JANUS_DUMP").filter(|v| !v.is_empty()).map(PathBuf::from),
        verify: cfg!(debug_assertions) || std::env::var("JANUS_VERIFY").is_ok_and(|v| v == "1"),
        serial: std::env::var("JANUS_SERIAL").is_ok_and(|v| v == "1"),
        force_parallel: std::env::var("JANUS_PARALLEL").is_ok_and(|v| v == "force"),
        replan: std::env::var("JANUS_REPLAN").map_or(true, |v| v != "0"),
        split_joins: std::env::var("JANUS_SPLIT_JOINS").map_or(true, |v| v != "0"),
        share_long: std::env::var("JANUS_SHARE_LONG").map_or(true, |v| v != "0"),
        pack: std::env::var("JANUS_PACK").ok().map(|v| v != "0"),
        prefetch: std::env::var("JANUS_PREFETCH").is_ok_and(|v| v == "1"),
        hugepages: std::env::var("JANUS_HUGEPAGES").is_ok_and(|v| v == "1"),
        profile: std::env::var("JANUS_PROFILE").is_ok_and(|v| v == "1"),
        timeline: std::env::var_os("JANUS_TIMELINE").filter(|v| !v.is_empty()).map(PathBuf::from),
        mode: match std::env::var("JANUS_MODE").as_deref() {
            Ok("eager") => Mode::Eager,
            Ok("check") => Mode::Check,
            Ok("janus") | Err(_) => Mode::Janus,
            Ok(other) => {
                eprintln!(
                    "janus: unknown JANUS_MODE `{other}` (expected eager, janus or check); using janus"
                );
                Mode::Janus
            }
        },
        check_every: std::env::var("JANUS_CHECK_EVERY").ok().and_then(|v| v.parse().ok()).unwrap_or(0),
        self_check: std::env::var("JANUS_SELF_CHECK").map_or(true, |v| v != "0"),
        cuda_windows: std::env::var("JANUS_CUDA_WINDOWS").is_ok_and(|v| v == "device"),
        log: match std::env::var("JANUS_LOG").as_deref() {
            Ok("debug") => Some(log::LevelFilter::Debug),
            Ok("info") | Ok("explain") => Some(log::LevelFilter::Info),
            _ => None,
        },
    }
}

/// A process-wide override of a boolean setting: unset (the environment decides), off or on.
struct Override(std::sync::atomic::AtomicU8);

impl Override {
    const fn unset() -> Self {
        Override(std::sync::atomic::AtomicU8::new(0))
    }

    fn set(&self, on: bool) {
        self.0.store(if on { 2 } else { 1 }, std::sync::atomic::Ordering::Relaxed);
    }

    /// The override, else `env`.
    fn get(&self, env: bool) -> bool {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            0 => env,
            v => v == 2,
        }
    }
}

static SERIAL: Override = Override::unset();
static REPLAN: Override = Override::unset();
static SPLIT_JOINS: Override = Override::unset();
static SHARE_LONG: Override = Override::unset();
static PACK: Override = Override::unset();
static PREFETCH: Override = Override::unset();
static HUGEPAGES: Override = Override::unset();

/// Overrides `JANUS_SERIAL` for the whole process: `true` runs every compiled program's steps
/// on the calling thread (each kernel may still use rayon), `false` allows the two-worker
/// schedule. For benchmarks that compare both in one run.
pub fn set_serial(serial: bool) {
    SERIAL.set(serial);
}

/// Whether compiled programs run on the calling thread only (`JANUS_SERIAL=1` or
/// [`set_serial`]).
pub fn serial() -> bool {
    SERIAL.get(config().serial)
}

/// Overrides `JANUS_REPLAN` for programs compiled from now on: `true` (the default) plans the
/// arena of a program whose steps split between the two workers again, by the pieces of values
/// the halves touch, so that no range is reused in a way that makes one worker wait for the
/// other; `false` keeps the plan made for the whole steps. For benchmarks comparing both.
pub fn set_replan(on: bool) {
    REPLAN.set(on);
}

/// Whether split programs' memory is planned again by pieces (`JANUS_REPLAN`, [`set_replan`]).
pub fn replan() -> bool {
    REPLAN.get(config().replan)
}

/// Overrides `JANUS_SPLIT_JOINS` for programs compiled from now on: `true` (the default) also
/// splits steps too small to split for their own sake when they sit between split steps, fed by
/// the two halves and feeding split steps (a cross-entropy's backward between an RNN's time
/// steps), so that the workers' chains stay apart and neither waits for the other at every
/// step; `false` leaves them whole. For benchmarks comparing both.
pub fn set_split_joins(on: bool) {
    SPLIT_JOINS.set(on);
}

/// Whether small steps joining split chains split too (`JANUS_SPLIT_JOINS`, [`set_split_joins`]).
pub fn split_joins() -> bool {
    SPLIT_JOINS.get(config().split_joins)
}

/// Overrides `JANUS_SHARE_LONG` for programs compiled from now on: `true` (the default) lets
/// whichever worker is free first take a long step (a weight gradient's product, tens of
/// microseconds and up), also the half of a split step that its split assigned to the other
/// worker, so that a slower core does not run the last long halves alone while the other idles;
/// `false` keeps every half on its worker. Which worker runs a step changes no bits. For
/// benchmarks comparing both.
pub fn set_share_long(on: bool) {
    SHARE_LONG.set(on);
}

/// Whether long steps go to the first free worker (`JANUS_SHARE_LONG`, [`set_share_long`]).
pub fn share_long() -> bool {
    SHARE_LONG.get(config().share_long)
}

/// Overrides `JANUS_PACK` for programs compiled from now on: `true` packs each right factor
/// that two or more `f32` products of a program read, once per run, and runs those products
/// with the packed AVX2 kernel (`janus_kernels::matmul::packed`; where the CPU has AVX2 and
/// FMA); `false` runs every product through gemm. For benchmarks comparing both.
pub fn set_pack(on: bool) {
    PACK.set(on);
}

/// Whether programs pack shared right factors: [`set_pack`], else `JANUS_PACK`, else whether
/// the CPU has AVX2 but not AVX-512. The packed kernel is AVX2 only: it beat gemm on an AVX2
/// machine (README, "Performance"), and was not measured against gemm's AVX-512 kernels.
pub fn pack() -> bool {
    let auto = || janus_kernels::simd_math::simd_level() == janus_kernels::simd_math::SimdLevel::Avx2Fma;
    PACK.get(config().pack.unwrap_or_else(auto))
}

/// Overrides `JANUS_PREFETCH` for programs compiled from now on: `true` has each long product
/// of a CPU program first ask the caches for the operands and results of the fused steps that
/// read its result, so that they arrive while the product computes; `false` (the default)
/// leaves them to be read when those steps run. For benchmarks comparing both: on the machine
/// it was measured on, it did not pay (README, "Performance").
pub fn set_prefetch(on: bool) {
    PREFETCH.set(on);
}

/// Whether CPU programs fetch operands ahead of the steps reading them (`JANUS_PREFETCH`,
/// [`set_prefetch`]).
pub fn prefetch() -> bool {
    PREFETCH.get(config().prefetch)
}

/// Overrides `JANUS_HUGEPAGES` for arenas allocated from now on: `true` puts each CPU
/// arena (of any dtype) of at least 2 MiB in a 2 MiB-aligned mapping of its own that asks Linux for
/// transparent huge pages (`madvise`), `false` in the allocator's memory. For benchmarks
/// comparing both.
pub fn set_hugepages(on: bool) {
    HUGEPAGES.set(on);
}

/// Whether large CPU arenas ask for huge pages ([`set_hugepages`], else `JANUS_HUGEPAGES`).
pub fn hugepages() -> bool {
    HUGEPAGES.get(config().hugepages)
}

/// Installs a minimal stderr logger for `JANUS_LOG` when the program set none.
pub(crate) fn init_logging() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        struct Stderr;
        impl log::Log for Stderr {
            fn enabled(&self, m: &log::Metadata<'_>) -> bool {
                m.target().starts_with("janus")
            }
            fn log(&self, r: &log::Record<'_>) {
                if self.enabled(r.metadata()) {
                    eprintln!("[{} {}] {}", r.level(), r.target(), r.args());
                }
            }
            fn flush(&self) {}
        }
        if let Some(level) = config().log
            && log::set_logger(&Stderr).is_ok()
        {
            log::set_max_level(level);
        }
    });
}

// ---- the execution mode of `#[janus]` functions -------------------------------------------
// (here, in the leaf every layer may read, so nothing below `rt` depends on `rt`.)

/// Execution mode of `#[janus]` functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Run every statement eagerly, as without the attribute.
    Eager,
    /// Run static blocks as cached compiled graphs (the default).
    #[default]
    Janus,
    /// Run compiled graphs *and* the original statements, and panic on the first mismatch.
    Check,
}

thread_local! {
    static OVERRIDE: Cell<Option<Mode>> = const { Cell::new(None) };
}

/// The mode on this thread.
pub fn mode() -> Mode {
    OVERRIDE.with(Cell::get).unwrap_or_else(|| config().mode)
}

/// Sets the mode for this thread (other threads keep theirs).
pub fn set_mode(m: Mode) {
    OVERRIDE.with(|o| o.set(Some(m)));
}

/// Runs `f` in mode `m` on this thread, then restores the previous mode (even on panic).
pub fn with_mode<R>(m: Mode, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Mode>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(Some(m))));
    f()
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// This thread's minor page faults so far.
    fn faults() -> i64 {
        // SAFETY: `getrusage` writes one `rusage`, which is plain data, through a valid pointer.
        unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut u), 0);
            u.ru_minflt
        }
    }

    /// Freed tensor-sized buffers stay in the heap ([`super::tune_malloc`]): four 256 KiB
    /// buffers made and dropped 100 times fault a few pages, not their 256 pages a round, as
    /// under glibc's adaptive defaults (checked: 22,432 faults with the tuning taken out).
    #[test]
    fn freed_tensor_buffers_stay_mapped() {
        if std::env::var("JANUS_MALLOC").is_ok_and(|v| v == "0") {
            eprintln!("skipped: JANUS_MALLOC=0 leaves glibc's thresholds alone");
            return;
        }
        super::config();
        let round = || {
            let bufs: Vec<Vec<f32>> = (0..4).map(|k| vec![k as f32 + 1.0; 65_536]).collect();
            std::hint::black_box(&bufs);
        };
        round();
        let before = faults();
        for _ in 0..100 {
            round();
        }
        let took = faults() - before;
        assert!(took < 1_000, "{took} page faults in 100 rounds of four 256 KiB buffers");
    }
}
