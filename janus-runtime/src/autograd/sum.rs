//! Gradient accumulation with deferred weight gradients.
//!
//! A weight used by many matmuls (an RNN's `W` at every time step) receives one contribution
//! `aᵀ·g` per use. Summing them one by one costs a small GEMM (`K` = batch) plus a full-size add
//! per use. Instead, contributions are kept as factor pairs and, when the gradient is needed,
//! summed as one GEMM over concatenated factors: `Σ aᵢᵀ·gᵢ = [a₁;…;aₙ]ᵀ·[g₁;…;gₙ]`. Same sum,
//! different rounding order.

use crate::tensor::Tensor;

/// One contribution to a gradient.
pub(crate) enum GradPart {
    /// A gradient value.
    Dense(Tensor),
    /// The product `aᵀ·g` of 2-D factors `a: [m, k]` and `g: [m, n]`, not yet computed.
    Outer(Tensor, Tensor),
}

/// A gradient being accumulated.
#[derive(Default)]
pub(crate) struct GradSum {
    dense: Option<Tensor>,
    terms: Vec<(Tensor, Tensor)>,
}

impl GradSum {
    pub(crate) fn add(&mut self, part: GradPart) {
        match part {
            GradPart::Dense(g) => {
                self.dense = Some(match self.dense.take() {
                    Some(prev) => &prev + &g,
                    None => g,
                })
            }
            GradPart::Outer(a, g) => self.terms.push((a, g)),
        }
    }

    /// The accumulated gradient (`None` if nothing was added).
    pub(crate) fn finish(self) -> Option<Tensor> {
        let mut total = self.dense;
        let mut terms = self.terms;
        while let Some((a0, g0)) = terms.first() {
            // Terms with the same factor widths form one GEMM.
            let (k, n) = (a0.sizes()[1], g0.sizes()[1]);
            let (same, rest): (Vec<_>, Vec<_>) =
                terms.into_iter().partition(|(a, g)| a.sizes()[1] == k && g.sizes()[1] == n);
            terms = rest;
            let product = if same.len() == 1 {
                same[0].0.t().matmul(&same[0].1)
            } else {
                let a: Vec<&Tensor> = same.iter().map(|t| &t.0).collect();
                let g: Vec<&Tensor> = same.iter().map(|t| &t.1).collect();
                Tensor::cat(&a, 0).t().matmul(&Tensor::cat(&g, 0))
            };
            total = Some(match total {
                Some(t) => t + product,
                None => product,
            });
        }
        total
    }
}
