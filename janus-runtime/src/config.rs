//! Configuration, read once from the environment into a typed `Config`, and the execution
//! [`Mode`] of `#[janus]` functions (the default from `JANUS_MODE`, overridden per thread, so
//! tests running in parallel threads do not interfere).
//!
//! Every `JANUS_*` variable the code reads is listed in `docs/env_vars.md` (a test keeps the
//! list and the code in step); the executor's switches are [`ExecOptions`].

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
#[inline]
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

/// Switches of the compiled CPU executor, process-wide. Each default is the setting the bench
/// measured to pay (`cargo run --release --example bench -- --only replan|pack|joins|long`
/// alternates both sides of one switch in one process); they exist for such comparisons and
/// for a program that shares its cores with other work (`serial`). Read them with
/// [`exec_options`], change them with [`set_exec_options`]:
///
/// ```
/// let mut o = janus_runtime::exec_options();
/// o.serial = true; // run compiled steps on the calling thread only
/// janus_runtime::set_exec_options(o);
/// # o.serial = false;
/// # janus_runtime::set_exec_options(o);
/// ```
///
/// Programs compiled from then on use the new options (`serial` applies to every run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecOptions {
    /// Run every compiled program's steps on the calling thread (each kernel may still use
    /// rayon), never on the two-worker schedule. Default: off, or `JANUS_SERIAL=1`.
    pub serial: bool,
    /// Plan the arena of a program whose steps split between the two workers again, by the
    /// pieces of values the halves touch, so that no range is reused in a way that makes one
    /// worker wait for the other; off keeps the plan made for the whole steps. Default: on.
    pub replan: bool,
    /// Also split steps too small to split for their own sake when they sit between split
    /// steps (a cross-entropy's backward between an RNN's time steps), so that the workers'
    /// chains stay apart. Default: on.
    pub split_joins: bool,
    /// Let whichever worker is free first take a long step (a weight gradient's product), also
    /// the half of a split step assigned to the other worker. Which worker runs a step changes
    /// no bits. Default: on.
    pub share_long: bool,
    /// Pack each right factor that two or more `f32` products of a program read, once per run,
    /// and run those products with the packed AVX2 kernel (`janus_kernels::matmul::packed`);
    /// off runs every product through gemm. Default: on where the CPU has AVX2 but not
    /// AVX-512 (the packed kernel beat gemm on an AVX2 machine and was not measured against
    /// gemm's AVX-512 kernels).
    pub pack: bool,
}

impl Default for ExecOptions {
    /// The defaults, `JANUS_SERIAL` included.
    fn default() -> Self {
        let avx2_only =
            janus_kernels::simd_math::simd_level() == janus_kernels::simd_math::SimdLevel::Avx2Fma;
        ExecOptions {
            serial: config().serial,
            replan: true,
            split_joins: true,
            share_long: true,
            pack: avx2_only,
        }
    }
}

impl ExecOptions {
    const SET: u8 = 1;

    fn bits(self) -> u8 {
        Self::SET
            | (self.serial as u8) << 1
            | (self.replan as u8) << 2
            | (self.split_joins as u8) << 3
            | (self.share_long as u8) << 4
            | (self.pack as u8) << 5
    }

    fn from_bits(b: u8) -> Self {
        let on = |k: u8| b & (1 << k) != 0;
        ExecOptions { serial: on(1), replan: on(2), split_joins: on(3), share_long: on(4), pack: on(5) }
    }
}

/// The options as bits (`ExecOptions::SET` once initialised): one atomic load per read, since
/// every run reads `serial`.
static EXEC_OPTIONS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The executor's options now.
#[inline]
pub fn exec_options() -> ExecOptions {
    use std::sync::atomic::Ordering::Relaxed;
    match EXEC_OPTIONS.load(Relaxed) {
        0 => {
            let defaults = ExecOptions::default().bits();
            // A concurrent `set_exec_options` wins over the defaults.
            match EXEC_OPTIONS.compare_exchange(0, defaults, Relaxed, Relaxed) {
                Ok(_) => ExecOptions::from_bits(defaults),
                Err(set) => ExecOptions::from_bits(set),
            }
        }
        b => ExecOptions::from_bits(b),
    }
}

/// Replaces the executor's options, for the whole process.
pub fn set_exec_options(o: ExecOptions) {
    EXEC_OPTIONS.store(o.bits(), std::sync::atomic::Ordering::Relaxed);
}

#[inline]
pub(crate) fn serial() -> bool {
    exec_options().serial
}

#[inline]
pub(crate) fn replan() -> bool {
    exec_options().replan
}

#[inline]
pub(crate) fn split_joins() -> bool {
    exec_options().split_joins
}

#[inline]
pub(crate) fn share_long() -> bool {
    exec_options().share_long
}

#[inline]
pub(crate) fn pack() -> bool {
    exec_options().pack
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
#[inline]
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
