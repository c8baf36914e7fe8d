//! `MultiheadAttention`: scaled dot-product attention over several heads, batch first.

use super::{Linear, uniform_param};
use crate::Tensor;
use crate::module::impl_module;

/// Multi-head attention, like `torch.nn.MultiheadAttention(embed_dim, num_heads,
/// batch_first=True)`: inputs are `[B, T, E]`. `in_proj_weight` is `[3E, E]` (the query, key
/// and value projections stacked, Xavier-uniform) with `in_proj_bias` `[3E]` (zeros), then
/// `out_proj` (a [`Linear`], its bias zeroed), as in PyTorch, so checkpoints line up.
/// `dropout` applies to the attention weights in train mode.
///
/// The key part of `in_proj_bias` (`[E..2E]`) is kept, for checkpoints, but not added: it
/// adds `q . b_k` to every score of a query's row, which the softmax cancels exactly, so its
/// true gradient is zero. Adding it would hand the optimiser rounding noise instead (what
/// PyTorch computes), which Adam, dividing by the gradient's own magnitude, turns into
/// `lr`-sized steps that differ between any two summation orders. Here its gradient is
/// exactly zero, and outputs equal PyTorch's up to rounding.
///
/// ```
/// use janus_runtime::{Tensor, nn};
/// let mha = nn::MultiheadAttention::new(16, 4);
/// let x = Tensor::randn([2, 5, 16]);
/// let y = mha.self_attention(&x, true); // causal: position t sees 0..=t
/// assert_eq!(y.dims(), [2, 5, 16]);
/// ```
#[derive(Clone, Debug)]
pub struct MultiheadAttention {
    /// `[3E, E]`: query, key and value projections.
    pub in_proj_weight: Tensor,
    /// `[3E]`.
    pub in_proj_bias: Tensor,
    /// The output projection `E -> E`.
    pub out_proj: Linear,
    /// Heads; `E` is divisible by it.
    pub num_heads: usize,
    /// Dropout probability on the attention weights (train mode only).
    pub dropout: f64,
    /// Train or eval mode (only matters with `dropout > 0`).
    pub training: bool,
}

impl_module!(MultiheadAttention { in_proj_weight, in_proj_bias, out_proj, num_heads, dropout, training }; training = training);

impl MultiheadAttention {
    /// Attention over `embed_dim` features in `num_heads` heads, without dropout.
    #[track_caller]
    pub fn new(embed_dim: usize, num_heads: usize) -> Self {
        assert!(
            num_heads > 0 && embed_dim.is_multiple_of(num_heads),
            "janus::nn::MultiheadAttention: embed_dim {embed_dim} is not divisible by {num_heads} heads"
        );
        let xavier = (6.0 / (embed_dim + 3 * embed_dim) as f64).sqrt();
        let mut out_proj = Linear::new(embed_dim, embed_dim);
        out_proj.bias = Some(Tensor::zeros([embed_dim]).requires_grad());
        MultiheadAttention {
            in_proj_weight: uniform_param(&[3 * embed_dim, embed_dim], xavier),
            in_proj_bias: Tensor::zeros([3 * embed_dim]).requires_grad(),
            out_proj,
            num_heads,
            dropout: 0.0,
            training: true,
        }
    }

    /// The same layer with dropout `p` on the attention weights.
    pub fn with_dropout(self, p: f64) -> Self {
        MultiheadAttention { dropout: p, ..self }
    }

    /// A `[T, T]` boolean mask that is `true` above the diagonal: the positions a causal
    /// attention hides (PyTorch's `generate_square_subsequent_mask`, as booleans).
    pub fn causal_mask(t: usize) -> Tensor {
        Tensor::ones([t, t]).triu(1).gt_scalar(0.5)
    }

    /// Self-attention of `x` (`[B, T, E]`), causal or not: one projection GEMM for the
    /// queries, keys and values.
    #[track_caller]
    pub fn self_attention(&self, x: &Tensor, causal: bool) -> Tensor {
        let qkv = x.matmul(&self.in_proj_weight.t()) + self.bias_without_key();
        let [q, k, v] = qkv.chunk::<3>(2);
        let mask = causal.then(|| Self::causal_mask(x.sizes()[1]));
        self.attend(&q, &k, &v, mask.as_ref())
    }

    /// Attention of `query` (`[B, Tq, E]`) over `key` and `value` (`[B, Tk, E]`).
    /// `attn_mask` (`[Tq, Tk]` bool) hides the positions where it is `true`.
    #[track_caller]
    pub fn forward(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
    ) -> Tensor {
        let e = query.sizes()[2];
        let proj = |x: &Tensor, i: usize| x.matmul(&self.in_proj_weight.narrow(0, i * e, e).t());
        let bias = |i: usize| self.in_proj_bias.narrow(0, i * e, e);
        // No key bias: see the type's docs.
        self.attend(&(proj(query, 0) + bias(0)), &proj(key, 1), &(proj(value, 2) + bias(2)), attn_mask)
    }

    /// `in_proj_bias` with its key part zeroed (not added, so its gradient is exactly zero).
    fn bias_without_key(&self) -> Tensor {
        let e = self.in_proj_bias.sizes()[0] / 3;
        let b = &self.in_proj_bias;
        Tensor::cat(&[&b.narrow(0, 0, e), &Tensor::zeros_dtype([e], b.dtype()), &b.narrow(0, 2 * e, e)], 0)
    }

    /// Attention of projected `q`, `k`, `v`, then the output projection.
    fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor, attn_mask: Option<&Tensor>) -> Tensor {
        let (b, tq, e) = (q.sizes()[0], q.sizes()[1], q.sizes()[2]);
        let tk = k.sizes()[1];
        let (h, dh) = (self.num_heads, e / self.num_heads);
        // [B, T, E] -> [B * H, T, Dh]
        let heads =
            |x: &Tensor, t: usize| x.reshape([b, t, h, dh]).permute(&[0, 2, 1, 3]).reshape([b * h, t, dh]);
        let (q, k, v) = (heads(q, tq), heads(k, tk), heads(v, tk));
        let mut scores = q.matmul(&k.transpose(1, 2)) * (1.0 / (dh as f64).sqrt());
        if let Some(mask) = attn_mask {
            scores = scores.masked_fill(mask, f64::NEG_INFINITY);
        }
        let mut weights = scores.softmax(2);
        if self.dropout > 0.0 {
            weights = weights.dropout(self.dropout, self.training);
        }
        let out = weights.matmul(&v).reshape([b, h, tq, dh]).permute(&[0, 2, 1, 3]).reshape([b, tq, e]);
        self.out_proj.forward(&out)
    }
}
