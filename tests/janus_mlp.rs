//! A straight-line MLP training step under `#[janus]`: forward, `backward()`, then an Adam
//! update through `&mut model`, against the same function in eager mode over many calls.

use janus::prelude::*;

#[derive(Module, Clone)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

#[janus]
fn train_step(m: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let h = m.l1.forward(x).tanh();
    let loss = m.l2.forward(&h).cross_entropy(y);
    let grads = loss.backward();
    opt.step(m, &grads);
    loss.item()
}

fn data() -> (Tensor, Tensor) {
    janus::manual_seed(5);
    let x = Tensor::randn([16, 4]);
    let y = Tensor::from_vec((0..16).map(|i| (i % 3) as i64).collect::<Vec<_>>(), [16]);
    (x, y)
}

#[test]
fn staged_training_matches_eager() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let (x, y) = data();
    janus::manual_seed(1);
    let init = Mlp { l1: nn::Linear::new(4, 32), l2: nn::Linear::new(32, 3) };
    let (mut a, mut b) = (init.clone(), init);
    let (mut oa, mut ob) = (optim::Adam::new(0.01), optim::Adam::new(0.01));
    for step in 0..30 {
        let la = janus::with_mode(Mode::Eager, || train_step(&mut a, &mut oa, &x, &y));
        let lb = train_step(&mut b, &mut ob, &x, &y);
        assert!((la - lb).abs() <= 1e-5 * la.abs().max(1.0), "step {step}: eager {la} vs janus {lb}");
        for ((_, p), (_, q)) in a.named_tensors().iter().zip(b.named_tensors()) {
            let (p, q) = (p.to_vec::<f32>(), q.to_vec::<f32>());
            let err = p.iter().zip(&q).map(|(u, v)| (u - v).abs()).fold(0.0, f32::max);
            assert!(err <= 1e-5, "step {step}: parameter differs by {err}");
        }
    }
    let s = janus::stats();
    let frags: Vec<_> = s.function("train_step").collect();
    assert!(frags.iter().any(|f| f.hits > 0), "{}", janus::explain());
    println!("{}", janus::explain());
}
