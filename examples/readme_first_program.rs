//! The README's first program, kept compiling and running.
//!
//!     cargo run --release --example readme_first_program

use janus::prelude::*;

#[derive(Module)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

#[janus] // the body below runs as cached compiled graphs; without the attribute, eagerly
fn train_step(net: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let logits = net.l2.forward(&net.l1.forward(x).relu());
    let loss = logits.cross_entropy(y);
    let grads = loss.backward(); // autograd through the compiled forward graph
    opt.step(net, &grads); // rebinds every parameter, also inside a graph
    loss.item()
}

fn main() {
    janus::manual_seed(0);
    let x = Tensor::randn([64, 4]);
    let y = x.sum(1).gt_scalar(0.0).to_dtype(DType::I64); // a separable toy label
    let mut net = Mlp { l1: nn::Linear::new(4, 32), l2: nn::Linear::new(32, 2) };
    let mut opt = optim::Adam::new(0.01);
    let mut warm = janus::stats();
    for step in 0..200 {
        if step == 10 {
            warm = janus::stats(); // recordings and compiles are behind us
        }
        let loss = train_step(&mut net, &mut opt, &x, &y);
        if step % 50 == 0 {
            println!("{step}: {loss:.4}");
        }
    }
    println!("{}", janus::explain()); // what ran compiled, what ran eagerly, and why
    println!("after warm-up: {}", janus::stats().since(&warm).coverage_summary());
    let path = std::env::temp_dir().join("mlp.safetensors");
    janus::save(&path, &net).unwrap();
    println!("saved {}", path.display());
}
