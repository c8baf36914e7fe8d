//! The bench's rows for the issue-15 models: the refbench CNN and Transformer steps and the
//! `gan` example's step, each in every configuration of [`super::MODES`].

use super::{MODES, Row, cnn, gan, interleaved, timed, transformer_lm};
use janus::prelude::*;

/// Eight synthetic batches of the refbench CNN step: 1x28x28 images and labels of 10 classes.
pub fn cnn_batches() -> Vec<(Tensor, Tensor)> {
    (0..8)
        .map(|_| {
            let y = (Tensor::rand([cnn::BATCH]) * 10.0).floor().to_dtype(DType::I64);
            (Tensor::randn([cnn::BATCH, 1, 28, 28]), y)
        })
        .collect()
}

/// Eight synthetic batches of the refbench Transformer step: tokens and the next tokens.
pub fn transformer_batches() -> Vec<(Tensor, Tensor)> {
    use transformer_lm::{B, T, V};
    (0..8)
        .map(|_| {
            let tok = (Tensor::rand([B, T + 1]) * V as f64).floor().to_dtype(DType::I64);
            (tok.narrow(1, 0, T).contiguous(), tok.narrow(1, 1, T).contiguous())
        })
        .collect()
}

/// The refbench CNN step (batch 64 of 1x28x28, Adam 1e-3) on 8 synthetic batches, as
/// `shared/refbench/models_torch.py --model cnn` times it.
pub fn cnn_step(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(0);
    let data = cnn_batches();
    let init = cnn::model();
    let mut learners: Vec<(janus::nn::Sequential, optim::Adam)> =
        (0..4).map(|_| (init.clone(), optim::Adam::new(1e-3))).collect();
    let mut next = 0;
    let [e, j, jn, c] = interleaved(repeats, |k, out| {
        let (m, opt) = &mut learners[k];
        for _ in 0..steps {
            let (x, y) = &data[next % data.len()];
            out.push(timed(1e3, || _ = cnn::train_step(m, opt, x, y)));
            next += 1;
        }
    });
    vec![Row {
        workload: "CNN",
        metric: "training step (batch 64), ms",
        values: [Some(e), Some(j), Some(jn), Some(c)],
    }]
}

/// The refbench Transformer step (V=65, T=64, B=32, d=128, 4 heads, ff 512, 2 pre-norm layers,
/// dropout 0, Adam 3e-4) on 8 synthetic batches, as `models_torch.py --model transformer`.
pub fn transformer_step(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(0);
    let data = transformer_batches();
    let init = transformer_lm::CharTransformer::refbench();
    let mut learners: Vec<(transformer_lm::CharTransformer, optim::Adam)> =
        (0..4).map(|_| (init.clone(), optim::Adam::new(3e-4))).collect();
    let mut next = 0;
    let [e, j, jn, c] = interleaved(repeats, |k, out| {
        let (m, opt) = &mut learners[k];
        for _ in 0..steps {
            let (x, y) = &data[next % data.len()];
            out.push(timed(1e3, || _ = transformer_lm::train_step(m, opt, x, y)));
            next += 1;
        }
    });
    vec![Row {
        workload: "Transformer",
        metric: "training step (32x64 tokens), ms",
        values: [Some(e), Some(j), Some(jn), Some(c)],
    }]
}

/// The `gan` example's step: one discriminator and one generator update (batch 256, MLPs
/// 2-128-128-{2,1}, two Adams); `scripts/gan_torch.py` is its PyTorch peer.
pub fn gan_step(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(0);
    let data: Vec<(Tensor, Tensor, Tensor)> = (0..8)
        .map(|_| (gan::real_batch(gan::BATCH), gan::noise(gan::BATCH), gan::noise(gan::BATCH)))
        .collect();
    let (g0, d0) = gan::models(gan::HIDDEN);
    let mut learners: Vec<_> = (0..4)
        .map(|_| {
            let (od, og) = gan::optimisers(1e-3);
            (g0.clone(), d0.clone(), od, og)
        })
        .collect();
    let mut next = 0;
    let [e, j, jn, c] = interleaved(repeats, |k, out| {
        if MODES[k].0 == Mode::Check {
            // Check mode starts every block from the initial models: after a few hundred
            // steps, Adam's steps on weights whose gradient sums cancel differ between the
            // two summation orders by more than check mode's 1e-5 (docs/perf/2026-11-24.md).
            let (od, og) = gan::optimisers(1e-3);
            learners[k] = (g0.clone(), d0.clone(), od, og);
        }
        let (g, d, od, og) = &mut learners[k];
        for _ in 0..steps {
            let (real, zd, zg) = &data[next % data.len()];
            out.push(timed(1e3, || {
                gan::d_step(d, g, od, real, zd);
                gan::g_step(g, d, og, zg);
            }));
            next += 1;
        }
    });
    vec![Row {
        workload: "GAN",
        metric: "D + G step (batch 256), ms",
        values: [Some(e), Some(j), Some(jn), Some(c)],
    }]
}
