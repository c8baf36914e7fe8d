//! The "first program" of the README, kept compiling and running.
//!
//!     cargo run --release --example readme_first_program

use janus::prelude::*;

#[derive(Module)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

fn main() {
    janus::manual_seed(0);
    let x = Tensor::randn([64, 4]);
    let y = x.sum(1).gt_scalar(0.0).to_dtype(DType::I64); // a separable toy label
    let mut net = Mlp { l1: nn::Linear::new(4, 32), l2: nn::Linear::new(32, 2) };
    let mut opt = optim::Adam::new(0.01);
    for step in 0..200 {
        let loss = net.l2.forward(&net.l1.forward(&x).relu()).cross_entropy(&y);
        let grads = loss.backward(); // walks the autograd graph
        opt.step(&mut net, &grads); // rebinds every parameter
        if step % 50 == 0 {
            println!("{step}: {:.4}", loss.item());
        }
    }
    let path = std::env::temp_dir().join("mlp.safetensors");
    janus::save(&path, &net).unwrap();
    println!("saved {}", path.display());
}
