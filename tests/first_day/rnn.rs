//! `nn::GruCell` and `nn::RnnCell`: PyTorch's equations checked against a hand-written scalar
//! reference, parameter names and shapes, finite-difference gradients, and a staged unroll.

use super::assert_close;
use crate::common::{assert_grads, rand64, values};
use janus::prelude::*;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `sum_k w[row, k] * v[k]` for a row-major `[rows, cols]` matrix.
fn dot(w: &[f64], cols: usize, row: usize, v: &[f64]) -> f64 {
    (0..cols).map(|k| w[row * cols + k] * v[k]).sum()
}

/// PyTorch's GRUCell for one example, written out element by element.
fn gru_reference(c: &nn::GruCell, x: &[f64], h: &[f64]) -> Vec<f64> {
    let (hid, inp) = (h.len(), x.len());
    let (wi, wh) = (c.weight_ih.to_vec::<f64>(), c.weight_hh.to_vec::<f64>());
    let (bi, bh) = (c.bias_ih.to_vec::<f64>(), c.bias_hh.to_vec::<f64>());
    (0..hid)
        .map(|j| {
            let gi = |g: usize| dot(&wi, inp, g * hid + j, x) + bi[g * hid + j];
            let gh = |g: usize| dot(&wh, hid, g * hid + j, h) + bh[g * hid + j];
            let r = sigmoid(gi(0) + gh(0));
            let z = sigmoid(gi(1) + gh(1));
            let n = (gi(2) + r * gh(2)).tanh();
            (1.0 - z) * n + z * h[j]
        })
        .collect()
}

fn rnn_reference(c: &nn::RnnCell, x: &[f64], h: &[f64]) -> Vec<f64> {
    let (hid, inp) = (h.len(), x.len());
    let (wi, wh, b) = (c.weight_ih.to_vec::<f64>(), c.weight_hh.to_vec::<f64>(), c.bias.to_vec::<f64>());
    (0..hid)
        .map(|j| {
            let pre = dot(&wi, inp, j, x) + dot(&wh, hid, j, h) + b[j];
            if c.relu { pre.max(0.0) } else { pre.tanh() }
        })
        .collect()
}

/// The cell's parameters as `f64` (for the reference and the gradient checks).
fn to_f64<M: Module>(m: &M) -> M {
    m.map_tensors(&mut |t| t.detach().to_dtype(DType::F64))
}

#[test]
fn cells_match_hand_written_references() {
    janus::manual_seed(1);
    let (inp, hid, batch) = (3, 4, 2);
    let gru = to_f64(&nn::GruCell::new(inp, hid));
    let rnns = [to_f64(&nn::RnnCell::new(inp, hid)), to_f64(&nn::RnnCell::new_relu(inp, hid))];
    let x = rand64(&[batch, inp], 2, -1.0, 1.0);
    let h = rand64(&[batch, hid], 3, -1.0, 1.0);
    let (xv, hv) = (x.to_vec::<f64>(), h.to_vec::<f64>());
    let rows = |v: &[f64], n: usize, b: usize| v[b * n..(b + 1) * n].to_vec();
    let want: Vec<f64> =
        (0..batch).flat_map(|b| gru_reference(&gru, &rows(&xv, inp, b), &rows(&hv, hid, b))).collect();
    assert_close("gru", &gru.forward(&x, &h), &Tensor::from_vec(want, [batch, hid]), 1e-14);
    for rnn in &rnns {
        let want: Vec<f64> =
            (0..batch).flat_map(|b| rnn_reference(rnn, &rows(&xv, inp, b), &rows(&hv, hid, b))).collect();
        assert_close(
            &format!("rnn relu={}", rnn.relu),
            &rnn.forward(&x, &h),
            &Tensor::from_vec(want, [batch, hid]),
            1e-14,
        );
    }
}

#[test]
fn parameters_have_pytorch_names_and_shapes() {
    let names = |m: &dyn Fn() -> Vec<(String, Tensor)>| -> Vec<(String, Vec<usize>)> {
        m().into_iter().map(|(n, t)| (n, t.dims().to_vec())).collect()
    };
    let gru = nn::GruCell::new(3, 5);
    let want = [
        ("weight_ih", vec![15, 3]),
        ("weight_hh", vec![15, 5]),
        ("bias_ih", vec![15]),
        ("bias_hh", vec![15]),
    ];
    let got = names(&|| gru.named_tensors());
    assert_eq!(got.len(), 4);
    for ((n, d), (wn, wd)) in got.iter().zip(&want) {
        assert!(n.ends_with(wn) && d == wd, "{n} {d:?}");
    }
    assert_eq!(gru.hidden_size(), 5);
    let rnn = nn::RnnCell::new(3, 5);
    assert_eq!(names(&|| rnn.named_tensors()).len(), 3);
    assert!(rnn.named_tensors().iter().all(|(_, t)| t.needs_grad()));
    let bound = 1.0 / 5f64.sqrt();
    assert!(gru.weight_hh.to_vec::<f64>().iter().all(|v| v.abs() <= bound));
}

#[test]
fn gradients_match_finite_differences() {
    janus::manual_seed(4);
    let gru = to_f64(&nn::GruCell::new(2, 3));
    let x = rand64(&[2, 2], 5, -1.0, 1.0);
    let h = rand64(&[2, 3], 6, -1.0, 1.0);
    let params = [gru.weight_ih.clone(), gru.weight_hh.clone(), gru.bias_ih.clone(), gru.bias_hh.clone()];
    let inputs: Vec<Tensor> = [x.clone(), h.clone()].into_iter().chain(params).collect();
    assert_grads("gru cell", &inputs, &|t| {
        let c = nn::GruCell {
            weight_ih: t[2].clone(),
            weight_hh: t[3].clone(),
            bias_ih: t[4].clone(),
            bias_hh: t[5].clone(),
        };
        // Two steps, so the gradient also flows through the state.
        let h1 = c.forward(&t[0], &t[1]);
        c.forward(&(&t[0] * 0.5), &h1)
    });
    for relu in [false, true] {
        let rnn = to_f64(&nn::RnnCell { relu, ..nn::RnnCell::new(2, 3) });
        let inputs = [x.clone(), h.clone(), rnn.weight_ih.clone(), rnn.weight_hh.clone(), rnn.bias.clone()];
        assert_grads(&format!("rnn cell relu={relu}"), &inputs, &|t| {
            let c =
                nn::RnnCell { weight_ih: t[2].clone(), weight_hh: t[3].clone(), bias: t[4].clone(), relu };
            c.forward(&t[0], &c.forward(&t[0], &t[1]))
        });
    }
}

#[derive(Module)]
struct Seq {
    gru: nn::GruCell,
    rnn: nn::RnnCell,
}

/// A two-layer unroll over time, as a language model's step would write it.
#[janus(min_ops = 1)]
fn unroll(m: &Seq, xs: &[Tensor]) -> (Tensor, Tensor) {
    let mut h = Tensor::zeros_dtype([xs[0].dims()[0], m.gru.hidden_size()], xs[0].dtype());
    let mut g = Tensor::zeros_dtype([xs[0].dims()[0], m.rnn.hidden_size()], xs[0].dtype());
    for x in xs {
        h = m.gru.forward(x, &h);
        g = m.rnn.forward(&h, &g);
    }
    let loss = g.square().sum_all();
    let grads = loss.backward();
    (loss, grads.get(&m.gru.weight_hh).unwrap().clone())
}

#[test]
fn a_staged_unroll_equals_eager() {
    janus::set_self_check(false);
    janus::manual_seed(8);
    let m = Seq { gru: nn::GruCell::new(3, 4), rnn: nn::RnnCell::new(4, 2) };
    for call in 0..12 {
        let len = [2, 3][call % 2];
        let xs: Vec<Tensor> = (0..len)
            .map(|t| {
                Tensor::from_vec(values(6, (call * 10 + t) as u64, -1.0, 1.0), [2, 3]).to_dtype(DType::F32)
            })
            .collect();
        let want = janus::with_mode(Mode::Eager, || unroll(&m, &xs));
        let got = unroll(&m, &xs);
        assert_close(&format!("call {call} loss"), &got.0, &want.0, 1e-5);
        assert_close(&format!("call {call} gradient"), &got.1, &want.1, 1e-5);
    }
    let f = janus::stats().function("unroll").next().cloned().unwrap();
    assert!(f.hits > f.checks, "{}", janus::explain());
}
