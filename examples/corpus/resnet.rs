//! ResNet for CIFAR-10-style images: a port of akamaster's "Proper ResNet implementation for
//! CIFAR10/CIFAR100 in PyTorch" (https://github.com/akamaster/pytorch_resnet_cifar10, `resnet.py`
//! and `trainer.py`), shrunk to three basic blocks and trained on synthetic 3x16x16 images of
//! 10 classes of coloured shapes and patterns generated on the host (no download).
//! Shows: a conv-BN-ReLU stem, `BasicBlock`s with identity and strided 1x1-projection shortcuts
//! (an `nn::Sequential`, empty for the identity, as in the original's option B), global average
//! pooling, dropout before the classifier, SGD with momentum and weight decay, a cosine schedule
//! stepped per epoch, shuffled mini-batches of 32 (`data::Batches`), `model.train()` for training
//! and `model.eval()` + `no_grad` for a periodic test-set accuracy, and a checkpoint of model
//! (running statistics included) and optimiser saved and reloaded halfway.
use janus::data::Batches;
use janus::nn;
use janus::optim::lr_scheduler::{CosineAnnealingLr, LrScheduler};
use janus::prelude::*;

const IMAGE: usize = 16;
const CLASSES: usize = 10;
const TRAIN_IMAGES: usize = 2048;
const TEST_IMAGES: usize = 512;
const BATCH_SIZE: usize = 32;
const TEST_BATCH_SIZE: usize = 128;
const EVAL_EVERY: usize = 100;

// ---------------------------------------------------------------------------------------------
// Synthetic data set: coloured shapes and patterns.

struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize
    }

    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform().max(1e-12), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Whether pixel (`x`, `y`), in shape-centred coordinates scaled to the shape's radius, belongs
/// to class `class`'s shape or pattern.
fn inside(class: usize, x: f64, y: f64, phase: f64) -> bool {
    let r = (x * x + y * y).sqrt();
    match class {
        0 => x.abs() < 1.0 && y.abs() < 1.0,                          // square
        1 => r < 1.0,                                                 // disc
        2 => (0.55..1.0).contains(&r),                                // ring
        3 => ((y * 2.0 + phase).rem_euclid(2.0)) < 1.0,               // horizontal stripes
        4 => ((x * 2.0 + phase).rem_euclid(2.0)) < 1.0,               // vertical stripes
        5 => (((x + y) * 1.5 + phase).rem_euclid(2.0)) < 1.0,         // diagonal stripes
        6 => (x.abs() < 0.3 || y.abs() < 0.3) && r < 1.2,             // plus
        7 => ((x - y).abs() < 0.4 || (x + y).abs() < 0.4) && r < 1.2, // cross
        8 => y > -0.8 && y < 1.0 && x.abs() < (1.0 - y) * 0.6,        // triangle
        _ => ((x * 1.5 + phase).floor() + (y * 1.5).floor()).rem_euclid(2.0) < 1.0, // checkerboard
    }
}

/// `n` images `[n, 3, 16, 16]` (normalised as `transforms.Normalize` would) and labels `[n]`.
fn make_dataset(n: usize, rng: &mut SplitMix64) -> (Tensor, Tensor) {
    let mut pixels = Vec::with_capacity(n * 3 * IMAGE * IMAGE);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let class = rng.below(CLASSES);
        let fg: [f64; 3] = [rng.range(0.3, 1.0), rng.range(0.3, 1.0), rng.range(0.3, 1.0)];
        let bg: [f64; 3] = [rng.range(0.0, 0.4), rng.range(0.0, 0.4), rng.range(0.0, 0.4)];
        let (cx, cy) = (rng.range(5.5, 9.5), rng.range(5.5, 9.5));
        let radius = rng.range(2.5, 5.5);
        let phase = rng.range(0.0, 2.0);
        let mut image = vec![0.0f32; 3 * IMAGE * IMAGE];
        for py in 0..IMAGE {
            for px in 0..IMAGE {
                let x = (px as f64 + 0.5 - cx) / radius;
                let y = (py as f64 + 0.5 - cy) / radius;
                let on = inside(class, x, y, phase);
                for c in 0..3 {
                    let v = if on { fg[c] } else { bg[c] } + 0.2 * rng.normal();
                    image[c * IMAGE * IMAGE + py * IMAGE + px] = ((v - 0.5) / 0.25) as f32;
                }
            }
        }
        pixels.extend_from_slice(&image);
        labels.push(class as i64);
    }
    (Tensor::from_vec(pixels, [n, 3, IMAGE, IMAGE]), Tensor::from_vec(labels, [n]))
}

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Module, Clone)]
struct BasicBlock {
    conv1: nn::Conv2d,
    bn1: nn::BatchNorm2d,
    conv2: nn::Conv2d,
    bn2: nn::BatchNorm2d,
    shortcut: nn::Sequential,
}

impl BasicBlock {
    fn new(in_planes: usize, planes: usize, stride: usize) -> Self {
        let shortcut = if stride != 1 || in_planes != planes {
            nn::Sequential::new(vec![
                nn::Conv2d::new(in_planes, planes, 1).stride(stride).no_bias().into(),
                nn::BatchNorm2d::new(planes).into(),
            ])
        } else {
            nn::Sequential::new(vec![])
        };
        BasicBlock {
            conv1: nn::Conv2d::new(in_planes, planes, 3).stride(stride).padding(1).no_bias(),
            bn1: nn::BatchNorm2d::new(planes),
            conv2: nn::Conv2d::new(planes, planes, 3).padding(1).no_bias(),
            bn2: nn::BatchNorm2d::new(planes),
            shortcut,
        }
    }

    fn forward(&mut self, x: &Tensor) -> Tensor {
        let out = self.bn1.forward(&self.conv1.forward(x)).relu();
        let out = self.bn2.forward(&self.conv2.forward(&out));
        (out + self.shortcut.forward(x)).relu()
    }
}

#[derive(Module, Clone)]
struct ResNet {
    conv1: nn::Conv2d,
    bn1: nn::BatchNorm2d,
    layer1: Vec<BasicBlock>,
    layer2: Vec<BasicBlock>,
    dropout: nn::Dropout,
    linear: nn::Linear,
}

impl ResNet {
    /// `num_blocks` basic blocks per stage, 16/32 planes (akamaster's `ResNet` has a third stage of 64).
    fn new(num_blocks: [usize; 2], num_classes: usize) -> Self {
        let mut in_planes = 16;
        let mut make_layer = |planes: usize, blocks: usize, stride: usize| {
            let mut layers = Vec::new();
            for s in std::iter::once(stride).chain(std::iter::repeat_n(1, blocks - 1)) {
                layers.push(BasicBlock::new(in_planes, planes, s));
                in_planes = planes;
            }
            layers
        };
        let layer1 = make_layer(16, num_blocks[0], 1);
        let layer2 = make_layer(32, num_blocks[1], 2);
        ResNet {
            conv1: nn::Conv2d::new(3, 16, 3).padding(1).no_bias(),
            bn1: nn::BatchNorm2d::new(16),
            layer1,
            layer2,
            dropout: nn::Dropout::new(0.2),
            linear: nn::Linear::new(32, num_classes),
        }
    }

    fn forward(&mut self, x: &Tensor) -> Tensor {
        let mut out = self.bn1.forward(&self.conv1.forward(x)).relu();
        for block in self.layer1.iter_mut().chain(&mut self.layer2) {
            out = block.forward(&out);
        }
        // F.avg_pool2d(out, out.size()[3]); out.view(out.size(0), -1)
        let k = out.dims()[3];
        let out = out.avg_pool2d([k, k], [k, k], [0, 0]);
        let out = out.reshape([out.dims()[0] as i64, -1]);
        self.linear.forward(&self.dropout.forward(&out))
    }
}

#[janus]
fn train_step(model: &mut ResNet, optimizer: &mut optim::Sgd, input: &Tensor, target: &Tensor) -> f32 {
    let output = model.forward(input);
    let loss = output.cross_entropy(target);
    let grads = loss.backward();
    optimizer.step(model, &grads);
    loss.item()
}

#[janus]
fn predict(model: &mut ResNet, input: &Tensor) -> Tensor {
    let output = model.forward(input);
    output.argmax(1)
}

/// Test-set accuracy in percent, in eval mode and without gradients.
fn validate(model: &mut ResNet, x_test: &Tensor, y_test: &Tensor) -> f64 {
    model.eval();
    let mut correct = 0usize;
    let mut total = 0usize;
    no_grad(|| {
        for batch in Batches::new(&[x_test.clone(), y_test.clone()], TEST_BATCH_SIZE) {
            let (images, labels) = (&batch[0], &batch[1]);
            let predicted = predict(model, images);
            correct += predicted.eq(labels).to_dtype(DType::F32).sum_all().item() as usize;
            total += labels.dims()[0];
        }
    });
    model.train();
    100.0 * correct as f64 / total as f64
}

fn checkpoint_path(what: &str, seed: u64) -> std::path::PathBuf {
    let thread =
        format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
    std::env::temp_dir()
        .join(format!("janus_corpus_resnet_{what}_{}_{thread}_{seed}.safetensors", std::process::id()))
}

/// Trains for `steps` optimisation steps (mini-batches of 32) from `seed` in the current janus
/// mode (the caller picks eager/janus/check with `janus::with_mode`) and returns the
/// cross-entropy loss of every step.
pub fn train(steps: usize, seed: u64) -> Vec<f64> {
    janus::manual_seed(seed);
    let mut rng = SplitMix64(seed);
    let (x_train, y_train) = make_dataset(TRAIN_IMAGES, &mut rng);
    let (x_test, y_test) = make_dataset(TEST_IMAGES, &mut rng);

    let mut model = ResNet::new([1, 1], CLASSES);
    let mut optimizer = optim::Sgd::new(0.05).momentum(0.9).weight_decay(1e-4);
    let epochs = steps.div_ceil(TRAIN_IMAGES / BATCH_SIZE).max(1);
    let mut scheduler = CosineAnnealingLr::new(&mut optimizer, epochs, 0.0);

    let mut losses = Vec::with_capacity(steps);
    model.train();
    'training: for epoch in 0..epochs {
        for batch in Batches::shuffled(&[x_train.clone(), y_train.clone()], BATCH_SIZE) {
            let loss = train_step(&mut model, &mut optimizer, &batch[0], &batch[1]);
            losses.push(loss as f64);
            let step = losses.len();

            if step % EVAL_EVERY == 0 || step == steps {
                let accuracy = validate(&mut model, &x_test, &y_test);
                log::info!(target: "corpus", "resnet: epoch {epoch} step {step} loss {loss:.4} test accuracy {accuracy:.1}%");
            }

            // Save a checkpoint halfway and resume from it, as after a restart.
            if step == steps / 2 {
                let (model_path, opt_path) = (checkpoint_path("model", seed), checkpoint_path("opt", seed));
                janus::save(&model_path, &model).expect("saving the model");
                janus::save(&opt_path, &optimizer).expect("saving the optimiser");
                model = ResNet::new([1, 1], CLASSES);
                optimizer = optim::Sgd::new(0.05).momentum(0.9).weight_decay(1e-4);
                janus::load(&model_path, &mut model).expect("loading the model");
                janus::load(&opt_path, &mut optimizer).expect("loading the optimiser");
                let _ = std::fs::remove_file(model_path);
                let _ = std::fs::remove_file(opt_path);
            }

            if step == steps {
                break 'training;
            }
        }
        scheduler.step(&mut optimizer);
    }
    losses
}
