//! An LSTM over a `Vec<Tensor>` sequence with `backward()` after the time loop, the loop both
//! unrolled into one block and on the host: equal to eager mode and to the PyTorch reference
//! numbers; on the host, the loop body over `xs[t]` compiles at most two variants for 32 time
//! steps (inputs are places: see docs/design.md, "Scope analysis: inputs and outputs").
//! (The functions here pin the fragment path, `speculate = false`: whole-function speculation
//! is tested in `janus_speculate.rs` and by the macro fuzz.)

use janus::prelude::*;

#[derive(Module, Clone)]
struct Lstm {
    wx: Tensor,
    wh: Tensor,
    b: Tensor,
    wy: Tensor,
    by: Tensor,
}

/// The loss and gradients of an LSTM LM, defined twice: with the time loop unrolled into one
/// block (the default) and with it on the host, its body a block of its own.
macro_rules! loss_and_grads {
    ($name:ident, $($opt:tt)*) => {
        #[janus(speculate = false, $($opt)*)]
        fn $name(m: &Lstm, xs: &[Tensor], ys: &[Tensor]) -> (f64, Vec<Tensor>) {
            let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
            let dtype = m.wh.dtype();
            let mut h = Tensor::zeros_dtype([bsz, hid], dtype);
            let mut c = Tensor::zeros_dtype([bsz, hid], dtype);
            let mut loss = Tensor::scalar_dtype(0.0, dtype);
            for t in 0..xs.len() {
                let g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
                let [i, f, gg, o] = g.chunk::<4>(1);
                c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
                h = o.sigmoid() * c.tanh();
                loss += (h.matmul(&m.wy) + &m.by).cross_entropy(&ys[t]);
            }
            let loss = loss / xs.len() as f64;
            let grads = loss.backward();
            let gs = vec![&m.wx, &m.wh, &m.b, &m.wy, &m.by]
                .into_iter()
                .map(|p| grads.get(p).unwrap().clone())
                .collect();
            (loss.item_f64(), gs)
        }
    };
}
loss_and_grads!(loss_and_grads,);
loss_and_grads!(loss_and_grads_host_loop, unroll = false);

fn closed_form(dtype: DType) -> (Lstm, Vec<Tensor>, Vec<Tensor>) {
    let (t_len, b, v, h) = (3, 2, 5, 4);
    let p = |rows: usize, cols: usize, f: &dyn Fn(f64, f64) -> f64| {
        let vals: Vec<f64> = (0..rows * cols).map(|k| f((k / cols) as f64, (k % cols) as f64)).collect();
        let shape: Vec<usize> = if rows == 1 { vec![cols] } else { vec![rows, cols] };
        Tensor::from_vec(vals, shape).to_dtype(dtype).requires_grad()
    };
    let m = Lstm {
        wx: p(v, 4 * h, &|i, j| 0.1 * (7.0 * i + 3.0 * j + 1.0).sin()),
        wh: p(h, 4 * h, &|i, j| 0.1 * (5.0 * i + 11.0 * j + 2.0).cos()),
        b: p(1, 4 * h, &|_, j| 0.05 * (3.0 * j + 0.5).sin()),
        wy: p(h, v, &|i, j| 0.1 * (2.0 * i + 13.0 * j + 3.0).sin()),
        by: p(1, v, &|_, j| 0.05 * (j + 0.25).cos()),
    };
    let tok = |t: usize| {
        Tensor::from_vec(
            (0..b).map(|bb| ((7 * t + 13 * bb + (t * bb) % 5) % v) as i64).collect::<Vec<_>>(),
            [b],
        )
    };
    let xs = (0..t_len).map(|t| tok(t).one_hot_dtype(v, dtype)).collect();
    let ys = (0..t_len).map(|t| tok(t + 1)).collect();
    (m, xs, ys)
}

fn norm(t: &Tensor) -> f64 {
    t.to_vec::<f64>().iter().map(|v| v * v).sum::<f64>().sqrt()
}

#[test]
fn matches_eager_and_pytorch_over_many_calls() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let want_norms = [
        6.663382311345195e-03,
        3.5537792159304856e-05,
        8.218633092877688e-03,
        8.500274869945847e-03,
        3.684207014362452e-01,
    ];
    type LossFn = fn(&Lstm, &[Tensor], &[Tensor]) -> (f64, Vec<Tensor>);
    let fns: [(&str, LossFn); 2] =
        [("loss_and_grads", loss_and_grads), ("loss_and_grads_host_loop", loss_and_grads_host_loop)];
    for (name, f) in fns {
        for (dtype, tol) in [(DType::F64, 1e-9), (DType::F32, 1e-5)] {
            let (m, xs, ys) = closed_form(dtype);
            let (le, ge) = janus::with_mode(Mode::Eager, || f(&m, &xs, &ys));
            for call in 0..6 {
                let (l, g) = f(&m, &xs, &ys);
                let rel = |a: f64, b: f64| ((a - b) / b).abs();
                assert!(rel(l, 1.6152220273211306) <= tol, "{name} {dtype} call {call}: loss {l}");
                assert!(rel(l, le) <= tol, "{name} {dtype} call {call}: janus {l} vs eager {le}");
                for (k, (gj, gw)) in g.iter().zip(&ge).enumerate() {
                    let n = norm(gj);
                    assert!(rel(n, want_norms[k]) <= tol, "{name} {dtype} call {call}: |grad {k}| {n}");
                    assert!(rel(n, norm(gw)) <= tol.max(1e-12));
                }
            }
        }
        // The forward graph(s) replayed, and backward ran through them.
        let hits: u64 = janus::stats().function(name).map(|f| f.hits).sum();
        assert!(hits > 0, "{name}: {}", janus::explain());
    }
    // Unrolled, the loop and the loss are one block; on the host, the body is its own block
    // and replays once per time step (3 steps).
    let s = janus::stats();
    let most = |name: &str| s.function(name).map(|f| f.hits).max().unwrap_or(0);
    assert!(most("loss_and_grads_host_loop") >= 3 * most("loss_and_grads"), "{}", janus::explain());
}

/// An LSTM forward pass, defined twice. Indexing `xs[t]` is the point: a place read from
/// outside the block (see docs/design.md, "Scope analysis: inputs and outputs").
/// `lstm_forward` (`unroll = false`) keeps the loop on the host, so its body is a block of its
/// own; `lstm_forward_staged` (the default) stages the loop inside the block, which records it
/// unrolled as one graph.
macro_rules! lstm_forward {
    ($name:ident, $($opt:tt)*) => {
        #[allow(clippy::needless_range_loop)]
        #[janus(speculate = false, $($opt)*)]
        fn $name(m: &Lstm, xs: &[Tensor]) -> Tensor {
            let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
            let mut h = Tensor::zeros([bsz, hid]);
            let mut c = Tensor::zeros([bsz, hid]);
            for t in 0..xs.len() {
                let g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
                let [i, f, gg, o] = g.chunk::<4>(1);
                c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
                h = o.sigmoid() * c.tanh();
            }
            h
        }
    };
}
lstm_forward!(lstm_forward, unroll = false);
lstm_forward!(lstm_forward_staged,);

/// A small LSTM (input 7, hidden 4) and `len` random inputs of batch 3.
fn small_lstm(seed: u64, len: usize) -> (Lstm, Vec<Tensor>) {
    janus::manual_seed(seed);
    let m = Lstm {
        wx: Tensor::randn([7, 16]) * 0.3,
        wh: Tensor::randn([4, 16]) * 0.3,
        b: Tensor::zeros([16]),
        wy: Tensor::zeros([4, 7]),
        by: Tensor::zeros([7]),
    };
    (m, (0..len).map(|_| Tensor::randn([3, 7])).collect())
}

fn max_err(a: &Tensor, b: &Tensor) -> f32 {
    a.to_vec::<f32>().iter().zip(b.to_vec::<f32>()).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn loop_body_over_xs_t_compiles_at_most_two_variants_for_32_steps() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let (m, xs) = small_lstm(4, 32);
    let want = janus::with_mode(Mode::Eager, || lstm_forward(&m, &xs));
    for _ in 0..3 {
        let err = max_err(&lstm_forward(&m, &xs), &want);
        assert!(err < 1e-5, "{err}");
    }
    let s = janus::stats();
    let body: Vec<_> = s.function("lstm_forward").filter(|f| f.calls >= 32 * 3).collect();
    assert_eq!(body.len(), 1, "{}", janus::explain());
    assert!(body[0].variants <= 2 && body[0].hits > 60, "{}", janus::explain());
    println!("{}", janus::explain());
}

#[test]
fn a_loop_with_a_static_body_stages_as_one_unrolled_graph_per_trip_count() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let (m, xs) = small_lstm(5, 12);
    for len in [12, 12, 12, 5, 5, 5, 12] {
        let want = janus::with_mode(Mode::Eager, || lstm_forward_staged(&m, &xs[..len]));
        let err = max_err(&lstm_forward_staged(&m, &xs[..len]), &want);
        assert!(err < 1e-5, "len {len}: {err}");
    }
    let s = janus::stats();
    let find = |name: &str| s.function("lstm_forward_staged").find(|f| f.name == name).cloned();
    let (whole, body) = (find("lstm_forward_staged#1").unwrap(), find("lstm_forward_staged#0").unwrap());
    // 7 calls in each mode; two trip counts, each compiled once and then replayed.
    assert_eq!((whole.calls, whole.variants), (14, 2), "{}", janus::explain());
    assert!(whole.hits >= 2, "{}", janus::explain());
    // The loop body's own fragment only runs when the whole block runs its statements, and
    // then (while recording, or here after too few calls) records inline or runs eagerly.
    assert_eq!((body.hits, body.variants), (0, 0), "{}", janus::explain());
}

/// The staged loop with a variant limit of 2: a third trip count runs the block's statements,
/// whose loop body then dispatches to its own cached graph on every trip.
#[allow(clippy::needless_range_loop)]
#[janus(max_variants = 2, speculate = false)]
fn rnn_limited(w: &Tensor, xs: &[Tensor]) -> Tensor {
    let mut h = xs[0].tanh();
    for t in 1..xs.len() {
        h = (h.matmul(w) + &xs[t]).tanh();
    }
    h
}

#[test]
fn past_the_variant_limit_a_staged_loop_runs_its_body_as_a_cached_graph_per_trip() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    janus::manual_seed(6);
    let w = Tensor::randn_dtype([8, 8], DType::F64) * 0.3;
    let xs: Vec<Tensor> = (0..9).map(|_| Tensor::randn_dtype([2, 8], DType::F64)).collect();
    for len in [4, 4, 4, 6, 6, 6, 9, 9, 9, 7, 7, 4] {
        let want = janus::with_mode(Mode::Eager, || rnn_limited(&w, &xs[..len]));
        let got = rnn_limited(&w, &xs[..len]);
        assert_eq!(got.to_vec::<f64>(), want.to_vec::<f64>(), "len {len}");
    }
    let s = janus::stats();
    let find = |name: &str| s.function("rnn_limited").find(|f| f.name == name).cloned().unwrap();
    let (whole, body) = (find("rnn_limited#1"), find("rnn_limited#0"));
    assert_eq!(whole.variants, 2, "{}", janus::explain());
    // Lengths 9 (the third) hit the variant limit; 7 (the fourth) rolls its loop on the host.
    let runs = |k| whole.eager_runs.get(&k).copied().unwrap_or(0);
    let (limited, rolled) = (runs(janus::rt::EagerKind::VariantLimit), runs(janus::rt::EagerKind::Rolled));
    assert_eq!((limited, rolled), (3, 2), "{}", janus::explain());
    // Those 5 calls (lengths 9 and 7) ran the statements: 36 trips, all but the 2 profiled
    // ones replayed the body's graph.
    assert_eq!((body.variants, body.hits), (1, 34), "{}", janus::explain());
}

lstm_forward!(lstm_forward_checked,);

#[test]
fn check_mode_checks_an_unrolled_loop_once_against_purely_eager_statements() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let (m, xs) = small_lstm(7, 6);
    let want = janus::with_mode(Mode::Eager, || lstm_forward_checked(&m, &xs));
    for _ in 0..5 {
        let got = janus::with_mode(Mode::Check, || lstm_forward_checked(&m, &xs));
        assert!(max_err(&got, &want) < 1e-5);
    }
    let s = janus::stats();
    let find = |name: &str| s.function("lstm_forward_checked").find(|f| f.name == name).cloned().unwrap();
    let (whole, body) = (find("lstm_forward_checked#1"), find("lstm_forward_checked#0"));
    assert_eq!(whole.checks, 3, "two recordings, then three checked replays: {}", janus::explain());
    // Inside a checked block the body runs plainly: the check compares against eager code.
    assert_eq!(body.eager_runs.get(&janus::rt::EagerKind::Checked), Some(&18), "{}", janus::explain());
    assert_eq!((body.hits, body.checks), (0, 0), "{}", janus::explain());
}
