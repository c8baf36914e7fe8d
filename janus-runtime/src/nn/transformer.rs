//! `TransformerEncoderLayer`, pre-norm: `x + attn(norm1(x))`, then `x + ff(norm2(x))`.

use super::{Dropout, LayerNorm, Linear, MultiheadAttention};
use crate::Tensor;
use crate::module::impl_module;

/// A Transformer encoder layer, like `torch.nn.TransformerEncoderLayer(d_model, nhead,
/// dim_feedforward, dropout, activation="gelu", batch_first=True, norm_first=True)`:
///
/// ```text
/// x = x + dropout1(self_attn(norm1(x)))
/// x = x + dropout2(linear2(dropout(gelu(linear1(norm2(x))))))
/// ```
///
/// ```
/// use janus_runtime::{Module, Tensor, nn};
/// let mut layer = nn::TransformerEncoderLayer::new(32, 4, 64, 0.1);
/// let x = Tensor::randn([2, 6, 32]);
/// assert_eq!(layer.forward(&x, true).dims(), [2, 6, 32]);
/// layer.eval(); // every dropout inside turns off
/// assert!(!layer.dropout.training && !layer.self_attn.training);
/// ```
#[derive(Clone, Debug)]
pub struct TransformerEncoderLayer {
    /// Self-attention.
    pub self_attn: MultiheadAttention,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear,
    /// Before the attention.
    pub norm1: LayerNorm,
    /// Before the feed-forward block.
    pub norm2: LayerNorm,
    /// Inside the feed-forward block, after the GELU.
    pub dropout: Dropout,
    /// On the attention's output.
    pub dropout1: Dropout,
    /// On the feed-forward block's output.
    pub dropout2: Dropout,
}

impl_module!(TransformerEncoderLayer {
    self_attn,
    linear1,
    linear2,
    norm1,
    norm2,
    dropout,
    dropout1,
    dropout2
});

impl TransformerEncoderLayer {
    /// A layer of width `d_model` with `nhead` heads, a `dim_feedforward` feed-forward block and
    /// dropout `p` (on the attention weights too, as in PyTorch), in train mode.
    pub fn new(d_model: usize, nhead: usize, dim_feedforward: usize, p: f64) -> Self {
        TransformerEncoderLayer {
            self_attn: MultiheadAttention::new(d_model, nhead).with_dropout(p),
            linear1: Linear::new(d_model, dim_feedforward),
            linear2: Linear::new(dim_feedforward, d_model),
            norm1: LayerNorm::new(&[d_model]),
            norm2: LayerNorm::new(&[d_model]),
            dropout: Dropout::new(p),
            dropout1: Dropout::new(p),
            dropout2: Dropout::new(p),
        }
    }

    /// The layer applied to `x` (`[B, T, d_model]`), with a causal mask or none.
    #[track_caller]
    pub fn forward(&self, x: &Tensor, causal: bool) -> Tensor {
        let x = x + self.dropout1.forward(&self.self_attn.self_attention(&self.norm1.forward(x), causal));
        let ff = self
            .linear2
            .forward(&self.dropout.forward(&self.linear1.forward(&self.norm2.forward(&x)).gelu()));
        &x + self.dropout2.forward(&ff)
    }
}
