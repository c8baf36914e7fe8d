//! Character-level GPT: a port of Karpathy's nanoGPT `shakespeare_char` configuration
//! (https://github.com/karpathy/nanoGPT, `model.py` + `train.py` +
//! `config/train_shakespeare_char.py`), shrunk to 2 layers, 4 heads, d=64, trained on Cicero's
//! *De finibus* from the `lipsum` crate instead of Shakespeare. Token and learned position
//! embeddings, pre-norm causal blocks (`nn::TransformerEncoderLayer`), a final LayerNorm and an
//! LM head tied to the token embedding; dropout 0.2; `#[janus]` on the model's forward (nanoGPT
//! compiles the model) and on the training step. The context length is drawn per step
//! (16..=64, batch 16). AdamW (betas 0.9/0.99, decoupled weight decay 0.1 on 2-D weights, written
//! by hand: janus has Adam only), gradient clipping at 1.0, linear warm-up then cosine decay, an
//! `estimate_loss` in eval mode under `no_grad`, and a checkpoint saved and reloaded mid-run.
use janus::optim::lr_scheduler::{CosineAnnealingLr, LinearLr, LrScheduler, SequentialLr};
use janus::prelude::*;

const N_LAYER: usize = 2;
const N_HEAD: usize = 4;
const N_EMBD: usize = 64;
const BLOCK_SIZE: usize = 64;
const BATCH_SIZE: usize = 16;
const DROPOUT: f64 = 0.2;
const LEARNING_RATE: f64 = 1e-3;
const MIN_LR: f64 = 1e-4;
const WEIGHT_DECAY: f64 = 1e-1;
const BETA1: f64 = 0.9;
const BETA2: f64 = 0.99;
const GRAD_CLIP: f64 = 1.0;
const EVAL_ITERS: usize = 4;

/// SplitMix64, for batch offsets and context lengths.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed ^ 0x0DDB_A11C_AFE0_1234)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`torch.randint(n, ...)`).
    pub fn randint(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[derive(Module)]
pub struct Gpt {
    wte: nn::Embedding,
    wpe: nn::Embedding,
    drop: nn::Dropout,
    h: Vec<nn::TransformerEncoderLayer>,
    ln_f: nn::LayerNorm,
}

impl Gpt {
    pub fn new(vocab_size: usize) -> Self {
        let mut model = Gpt {
            wte: nn::Embedding::new(vocab_size, N_EMBD),
            wpe: nn::Embedding::new(BLOCK_SIZE, N_EMBD),
            drop: nn::Dropout::new(DROPOUT),
            h: (0..N_LAYER)
                .map(|_| nn::TransformerEncoderLayer::new(N_EMBD, N_HEAD, 4 * N_EMBD, DROPOUT))
                .collect(),
            ln_f: nn::LayerNorm::new(&[N_EMBD]),
        };
        // nanoGPT's _init_weights for the embeddings: normal(0, 0.02). (The lm_head is tied to
        // wte, so N(0, 1) would start with huge logits.) Linear layers keep PyTorch's default.
        model.wte.weight = (Tensor::randn([vocab_size, N_EMBD]) * 0.02).requires_grad();
        model.wpe.weight = (Tensor::randn([BLOCK_SIZE, N_EMBD]) * 0.02).requires_grad();
        model
    }

    /// nanoGPT's `GPT.forward(idx, targets=None)`: logits `[B, T, V]`, and the loss when
    /// `targets` are given.
    #[janus]
    pub fn forward(&self, idx: &Tensor, targets: Option<&Tensor>) -> (Tensor, Option<Tensor>) {
        let t = idx.dims()[1];
        assert!(t <= BLOCK_SIZE, "Cannot forward sequence of length {t}, block size is only {BLOCK_SIZE}");
        let pos = Tensor::arange(t);

        let tok_emb = self.wte.forward(idx);
        let pos_emb = self.wpe.forward(&pos);
        let mut x = self.drop.forward(&(tok_emb + pos_emb));
        for block in &self.h {
            x = block.forward(&x, true);
        }
        let x = self.ln_f.forward(&x);
        // lm_head with weight tying: lm_head.weight = wte.weight
        let logits = x.matmul(&self.wte.weight.t());
        let loss = match targets {
            Some(targets) => {
                let v = logits.dims()[2];
                Some(logits.reshape([-1, v as i64]).cross_entropy(&targets.reshape([-1])))
            }
            None => None,
        };
        (logits, loss)
    }
}

/// AdamW's decoupled weight decay, `p *= 1 - lr * wd`, on the 2-D weights only (nanoGPT's
/// `configure_optimizers` puts biases and LayerNorm weights in the no-decay group).
fn apply_weight_decay(model: &mut Gpt, lr: f64, weight_decay: f64) {
    no_grad(|| {
        model.visit_mut(&mut |p: &mut Tensor| {
            if p.rank() >= 2 {
                *p = (&*p * (1.0 - lr * weight_decay)).requires_grad();
            }
        })
    });
}

#[janus]
pub fn train_step(model: &mut Gpt, optimizer: &mut optim::Adam, x: &Tensor, y: &Tensor, lr: f64) -> f32 {
    let (_logits, loss) = model.forward(x, Some(y));
    let loss = loss.unwrap();
    let grads = loss.backward();
    let (grads, _norm) = grads.clip_norm(GRAD_CLIP);
    optimizer.step(model, &grads);
    apply_weight_decay(model, lr, WEIGHT_DECAY);
    loss.item()
}

/// The corpus, its character vocabulary, and the 90/10 train/val split (nanoGPT's
/// `data/shakespeare_char/prepare.py`).
struct Data {
    train: Vec<i64>,
    val: Vec<i64>,
    vocab_size: usize,
}

fn prepare() -> Data {
    let text = lipsum::LIBER_PRIMUS;
    let mut chars: Vec<char> = text.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    let stoi = |c: char| chars.binary_search(&c).unwrap() as i64;
    let data: Vec<i64> = text.chars().map(stoi).collect();
    let n = data.len() * 9 / 10;
    Data { train: data[..n].to_vec(), val: data[n..].to_vec(), vocab_size: chars.len() }
}

fn get_batch(data: &[i64], rng: &mut SplitMix64, block_size: usize) -> (Tensor, Tensor) {
    let mut x = Vec::with_capacity(BATCH_SIZE * block_size);
    let mut y = Vec::with_capacity(BATCH_SIZE * block_size);
    for _ in 0..BATCH_SIZE {
        let i = rng.randint(data.len() - block_size);
        x.extend_from_slice(&data[i..i + block_size]);
        y.extend_from_slice(&data[i + 1..i + 1 + block_size]);
    }
    (Tensor::from_vec(x, [BATCH_SIZE, block_size]), Tensor::from_vec(y, [BATCH_SIZE, block_size]))
}

/// Mean loss over a few batches of each split, in eval mode (no dropout) and without autograd.
fn estimate_loss(model: &mut Gpt, data: &Data, rng: &mut SplitMix64) -> (f64, f64) {
    model.eval();
    let mut out = [0.0; 2];
    for (k, split) in [&data.train, &data.val].into_iter().enumerate() {
        let mut total = 0.0;
        for _ in 0..EVAL_ITERS {
            let (x, y) = get_batch(split, rng, BLOCK_SIZE);
            let (_logits, loss) = no_grad(|| model.forward(&x, Some(&y)));
            total += loss.unwrap().item() as f64;
        }
        out[k] = total / EVAL_ITERS as f64;
    }
    model.train();
    (out[0], out[1])
}

fn checkpoint_paths(seed: u64) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir();
    let stem = format!("char-gpt-{}-{seed}-{run}", std::process::id());
    (dir.join(format!("{stem}-model.safetensors")), dir.join(format!("{stem}-optim.safetensors")))
}

fn adamw() -> optim::Adam {
    optim::Adam::new(LEARNING_RATE).betas(BETA1, BETA2)
}

/// Trains for `steps` optimisation steps from `seed` in the current janus mode (the caller picks eager/janus/check with `janus::with_mode`) and returns one main loss value per step.
pub fn train(steps: usize, seed: u64) -> Vec<f64> {
    janus::manual_seed(seed);
    let mut rng = SplitMix64::new(seed);
    let data = prepare();

    let mut model = Gpt::new(data.vocab_size);
    let mut optimizer = adamw();
    let warmup_iters = (steps / 10).max(1);
    let warmup = LinearLr::warmup(&mut optimizer, 0.01, warmup_iters);
    let cosine = CosineAnnealingLr::new(&mut optimizer, steps - warmup_iters, MIN_LR);
    let mut scheduler =
        SequentialLr::new(&mut optimizer, vec![Box::new(warmup), Box::new(cosine)], &[warmup_iters]);

    let mut best_val_loss = f64::INFINITY;
    let mut losses = Vec::with_capacity(steps);
    for iter_num in 0..steps {
        if iter_num == steps / 2 {
            let (_train_loss, val_loss) = estimate_loss(&mut model, &data, &mut rng);
            if val_loss < best_val_loss {
                best_val_loss = val_loss;
                let (model_path, optim_path) = checkpoint_paths(seed);
                janus::save(&model_path, &model).expect("save model");
                janus::save(&optim_path, &optimizer).expect("save optimizer");
                // Resume as `init_from = 'resume'` would: a fresh model and optimiser.
                model = Gpt::new(data.vocab_size);
                optimizer = adamw();
                janus::load(&model_path, &mut model).expect("load model");
                janus::load(&optim_path, &mut optimizer).expect("load optimizer");
                let _ = std::fs::remove_file(&model_path);
                let _ = std::fs::remove_file(&optim_path);
            }
        }

        let block_size = 16 + rng.randint(BLOCK_SIZE - 16 + 1);
        let (x, y) = get_batch(&data.train, &mut rng, block_size);
        let lr = scheduler.get_last_lr();
        let loss = train_step(&mut model, &mut optimizer, &x, &y, lr);
        scheduler.step(&mut optimizer);
        losses.push(loss as f64);
    }
    losses
}
