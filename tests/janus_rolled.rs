//! Loops whose trip count changes between calls, and loops too long to unroll, compile as loop
//! nodes: the loop's body once, its trip count a size (calls of new lengths key their
//! sequences stacked, so the length generalises like any dimension). Loops that do not roll
//! run on the host, their body staged. Values and gradients equal eager mode's at every call.

use janus::EagerKind;
use janus::prelude::*;

#[derive(Module, Clone)]
struct Rnn {
    wx: Tensor,
    wh: Tensor,
    b: Tensor,
}

impl Rnn {
    fn new() -> Rnn {
        Rnn {
            wx: (Tensor::randn([3, 8]) * 0.3).requires_grad(),
            wh: (Tensor::randn([8, 8]) * 0.3).requires_grad(),
            b: Tensor::zeros([8]).requires_grad(),
        }
    }
}

// Indexing `xs[t]` is how a staged loop reads a sequence (the body's input is `xs[t]`).
#[allow(clippy::needless_range_loop)]
#[janus(min_ops = 1)]
fn final_state(m: &Rnn, xs: &[Tensor], h0: &Tensor) -> Tensor {
    let mut h = h0.clone();
    for t in 0..xs.len() {
        h = (xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b).tanh();
    }
    (&h * h.sigmoid()).sum_all()
}

fn frag(name: &str) -> Vec<janus::rt::FragmentStats> {
    janus::stats().function(name).cloned().collect()
}

fn close(a: &Tensor, b: &Tensor, what: &str) {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    assert_eq!(x.len(), y.len(), "{what}");
    for (p, q) in x.iter().zip(&y) {
        assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()), "{what}: {p} vs eager {q}");
    }
}

fn check(m: &Rnn, t: usize, b: usize, step: usize) {
    let xs: Vec<Tensor> = (0..t).map(|_| Tensor::randn([b, 3])).collect();
    let h0 = Tensor::zeros([b, 8]);
    let got = final_state(m, &xs, &h0);
    let g = got.backward();
    let want = janus::with_mode(Mode::Eager, || final_state(m, &xs, &h0));
    let w = want.backward();
    close(&got, &want, &format!("step {step} (T={t}, B={b}): value"));
    for (name, p) in [("wx", &m.wx), ("wh", &m.wh), ("b", &m.b)] {
        close(g.get(p).unwrap(), w.get(p).unwrap(), &format!("step {step} (T={t}, B={b}): d{name}"));
    }
}

/// The stream of `(trip count, batch)` the first tests run: sizes come back, as in an epoch of
/// a bucketed dataset.
const STREAM: [(usize, usize); 20] = [
    (5, 4),
    (5, 4),
    (5, 4),
    (9, 4),
    (3, 6),
    (12, 5),
    (7, 4),
    (40, 9),
    (5, 4),
    (12, 5),
    (7, 4),
    (30, 2),
    (40, 9),
    (30, 2),
    (12, 5),
    (7, 4),
    (8, 8),
    (40, 9),
    (8, 8),
    (30, 2),
];

#[test]
fn a_loop_whose_trip_count_varies_rolls_into_one_graph_for_every_length() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    janus::manual_seed(5);
    let m = Rnn::new();
    for (step, &(t, b)) in STREAM.iter().enumerate() {
        check(&m, t, b, step);
    }
    let explain = janus::explain();
    let fs = frag("final_state");
    let by_name =
        |n: &str| fs.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("no {n}: {explain}")).clone();
    // T=5 compiles unrolled (the whole function); 9 and 3 record; from the fourth length on,
    // calls key `xs` stacked and their loop rolls: (12, 5) and (7, 4) compile, and the graph
    // generalises over the length and the batch. Later sizes run on the host the first time
    // they come, are validated by a recording the second time, and replay an instance after.
    let whole = by_name("final_state#fn");
    assert_eq!(whole.compiles, 3, "{explain}");
    assert_eq!(whole.instances, 3, "(40, 9), (30, 2) and (8, 8): {explain}");
    assert!(whole.hits >= 8, "{explain}");
    assert!(explain.contains("xs.dims()[0] = s0"), "the length is a symbol: {explain}");
    let host = whole.eager_runs.get(&EagerKind::Rolled).copied().unwrap_or(0);
    assert!((1..=3).contains(&host), "new sizes once at most: {explain}");
}

// `hs` grows by one state per trip: no two trips output alike, so the loop cannot roll.
#[allow(clippy::needless_range_loop)]
#[janus(min_ops = 1, speculate = false)]
fn all_states(m: &Rnn, xs: &[Tensor], h0: &Tensor) -> Tensor {
    let mut hs = vec![h0.clone()];
    for t in 0..xs.len() {
        hs.push((xs[t].matmul(&m.wx) + hs[t].matmul(&m.wh) + &m.b).tanh());
    }
    let refs: Vec<&Tensor> = hs.iter().collect();
    Tensor::stack(&refs, 0).square().sum_all()
}

#[test]
fn a_loop_that_does_not_roll_runs_on_the_host() {
    janus::set_self_check(false);
    janus::manual_seed(6);
    let m = Rnn::new();
    for (step, &(t, b)) in STREAM.iter().enumerate() {
        let xs: Vec<Tensor> = (0..t).map(|_| Tensor::randn([b, 3])).collect();
        let h0 = Tensor::zeros([b, 8]);
        let got = all_states(&m, &xs, &h0);
        let g = got.backward();
        let want = janus::with_mode(Mode::Eager, || all_states(&m, &xs, &h0));
        let w = want.backward();
        close(&got, &want, &format!("step {step}: value"));
        for p in [&m.wx, &m.wh, &m.b] {
            close(g.get(p).unwrap(), w.get(p).unwrap(), &format!("step {step}: gradient"));
        }
    }
    let explain = janus::explain();
    let fs = frag("all_states");
    let block = fs.iter().find(|f| f.name == "all_states#1").expect("the loop's block");
    assert!(block.eager.keys().any(|why| why.contains("its loop did not roll")), "{explain}");
    assert!(block.eager_runs[&EagerKind::Rolled] >= 8, "{explain}");
}

#[allow(clippy::needless_range_loop)]
#[janus(min_ops = 1, speculate = false)]
fn long_sum(xs: &[Tensor]) -> Tensor {
    let mut acc = xs[0].clone();
    for t in 1..xs.len() {
        acc = (acc * 0.5 + &xs[t]).tanh();
    }
    acc
}

#[test]
fn a_loop_too_long_to_unroll_compiles_rolled() {
    janus::set_self_check(false);
    let xs: Vec<Tensor> = (0..6000).map(|k| Tensor::ones([2]) * (k % 7) as f64 * 0.1).collect();
    for _ in 0..4 {
        let got = long_sum(&xs);
        let want = janus::with_mode(Mode::Eager, || long_sum(&xs));
        close(&got, &want, "6000 trips");
    }
    let explain = janus::explain();
    let fs = frag("long_sum");
    let block = fs.iter().find(|f| f.name == "long_sum#1").expect("the loop's block");
    assert_eq!((block.compiles, block.hits), (1, 2), "{explain}");
    // One replay stands for the 5999 trips' ops (a multiply, an add and a tanh each).
    assert!(block.staged_ops >= 3 * 5999, "{explain}");
    assert!(!explain.contains("loop too long to unroll"), "{explain}");
}

#[allow(clippy::needless_range_loop)]
#[janus(min_ops = 1, speculate = false)]
fn rnn_loss_f64(wx: &Tensor, wh: &Tensor, xs: &[Tensor]) -> Tensor {
    let mut h = xs[0].matmul(wx).tanh();
    for t in 1..xs.len() {
        h = (xs[t].matmul(wx) + h.matmul(wh)).tanh();
    }
    h.square().sum_all()
}

#[test]
fn gradients_through_a_rolled_loop_match_finite_differences_in_f64() {
    janus::set_self_check(false);
    janus::manual_seed(9);
    let wx = (Tensor::randn_dtype([3, 4], DType::F64) * 0.5).requires_grad();
    let wh = (Tensor::randn_dtype([4, 4], DType::F64) * 0.5).requires_grad();
    // From the fourth trip count on, the loop rolls: two lengths compile, the rest run on the
    // host once, then validate and replay instances of one graph.
    for (k, t) in [3usize, 4, 5, 6, 7, 6, 8, 9, 8, 9, 8, 7].into_iter().enumerate() {
        let xs: Vec<Tensor> = (0..t).map(|_| Tensor::randn_dtype([2, 3], DType::F64)).collect();
        let g = rnn_loss_f64(&wx, &wh, &xs).backward();
        let f = |w: &[f64], which: usize| {
            let p = Tensor::from_vec(w.to_vec(), if which == 0 { [3, 4] } else { [4, 4] });
            let (a, b) = if which == 0 { (&p, &wh) } else { (&wx, &p) };
            janus::with_mode(Mode::Eager, || no_grad(|| rnn_loss_f64(a, b, &xs))).to_vec::<f64>()[0]
        };
        for (which, w) in [&wx, &wh].into_iter().enumerate() {
            let base = w.to_vec::<f64>();
            let analytic = g.get(w).unwrap().to_vec::<f64>();
            for i in 0..base.len() {
                let (mut up, mut down) = (base.clone(), base.clone());
                up[i] += 1e-6;
                down[i] -= 1e-6;
                let numeric = (f(&up, which) - f(&down, which)) / 2e-6;
                let err = (analytic[i] - numeric).abs() / (1.0 + numeric.abs());
                assert!(err < 1e-6, "call {k} (T={t}), weight {which}[{i}]: {} vs {numeric}", analytic[i]);
            }
        }
    }
    let explain = janus::explain();
    let block =
        frag("rnn_loss_f64").into_iter().find(|f| f.name == "rnn_loss_f64#1").expect("the loop's block");
    assert!(block.compiles <= 2 && block.instances >= 2, "{explain}");
    assert!(block.hits >= 2, "the rolled calls replayed a loop graph: {explain}");
}
