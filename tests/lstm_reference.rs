//! A tiny LSTM with closed-form parameters and data, checked against PyTorch float64 numbers
//! (loss, gradient norms, loss after one SGD step). T=3, B=2, V=5, H=4.

use janus::prelude::*;

const T: usize = 3;
const B: usize = 2;
const V: usize = 5;
const H: usize = 4;

fn param(rows: usize, cols: usize, f: impl Fn(f64, f64) -> f64, dtype: DType) -> Tensor {
    let v: Vec<f64> = (0..rows * cols).map(|k| f((k / cols) as f64, (k % cols) as f64)).collect();
    let shape: Vec<usize> = if rows == 1 { vec![cols] } else { vec![rows, cols] };
    Tensor::from_vec(v, shape).to_dtype(dtype).requires_grad()
}

struct Params {
    wx: Tensor,
    wh: Tensor,
    b: Tensor,
    wy: Tensor,
    by: Tensor,
}

fn params(dtype: DType) -> Params {
    Params {
        wx: param(V, 4 * H, |i, j| 0.1 * (7.0 * i + 3.0 * j + 1.0).sin(), dtype),
        wh: param(H, 4 * H, |i, j| 0.1 * (5.0 * i + 11.0 * j + 2.0).cos(), dtype),
        b: param(1, 4 * H, |_, j| 0.05 * (3.0 * j + 0.5).sin(), dtype),
        wy: param(H, V, |i, j| 0.1 * (2.0 * i + 13.0 * j + 3.0).sin(), dtype),
        by: param(1, V, |_, j| 0.05 * (j + 0.25).cos(), dtype),
    }
}

fn tokens(t: usize) -> Tensor {
    let v: Vec<i64> = (0..B).map(|b| ((7 * t + 13 * b + (t * b) % 5) % V) as i64).collect();
    Tensor::from_vec(v, [B])
}

fn loss(p: &Params, dtype: DType) -> Tensor {
    let mut h = Tensor::zeros_dtype([B, H], dtype);
    let mut c = Tensor::zeros_dtype([B, H], dtype);
    let mut total = Tensor::scalar_dtype(0.0, dtype);
    for t in 0..T {
        let x = tokens(t).one_hot_dtype(V, dtype);
        let gates = x.matmul(&p.wx) + h.matmul(&p.wh) + &p.b;
        let [i, f, g, o] = gates.chunk::<4>(1);
        c = f.sigmoid() * &c + i.sigmoid() * g.tanh();
        h = o.sigmoid() * c.tanh();
        let logits = h.matmul(&p.wy) + &p.by;
        total += logits.cross_entropy(&tokens(t + 1));
    }
    total / T as f64
}

fn norm(t: &Tensor) -> f64 {
    t.to_vec::<f64>().iter().map(|v| v * v).sum::<f64>().sqrt()
}

fn check(dtype: DType, tol: f64) {
    let close = |what: &str, got: f64, want: f64| {
        let rel = ((got - want) / want).abs();
        assert!(
            rel <= tol,
            "{dtype} {what}: got {got:.17e}, PyTorch {want:.17e}, relative error {rel:e} > {tol:e}"
        );
    };
    let p = params(dtype);
    let l = loss(&p, dtype);
    close("loss", l.item_f64(), 1.6152220273211306);
    let grads = l.backward();
    let g = |t: &Tensor| grads.get(t).expect("every parameter gets a gradient").clone();
    close("|dWx|", norm(&g(&p.wx)), 6.663382311345195e-03);
    close("|dWh|", norm(&g(&p.wh)), 3.5537792159304856e-05);
    close("|db|", norm(&g(&p.b)), 8.218633092877688e-03);
    close("|dWy|", norm(&g(&p.wy)), 8.500274869945847e-03);
    close("|dby|", norm(&g(&p.by)), 3.684207014362452e-01);
    let step = |w: &Tensor| no_grad(|| (w - g(w) * 0.1).requires_grad());
    let p2 = Params { wx: step(&p.wx), wh: step(&p.wh), b: step(&p.b), wy: step(&p.wy), by: step(&p.by) };
    close("loss after one SGD step", loss(&p2, dtype).item_f64(), 1.6017665630110152);
}

#[test]
fn matches_pytorch_in_f64() {
    check(DType::F64, 1e-9);
}

#[test]
fn matches_pytorch_in_f32() {
    check(DType::F32, 1e-5);
}
