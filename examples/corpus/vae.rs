//! Variational auto-encoder: a port of pytorch/examples `vae/main.py`
//! (https://github.com/pytorch/examples/tree/main/vae) to synthetic 16x16 images (soft discs
//! and bars drawn on the host) instead of MNIST. The same MLP VAE (256 -> 400 -> 2x20 latent
//! -> 400 -> 256, sigmoid output), the reparameterisation trick with `Tensor::randn` drawn
//! inside the training step, the summed binary cross-entropy plus KL divergence loss, Adam 1e-3,
//! and a shuffled data loader of batch 128 whose last batch of each epoch is smaller
//! (`drop_last=False`). The training step reads both loss terms on the host, as a logging loop
//! would. A checkpoint of model and optimiser is saved and reloaded mid-run.
use janus::prelude::*;

const SIDE: usize = 16;
const PIXELS: usize = SIDE * SIDE;
const HIDDEN: usize = 400;
const LATENT: usize = 20;
const DATASET: usize = 2000;
const BATCH_SIZE: usize = 128;
const LR: f64 = 1e-3;

/// SplitMix64, for the synthetic images and the data loader's shuffling.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed ^ 0xA5A5_0F0F_1357_9BDF)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[derive(Module)]
pub struct Vae {
    fc1: nn::Linear,
    fc21: nn::Linear,
    fc22: nn::Linear,
    fc3: nn::Linear,
    fc4: nn::Linear,
}

impl Vae {
    pub fn new() -> Self {
        Vae {
            fc1: nn::Linear::new(PIXELS, HIDDEN),
            fc21: nn::Linear::new(HIDDEN, LATENT),
            fc22: nn::Linear::new(HIDDEN, LATENT),
            fc3: nn::Linear::new(LATENT, HIDDEN),
            fc4: nn::Linear::new(HIDDEN, PIXELS),
        }
    }

    pub fn encode(&self, x: &Tensor) -> (Tensor, Tensor) {
        let h1 = self.fc1.forward(x).relu();
        (self.fc21.forward(&h1), self.fc22.forward(&h1))
    }

    pub fn reparameterize(&self, mu: &Tensor, logvar: &Tensor) -> Tensor {
        let std = (0.5 * logvar).exp();
        let eps = Tensor::randn(std.dims()); // torch.randn_like(std)
        mu + eps * std
    }

    pub fn decode(&self, z: &Tensor) -> Tensor {
        let h3 = self.fc3.forward(z).relu();
        self.fc4.forward(&h3).sigmoid()
    }

    pub fn forward(&self, x: &Tensor) -> (Tensor, Tensor, Tensor) {
        let (mu, logvar) = self.encode(&x.reshape([-1, PIXELS as i64]));
        let z = self.reparameterize(&mu, &logvar);
        (self.decode(&z), mu, logvar)
    }
}

/// Reconstruction + KL divergence losses summed over all elements and the batch.
/// `F.binary_cross_entropy(recon_x, x, reduction='sum')` written out (PyTorch clamps each log
/// at -100), and the KL term from Appendix B of Kingma & Welling (2014).
pub fn loss_function(recon_x: &Tensor, x: &Tensor, mu: &Tensor, logvar: &Tensor) -> (Tensor, Tensor) {
    let x = x.reshape([-1, PIXELS as i64]);
    let log_p = recon_x.log().clamp(-100.0, f64::INFINITY);
    let log_1mp = (1.0 - recon_x).log().clamp(-100.0, f64::INFINITY);
    let bce = -(&x * log_p + (1.0 - &x) * log_1mp).sum_all();
    let kld = -0.5 * (1.0 + logvar - mu.square() - logvar.exp()).sum_all();
    (bce, kld)
}

#[janus]
pub fn train_step(model: &mut Vae, optimizer: &mut optim::Adam, data: &Tensor) -> (f32, f32) {
    let (recon_batch, mu, logvar) = model.forward(data);
    let (bce, kld) = loss_function(&recon_batch, data, &mu, &logvar);
    let loss = &bce + &kld;
    let grads = loss.backward();
    optimizer.step(model, &grads);
    (bce.item(), kld.item())
}

/// `n` synthetic grey-level images `[n, 1, 16, 16]` in `[0, 1]`: one to three soft discs and
/// bars each.
fn synthetic_images(rng: &mut SplitMix64, n: usize) -> Vec<f32> {
    let mut data = vec![0f32; n * PIXELS];
    for img in data.chunks_mut(PIXELS) {
        let shapes = 1 + rng.below(3);
        for _ in 0..shapes {
            let intensity = 0.6 + 0.4 * rng.uniform();
            let (cx, cy) = (2.0 + 12.0 * rng.uniform(), 2.0 + 12.0 * rng.uniform());
            let kind = rng.below(3);
            let r = 2.0 + 3.0 * rng.uniform();
            let half_len = 3.0 + 4.0 * rng.uniform();
            for y in 0..SIDE {
                for x in 0..SIDE {
                    let (dx, dy) = (x as f64 + 0.5 - cx, y as f64 + 0.5 - cy);
                    // Signed distance inside the shape (positive inside).
                    let inside = match kind {
                        0 => r - (dx * dx + dy * dy).sqrt(),            // disc
                        1 => (1.2 - dy.abs()).min(half_len - dx.abs()), // horizontal bar
                        _ => (1.2 - dx.abs()).min(half_len - dy.abs()), // vertical bar
                    };
                    let v = intensity / (1.0 + (-3.0 * inside).exp());
                    let p = &mut img[y * SIDE + x];
                    *p = p.max(v as f32);
                }
            }
        }
    }
    data
}

fn checkpoint_paths(seed: u64) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir();
    let stem = format!("vae-{}-{seed}-{run}", std::process::id());
    (dir.join(format!("{stem}-model.safetensors")), dir.join(format!("{stem}-optim.safetensors")))
}

/// Trains for `steps` optimisation steps from `seed` in the current janus mode (the caller picks eager/janus/check with `janus::with_mode`) and returns one main loss value per step.
pub fn train(steps: usize, seed: u64) -> Vec<f64> {
    janus::manual_seed(seed);
    let mut rng = SplitMix64::new(seed);
    let images = synthetic_images(&mut rng, DATASET);

    let mut model = Vae::new();
    let mut optimizer = optim::Adam::new(LR);

    let mut losses = Vec::with_capacity(steps);
    let mut order: Vec<usize> = (0..DATASET).collect();
    let mut step = 0;
    'epochs: loop {
        // DataLoader(shuffle=True, drop_last=False)
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for batch_idx in order.chunks(BATCH_SIZE) {
            if step == steps {
                break 'epochs;
            }
            if step == steps / 2 {
                let (model_path, optim_path) = checkpoint_paths(seed);
                janus::save(&model_path, &model).expect("save model");
                janus::save(&optim_path, &optimizer).expect("save optimizer");
                model = Vae::new();
                optimizer = optim::Adam::new(LR);
                janus::load(&model_path, &mut model).expect("load model");
                janus::load(&optim_path, &mut optimizer).expect("load optimizer");
                let _ = std::fs::remove_file(&model_path);
                let _ = std::fs::remove_file(&optim_path);
            }

            let mut batch = Vec::with_capacity(batch_idx.len() * PIXELS);
            for &i in batch_idx {
                batch.extend_from_slice(&images[i * PIXELS..(i + 1) * PIXELS]);
            }
            let data = Tensor::from_vec(batch, [batch_idx.len(), 1, SIDE, SIDE]);
            let (recon, kl) = train_step(&mut model, &mut optimizer, &data);
            // The example logs loss.item() / len(data).
            losses.push((recon as f64 + kl as f64) / batch_idx.len() as f64);
            step += 1;
        }
    }
    losses
}
