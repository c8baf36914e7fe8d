//! The character Transformer of `shared/refbench/models_torch.py` (D): token and learned
//! positional embeddings, pre-norm `nn::TransformerEncoderLayer`s with a causal mask, a final
//! LayerNorm and a linear head; cross-entropy over all `B x T` positions. Shared by the
//! `transformer_lm` example, the bench and the tests.
#![allow(dead_code)]

use janus::nn;
use janus::prelude::*;

/// The refbench sizes: vocabulary, context, batch, width, heads, feed-forward width, layers.
pub const V: usize = 65;
pub const T: usize = 64;
pub const B: usize = 32;
pub const D: usize = 128;
pub const HEADS: usize = 4;
pub const FF: usize = 512;
pub const LAYERS: usize = 2;

/// The model.
#[derive(Module, Clone)]
pub struct CharTransformer {
    pub tok: nn::Embedding,
    pub pos: nn::Embedding,
    pub blocks: Vec<nn::TransformerEncoderLayer>,
    pub norm: nn::LayerNorm,
    pub head: nn::Linear,
}

impl CharTransformer {
    /// A model over `vocab` tokens and contexts up to `context`, in train mode.
    pub fn new(
        vocab: usize,
        context: usize,
        d: usize,
        heads: usize,
        ff: usize,
        layers: usize,
        dropout: f64,
    ) -> Self {
        CharTransformer {
            tok: nn::Embedding::new(vocab, d),
            pos: nn::Embedding::new(context, d),
            blocks: (0..layers).map(|_| nn::TransformerEncoderLayer::new(d, heads, ff, dropout)).collect(),
            norm: nn::LayerNorm::new(&[d]),
            head: nn::Linear::new(d, vocab),
        }
    }

    /// The refbench model (dropout 0).
    pub fn refbench() -> Self {
        Self::new(V, T, D, HEADS, FF, LAYERS, 0.0)
    }

    /// Logits `[B, T, V]` for token ids `idx` (`[B, T]` i64).
    pub fn logits(&self, idx: &Tensor) -> Tensor {
        let t = idx.dims()[1];
        let mut x = self.tok.forward(idx) + self.pos.forward(&Tensor::arange(t));
        for b in &self.blocks {
            x = b.forward(&x, true);
        }
        self.head.forward(&self.norm.forward(&x))
    }

    /// Mean cross-entropy of the next-token predictions (`targets` `[B, T]` i64).
    pub fn loss(&self, idx: &Tensor, targets: &Tensor) -> Tensor {
        let logits = self.logits(idx);
        let (b, t, v) = (logits.dims()[0], logits.dims()[1], logits.dims()[2]);
        logits.reshape([b * t, v]).cross_entropy(&targets.reshape([b * t]))
    }
}

/// One training step: forward, loss, backward, Adam. Returns the loss.
#[janus]
pub fn train_step(m: &mut CharTransformer, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let loss = m.loss(x, y);
    let grads = loss.backward();
    opt.step(m, &grads);
    loss.item()
}

/// The loss of a batch without training (call it in eval mode, under `no_grad`).
#[janus]
pub fn eval_loss(m: &CharTransformer, x: &Tensor, y: &Tensor) -> f32 {
    m.loss(x, y).item()
}

/// `n` windows of `t + 1` tokens starting at `starts`: inputs and next-token targets, `[n, t]`.
pub fn windows(ids: &[usize], starts: &[usize], t: usize) -> (Tensor, Tensor) {
    let mut x = Vec::with_capacity(starts.len() * t);
    let mut y = Vec::with_capacity(starts.len() * t);
    for &s in starts {
        x.extend(ids[s..s + t].iter().map(|&i| i as i64));
        y.extend(ids[s + 1..s + t + 1].iter().map(|&i| i as i64));
    }
    (Tensor::from_vec(x, [starts.len(), t]), Tensor::from_vec(y, [starts.len(), t]))
}
