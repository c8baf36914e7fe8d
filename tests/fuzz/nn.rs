//! The issue-15 ops in the differential fuzz: convolution, pooling, normalisation, dropout,
//! masks, triangles and matmul over four dimensions. Operands of other ranks are viewed as
//! `[N, C, H, W]` (left-padded with 1s, or with the first dimension as the batch).

use super::{Instr, Rng, values};
use janus::Conv2dOptions;
use janus::prelude::*;

/// One of the new ops; `args` of the instruction are its operand value indices.
#[derive(Clone, Debug)]
pub enum NnOp {
    /// `args`: input, then the weight when `w_seed` is `None`.
    Conv {
        view: [usize; 4],
        w_shape: [usize; 4],
        w_seed: Option<u64>,
        bias_seed: Option<u64>,
        opts: Conv2dOptions,
    },
    Pool {
        max: bool,
        view: [usize; 4],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    },
    LayerNorm {
        k: usize,
        w_seed: Option<u64>,
        b_seed: Option<u64>,
    },
    /// `pick`: 0 the output, 1 the new running mean, 2 the new running variance.
    BatchNorm {
        stats_seed: u64,
        affine_seed: Option<u64>,
        training: bool,
        pick: usize,
    },
    Dropout {
        p: f64,
        training: bool,
    },
    /// `args`: input, bool mask.
    MaskedFill {
        value: f64,
    },
    Triangle {
        diagonal: i64,
        upper: bool,
    },
    /// `view` of the input at `[B, H, m, k]` times a constant `[b_batch, k, n]`.
    MatMul4 {
        view: [usize; 4],
        n: usize,
        b_batch: usize,
        seed: u64,
    },
}

fn view4(dims: &[usize], batch_first: bool) -> [usize; 4] {
    let mut v = [1; 4];
    if batch_first && dims.len() == 3 {
        return [dims[0], 1, dims[1], dims[2]];
    }
    v[4 - dims.len()..].copy_from_slice(dims);
    v
}

pub fn apply(dtype: DType, special: bool, op: &NnOp, args: &[&Tensor]) -> Tensor {
    let cst = |shape: &[usize], seed: u64| values(shape, seed, dtype, special);
    // Statistics and scales stay positive and finite.
    let pos = |shape: &[usize], seed: u64| values(shape, seed, dtype, false).abs() + 0.5;
    let x = args[0];
    match op {
        NnOp::Conv { view, w_shape, w_seed, bias_seed, opts } => {
            let w = match w_seed {
                Some(s) => cst(w_shape, *s),
                None => args[1].reshape(w_shape.to_vec()),
            };
            let b = bias_seed.map(|s| cst(&[w_shape[0]], s));
            x.reshape(view.to_vec()).conv2d(&w, b.as_ref(), *opts)
        }
        NnOp::Pool { max, view, kernel, stride, padding } => {
            let x = x.reshape(view.to_vec());
            if *max {
                x.max_pool2d(*kernel, *stride, *padding)
            } else {
                x.avg_pool2d(*kernel, *stride, *padding)
            }
        }
        NnOp::LayerNorm { k, w_seed, b_seed } => {
            let shape = x.dims()[x.rank() - k.min(&x.rank())..].to_vec();
            let w = w_seed.map(|s| pos(&shape, s));
            let b = b_seed.map(|s| cst(&shape, s));
            x.layer_norm(&shape, w.as_ref(), b.as_ref(), 1e-5)
        }
        NnOp::BatchNorm { stats_seed, affine_seed, training, pick } => {
            let c = x.dims().get(1).copied().unwrap_or(0);
            let (m, v) = (cst(&[c], *stats_seed), pos(&[c], stats_seed + 1));
            let w = affine_seed.map(|s| pos(&[c], s));
            let b = affine_seed.map(|s| cst(&[c], s + 1));
            let (y, m, v) = x.batch_norm(&m, &v, w.as_ref(), b.as_ref(), *training, 0.1, 1e-5);
            [y, m, v][*pick].clone()
        }
        NnOp::Dropout { p, training } => x.dropout(*p, *training),
        NnOp::MaskedFill { value } => x.masked_fill(args[1], *value),
        NnOp::Triangle { diagonal, upper } => {
            if *upper {
                x.triu(*diagonal)
            } else {
                x.tril(*diagonal)
            }
        }
        NnOp::MatMul4 { view, n, b_batch, seed } => {
            x.reshape(view.to_vec()).matmul(&cst(&[*b_batch, view[3], *n], *seed))
        }
    }
}

/// A new-op instruction over value `a` (of the program's float dtype).
pub fn propose(r: &mut Rng, v: &[Tensor], dtype: DType, a: usize) -> Option<Instr> {
    let s = v[a].dims().to_vec();
    if s.len() > 4 {
        return None;
    }
    let floats = |n: usize| (0..v.len()).filter(move |&i| v[i].dtype() == dtype && v[i].numel() == n);
    let view = view4(&s, r.chance(0.3));
    let pair = |r: &mut Rng, lo: usize, hi: usize| [lo + r.below(hi - lo + 1), lo + r.below(hi - lo + 1)];
    let (op, args) = match r.below(8) {
        0 | 1 => {
            let c = view[1];
            let groups = if c > 1 && r.chance(0.3) { c } else { 1 };
            let kernel = pair(r, 1, 3);
            let w_shape = [groups * (1 + r.below(2)), c / groups, kernel[0], kernel[1]];
            let opts = Conv2dOptions {
                stride: pair(r, 1, 2),
                padding: pair(r, 0, 1),
                dilation: pair(r, 1, 2),
                groups,
            };
            let bias_seed = r.chance(0.5).then(|| r.next());
            let n: usize = w_shape.iter().product();
            match floats(n).collect::<Vec<_>>() {
                ws if !ws.is_empty() && r.chance(0.6) => {
                    (NnOp::Conv { view, w_shape, w_seed: None, bias_seed, opts }, vec![a, r.pick(&ws)])
                }
                _ => (NnOp::Conv { view, w_shape, w_seed: Some(r.next()), bias_seed, opts }, vec![a]),
            }
        }
        2 => {
            let kernel = pair(r, 1, 3);
            let padding = [r.below(kernel[0] / 2 + 1), r.below(kernel[1] / 2 + 1)];
            (NnOp::Pool { max: r.chance(0.5), view, kernel, stride: pair(r, 1, 3), padding }, vec![a])
        }
        3 => {
            let k = 1 + r.below(s.len().max(1));
            let op = NnOp::LayerNorm {
                k,
                w_seed: r.chance(0.5).then(|| r.next()),
                b_seed: r.chance(0.5).then(|| r.next()),
            };
            (op, vec![a])
        }
        4 => {
            let op = NnOp::BatchNorm {
                stats_seed: r.next(),
                affine_seed: r.chance(0.5).then(|| r.next()),
                training: r.chance(0.7),
                pick: if r.chance(0.6) { 0 } else { 1 + r.below(2) },
            };
            (op, vec![a])
        }
        5 => (NnOp::Dropout { p: r.pick(&[0.0, 0.3, 0.5]), training: r.chance(0.8) }, vec![a]),
        6 => {
            let masks: Vec<usize> = (0..v.len())
                .filter(|&m| {
                    v[m].dtype() == DType::Bool
                        && janus::broadcast_shapes(&s, v[m].dims()).is_some_and(|b| b.dims() == s.as_slice())
                })
                .collect();
            if masks.is_empty() || r.chance(0.3) {
                (NnOp::Triangle { diagonal: r.below(5) as i64 - 2, upper: r.chance(0.5) }, vec![a])
            } else {
                let value = r.pick(&[0.0, -1.5, f64::NEG_INFINITY]);
                (NnOp::MaskedFill { value }, vec![a, r.pick(&masks)])
            }
        }
        _ => {
            let view = view4(&s, false);
            let b_batch = if r.chance(0.5) { view[1] } else { 1 };
            (NnOp::MatMul4 { view, n: 1 + r.below(3), b_batch, seed: r.next() }, vec![a])
        }
    };
    Some(Instr::Nn(op, args))
}
