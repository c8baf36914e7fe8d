//! The GAN workload shared by the `gan` example, the bench and the tests: a generator and a
//! discriminator (MLPs of `nn::Linear` layers, PyTorch's default init) on a 2-D mixture of 8
//! Gaussians on a ring, trained with the non-saturating loss and one Adam optimiser each.
//! `scripts/gan_torch.py` is the same program in PyTorch (the bench's peer).
#![allow(dead_code)]

use janus::prelude::*;

/// Latent size of the generator's input noise.
pub const Z: usize = 2;
/// Hidden width of both networks.
pub const HIDDEN: usize = 128;
/// Samples per step (real and generated alike).
pub const BATCH: usize = 256;
/// Number of modes on the ring.
pub const MODES: usize = 8;
/// Radius of the ring.
pub const RADIUS: f64 = 2.0;
/// Standard deviation of each mode.
pub const STD: f64 = 0.05;

/// An MLP `in -> h -> h -> out` with ReLUs between the layers.
#[derive(Module, Clone)]
pub struct Mlp {
    pub l1: nn::Linear,
    pub l2: nn::Linear,
    pub l3: nn::Linear,
}

impl Mlp {
    pub fn new(inputs: usize, hidden: usize, outputs: usize) -> Self {
        Mlp {
            l1: nn::Linear::new(inputs, hidden),
            l2: nn::Linear::new(hidden, hidden),
            l3: nn::Linear::new(hidden, outputs),
        }
    }

    pub fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.l1.forward(x).relu();
        let h = self.l2.forward(&h).relu();
        self.l3.forward(&h)
    }
}

/// The generator `z [B, Z] -> x [B, 2]` and the discriminator `x [B, 2] -> logit [B, 1]`.
pub fn models(hidden: usize) -> (Mlp, Mlp) {
    let g = Mlp::new(Z, hidden, 2);
    let d = Mlp::new(2, hidden, 1);
    (g, d)
}

/// The centre of mode `k`.
pub fn centre(k: usize) -> (f64, f64) {
    let a = 2.0 * std::f64::consts::PI * k as f64 / MODES as f64;
    (RADIUS * a.cos(), RADIUS * a.sin())
}

/// `n` real samples `[n, 2]`: a uniformly chosen mode plus `N(0, STD^2)` noise, from janus's
/// random stream.
pub fn real_batch(n: usize) -> Tensor {
    let k = (Tensor::rand([n]) * MODES as f64).floor().to_dtype(DType::I64);
    let centres: Vec<f32> = (0..MODES)
        .flat_map(|k| {
            let (x, y) = centre(k);
            [x as f32, y as f32]
        })
        .collect();
    let centres = Tensor::from_vec(centres, [MODES, 2]);
    centres.index_select(0, &k) + Tensor::randn([n, 2]) * STD
}

/// Noise for the generator, `[n, Z]`.
pub fn noise(n: usize) -> Tensor {
    Tensor::randn([n, Z])
}

/// One discriminator step: real samples should score high, generated ones low. The generated
/// batch is `detach()`ed, so no gradient reaches the generator.
#[janus]
pub fn d_step(d: &mut Mlp, g: &Mlp, opt: &mut optim::Adam, real: &Tensor, z: &Tensor) -> f32 {
    let fake = g.forward(z).detach();
    let loss = (-d.forward(real)).softplus().mean_all() + d.forward(&fake).softplus().mean_all();
    let grads = loss.backward();
    opt.step(d, &grads);
    loss.item()
}

/// One generator step with the non-saturating loss `-log D(G(z))`. Gradients flow through the
/// discriminator into the generator; only the generator's optimiser steps.
#[janus]
pub fn g_step(g: &mut Mlp, d: &Mlp, opt: &mut optim::Adam, z: &Tensor) -> f32 {
    let loss = (-d.forward(&g.forward(z))).softplus().mean_all();
    let grads = loss.backward();
    opt.step(g, &grads);
    loss.item()
}

/// The two optimisers, Adam(1e-3, betas 0.5, 0.999) each, as in the usual GAN recipes.
pub fn optimisers(lr: f64) -> (optim::Adam, optim::Adam) {
    (optim::Adam::new(lr).betas(0.5, 0.999), optim::Adam::new(lr).betas(0.5, 0.999))
}

/// Per mode, how many of `points` lie within 3 standard deviations of its centre; and how many
/// lie within 3 standard deviations of any centre (the "high-quality" samples).
pub fn mode_counts(points: &[(f32, f32)]) -> ([usize; MODES], usize) {
    let mut counts = [0; MODES];
    let mut good = 0;
    for &(x, y) in points {
        for (k, c) in counts.iter_mut().enumerate() {
            let (cx, cy) = centre(k);
            let dist = ((x as f64 - cx).powi(2) + (y as f64 - cy).powi(2)).sqrt();
            if dist < 3.0 * STD {
                *c += 1;
                good += 1;
                break;
            }
        }
    }
    (counts, good)
}

/// The modes that hold at least 1% of the samples each (a mode is "covered").
pub fn covered(counts: &[usize; MODES], total: usize) -> usize {
    counts.iter().filter(|&&c| c * 100 >= total).count()
}

/// A tensor `[n, 2]` as points.
pub fn to_points(t: &Tensor) -> Vec<(f32, f32)> {
    t.to_vec::<f32>().chunks(2).map(|p| (p[0], p[1])).collect()
}
