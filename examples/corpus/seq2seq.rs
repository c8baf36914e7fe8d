//! Seq2seq with attention: a port of the PyTorch tutorial "NLP From Scratch: Translation with a
//! Sequence to Sequence Network and Attention"
//! (https://pytorch.org/tutorials/intermediate/seq2seq_translation_tutorial.html), on a synthetic
//! task: reverse a sequence of tokens. A GRU encoder (`nn::Embedding` + `nn::GruCell` stepped
//! over time, outputs stacked), a GRU decoder with dot-product (Luong) attention over all encoder
//! outputs, teacher forcing drawn per step inside the training step (as the tutorial's
//! `train()` does) and greedy argmax feedback otherwise, cross-entropy averaged over the decoder
//! steps, gradient clipping, Adam with a cosine schedule, and a checkpoint of model and
//! optimiser saved and reloaded mid-run. Sequence length and batch size change on every step.
use janus::optim::lr_scheduler::{CosineAnnealingLr, LrScheduler};
use janus::prelude::*;

const SOS: i64 = 0;
const EOS: i64 = 1;
const N_TOKENS: usize = 20; // ordinary tokens are 2..22
const VOCAB: usize = N_TOKENS + 2;
const HIDDEN: usize = 128; // the tutorial's hidden_size
const TEACHER_FORCING_RATIO: f64 = 0.75;
const LR: f64 = 3e-3;
const CLIP: f64 = 1.0;

/// SplitMix64: the host-side random choices (lengths, batch sizes, tokens, teacher forcing).
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed ^ 0x5EED_5EED_1234_5678)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    pub fn random(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Module)]
pub struct EncoderRnn {
    embedding: nn::Embedding,
    gru: nn::GruCell,
}

impl EncoderRnn {
    pub fn new(vocab: usize, hidden: usize) -> Self {
        EncoderRnn { embedding: nn::Embedding::new(vocab, hidden), gru: nn::GruCell::new(hidden, hidden) }
    }

    /// `src` `[B, T]` i64 -> (outputs `[B, T, H]`, last hidden `[B, H]`).
    pub fn forward(&self, src: &Tensor) -> (Tensor, Tensor) {
        let batch = src.dims()[0];
        let mut hidden = Tensor::zeros([batch, self.gru.hidden_size()]);
        let mut outputs = Vec::new();
        for t in 0..src.dims()[1] {
            let embedded = self.embedding.forward(&src.narrow(1, t, 1).squeeze(1));
            hidden = self.gru.forward(&embedded, &hidden);
            outputs.push(hidden.clone());
        }
        let outputs: Vec<&Tensor> = outputs.iter().collect();
        (Tensor::stack(&outputs, 1), hidden)
    }
}

#[derive(Module)]
pub struct AttnDecoderRnn {
    embedding: nn::Embedding,
    gru: nn::GruCell,
    concat: nn::Linear,
    out: nn::Linear,
}

impl AttnDecoderRnn {
    pub fn new(hidden: usize, vocab: usize) -> Self {
        AttnDecoderRnn {
            embedding: nn::Embedding::new(vocab, hidden),
            gru: nn::GruCell::new(hidden, hidden),
            concat: nn::Linear::new(2 * hidden, hidden),
            out: nn::Linear::new(hidden, vocab),
        }
    }

    /// One decoder step (Luong, "dot" score): `input` `[B]` i64, `hidden` `[B, H]`,
    /// `encoder_outputs` `[B, T, H]` -> (logits `[B, V]`, hidden `[B, H]`, attention `[B, T]`).
    pub fn forward(
        &self,
        input: &Tensor,
        hidden: &Tensor,
        encoder_outputs: &Tensor,
    ) -> (Tensor, Tensor, Tensor) {
        let embedded = self.embedding.forward(input);
        let hidden = self.gru.forward(&embedded, hidden);
        // score(h_t, h_s) = h_t . h_s
        let scores = encoder_outputs.matmul(&hidden.unsqueeze(2)).squeeze(2);
        let attn_weights = scores.softmax(1);
        let context = attn_weights.unsqueeze(1).matmul(encoder_outputs).squeeze(1);
        let concat_output = self.concat.forward(&Tensor::cat(&[&hidden, &context], 1)).tanh();
        let output = self.out.forward(&concat_output);
        (output, hidden, attn_weights)
    }
}

#[derive(Module)]
pub struct Seq2Seq {
    encoder: EncoderRnn,
    decoder: AttnDecoderRnn,
}

impl Seq2Seq {
    pub fn new() -> Self {
        Seq2Seq { encoder: EncoderRnn::new(VOCAB, HIDDEN), decoder: AttnDecoderRnn::new(HIDDEN, VOCAB) }
    }
}

/// One training step, like the tutorial's `train()`: teacher forcing is drawn here.
#[janus]
pub fn train_step(
    model: &mut Seq2Seq,
    opt: &mut optim::Adam,
    rng: &mut SplitMix64,
    src: &Tensor,
    tgt: &Tensor,
) -> f32 {
    let (encoder_outputs, encoder_hidden) = model.encoder.forward(src);

    let batch = src.dims()[0];
    let mut decoder_input = Tensor::full_dtype([batch], SOS as f64, DType::I64);
    let mut decoder_hidden = encoder_hidden;

    let use_teacher_forcing = rng.random() < TEACHER_FORCING_RATIO;

    let mut losses = Vec::new();
    if use_teacher_forcing {
        // Teacher forcing: feed the target as the next input.
        for di in 0..tgt.dims()[1] {
            let (decoder_output, hidden, _attn) =
                model.decoder.forward(&decoder_input, &decoder_hidden, &encoder_outputs);
            decoder_hidden = hidden;
            let target = tgt.narrow(1, di, 1).squeeze(1);
            losses.push(decoder_output.cross_entropy(&target));
            decoder_input = target;
        }
    } else {
        // Without teacher forcing: use its own predictions as the next input.
        for di in 0..tgt.dims()[1] {
            let (decoder_output, hidden, _attn) =
                model.decoder.forward(&decoder_input, &decoder_hidden, &encoder_outputs);
            decoder_hidden = hidden;
            let target = tgt.narrow(1, di, 1).squeeze(1);
            losses.push(decoder_output.cross_entropy(&target));
            decoder_input = decoder_output.argmax(1).detach();
        }
    }
    let losses: Vec<&Tensor> = losses.iter().collect();
    let loss = Tensor::stack(&losses, 0).mean_all();

    let grads = loss.backward();
    let (grads, _norm) = grads.clip_norm(CLIP);
    opt.step(model, &grads);

    loss.item()
}

/// A batch of the reversal task: `src` `[B, T]` of random tokens, `tgt` `[B, T + 1]` the
/// reversed tokens followed by EOS.
fn random_batch(rng: &mut SplitMix64, batch: usize, len: usize) -> (Tensor, Tensor) {
    let mut src = Vec::with_capacity(batch * len);
    let mut tgt = Vec::with_capacity(batch * (len + 1));
    for _ in 0..batch {
        let seq: Vec<i64> = (0..len).map(|_| 2 + rng.range(0, N_TOKENS - 1) as i64).collect();
        src.extend_from_slice(&seq);
        tgt.extend(seq.iter().rev());
        tgt.push(EOS);
    }
    (Tensor::from_vec(src, [batch, len]), Tensor::from_vec(tgt, [batch, len + 1]))
}

fn checkpoint_paths(seed: u64) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir();
    let stem = format!("seq2seq-{}-{seed}-{run}", std::process::id());
    (dir.join(format!("{stem}-model.safetensors")), dir.join(format!("{stem}-optim.safetensors")))
}

/// Trains for `steps` optimisation steps from `seed` in the current janus mode (the caller picks eager/janus/check with `janus::with_mode`) and returns one main loss value per step.
pub fn train(steps: usize, seed: u64) -> Vec<f64> {
    janus::manual_seed(seed);
    let mut rng = SplitMix64::new(seed);

    let mut model = Seq2Seq::new();
    let mut opt = optim::Adam::new(LR);
    let mut scheduler = CosineAnnealingLr::new(&mut opt, steps, 0.0);

    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        if step == steps / 2 {
            // torch.save({'model': ..., 'optimizer': ...}); then resume as a fresh process would.
            let (model_path, optim_path) = checkpoint_paths(seed);
            janus::save(&model_path, &model).expect("save model");
            janus::save(&optim_path, &opt).expect("save optimizer");
            model = Seq2Seq::new();
            opt = optim::Adam::new(LR);
            janus::load(&model_path, &mut model).expect("load model");
            janus::load(&optim_path, &mut opt).expect("load optimizer");
            let _ = std::fs::remove_file(&model_path);
            let _ = std::fs::remove_file(&optim_path);
        }

        let len = rng.range(4, 10);
        let batch = rng.range(16, 48);
        let (src, tgt) = random_batch(&mut rng, batch, len);
        let loss = train_step(&mut model, &mut opt, &mut rng, &src, &tgt);
        scheduler.step(&mut opt);
        losses.push(loss as f64);
    }
    losses
}
