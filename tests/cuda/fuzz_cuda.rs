//! The graph fuzz's random programs with CUDA against the CPU: each program runs eagerly on the
//! CPU, eagerly on CUDA, and compiled on CUDA (a `janus::trace` replay, through a CUDA graph
//! from the second replay on); values and gradients must agree within `tol`.
//!
//! `JANUS_CUDA_FUZZ_PROGRAMS=N` runs N programs (default 2000) from seed
//! `JANUS_CUDA_FUZZ_FIRST` (default 0); `JANUS_CUDA_FUZZ_SECONDS=S` stops taking new seeds
//! after S seconds, and the count that ran is printed. They run on
//! `JANUS_CUDA_FUZZ_THREADS` threads (default: the cores, at most 8). A failure names the program, the
//! call, and for a panic its place and the janus frames of its backtrace.

#[path = "../fuzz/program.rs"]
#[allow(dead_code)]
mod program;

use super::{cuda, rel_error, tol};
use janus::prelude::*;
use program::{Program, generate, inputs, run};

fn grads_of(outs: &[Tensor], ins: &[Tensor], dtype: DType) -> Vec<Option<Tensor>> {
    let mut total: Option<Tensor> = None;
    for (k, o) in outs.iter().enumerate() {
        if o.dtype() == dtype && o.needs_grad() {
            let term = (o * (0.5 + 0.25 * k as f64)).sum_all();
            total = Some(match total {
                Some(t) => t + term,
                None => term,
            });
        }
    }
    match total {
        Some(t) => {
            let g = t.backward();
            ins.iter().map(|x| g.get(x).cloned()).collect()
        }
        None => vec![None; ins.len()],
    }
}

fn compare(what: &str, got: &[Tensor], want: &[Tensor], d: DType) -> Result<(), String> {
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let e = rel_error(g, w).map_err(|m| format!("{what} output {k}: {m}"))?;
        // Bool and integer outputs must match exactly; floats within tolerance (a comparison
        // of two nearly equal floats may flip, which the fuzz's value ranges make rare).
        if e > tol(d) * 10.0 {
            return Err(format!("{what} output {k}: relative error {e:e}"));
        }
    }
    Ok(())
}

fn check(p: &Program, dev: Device) -> Result<(), String> {
    program::set_device(Device::Cpu);
    let ins = inputs(p);
    janus::manual_seed(7);
    let want = run(p, &ins);
    let want_g = grads_of(&want, &ins, p.dtype);
    program::set_device(dev);
    let gins = inputs(p);
    janus::manual_seed(7);
    let eager = run(p, &gins);
    compare("eager cuda", &eager, &want, p.dtype)?;
    let f = trace(|x: &[Tensor]| run(p, x));
    for call in 0..3 {
        janus::manual_seed(7);
        let got = f.run(&gins);
        compare(&format!("compiled cuda (call {call})"), &got, &want, p.dtype)?;
        if call == 2 {
            let got_g = grads_of(&got, &gins, p.dtype);
            for (k, (a, b)) in got_g.iter().zip(&want_g).enumerate() {
                match (a, b) {
                    (Some(a), Some(b)) => compare(
                        &format!("gradient {k}"),
                        std::slice::from_ref(a),
                        std::slice::from_ref(b),
                        p.dtype,
                    )?,
                    (None, None) => {}
                    _ => return Err(format!("gradient {k}: present on one device only")),
                }
            }
        }
    }
    program::set_device(Device::Cpu);
    Ok(())
}

thread_local! {
    /// Where the last panic on this thread happened, and its backtrace's janus frames.
    static PANIC_AT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The frames of a backtrace inside janus (the failing program's path through the runtime).
fn janus_frames(bt: &std::backtrace::Backtrace) -> String {
    let text = bt.to_string();
    let frames: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("janus") && !l.contains("panicking") && !l.starts_with("at "))
        .take(12)
        .collect();
    frames.join("\n    ")
}

/// A caught panic's message and where it happened (recorded by the test's hook).
fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    let msg = e
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    format!("{msg} {}", PANIC_AT.with(|p| p.borrow().clone()))
}

#[test]
fn cuda_programs_match_the_cpu() {
    let Some(dev) = cuda() else { return };
    janus::set_self_check(false);
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let count = env("JANUS_CUDA_FUZZ_PROGRAMS").unwrap_or(2000);
    // A time budget (the GPU suite sets one): the programs run in seed order until it is spent,
    // and the count that ran is printed.
    let deadline =
        env("JANUS_CUDA_FUZZ_SECONDS").map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s));
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let bt = std::backtrace::Backtrace::force_capture();
        let at = info.location().map(|l| l.to_string()).unwrap_or_default();
        PANIC_AT.with(|p| *p.borrow_mut() = format!("at {at}\n    {}", janus_frames(&bt)));
    }));
    let first = env("JANUS_CUDA_FUZZ_FIRST").unwrap_or(0);
    // Programs run on several threads at once (NVRTC's compiles dominate; the device and its
    // stream are shared, as in any multithreaded user program), each taking the next seed.
    let threads = env("JANUS_CUDA_FUZZ_THREADS")
        .map(|t| t.max(1) as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)));
    let next = std::sync::atomic::AtomicU64::new(first);
    let results: std::sync::Mutex<Vec<(u64, Result<(), String>)>> = Default::default();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    if deadline.is_some_and(|d| std::time::Instant::now() > d) {
                        break;
                    }
                    let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if seed >= first + count {
                        break;
                    }
                    // A panic in the generator too is this seed's failure (and leaves the
                    // hook to be restored below).
                    let p = match std::panic::catch_unwind(|| generate(seed)) {
                        Ok(p) => p,
                        Err(e) => {
                            let why = format!("seed {seed}: the generator panicked: {}", panic_text(&*e));
                            results.lock().unwrap().push((seed, Err(why)));
                            continue;
                        }
                    };
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&p, dev)));
                    let r = r.unwrap_or_else(|e| Err(format!("panic: {}", panic_text(&*e))));
                    program::set_device(Device::Cpu);
                    results
                        .lock()
                        .unwrap()
                        .push((seed, r.map_err(|why| format!("seed {seed}: {why}\n{p:?}"))));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    let ran = results.len() as u64;
    let failing: Vec<u64> = results.iter().filter(|r| r.1.is_err()).map(|r| r.0).collect();
    let failures: Vec<String> = results.into_iter().filter_map(|r| r.1.err()).take(8).collect();
    std::panic::set_hook(hook);
    assert!(
        failures.is_empty(),
        "{} of {ran} programs fail (seeds {failing:?}); the first {}:\n\n{}",
        failing.len(),
        failures.len(),
        failures.join("\n\n")
    );
    println!("{ran} programs (seeds {first}..{}, {threads} threads): CUDA == CPU", first + ran);
}
