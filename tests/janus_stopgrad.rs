//! Autograd boundaries inside staged blocks (issue 9, items 1 and 2): `detach()`, `no_grad`, a
//! `backward()` inside a block, fresh leaves made with `requires_grad()` (also of a module
//! field), an input returned detached, and a fresh leaf returned twice. Each case runs eagerly
//! and staged over several keys and at least 8 calls per key, compares values and gradients,
//! and asserts that unchecked replays happened (the sampled self-check is turned off, so a
//! replay's results are the compiled graph's own).

use janus::prelude::*;

fn close(a: &Tensor, b: &Tensor) -> bool {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    a.dims() == b.dims() && x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= 1e-5 * (1.0 + q.abs()))
}

#[track_caller]
fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert!(close(got, want), "{what}: janus {:?} vs eager {:?}", got.to_vec::<f64>(), want.to_vec::<f64>());
}

/// Inputs of several keys (shapes and dtypes), in a cycle.
fn input(call: usize) -> Tensor {
    let shapes: [&[usize]; 3] = [&[3], &[2, 4], &[5]];
    let s = shapes[call % 3];
    let n: usize = s.iter().product();
    let v: Vec<f64> = (0..n).map(|i| 0.3 + 0.1 * i as f64 - 0.05 * call as f64).collect();
    let t = Tensor::from_vec(v, s);
    if call.is_multiple_of(2) { t } else { t.to_dtype(DType::F32) }
}

/// Unchecked replays of `function` so far.
fn replays(function: &str) -> u64 {
    janus::stats().function(function).map(|f| f.hits - f.checks).sum()
}

#[track_caller]
fn assert_replayed(function: &str) {
    assert!(replays(function) > 0, "no replay of `{function}`:\n{}", janus::explain());
}

/// `run` eagerly and staged on the same leaf, for 48 calls over six keys (8 each); `check` compares.
fn eager_vs_janus<R>(run: impl Fn(&Tensor) -> R, check: impl Fn(usize, &Tensor, R, &Tensor, R)) {
    janus::set_self_check(false);
    for call in 0..48 {
        let x = input(call);
        let (xe, xj) = (x.clone().requires_grad(), x.requires_grad());
        let want = janus::with_mode(Mode::Eager, || run(&xe));
        let got = run(&xj);
        check(call, &xj, got, &xe, want);
    }
}

#[janus(min_ops = 1)]
fn detached_square(x: &Tensor) -> Tensor {
    let sg = x.detach();
    let loss = (x * &sg).sum_all();
    loss
}

#[test]
fn detach_stops_the_gradient_inside_a_block() {
    eager_vs_janus(detached_square, |call, xj, got, xe, want| {
        assert_close("loss", &got, &want);
        let (gj, ge) = (got.backward(), want.backward());
        assert_close(&format!("call {call}: d/dx"), gj.get(xj).unwrap(), ge.get(xe).unwrap());
        assert_close("d/dx is x, not 2x", gj.get(xj).unwrap(), &xe.detach());
    });
    assert_replayed("detached_square");
}

#[janus(min_ops = 1)]
fn no_grad_inside(x: &Tensor) -> Tensor {
    let c = no_grad(|| x.square() + 1.0);
    let loss = (x * &c).sum_all();
    loss
}

#[test]
fn no_grad_inside_a_block_stops_the_gradient() {
    eager_vs_janus(no_grad_inside, |call, xj, got, xe, want| {
        assert_close("loss", &got, &want);
        let (gj, ge) = (got.backward(), want.backward());
        assert_close(&format!("call {call}: d/dx = x^2 + 1"), gj.get(xj).unwrap(), ge.get(xe).unwrap());
    });
    assert_replayed("no_grad_inside");
}

/// A first-order meta step: the inner gradient is a constant to the outer one.
fn inner_step(w: &Tensor, x: &Tensor) -> Tensor {
    let inner = (w * x).square().sum_all();
    let g = inner.backward();
    let gw = g.get(w).expect("the inner loss depends on w").clone();
    w - gw * 0.1
}

#[janus(min_ops = 1)]
fn meta_loss(w: &Tensor, x: &Tensor) -> Tensor {
    let adapted = inner_step(w, x);
    let loss = (&adapted * x).tanh().sum_all();
    loss
}

#[test]
fn backward_inside_a_block_leaks_no_second_order_term() {
    eager_vs_janus(
        |w| meta_loss(w, &(w.detach() * 0.5 + 0.25)),
        |call, wj, got, we, want| {
            assert_close("loss", &got, &want);
            let (gj, ge) = (got.backward(), want.backward());
            assert_close(&format!("call {call}: d/dw"), gj.get(wj).unwrap(), ge.get(we).unwrap());
        },
    );
    assert_replayed("meta_loss");
}

#[janus(min_ops = 1)]
fn fresh_leaf(x: &Tensor) -> (Tensor, Tensor) {
    let w = (x * 2.0).requires_grad();
    let loss = (&w * x).sum_all();
    (loss, w)
}

#[test]
fn a_fresh_leaf_inside_a_block_gets_its_gradient_and_cuts_its_source() {
    eager_vs_janus(fresh_leaf, |call, xj, (lj, wj), xe, (le, we)| {
        assert_close("loss", &lj, &le);
        assert!(wj.is_leaf() && wj.needs_grad(), "call {call}: w is a leaf");
        let (gj, ge) = (lj.backward(), le.backward());
        // d/dx = w (2x), not 4x: w is a leaf, not a function of x.
        assert_close(&format!("call {call}: d/dx"), gj.get(xj).unwrap(), ge.get(xe).unwrap());
        assert_close(
            &format!("call {call}: d/dw"),
            gj.get(&wj).expect("w gets a gradient"),
            ge.get(&we).unwrap(),
        );
    });
    assert_replayed("fresh_leaf");
}

#[derive(Module, Clone)]
struct Net {
    w: Tensor,
}

#[janus(min_ops = 1)]
fn relearn(m: &mut Net, x: &Tensor) -> Tensor {
    m.w = m.w.detach().requires_grad();
    let loss = x.matmul(&m.w).tanh().sum_all();
    loss
}

#[test]
fn a_module_field_made_a_fresh_leaf_gets_its_gradient() {
    janus::set_self_check(false);
    for call in 0..48 {
        let (rows, k) = [(2, 3), (4, 3), (2, 5)][call % 3];
        let x = Tensor::from_vec((0..rows * k).map(|i| 0.1 * i as f32 - 0.2).collect::<Vec<_>>(), [rows, k]);
        let w = Tensor::from_vec((0..k * 2).map(|i| 0.3 - 0.05 * i as f32).collect::<Vec<_>>(), [k, 2]);
        let mut me = Net { w: w.clone() };
        let mut mj = Net { w };
        let le = janus::with_mode(Mode::Eager, || relearn(&mut me, &x));
        let lj = relearn(&mut mj, &x);
        assert_close("loss", &lj, &le);
        let (gj, ge) = (lj.backward(), le.backward());
        let got = gj.get(&mj.w).unwrap_or_else(|| panic!("call {call}: m.w has no gradient"));
        assert_close(&format!("call {call}: d/dw"), got, ge.get(&me.w).unwrap());
    }
    assert_replayed("relearn");
}

#[janus(min_ops = 1)]
fn detached_input(h: &Tensor) -> (Tensor, Tensor) {
    let y = h.tanh() * 2.0;
    let d = h.detach();
    (y, d)
}

#[test]
fn an_input_returned_detached_has_no_history() {
    eager_vs_janus(
        |x| {
            let h = x * 3.0; // history behind the block's input
            let (y, d) = detached_input(&h);
            (y.sum_all() + (&d * &d).sum_all(), d)
        },
        |call, xj, (lj, dj), xe, (le, de)| {
            assert!(!dj.needs_grad() && !de.needs_grad(), "call {call}: the detached output has no history");
            assert_close("loss", &lj, &le);
            let (gj, ge) = (lj.backward(), le.backward());
            assert_close(&format!("call {call}: d/dx"), gj.get(xj).unwrap(), ge.get(xe).unwrap());
        },
    );
    assert_replayed("detached_input");
}

#[janus(min_ops = 1)]
fn leaf_twice(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let w = (x + 1.0).requires_grad();
    let loss = (&w * x).sum_all();
    (loss, w.clone(), w)
}

#[test]
fn a_fresh_leaf_returned_twice_is_one_tensor() {
    eager_vs_janus(leaf_twice, |call, xj, (lj, aj, bj), xe, (le, ae, be)| {
        assert!(ae.same(&be), "eager: one tensor");
        assert!(aj.same(&bj), "call {call}: the two outputs are the same tensor");
        let (gj, ge) = (lj.backward(), le.backward());
        assert_close(
            &format!("call {call}: d/dalias"),
            gj.get(&bj).expect("alias has a gradient"),
            ge.get(&be).unwrap(),
        );
        assert_close(&format!("call {call}: d/dx"), gj.get(xj).unwrap(), ge.get(xe).unwrap());
    });
    assert_replayed("leaf_twice");
}

#[derive(Module, Clone)]
struct ThreeLayers {
    a: Tensor,
    b: Tensor,
    c: Tensor,
}

/// A whole SGD step (a helper, so that `backward()` runs inside the block): the weight
/// gradients are summed by GEMMs that `backward()` runs inside the recording, which must come
/// out in the same order on every call.
fn sgd(m: &ThreeLayers, x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let loss = x.matmul(&m.a).tanh().matmul(&m.b).tanh().matmul(&m.c).sum_all();
    let g = loss.backward();
    let step = |w: &Tensor| (w - g.get(w).unwrap() * 0.1).detach();
    (step(&m.a), step(&m.b), step(&m.c))
}

#[janus(min_ops = 1)]
fn sgd_inside(m: &ThreeLayers, x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let out = sgd(m, x);
    out
}

#[test]
fn a_block_that_sums_weight_gradients_records_the_same_graph_every_call() {
    janus::set_self_check(false);
    let w = |r: usize, c: usize, s: f32| {
        Tensor::from_vec((0..r * c).map(|i| s * ((i % 7) as f32 - 3.0)).collect::<Vec<_>>(), [r, c])
            .requires_grad()
    };
    let mut me = ThreeLayers { a: w(3, 4, 0.1), b: w(4, 4, 0.05), c: w(4, 2, 0.2) };
    let mut mj = me.clone();
    for call in 0..10 {
        let x = Tensor::from_vec((0..6).map(|i| 0.1 * (i + call) as f32).collect::<Vec<_>>(), [2, 3]);
        let (ae, be, ce) = janus::with_mode(Mode::Eager, || sgd_inside(&me, &x));
        let (aj, bj, cj) = sgd_inside(&mj, &x);
        for (got, want) in [(&aj, &ae), (&bj, &be), (&cj, &ce)] {
            assert_close(&format!("call {call}"), got, want);
        }
        me = ThreeLayers { a: ae.requires_grad(), b: be.requires_grad(), c: ce.requires_grad() };
        mj = ThreeLayers { a: aj.requires_grad(), b: bj.requires_grad(), c: cj.requires_grad() };
    }
    assert_replayed("sgd_inside");
}
