//! Shape-polymorphic variants: once two sizes of a key have compiled, new sizes get instances
//! of one generic graph instead of new compiles, and every guard on them holds: fixed dims,
//! equal dims, sizes of 1, and sizes read on the host.

use janus::prelude::*;

fn frag(name: &str) -> janus::rt::FragmentStats {
    janus::stats().function(name).next().cloned().unwrap_or_else(|| panic!("no fragment `{name}`"))
}

fn assert_same(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.dims(), b.dims(), "{what}: shapes");
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    for (k, (p, q)) in x.iter().zip(&y).enumerate() {
        assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()), "{what}: element {k}: {p} vs eager {q}");
    }
}

#[derive(Module, Clone)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

#[janus(min_ops = 1)]
fn train_step(net: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let logits = net.l2.forward(&net.l1.forward(x).tanh());
    let loss = logits.cross_entropy(y);
    let grads = loss.backward();
    opt.step(net, &grads);
    loss.item()
}

#[test]
fn a_training_step_over_changing_batch_sizes_equals_eager_with_two_compiles() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    janus::manual_seed(3);
    let mut net = Mlp { l1: nn::Linear::new(6, 16), l2: nn::Linear::new(16, 3) };
    let mut eager_net = net.clone();
    let (mut opt, mut eager_opt) = (optim::Adam::new(0.01), optim::Adam::new(0.01));
    let batches = [8usize, 8, 8, 12, 12, 12, 5, 20, 8, 33, 7, 12, 64, 9, 5, 3, 1, 1];
    for (step, &b) in batches.iter().enumerate() {
        let x = Tensor::randn([b, 6]);
        let y = x.sum(1).gt_scalar(0.0).to_dtype(DType::I64);
        let got = train_step(&mut net, &mut opt, &x, &y);
        let want = janus::with_mode(Mode::Eager, || train_step(&mut eager_net, &mut eager_opt, &x, &y));
        assert!(
            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "step {step} (batch {b}): loss {got} vs eager {want}"
        );
        assert_same(&net.l1.weight, &eager_net.l1.weight, &format!("step {step}: l1.weight"));
        assert_same(
            net.l2.bias.as_ref().unwrap(),
            eager_net.l2.bias.as_ref().unwrap(),
            &format!("step {step}: l2.bias"),
        );
    }
    let f = frag("train_step");
    let explain = janus::explain();
    assert!(f.dynamic_dims.as_deref().is_some_and(|d| d.contains("generalised over 1")), "{explain}");
    // Batch 8 and 12 compile; each later new batch size (5, 20, 33, 7, 64, 9, 3) is an
    // instance of their graph (5, the first, after a recording that matched it). Batch 1 is
    // validated by a recording too, which differs (a sum's gradient broadcasts [1, 3] to
    // itself, which records nothing), so it compiles.
    assert_eq!((f.compiles, f.instances), (3, 7), "{explain}");
    assert!(f.hits >= 8, "the compiled graphs and instances replayed: {explain}");
    assert!(explain.contains("instance(s)"), "{explain}");
}

#[janus(min_ops = 1, speculate = false)]
fn add_rows(a: &Tensor, b: &Tensor) -> Tensor {
    let y = (a + b) * 2.0;
    y
}

#[test]
fn a_size_of_one_broadcasts_and_never_replays_an_unvalidated_instance() {
    janus::set_self_check(false);
    let check = |n: usize, m: usize| {
        let a = Tensor::randn([n, 3]);
        let b = Tensor::randn([m, 3]);
        let want = janus::with_mode(Mode::Eager, || add_rows(&a, &b));
        assert_same(&add_rows(&a, &b), &want, &format!("a [{n}, 3] + b [{m}, 3]"));
    };
    // `a` and `b` share their rows: one symbol.
    for (n, m) in [(2, 2), (2, 2), (2, 2), (5, 5), (5, 5), (5, 5), (7, 7), (9, 9)] {
        check(n, m);
    }
    let f = frag("add_rows");
    assert!(f.instances >= 2 && f.hits >= 4, "{}", janus::explain());
    // `b` with one row broadcasts: the symbol's dims differ, so no instance serves it.
    for (n, m) in [(4, 1), (4, 1), (4, 1), (6, 1), (1, 4), (3, 3), (1, 1), (1, 1), (1, 1)] {
        check(n, m);
    }
}

#[janus(min_ops = 1, speculate = false)]
fn scaled_by_rows(x: &Tensor) -> Tensor {
    // A size read on the host, turned into a constant no graph size shows.
    let y = x * (1.0 + (x.dims()[0] > 10) as u8 as f64);
    y
}

#[test]
fn a_size_read_on_the_host_is_validated_by_a_recording_per_size() {
    janus::set_self_check(false);
    // 4 and 6 compile and generalise; 8 and 3 record once each and match the generic graph
    // (scale 1); 20 records a scale of 2, which the generic graph does not have: it compiles.
    for n in [4usize, 4, 4, 6, 6, 6, 8, 8, 20, 20, 3, 3, 20] {
        let x = Tensor::ones([n, 2]);
        let want = if n > 10 { 2.0 } else { 1.0 };
        assert_eq!(scaled_by_rows(&x).to_vec::<f32>(), vec![want; n * 2], "{n} rows");
    }
    let f = frag("scaled_by_rows");
    let explain = janus::explain();
    assert_eq!((f.compiles, f.instances), (3, 2), "{explain}");
    assert!(f.hits >= 3, "{explain}");
    let note = f.dynamic_dims.unwrap_or_default();
    assert!(note.contains("validated by one recording"), "{note}");
}

#[janus(min_ops = 1, speculate = false)]
fn mean_rows(x: &Tensor, w: &Tensor) -> Tensor {
    // The mean's 1/n is a size-derived constant inside the graph.
    let y = x.matmul(w).tanh().mean(0);
    y
}

#[test]
fn size_derived_constants_follow_the_sizes() {
    janus::set_self_check(false);
    let w = Tensor::randn([5, 4]);
    for n in [3usize, 3, 3, 6, 6, 6, 11, 2, 17, 6, 40] {
        let x = Tensor::randn([n, 5]);
        let want = janus::with_mode(Mode::Eager, || mean_rows(&x, &w));
        assert_same(&mean_rows(&x, &w), &want, &format!("{n} rows"));
    }
    let f = frag("mean_rows");
    assert!(f.instances >= 4 && f.hits >= 4, "{}", janus::explain());
}

#[janus(min_ops = 1, speculate = false, dynamic_dims = false)]
fn specialised(x: &Tensor) -> Tensor {
    let y = (x * 3.0).exp();
    y
}

#[test]
fn dynamic_dims_false_compiles_every_size() {
    janus::set_self_check(false);
    for n in [2usize, 2, 2, 3, 3, 3, 4, 4, 4] {
        let x = Tensor::ones([n]);
        assert_same(&specialised(&x), &(&x * 3.0).exp(), &format!("{n}"));
    }
    let f = frag("specialised");
    assert_eq!((f.instances, f.compiles), (0, 3), "{}", janus::explain());
    assert!(f.hits >= 3, "{}", janus::explain());
    assert!(f.dynamic_dims.is_none());
}

static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A host counter: a constant that changes on every call, for reasons other than sizes.
fn counter() -> f64 {
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as f64 + 1.0
}

#[janus(min_ops = 1, speculate = false)]
fn impure(x: &Tensor) -> Tensor {
    let y = (x * counter()).exp();
    y
}

#[test]
fn a_constant_that_moves_between_sizes_is_not_taken_for_a_size() {
    janus::set_self_check(false);
    // The counter runs 1, 2, 3, ... while sizes change: no two recordings agree, so nothing
    // compiles and every call sees its own counter, as without the attribute. (A counter that
    // happened to follow the sizes, 1, 2, 3 at sizes 4, 8, 12, would be taken for `n / 4`:
    // impure constants are outside the tracing contract, see the README's "Limitations".)
    for (k, n) in [4usize, 9, 5, 13, 6, 6, 7, 7, 7, 11, 3].into_iter().enumerate() {
        let before = CALLS.load(std::sync::atomic::Ordering::Relaxed);
        let x = Tensor::ones([n]) * 0.01;
        let got = impure(&x).to_vec::<f32>();
        let c = (before + 1) as f32;
        assert!(
            got.iter().all(|v| (v - (0.01 * c).exp()).abs() < 1e-5),
            "call {k} ({n}): {got:?} vs counter {c}"
        );
    }
    assert_eq!(frag("impure").compiles, 0, "{}", janus::explain());
}
