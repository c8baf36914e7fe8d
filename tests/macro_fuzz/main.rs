//! Differential fuzz of the macro: random `#[janus]` functions (see `generator.rs`; the generated
//! source is checked in under `generated/`) run in janus mode over several calls each, so that
//! profiling, recording, compiling and replaying all happen, against two references: the same
//! function in eager mode, and the same source *without* the attribute (`f3_plain`), which is
//! the only reference for evaluation order and host effects, since the attribute's expansion
//! runs in eager mode too. Outputs, the mutated module and the gradients of the inputs and the
//! module must agree within 1e-9 relative (f64), the host effects' log exactly, and check mode
//! must accept every function. The host helpers read values that change between calls.

#[cfg(not(janus_macro_fuzz_large))]
#[rustfmt::skip] // generated; `generated_files_are_current` pins its exact text
mod generated;
/// The large setting: `JANUS_MACRO_FUZZ_FUNCTIONS=N` when building the tests (see `build.rs`).
#[cfg(janus_macro_fuzz_large)]
#[rustfmt::skip]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/macro_fuzz_large.rs"));
}
mod generator;

use janus::prelude::*;
use std::cell::{Cell, RefCell};

/// The module the generated functions update through `&mut`.
#[derive(Module, Clone)]
pub struct P {
    pub w: Tensor,
    pub b: Tensor,
}

/// The generated functions' signature.
pub type Generated = fn(&Tensor, &Tensor, &mut P, usize, f64) -> (Tensor, Tensor, Vec<Tensor>);

/// Helpers the generated code calls: a plain function, one returning a pair, two writing
/// through `&mut`.
pub fn mix(a: &Tensor, b: &Tensor) -> Tensor {
    (a - b).tanh() * 0.5 + a * 0.25
}

pub fn pair(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    ((a + b).tanh(), (a * b).sigmoid())
}

pub fn bump(a: &mut Tensor, b: &Tensor) {
    *a = (&*a + b).tanh();
}

pub fn decay(m: &mut P) {
    m.w = &m.w * 0.99;
    m.b = (&m.b + 0.01).tanh();
}

thread_local! {
    /// The host effects of a call, in order.
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// What `knob()` reads: changed between calls, invisible to the macro but for the call.
    static KNOB: Cell<f64> = const { Cell::new(1.0) };
    /// What `depth()` reads.
    static DEPTH: Cell<usize> = const { Cell::new(1) };
}

/// Host helpers the generated code calls: a value read from a global, a loop bound, and
/// calls with effects on the log (one also returns a value, one is compared with a host
/// read).
pub fn knob() -> f64 {
    KNOB.with(Cell::get)
}

pub fn depth() -> usize {
    DEPTH.with(Cell::get)
}

pub fn note(tag: usize) -> f64 {
    LOG.with(|l| l.borrow_mut().push(format!("note {tag}")));
    1.0 + knob() * tag as f64 * 0.1
}

pub fn thr(tag: usize) -> f32 {
    LOG.with(|l| l.borrow_mut().push(format!("thr {tag}")));
    0.1 * tag as f32 - 0.3
}

pub fn say(tag: usize) {
    LOG.with(|l| l.borrow_mut().push(format!("say {tag}")));
}

fn take_log() -> Vec<String> {
    LOG.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

const SEED: u64 = 1;
/// The functions checked in (the large setting generates more from the same seed).
const COUNT: usize = 80;

/// One call: `n`, `s`, the data seed, and what `knob()` and `depth()` read.
type Call = (usize, f64, u64, f64, usize);

/// The calls: repeated keys (so variants compile and replay), a new loop count, a new host
/// scalar (a recompile, or a runtime input under `dynamic(s)`), and helper values that change
/// while every argument stays the same (calls 4, 6 and 9).
const CALLS: [Call; 10] = [
    (2, 0.5, 1, 1.0, 1),
    (2, 0.5, 2, 1.0, 1),
    (2, 0.5, 3, 1.0, 1),
    (2, 0.5, 4, 0.5, 1),
    (2, 0.5, 5, 0.5, 1),
    (3, 0.5, 5, 0.5, 2),
    (1, 0.5, 6, 0.5, 2),
    (2, 0.75, 7, 1.0, 1),
    (2, 0.5, 8, 1.0, 1),
    (2, 0.5, 9, 1.0, 3),
];

fn data(seed: u64) -> (Tensor, Tensor, P) {
    janus::manual_seed(seed);
    let t = |r: usize, c: usize| Tensor::randn_dtype([r, c], DType::F64);
    (t(2, 4), t(2, 4), P { w: t(4, 4) * 0.5, b: Tensor::randn_dtype([4], DType::F64) * 0.1 })
}

/// Everything a call produces: outputs, the module after it, and the gradients of a weighted
/// sum of the outputs with respect to `x`, `m.w` and `m.b` (as they were before the call);
/// and its host effects, in order.
fn run(f: Generated, &(n, s, seed, knob, depth): &Call) -> (Vec<(String, Tensor)>, Vec<String>) {
    KNOB.with(|k| k.set(knob));
    DEPTH.with(|d| d.set(depth));
    take_log();
    let out = outputs(f, seed, n, s);
    (out, take_log())
}

fn outputs(f: Generated, seed: u64, n: usize, s: f64) -> Vec<(String, Tensor)> {
    let (x, y, p) = data(seed);
    let x = x.requires_grad();
    let mut m = P { w: p.w.requires_grad(), b: p.b.requires_grad() };
    let leaves = [("x", x.clone()), ("w", m.w.clone()), ("b", m.b.clone())];
    let (a, b, hs) = f(&x, &y, &mut m, n, s);
    let mut out = vec![("a".to_string(), a.clone()), ("b".to_string(), b.clone())];
    out.extend(hs.iter().enumerate().map(|(k, h)| (format!("hs[{k}]"), h.clone())));
    out.push(("m.w after".into(), m.w.clone()));
    out.push(("m.b after".into(), m.b.clone()));
    let mut loss = a.sum_all() + b.sum_all() * 0.5 + m.w.sum_all() * 0.25 + m.b.sum_all();
    for h in &hs {
        loss += h.sum_all() * 0.75;
    }
    if loss.needs_grad() {
        let grads = loss.backward();
        for (name, l) in &leaves {
            if let Some(g) = grads.get(l) {
                out.push((format!("d{name}"), g.clone()));
            }
        }
    }
    out.into_iter().map(|(k, t)| (k, t.detach())).collect()
}

fn max_rel(got: &Tensor, want: &Tensor) -> f64 {
    if got.dims() != want.dims() {
        return f64::INFINITY;
    }
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    let scale = w.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
    g.iter().zip(&w).map(|(a, b)| if a == b { 0.0 } else { (a - b).abs() / scale }).fold(0.0, f64::max)
}

fn generated_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/macro_fuzz/generated")
}

/// The source of generated function `name`, for failure messages.
fn source(name: &str) -> String {
    for (_, all) in generator::generate(SEED, generated::FUNCTIONS.len()) {
        if let Some(start) = all.find(&format!("pub fn {name}(")) {
            let start = all[..start].rfind("#[janus").unwrap_or(start);
            let end = all[start..].find("\n}\n").map_or(all.len(), |e| start + e + 3);
            return all[start..end].to_string();
        }
    }
    format!("(no source for {name})")
}

#[test]
#[cfg(not(janus_macro_fuzz_large))]
fn generated_files_are_current() {
    let bless = std::env::var("JANUS_BLESS").is_ok_and(|v| v == "1");
    for (file, want) in generator::generate(SEED, COUNT) {
        let path = generated_dir().join(&file);
        if bless {
            std::fs::create_dir_all(generated_dir()).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            got == want,
            "{} is stale: rerun with JANUS_BLESS=1 after changing generator.rs",
            path.display()
        );
    }
}

/// Asserts that `got` equals `want` (named `reference`), outputs within 1e-9 and effects exactly.
fn assert_agree(
    (name, call, reference): (&str, usize, &str),
    got: &(Vec<(String, Tensor)>, Vec<String>),
    want: &(Vec<(String, Tensor)>, Vec<String>),
) {
    let names = |v: &[(String, Tensor)]| v.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    let (n, s) = (CALLS[call].0, CALLS[call].1);
    assert_eq!(
        names(&got.0),
        names(&want.0),
        "{name}, call {call}: results differ from {reference}\n{}",
        source(name)
    );
    for ((k, g), (_, w)) in got.0.iter().zip(&want.0) {
        let err = max_rel(g, w);
        assert!(
            err <= 1e-9,
            "{name}, call {call} (n={n}, s={s}): `{k}` differs from {reference} by {err:e}\n{}\n{}",
            source(name),
            janus::explain()
        );
    }
    assert_eq!(got.1, want.1, "{name}, call {call}: host effects differ from {reference}\n{}", source(name));
}

#[test]
fn janus_agrees_with_eager_and_with_the_function_without_the_attribute() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    for &(name, f, plain) in generated::FUNCTIONS {
        for (call, c) in CALLS.iter().enumerate() {
            let got = run(f, c);
            let eager = janus::with_mode(Mode::Eager, || run(f, c));
            assert_agree((name, call, "eager mode"), &got, &eager);
            assert_agree((name, call, "the function without the attribute"), &got, &run(plain, c));
        }
        // Check mode compares every replay with the statements: it must accept them all.
        janus::with_mode(Mode::Check, || run(f, &(2, 0.5, 9, 1.0, 1)));
    }
    // The comparison means something only if most functions really ran compiled code. (With
    // speculation on, a function that keeps failing its asserts spends several of its 8 calls
    // profiling, at the function level and then in its blocks.)
    let stats = janus::stats();
    let replayed =
        generated::FUNCTIONS.iter().filter(|(name, ..)| stats.function(name).any(|s| s.hits > 0)).count();
    assert!(
        replayed * 10 >= generated::FUNCTIONS.len() * 8,
        "only {replayed} of {} functions replayed a compiled block\n{}",
        generated::FUNCTIONS.len(),
        janus::explain()
    );
    // Speculation is on: whole functions replayed, and some of their asserts failed (the
    // calls' data flips `if x.item() > t` decisions), all matching eager above.
    let whole = |f: &janus::rt::FragmentStats| f.name.ends_with("#fn");
    let speculated = stats.fragments.iter().filter(|f| whole(f) && f.hits > 0).count();
    let failures: u64 = stats.fragments.iter().filter(|f| whole(f)).map(|f| f.assert_failures).sum();
    println!("{speculated} functions replayed as one speculative graph; {failures} assert failures");
    assert!(
        speculated * 4 >= generated::FUNCTIONS.len(),
        "only {speculated} speculated\n{}",
        janus::explain()
    );
    assert!(failures > 0, "no assert failed: the fuzz does not exercise a failed speculation");
}
