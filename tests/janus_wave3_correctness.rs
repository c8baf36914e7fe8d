//! Issue 51's silent wrong answers, each judged with the sampled self-check off so that only
//! the compiled path is judged: sizes read through accessors, host values read by helpers
//! (globals, thread-locals, loop bounds), a helper that reseeds the random stream, and the
//! order of host effects against the function written without the attribute.

use janus::prelude::*;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

fn close(a: &Tensor, b: &Tensor) -> bool {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    a.dims() == b.dims() && x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= 1e-6 * (1.0 + q.abs()))
}

#[track_caller]
fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert!(close(got, want), "{what}: janus {:?} vs eager {:?}", got.to_vec::<f64>(), want.to_vec::<f64>());
}

fn frag(name: &str) -> Vec<janus::rt::FragmentStats> {
    janus::stats().fragments.into_iter().filter(|f| f.name.starts_with(&format!("{name}#"))).collect()
}

/// Unchecked replays of any block (or the whole function) of `name`.
fn replays(name: &str) -> u64 {
    frag(name).iter().map(|f| f.hits - f.checks).sum()
}

// ---- 1. Sizes read through accessors ----

#[janus(min_ops = 1)]
fn scaled_by_hidden(cell: &nn::RnnCell, x: &Tensor, h: &Tensor) -> Tensor {
    let k = cell.hidden_size().min(8) as f64;
    cell.forward(x, h) * k
}

#[test]
fn a_size_read_through_an_accessor_is_a_guard_not_a_fitted_rule() {
    janus::set_self_check(false);
    janus::manual_seed(1);
    for (call, hidden) in [2, 2, 4, 4, 6, 6, 16, 16, 12, 3].into_iter().enumerate() {
        let cell = nn::RnnCell::new(3, hidden);
        let x = Tensor::randn([2, 3]);
        let h = Tensor::randn([2, hidden]);
        let want = janus::with_mode(Mode::Eager, || scaled_by_hidden(&cell, &x, &h));
        let got = scaled_by_hidden(&cell, &x, &h);
        assert_close(&format!("call {call}, hidden {hidden}"), &got, &want);
    }
    assert!(replays("scaled_by_hidden") > 0, "{}", janus::explain());
}

#[janus(min_ops = 1)]
#[allow(clippy::assign_op_pattern)] // the program as written
fn halved_when_wide(cell: &nn::RnnCell, x: &Tensor, h: &Tensor) -> Tensor {
    let mut y = cell.forward(x, h).tanh();
    if cell.hidden_size() > 8 {
        y = y * 0.5;
    }
    y.sum_all()
}

#[test]
fn a_host_decision_on_an_accessor_size_is_never_replayed_from_another_size() {
    janus::set_self_check(false);
    janus::manual_seed(2);
    for (call, hidden) in [2, 2, 2, 4, 4, 4, 6, 6, 6, 5, 12, 12, 12, 16, 7, 4, 16].into_iter().enumerate() {
        let cell = nn::RnnCell::new(5, hidden);
        let x = Tensor::randn([3, 5]);
        let h = Tensor::randn([3, hidden]);
        let want = janus::with_mode(Mode::Eager, || halved_when_wide(&cell, &x, &h));
        let got = halved_when_wide(&cell, &x, &h);
        assert_close(&format!("call {call}, hidden {hidden}"), &got, &want);
    }
    assert!(replays("halved_when_wide") > 0, "{}", janus::explain());
}

// ---- 2. Host values read by helpers ----

static TEMPERATURE_BITS: AtomicU64 = AtomicU64::new(0x3FF0_0000_0000_0000); // 1.0

fn temperature() -> f64 {
    f64::from_bits(TEMPERATURE_BITS.load(Ordering::Relaxed))
}

fn set_temperature(t: f64) {
    TEMPERATURE_BITS.store(t.to_bits(), Ordering::Relaxed);
}

#[janus(min_ops = 1)]
fn soften(logits: &Tensor) -> Tensor {
    let p = (logits / temperature()).softmax(-1);
    p
}

#[test]
fn a_scalar_a_helper_reads_from_a_global_is_read_on_every_call() {
    janus::set_self_check(false);
    janus::manual_seed(3);
    let logits = Tensor::randn([4, 5]);
    for call in 0..40 {
        set_temperature(if call < 12 {
            1.0
        } else if call < 30 {
            4.0
        } else {
            0.5
        });
        let want = janus::with_mode(Mode::Eager, || soften(&logits));
        assert_close(&format!("call {call}"), &soften(&logits), &want);
    }
    assert!(replays("soften") > 0, "{}", janus::explain());
}

thread_local! {
    static LOCAL_TEMPERATURE: Cell<f64> = const { Cell::new(1.0) };
}

fn local_temperature() -> f64 {
    LOCAL_TEMPERATURE.with(Cell::get)
}

#[janus(min_ops = 1)]
fn soften_local(logits: &Tensor) -> Tensor {
    let p = (logits * 2.0 / local_temperature()).softmax(-1);
    p
}

#[test]
fn a_thread_local_read_by_a_helper_is_per_thread() {
    janus::set_self_check(false);
    let logits = Tensor::randn([3, 4]);
    std::thread::scope(|s| {
        for t in [1.0, 3.0, 0.25] {
            let logits = logits.clone();
            s.spawn(move || {
                janus::set_self_check(false);
                LOCAL_TEMPERATURE.with(|c| c.set(t));
                for call in 0..30 {
                    let want = janus::with_mode(Mode::Eager, || soften_local(&logits));
                    assert_close(&format!("temperature {t}, call {call}"), &soften_local(&logits), &want);
                }
            });
        }
    });
    assert!(replays("soften_local") > 0, "{}", janus::explain());
}

static DEPTH: AtomicUsize = AtomicUsize::new(2);

fn depth() -> usize {
    DEPTH.load(Ordering::Relaxed)
}

#[janus(min_ops = 1)]
fn deep(x: &Tensor, w: &Tensor) -> Tensor {
    let mut h = x.clone();
    for _ in 0..depth() {
        h = h.matmul(w).tanh();
    }
    h
}

#[test]
fn a_loop_bound_a_helper_reads_from_a_global_is_read_on_every_call() {
    janus::set_self_check(false);
    janus::manual_seed(4);
    let (x, w) = (Tensor::randn([2, 3]), Tensor::randn([3, 3]));
    for call in 0..40 {
        DEPTH.store(
            if call < 10 {
                2
            } else if call < 25 {
                5
            } else {
                1
            },
            Ordering::Relaxed,
        );
        let want = janus::with_mode(Mode::Eager, || deep(&x, &w));
        assert_close(&format!("call {call}"), &deep(&x, &w), &want);
    }
    assert!(replays("deep") > 0, "{}", janus::explain());
}

fn reseed_for_noise() {
    janus::manual_seed(77);
}

#[janus(min_ops = 1)]
fn noisy(x: &Tensor) -> Tensor {
    reseed_for_noise();
    let y = x + Tensor::randn([2, 3]) * 0.1;
    y.tanh()
}

#[test]
fn a_helper_that_reseeds_inside_a_block_reseeds_on_every_call() {
    janus::set_self_check(false);
    let x = Tensor::ones([2, 3]);
    for call in 0..12 {
        janus::manual_seed(call);
        let want = janus::with_mode(Mode::Eager, || noisy(&x));
        let after_eager = Tensor::randn([4]);
        janus::manual_seed(call);
        let got = noisy(&x);
        let after_janus = Tensor::randn([4]);
        assert_close(&format!("call {call}"), &got, &want);
        assert_close(&format!("the caller's stream after call {call}"), &after_janus, &after_eager);
    }
}

// ---- 3. The order of host effects, against the function without the attribute ----

/// Defines `$name` with `#[janus]` and `$plain` from the same source without it.
macro_rules! with_and_without {
    ($name:ident, $plain:ident, fn ($($args:tt)*) -> $ret:ty $body:block) => {
        #[janus(min_ops = 1)]
        fn $name($($args)*) -> $ret $body
        fn $plain($($args)*) -> $ret $body
    };
}

fn thr(log: &mut Vec<&'static str>) -> f32 {
    log.push("thr");
    0.0
}

fn val(log: &mut Vec<&'static str>, x: &Tensor) -> Tensor {
    log.push("val");
    x.sum_all()
}

with_and_without!(ordered, ordered_plain, fn (log: &mut Vec<&'static str>, x: &Tensor) -> Tensor {
    let y = x.tanh() * 2.0;
    if thr(log) < val(log, &y).item() {
        log.push("then");
    }
    y.exp()
});

#[test]
fn a_host_comparison_evaluates_its_operands_in_source_order() {
    janus::set_self_check(false);
    for call in 0..10 {
        let x = Tensor::from_vec(vec![0.5f32 - call as f32 * 0.1, 0.25], [2]);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let a = ordered(&mut got, &x);
        let b = ordered_plain(&mut want, &x);
        assert_eq!(got, want, "call {call}");
        assert_close(&format!("call {call}"), &a, &b);
    }
}

static STEPS: AtomicUsize = AtomicUsize::new(0);

/// A helper with an effect (a counter) that returns a host value (one of three).
fn next_step() -> usize {
    STEPS.fetch_add(1, Ordering::Relaxed) % 3
}

with_and_without!(stepped, stepped_plain, fn (x: &Tensor) -> (Tensor, usize) {
    let h = x.tanh();
    let k = next_step();
    let y = h * (1.0 + k as f64);
    (y.exp(), k)
});

#[test]
fn a_helper_with_an_effect_runs_once_per_call_in_source_order() {
    janus::set_self_check(false);
    let x = Tensor::from_vec(vec![0.5f32, -0.25], [2]);
    for call in 0..30 {
        let before = STEPS.load(Ordering::Relaxed);
        let (a, k) = stepped(&x);
        assert_eq!(STEPS.load(Ordering::Relaxed), before + 1, "call {call}: the helper ran once");
        assert_eq!(k, before % 3);
        STEPS.store(before, Ordering::Relaxed);
        let (b, k2) = stepped_plain(&x);
        assert_eq!(k2, before % 3);
        assert_close(&format!("call {call}"), &a, &b);
    }
    assert!(replays("stepped") > 0, "{}", janus::explain());
}
