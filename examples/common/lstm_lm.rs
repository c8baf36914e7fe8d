//! The LSTM language-model workload of `shared/refbench` (T=32, B=32, V=65, H=128; one-hot
//! input matmul, gate order i, f, g, o, softmax cross-entropy at every step), shared by the
//! flagship example, the benches and the tests.
#![allow(dead_code)]

use janus::prelude::*;

/// Sequence length.
pub const T: usize = 32;
/// Batch size.
pub const B: usize = 32;
/// Vocabulary size.
pub const V: usize = 65;
/// Hidden size.
pub const H: usize = 128;

/// Parameters, laid out as in the reference benchmarks.
#[derive(Module, Clone)]
pub struct LstmLm {
    /// `[V, 4H]` input projection.
    pub wx: Tensor,
    /// `[H, 4H]` recurrent projection.
    pub wh: Tensor,
    /// `[4H]` gate bias.
    pub b: Tensor,
    /// `[H, V]` output projection.
    pub wy: Tensor,
    /// `[V]` output bias.
    pub by: Tensor,
}

impl LstmLm {
    /// Weights `N(0, 0.1^2)`, biases zero, like `lstm_common.init_params`.
    pub fn new(vocab: usize, hidden: usize) -> Self {
        let w = |r: usize, c: usize| no_grad(|| (Tensor::randn([r, c]) * 0.1f32).requires_grad());
        LstmLm {
            wx: w(vocab, 4 * hidden),
            wh: w(hidden, 4 * hidden),
            b: Tensor::zeros([4 * hidden]).requires_grad(),
            wy: w(hidden, vocab),
            by: Tensor::zeros([vocab]).requires_grad(),
        }
    }
}

/// One LSTM cell step: the new `(h, c)` for input `x` (`[B, V]`) and state `(h, c)` (`[B, H]`).
pub fn cell(m: &LstmLm, x: &Tensor, h: &Tensor, c: &Tensor) -> (Tensor, Tensor) {
    let g = x.matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
    let [i, f, gg, o] = g.chunk::<4>(1);
    let c = f.sigmoid() * c + i.sigmoid() * gg.tanh();
    let h = o.sigmoid() * c.tanh();
    (h, c)
}

/// Output logits `[B, V]` for hidden state `h`.
pub fn logits(m: &LstmLm, h: &Tensor) -> Tensor {
    h.matmul(&m.wy) + &m.by
}

/// Mean cross-entropy over all T x B positions; `xs[t]` is one-hot `[B, V]`, `ys[t]` `[B]`.
pub fn loss(m: &LstmLm, xs: &[Tensor], ys: &[Tensor]) -> Tensor {
    let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
    let mut h = Tensor::zeros_on([bsz, hid], xs[0].device());
    let mut c = Tensor::zeros_on([bsz, hid], xs[0].device());
    let mut total = Tensor::scalar(0.0);
    for t in 0..xs.len() {
        let g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
        let [i, f, gg, o] = g.chunk::<4>(1);
        c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
        h = o.sigmoid() * c.tanh();
        total += (h.matmul(&m.wy) + &m.by).cross_entropy(&ys[t]);
    }
    total / xs.len() as f64
}

impl LstmLm {
    /// The same model with every parameter on `device` (still a gradient leaf).
    pub fn to_device(&self, device: Device) -> Self {
        let mv = |t: &Tensor| no_grad(|| t.to_device(device)).requires_grad();
        LstmLm { wx: mv(&self.wx), wh: mv(&self.wh), b: mv(&self.b), wy: mv(&self.wy), by: mv(&self.by) }
    }

    /// The parameters in the order of [`flat_sgd_step`]'s inputs.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.wx.clone(), self.wh.clone(), self.b.clone(), self.wy.clone(), self.by.clone()]
    }

    /// The model with the parameters `p` (in [`LstmLm::params`] order).
    pub fn from_params(p: &[Tensor]) -> Self {
        LstmLm { wx: p[0].clone(), wh: p[1].clone(), b: p[2].clone(), wy: p[3].clone(), by: p[4].clone() }
    }
}

/// The SGD step (lr 0.1) over flat tensors, for `janus::trace`: the five parameters, then `T`
/// inputs and `T` targets; returns the loss and the five updated parameters.
pub fn flat_sgd_step(x: &[Tensor]) -> Vec<Tensor> {
    let mut m = LstmLm::from_params(&x[..5]);
    let loss = loss(&m, &x[5..5 + T], &x[5 + T..]);
    let grads = loss.backward();
    optim::Sgd::new(0.1).step(&mut m, &grads);
    let mut out = vec![loss];
    out.extend(m.params());
    out
}

/// [`flat_sgd_step`]'s inputs for parameters `p` and one batch.
pub fn flat_args(p: &[Tensor], xs: &[Tensor], ys: &[Tensor]) -> Vec<Tensor> {
    p.iter().chain(xs).chain(ys).cloned().collect()
}

/// One training step with plain SGD; returns the loss before the update.
pub fn sgd_step(m: &mut LstmLm, xs: &[Tensor], ys: &[Tensor], lr: f64) -> f32 {
    let l = loss(m, xs, ys);
    let grads = l.backward();
    optim::Sgd::new(lr).step(m, &grads);
    l.item()
}

/// The same step written imperatively under `#[janus]`, defined three times: `janus_sgd_step`
/// is speculated, the whole step one graph (forward, backward, update); with `speculate =
/// false` (`janus_sgd_step_fragments`) it runs as blocks: the time loop (its body is all
/// static) recorded unrolled, so the forward pass is one cached graph per sequence length,
/// and the update another; `janus_sgd_step_host_loop` (`unroll = false`, not speculated)
/// keeps the loop on the host, its body (one LSTM step) a cached graph of its own.
macro_rules! janus_sgd_step {
    ($name:ident, $($opt:tt)*) => {
        #[janus($($opt)*)]
        pub fn $name(m: &mut LstmLm, xs: &[Tensor], ys: &[Tensor], lr: f64) -> f32 {
            let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
            let mut h = Tensor::zeros_on([bsz, hid], xs[0].device());
            let mut c = Tensor::zeros_on([bsz, hid], xs[0].device());
            let mut total = Tensor::scalar(0.0);
            for t in 0..xs.len() {
                let g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
                let [i, f, gg, o] = g.chunk::<4>(1);
                c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
                h = o.sigmoid() * c.tanh();
                total += (h.matmul(&m.wy) + &m.by).cross_entropy(&ys[t]);
            }
            let loss = total / xs.len() as f64;
            let grads = loss.backward();
            optim::Sgd::new(lr).step(m, &grads);
            loss.item()
        }
    };
}
janus_sgd_step!(janus_sgd_step,);
janus_sgd_step!(janus_sgd_step_fragments, speculate = false);
janus_sgd_step!(janus_sgd_step_host_loop, unroll = false, speculate = false);
// The same step for streams of varying lengths and batches (the bench's `--only stream`), with
// fragment statistics of its own; `..._per_shape` compiles one graph per shape.
janus_sgd_step!(janus_sgd_step_stream, max_variants = 64);
janus_sgd_step!(janus_sgd_step_per_shape, dynamic_dims = false, max_variants = 64);

/// The same step as a cuDNN-style LSTM layer is written by hand: the input projection of all
/// `T` steps as one `[T*B, V] @ [V, 4H]` product before the loop, and the output layer and the
/// loss as one product and one cross-entropy over the `T*B` stacked hidden states after it.
/// Same loss (the mean over all positions), same gradients up to rounding; the bench runs it
/// next to [`janus_sgd_step`] to show what batching by hand buys over the per-timestep code.
#[janus]
pub fn janus_sgd_step_batched(m: &mut LstmLm, xs: &[Tensor], ys: &[Tensor], lr: f64) -> f32 {
    let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
    let mut h = Tensor::zeros_on([bsz, hid], xs[0].device());
    let mut c = Tensor::zeros_on([bsz, hid], xs[0].device());
    let gx = Tensor::cat(&xs.iter().collect::<Vec<_>>(), 0).matmul(&m.wx) + &m.b;
    let mut hs = Vec::with_capacity(xs.len());
    for t in 0..xs.len() {
        let g = gx.narrow(0, t * bsz, bsz) + h.matmul(&m.wh);
        let [i, f, gg, o] = g.chunk::<4>(1);
        c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
        h = o.sigmoid() * c.tanh();
        hs.push(h.clone());
    }
    let logits = Tensor::cat(&hs.iter().collect::<Vec<_>>(), 0).matmul(&m.wy) + &m.by;
    let loss = logits.cross_entropy(&Tensor::cat(&ys.iter().collect::<Vec<_>>(), 0));
    let grads = loss.backward();
    optim::Sgd::new(lr).step(m, &grads);
    loss.item()
}

/// The step with gradient clipping (`clip_grad_norm_` at 5.0 written as a host decision): the
/// decision is an assert of the speculated graph.
#[janus]
pub fn janus_sgd_step_clipped(m: &mut LstmLm, xs: &[Tensor], ys: &[Tensor], lr: f64) -> f32 {
    let loss = loss(m, xs, ys);
    let grads = loss.backward();
    let g: Vec<Tensor> = m.params().iter().map(|p| grads.get(p).unwrap().clone()).collect();
    let norm = g.iter().map(|t| t.square().sum_all()).fold(Tensor::scalar(0.0), |a, b| a + b).sqrt();
    let mut step = Tensor::scalar(lr as f32);
    if norm.item() > 5.0 {
        step = Tensor::scalar(lr as f32 * 5.0) / &norm;
    }
    let upd = |p: &Tensor, g: &Tensor| no_grad(|| p - g * &step).requires_grad();
    *m = LstmLm {
        wx: upd(&m.wx, &g[0]),
        wh: upd(&m.wh, &g[1]),
        b: upd(&m.b, &g[2]),
        wy: upd(&m.wy, &g[3]),
        by: upd(&m.by, &g[4]),
    };
    loss.item()
}

/// Pre-generated batches of a periodic synthetic text (period 97), as in the refbench: the
/// one-hot inputs and targets are prepared outside the timed step.
pub struct Batches {
    xs: Vec<Vec<Tensor>>,
    ys: Vec<Vec<Tensor>>,
}

impl Batches {
    /// `n` batches of `[T][B]` tokens drawn from the periodic text.
    pub fn synthetic(n: usize) -> Self {
        let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |m: usize| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % m as u64) as usize
        };
        let base: Vec<usize> = (0..97).map(|_| next(V)).collect();
        let corpus: Vec<usize> = (0..97 * 64).map(|i| base[i % 97]).collect();
        let starts: Vec<Vec<usize>> =
            (0..n).map(|_| (0..B).map(|_| next(corpus.len() - T - 1)).collect()).collect();
        Batches::from_corpus(&corpus, &starts, V)
    }

    /// Batches cut from `corpus` (token ids `< vocab`) at the given start offsets per batch.
    pub fn from_corpus(corpus: &[usize], starts: &[Vec<usize>], vocab: usize) -> Self {
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for st in starts {
            let tok = |t: usize| {
                Tensor::from_vec(st.iter().map(|&s| corpus[s + t] as i64).collect::<Vec<_>>(), [st.len()])
            };
            xs.push((0..T).map(|t| tok(t).one_hot(vocab)).collect());
            ys.push((0..T).map(|t| tok(t + 1)).collect());
        }
        Batches { xs, ys }
    }

    /// The same batches on `device`.
    pub fn to_device(&self, device: Device) -> Self {
        let mv = |v: &Vec<Vec<Tensor>>| {
            v.iter().map(|b| b.iter().map(|t| t.to_device(device)).collect()).collect()
        };
        Batches { xs: mv(&self.xs), ys: mv(&self.ys) }
    }

    /// Batch `k` (cycling), as `(inputs, targets)`.
    pub fn batch(&self, k: usize) -> (&[Tensor], &[Tensor]) {
        let i = k % self.xs.len();
        (&self.xs[i], &self.ys[i])
    }
}
