//! Keys, guards and the hard cases (see docs/design.md, "Keys" and "Guards and fallback"):
//! changing shapes and the variant limit, aliasing, grad mode, opaque inputs, closures, host
//! scalars, in-out locals, impure constants, inline recursion, panics inside a recording, and
//! dynamic scalars.
//! (The functions here pin the fragment path, `speculate = false`: whole-function speculation
//! is tested in `janus_speculate.rs` and by the macro fuzz.)

use janus::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>()
}

fn close(a: &Tensor, b: &Tensor) -> bool {
    let (x, y) = (vals(a), vals(b));
    x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= 1e-6 * (1.0 + q.abs()))
}

fn frag(name: &str) -> Vec<janus::rt::FragmentStats> {
    janus::stats().function(name).cloned().collect()
}

// Sizes generalise by default (`tests/janus_dynamic_dims.rs`); here each shape is its own key.
#[janus(max_variants = 3, min_ops = 1, speculate = false, dynamic_dims = false)]
fn scaled_tanh(x: &Tensor) -> Tensor {
    let y = (x * 1.5).tanh() + 0.5;
    y
}

#[test]
fn changing_shapes_compile_variants_up_to_the_limit() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let shapes = [[2, 3], [4, 3], [2, 5], [7, 1], [9, 9]];
    for round in 0..4 {
        for s in shapes {
            let x = Tensor::ones(s) * 0.25;
            assert!(close(&scaled_tanh(&x), &((&x * 1.5).tanh() + 0.5)), "round {round} shape {s:?}");
        }
    }
    let f = &frag("scaled_tanh")[0];
    assert_eq!(f.variants, 3, "{}", janus::explain());
    assert!(f.hits >= 3, "old variants keep serving their keys: {}", janus::explain());
    let limit = f.eager_runs.get(&janus::rt::EagerKind::VariantLimit).copied().unwrap_or(0);
    assert_eq!(limit, 8, "two unseen shapes, four rounds: {}", janus::explain());
    assert!(janus::explain().contains("variant limit (3) reached: the shape of `x` differs between calls"));
}

#[janus(min_ops = 1, speculate = false)]
fn affine(a: &Tensor, b: &Tensor) -> Tensor {
    let y = a * 2.0 + b;
    y
}

#[test]
fn aliased_inputs_get_their_own_variant() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let w = Tensor::from_vec(vec![1.0f32, 2.0], [2]);
    let v = Tensor::from_vec(vec![10.0f32, 20.0], [2]);
    for _ in 0..4 {
        assert_eq!(vals(&affine(&w, &w)), [3.0, 6.0]);
    }
    for _ in 0..4 {
        assert_eq!(vals(&affine(&w, &v)), [12.0, 24.0]);
        assert_eq!(vals(&affine(&w, &w)), [3.0, 6.0]);
    }
    assert_eq!(frag("affine")[0].variants, 2, "{}", janus::explain());
}

#[janus(min_ops = 1, speculate = false)]
fn cubed(x: &Tensor) -> Tensor {
    let y = x.tanh() * x.square();
    y
}

#[test]
fn no_grad_variants_never_serve_calls_that_need_gradients() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::from_vec(vec![0.3f64, -0.7], [2]).requires_grad();
    for _ in 0..4 {
        let y = no_grad(|| cubed(&x));
        assert!(!y.needs_grad());
    }
    for _ in 0..4 {
        let y = cubed(&x);
        let g = y.sum_all().backward();
        let e = janus::with_mode(Mode::Eager, || cubed(&x)).sum_all().backward();
        assert!(close(g.get(&x).unwrap(), e.get(&x).unwrap()));
    }
    assert_eq!(frag("cubed")[0].variants, 2, "{}", janus::explain());
}

#[janus(min_ops = 1, speculate = false)]
fn gated(w: &Tensor, h: &Tensor) -> Tensor {
    let y = (h.matmul(w)).tanh() * h.sigmoid();
    y
}

#[test]
fn a_call_needing_fewer_gradients_replays_the_graph_of_a_call_needing_more() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let w = Tensor::from_vec(vec![0.5f64, -0.2, 0.1, 0.9], [2, 2]).requires_grad();
    let hw = Tensor::from_vec(vec![0.3f64, -0.7, 1.1, 0.4], [2, 2]).requires_grad();
    // `h` with a gradient first (an RNN's later steps): compiled.
    for _ in 0..3 {
        let g = gated(&w, &hw).sum_all().backward();
        let e = janus::with_mode(Mode::Eager, || gated(&w, &hw)).sum_all().backward();
        assert!(close(g.get(&w).unwrap(), e.get(&w).unwrap()));
        assert!(close(g.get(&hw).unwrap(), e.get(&hw).unwrap()));
    }
    // Then `h` without one (the zero state of the first step): that graph serves it, its
    // gradient for `h` dropped, and `w`'s equal to eager mode's.
    let h0 = Tensor::from_vec(vec![0.0f64, 0.5, -0.5, 0.25], [2, 2]);
    for _ in 0..3 {
        let y = gated(&w, &h0);
        let g = y.sum_all().backward();
        let e = janus::with_mode(Mode::Eager, || gated(&w, &h0));
        assert!(close(&y, &e));
        assert!(close(g.get(&w).unwrap(), e.sum_all().backward().get(&w).unwrap()));
        assert!(g.get(&h0).is_none(), "no gradient for a tensor that needs none");
    }
    let f = &frag("gated")[0];
    assert_eq!(f.compiles, 1, "{}", janus::explain());
    assert!(f.hits >= 4, "{}", janus::explain());
}

#[janus(min_ops = 1, speculate = false)]
fn squashed(w: &Tensor, h: &Tensor) -> (Tensor, Tensor) {
    let a = h.tanh() * h.sigmoid();
    let b = h.matmul(w).tanh();
    (a, b)
}

#[test]
fn an_output_that_would_lose_its_history_keeps_its_own_graph() {
    janus::set_self_check(false);
    let w = Tensor::from_vec(vec![0.5f64, -0.2, 0.1, 0.9], [2, 2]).requires_grad();
    let hw = Tensor::from_vec(vec![0.3f64, -0.7, 1.1, 0.4], [2, 2]).requires_grad();
    for _ in 0..3 {
        let (a, _) = squashed(&w, &hw);
        assert!(a.needs_grad());
    }
    // Without a gradient for `h`, `a` has no history in eager mode: the graph compiled for
    // `h` with one would give it one, so this key compiles its own.
    let h0 = Tensor::from_vec(vec![0.0f64, 0.5, -0.5, 0.25], [2, 2]);
    for _ in 0..3 {
        let (a, b) = squashed(&w, &h0);
        assert!(!a.needs_grad(), "eager mode gives `a` no history");
        assert!(b.needs_grad());
        let (ea, eb) = janus::with_mode(Mode::Eager, || squashed(&w, &h0));
        assert!(close(&a, &ea) && close(&b, &eb));
    }
    assert_eq!(frag("squashed")[0].compiles, 2, "{}", janus::explain());
    assert!(frag("squashed")[0].hits >= 2, "both keys replay: {}", janus::explain());
}

/// Host state a graph cannot key: an RNG.
struct Lcg(u64);
impl Lcg {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[janus(min_ops = 1, speculate = false)]
fn jitter(x: &Tensor, rng: &mut Lcg) -> Tensor {
    let y = x + rng.next_f64();
    y
}

#[test]
fn opaque_inputs_run_eagerly_and_host_state_advances() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::zeros([2]);
    let mut rng = Lcg(1);
    let mut reference = Lcg(1);
    for _ in 0..6 {
        let y = jitter(&x, &mut rng);
        let want = reference.next_f64();
        assert!((vals(&y)[0] - want).abs() < 1e-6);
    }
    let f = &frag("jitter")[0];
    assert_eq!(f.hits, 0);
    assert!(f.eager_runs.contains_key(&janus::rt::EagerKind::Opaque), "{}", janus::explain());
    assert!(
        f.eager.keys().any(|r| r.contains("opaque input `rng`")),
        "the reason names it: {}",
        janus::explain()
    );
}

#[janus(min_ops = 1, speculate = false)]
fn closures_and_iterators(xs: &[Tensor], scale: f64) -> Tensor {
    let sq = |t: &Tensor| t.square() * scale;
    let parts: Vec<Tensor> = xs.iter().map(sq).collect();
    parts.iter().fold(Tensor::zeros([2]), |acc, p| acc + p)
}

#[test]
fn closure_and_iterator_chain_in_a_static_block() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let xs = vec![Tensor::from_vec(vec![1.0f32, 2.0], [2]), Tensor::from_vec(vec![3.0f32, -1.0], [2])];
    for _ in 0..4 {
        assert_eq!(vals(&closures_and_iterators(&xs, 0.5)), [5.0, 2.5]);
    }
    assert!(frag("closures_and_iterators").iter().any(|f| f.hits > 0), "{}", janus::explain());
}

#[janus(max_variants = 4, min_ops = 1, speculate = false)]
fn sgd_constant_lr(w: &Tensor, g: &Tensor, lr: f64) -> Tensor {
    let w2 = w - g * lr;
    w2
}

#[janus(min_ops = 1, dynamic(lr), speculate = false)]
fn sgd_dynamic_lr(w: &Tensor, g: &Tensor, lr: f64) -> Tensor {
    let w2 = w - g * lr;
    w2
}

#[test]
fn host_scalars_key_the_cache_unless_dynamic() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let w = Tensor::from_vec(vec![1.0f64, 2.0], [2]);
    let g = Tensor::from_vec(vec![0.5f64, -1.0], [2]);
    for k in 0..12 {
        let lr = 0.1 / (1.0 + k as f64);
        let want = [1.0 - 0.5 * lr, 2.0 + lr];
        assert_eq!(vals(&sgd_constant_lr(&w, &g, lr)), want);
        assert_eq!(vals(&sgd_dynamic_lr(&w, &g, lr)), want);
    }
    let constant = &frag("sgd_constant_lr")[0];
    assert_eq!(constant.variants, 0, "a new key every call never agrees twice: {}", janus::explain());
    assert!(janus::explain().contains("the value of `lr` differs between calls"), "{}", janus::explain());
    let dynamic = &frag("sgd_dynamic_lr")[0];
    assert_eq!((dynamic.variants, dynamic.compiles), (1, 1), "{}", janus::explain());
    assert_eq!(dynamic.hits, 10);
}

#[janus(min_ops = 1, speculate = false)]
#[allow(clippy::needless_range_loop)] // indexing `xs[t]` is the point: places as inputs
fn collect_states(xs: &[Tensor]) -> Vec<Tensor> {
    let mut hs = Vec::new();
    let mut h = Tensor::zeros([2]);
    for t in 0..xs.len() {
        h = (&h + &xs[t]).tanh();
        hs.push(h.clone());
    }
    hs
}

#[test]
fn in_out_locals_are_restored_on_replay() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let xs: Vec<Tensor> = (0..6).map(|k| Tensor::full([2], k as f64 * 0.1)).collect();
    let want = janus::with_mode(Mode::Eager, || collect_states(&xs));
    for _ in 0..3 {
        let got = collect_states(&xs);
        assert_eq!(got.len(), 6);
        assert!(got.iter().zip(&want).all(|(a, b)| close(a, b)));
    }
    assert!(frag("collect_states").iter().any(|f| f.hits > 0), "{}", janus::explain());
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn next_count() -> f64 {
    COUNTER.fetch_add(1, Ordering::SeqCst) as f64
}

/// A helper the macro cannot see into: it returns a tensor, built from a counter.
fn counted_shift(x: &Tensor) -> Tensor {
    x + next_count()
}

#[janus(min_ops = 1, speculate = false)]
fn impure(x: &Tensor) -> Tensor {
    let y = counted_shift(x) * 1.0;
    y
}

#[janus(min_ops = 1, speculate = false)]
fn impure_scalar(x: &Tensor) -> Tensor {
    let y = x + next_count();
    y
}

#[test]
fn constants_from_impure_code_are_never_baked_in() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::zeros([1]);
    let start = COUNTER.load(Ordering::SeqCst) as f64;
    for k in 0..6 {
        assert_eq!(vals(&impure(&x)), [start + k as f64]);
    }
    let f = &frag("impure")[0];
    assert_eq!(f.variants, 0);
    assert!(
        f.eager.keys().any(|r| r.contains("constant changed between calls at tests/janus_keys.rs")),
        "{}",
        janus::explain()
    );
    // A helper returning the scalar itself is read on every call: the block runs split around
    // the call (`impure_scalar#0.1` takes its value as a keyed input) and never replays a
    // stale value.
    let start = COUNTER.load(Ordering::SeqCst) as f64;
    for k in 0..6 {
        assert_eq!(vals(&impure_scalar(&x)), [start + k as f64]);
    }
    let fs = frag("impure_scalar");
    assert!(fs.iter().all(|f| f.hits == 0), "{}", janus::explain());
    assert!(fs.iter().any(|f| f.name == "impure_scalar#0.1" && f.calls == 5), "{}", janus::explain());
}

#[janus(min_ops = 1, speculate = false)]
fn inner_cell(h: &Tensor) -> Tensor {
    let y = (h * 0.5).tanh();
    y
}

#[janus(min_ops = 1, speculate = false)]
fn outer_cell(h: &Tensor) -> Tensor {
    let a = inner_cell(h) + 1.0;
    let b = inner_cell(&a) * 2.0;
    b
}

#[test]
fn janus_functions_called_inside_a_recording_record_inline() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let h = Tensor::from_vec(vec![0.2f32, -0.4], [2]);
    let want = janus::with_mode(Mode::Eager, || outer_cell(&h));
    for _ in 0..5 {
        assert!(close(&outer_cell(&h), &want));
    }
    let outer = &frag("outer_cell")[0];
    let inner = &frag("inner_cell")[0];
    assert!(outer.hits >= 3, "{}", janus::explain());
    // The inner function ran only while the outer block recorded (twice per recording), inline.
    assert_eq!(inner.hits, 0, "{}", janus::explain());
    assert_eq!(
        inner.eager_runs.get(&janus::rt::EagerKind::Recorded),
        Some(&(2 * outer.traces)),
        "{}",
        janus::explain()
    );
}

#[janus(min_ops = 1, speculate = false)]
fn maybe_bad(x: &Tensor, y: &Tensor) -> Tensor {
    let z = (x + y).exp();
    z
}

#[test]
fn a_panic_inside_a_recording_leaves_later_calls_correct() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::ones([3]);
    let bad = Tensor::ones([4]);
    for _ in 0..3 {
        let r = std::panic::catch_unwind(|| maybe_bad(&x, &bad));
        assert!(r.is_err());
        let y = maybe_bad(&x, &x);
        assert!(close(&y, &(&x + &x).exp()));
    }
    assert!(frag("maybe_bad")[0].hits >= 1, "{}", janus::explain());
    // Ordinary ops still work on this thread: no recording was left active.
    assert_eq!(vals(&(&x * 2.0)), [2.0, 2.0, 2.0]);
}

/// Two ops on small tensors: a replay would cost more than it saves.
#[janus(speculate = false)]
fn tiny(x: &Tensor) -> Tensor {
    (x * 2.0).tanh()
}

#[test]
fn blocks_too_small_to_pay_off_run_eagerly_and_large_ones_compile() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let small = Tensor::from_vec(vec![0.5f32, -1.0], [2]);
    for _ in 0..5 {
        assert!(close(&tiny(&small), &(&small * 2.0).tanh()));
    }
    let f = &frag("tiny")[0];
    assert_eq!((f.hits, f.variants), (0, 0), "{}", janus::explain());
    assert!(janus::explain().contains("too small to gain from compiling: 2 op(s)"), "{}", janus::explain());

    // The same two ops on 8192 elements compile (one pass over memory instead of two); the
    // decision is per block, so it takes a block that has not met small inputs.
    let large = Tensor::randn([8192]);
    for _ in 0..5 {
        assert!(close(&tiny_large(&large), &(&large * 2.0).tanh()));
    }
    assert!(frag("tiny_large")[0].hits > 0, "{}", janus::explain());
}

#[janus(speculate = false)]
fn tiny_large(x: &Tensor) -> Tensor {
    (x * 2.0).tanh()
}

/// A module with host fields next to its tensors: a depth that sets a staged loop's trip
/// count, and a scale baked into the graph as a constant.
#[derive(Module, Clone)]
struct Deep {
    w: Tensor,
    depth: usize,
    scale: f64,
}

#[janus(min_ops = 1, speculate = false)]
fn deep(m: &Deep, x: &Tensor) -> Tensor {
    let mut h = x * m.scale;
    for _ in 0..m.depth {
        h = h.matmul(&m.w).tanh();
    }
    h
}

#[test]
fn host_fields_of_a_module_key_the_cache_including_loop_trip_counts() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    janus::manual_seed(3);
    let x = Tensor::randn_dtype([2, 3], DType::F64);
    let mut m = Deep { w: Tensor::randn_dtype([3, 3], DType::F64), depth: 1, scale: 1.0 };
    for k in 0..24 {
        m.depth = 1 + k % 3;
        m.scale = 0.5 + (k % 2) as f64;
        let want = janus::with_mode(Mode::Eager, || deep(&m, &x));
        assert!(close(&deep(&m, &x), &want), "call {k}: depth {} scale {}", m.depth, m.scale);
    }
    let f = &frag("deep")[0];
    assert_eq!(f.variants, 6, "one graph per (depth, scale)");
    assert!(f.hits >= 6, "{} hits", f.hits);
}

#[janus(min_ops = 1, max_variants = 1, speculate = false)]
fn one_variant(x: &Tensor) -> Tensor {
    let y = x.tanh() * x.square();
    y
}

#[test]
fn the_variant_limit_names_what_changed_when_no_input_did() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::from_vec(vec![0.3f64, -0.7], [2]).requires_grad();
    for _ in 0..3 {
        no_grad(|| one_variant(&x));
    }
    let want = janus::with_mode(Mode::Eager, || one_variant(&x));
    let y = one_variant(&x); // needs gradients: a new key, past the limit
    assert!(close(&y, &want) && y.needs_grad());
    let f = &frag("one_variant")[0];
    assert!(
        f.eager.keys().any(|r| r.contains("variant limit (1) reached: inputs as before, but grad flags")),
        "{}",
        janus::explain()
    );
}

#[janus(min_ops = 1, speculate = false)]
fn shifted(x: &Tensor, k: i64) -> Tensor {
    let y = (x + k as f64).tanh() * 2.0;
    y
}

#[test]
fn negative_and_non_negative_integers_are_different_keys() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::from_vec(vec![0.5f64, -0.25], [2]);
    // -1 and 0, -2 and 1 once shared a key word (the high half of the i128 folded in).
    for k in [0, 0, 0, -1, -1, 1, -2, -2, 1] {
        let want = janus::with_mode(Mode::Eager, || shifted(&x, k));
        assert!(close(&shifted(&x, k), &want), "k = {k}");
    }
}

#[janus(max_variants = 8, min_ops = 1, speculate = false, dynamic_dims = false)]
fn scaled_sum(x: &Tensor, y: &Tensor, k: f64) -> Tensor {
    let z = x * k + y;
    z
}

/// A thread memoises its last hits per block and compares a call with the memoised keys
/// without building its own: every kind of key change must still miss the memo, and a reset
/// of the caches must drop it.
#[test]
fn memoised_hits_follow_every_key_change() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let a = Tensor::from_vec(vec![1.0f32, 2.0], [2]);
    let b = Tensor::from_vec(vec![10.0f32, 20.0], [2]);
    let wide = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]);
    let wide_b = Tensor::from_vec(vec![5.0f32, 6.0, 7.0], [3]);
    let a64 = Tensor::from_vec(vec![1.0f64, 2.0], [2]);
    let b64 = Tensor::from_vec(vec![10.0f64, 20.0], [2]);
    let g = Tensor::from_vec(vec![1.0f32, 2.0], [2]).requires_grad();
    // Calls that differ in a shape, a dtype, a host scalar, aliasing and grad flags, each
    // made often enough to compile and then interleaved, so two-way memo slots keep evicting.
    let calls: [(&Tensor, &Tensor, f64, [f64; 3]); 6] = [
        (&a, &b, 2.0, [12.0, 24.0, 0.0]),
        (&wide, &wide_b, 2.0, [7.0, 10.0, 13.0]),
        (&a64, &b64, 2.0, [12.0, 24.0, 0.0]),
        (&a, &b, 3.0, [13.0, 26.0, 0.0]),
        (&a, &a, 2.0, [3.0, 6.0, 0.0]),
        (&g, &b, 2.0, [12.0, 24.0, 0.0]),
    ];
    let check = |round: usize| {
        for (k, (x, y, s, want)) in calls.iter().enumerate() {
            for _ in 0..3 {
                let got = vals(&scaled_sum(x, y, *s));
                assert_eq!(got, want[..got.len()], "round {round}, call {k}");
            }
        }
    };
    for round in 0..3 {
        check(round);
    }
    let hits = frag("scaled_sum")[0].hits;
    assert!(hits >= 6 * 3, "every key replays: {}", janus::explain());
    // The gradient flows through the memoised replay of the grad-flagged key.
    let grads = scaled_sum(&g, &b, 2.0).sum_all().backward();
    assert_eq!(vals(grads.get(&g).unwrap()), [2.0, 2.0]);
    // A reset empties the variant table: the memo must not serve the old graphs.
    janus::reset_caches();
    check(3);
    let after = frag("scaled_sum")[0].clone();
    assert!(after.traces > 0, "the reset's calls record again: {}", janus::explain());
    assert!(after.hits > 0, "and the new graphs replay: {}", janus::explain());
    // Another thread has its own memo and the same answers.
    std::thread::scope(|s| {
        s.spawn(|| check(4));
    });
}

#[janus(min_ops = 1, speculate = false)]
fn mix(p: &(Tensor, Tensor), c: &Tensor, d: &Tensor) -> Tensor {
    let y = &p.0 * 2.0 + &p.1 * 3.0 + c * 5.0 + d * 7.0;
    y
}

/// A replay passes each distinct leaf once, in order of first occurrence, moved out of the
/// probes: aliases across inputs and inside a tuple, and leaves after an alias.
#[test]
fn aliases_across_inputs_replay_their_distinct_leaves_in_order() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let t = |x: f32| Tensor::from_vec(vec![x, 10.0 * x], [2]);
    let (a, b, c) = (t(1.0), t(2.0), t(3.0));
    let cases = [
        ((a.clone(), b.clone()), a.clone(), c.clone()), // leaves a b a c
        ((a.clone(), b.clone()), b.clone(), a.clone()), // a b b a
        ((a.clone(), a.clone()), c.clone(), a.clone()), // a a c a
        ((a.clone(), b.clone()), c.clone(), b.clone()), // a b c b
    ];
    for round in 0..4 {
        for (k, (p, c, d)) in cases.iter().enumerate() {
            let want = janus::with_mode(Mode::Eager, || mix(p, c, d));
            assert_eq!(vals(&mix(p, c, d)), vals(&want), "case {k}, round {round}");
        }
    }
    let f = &frag("mix")[0];
    assert_eq!(f.variants, 4, "{}", janus::explain());
    assert!(f.hits >= 8, "the aliased keys replayed: {}", janus::explain());
}
