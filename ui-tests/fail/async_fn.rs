use janus::prelude::*;

#[janus]
async fn step(x: &Tensor) -> Tensor {
    x.exp()
}

fn main() {}
