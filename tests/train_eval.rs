//! `Module::train()`/`eval()` (issue 15): the mode flag is a constant leaf, so a `#[janus]`
//! function called in eval mode after train mode gets a key (and a graph) of its own and gives
//! eager mode's results; `set_training` reaches every layer through containers and the derive.
//! (The layers' own behaviour in both modes is tested in `tests/layers.rs`.)

use janus::prelude::*;

/// A model with its own flag (`#[module(training)]`), behaving differently in the two modes.
#[derive(Module, Clone)]
struct Net {
    l1: nn::Linear,
    l2: nn::Linear,
    #[module(training)]
    training: bool,
}

impl Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.l1.forward(x).tanh();
        // In train mode the hidden layer is scaled (a stand-in for dropout's 1/(1-p)).
        let h = if self.training { h * 0.5 } else { h };
        self.l2.forward(&h)
    }
}

#[janus]
fn train_step(m: &mut Net, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let loss = m.forward(x).cross_entropy(y);
    let grads = loss.backward();
    opt.step(m, &grads);
    loss.item()
}

#[janus]
fn outputs(m: &Net, x: &Tensor) -> Tensor {
    let y = m.forward(x).softmax(1);
    y
}

/// Within 1e-6 relative: compiled graphs may fuse and round differently from eager ops.
fn assert_close(a: &Tensor, b: &Tensor, what: &str) {
    for (x, y) in a.to_vec::<f32>().iter().zip(b.to_vec::<f32>()) {
        assert!((x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1e-3), "{what}: {x} vs {y}");
    }
}

fn variants(name: &str) -> usize {
    janus::stats().function(name).map(|f| f.variants).sum()
}

#[test]
fn eval_after_train_gets_its_own_key_and_eager_results() {
    janus::set_self_check(false);
    janus::manual_seed(3);
    let mut net = Net { l1: nn::Linear::new(4, 16), l2: nn::Linear::new(16, 3), training: true };
    let mut opt = optim::Adam::new(0.01);
    let x = Tensor::randn([8, 4]);
    let y = Tensor::from_vec((0..8).map(|i| (i % 3) as i64).collect::<Vec<_>>(), [8]);
    for _ in 0..6 {
        train_step(&mut net, &mut opt, &x, &y);
        let staged = outputs(&net, &x);
        let eager = janus::with_mode(Mode::Eager, || outputs(&net, &x));
        assert_close(&staged, &eager, "train mode");
    }
    let before = janus::stats();
    let train_variants = variants("outputs");
    assert!(train_variants >= 1, "{}", janus::explain());
    net.eval();
    assert!(!net.training);
    for _ in 0..6 {
        let staged = outputs(&net, &x);
        let eager = janus::with_mode(Mode::Eager, || outputs(&net, &x));
        // The train graph scales the hidden layer by 0.5: replaying it here would be far off.
        assert_close(&staged, &eager, "eval mode");
    }
    // The eval-mode calls compiled a graph of their own (a second key) and replayed it.
    assert_eq!(variants("outputs"), train_variants + 1, "{}", janus::explain());
    let s = janus::stats().since(&before);
    assert!(s.function("outputs").map(|f| f.hits).sum::<u64>() > 0, "{}", janus::explain());
    // Back in train mode, the first key replays again: no new variant.
    net.train();
    let staged = outputs(&net, &x);
    let eager = janus::with_mode(Mode::Eager, || outputs(&net, &x));
    assert_close(&staged, &eager, "train mode again");
    assert_eq!(variants("outputs"), train_variants + 1);
}

#[test]
fn set_training_reaches_every_layer_through_containers() {
    #[derive(Module)]
    struct Outer {
        inner: Vec<Net>,
        pair: (Option<Net>, Box<nn::Dropout>),
        seq: nn::Sequential,
    }
    let net = || Net { l1: nn::Linear::new(2, 2), l2: nn::Linear::new(2, 2), training: true };
    let mut m = Outer {
        inner: vec![net(), net()],
        pair: (Some(net()), Box::new(nn::Dropout::new(0.5))),
        seq: nn::Sequential::new(vec![nn::Dropout::new(0.1).into(), nn::BatchNorm2d::new(3).into()]),
    };
    let flags = |m: &Outer| {
        let mut v: Vec<bool> = m.inner.iter().map(|n| n.training).collect();
        v.push(m.pair.0.as_ref().unwrap().training);
        v.push(m.pair.1.training);
        for l in &m.seq.layers {
            match l {
                nn::Layer::Dropout(d) => v.push(d.training),
                nn::Layer::BatchNorm2d(b) => v.push(b.training),
                _ => {}
            }
        }
        v
    };
    assert!(flags(&m).iter().all(|&t| t));
    m.eval();
    assert_eq!(flags(&m), vec![false; 6]);
    m.train();
    assert_eq!(flags(&m), vec![true; 6]);
}
