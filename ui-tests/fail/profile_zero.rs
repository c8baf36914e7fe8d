use janus::prelude::*;

#[janus(profile = 0)]
fn step(x: &Tensor) -> Tensor {
    x.exp()
}

fn main() {}
