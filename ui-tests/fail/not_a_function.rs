use janus::prelude::*;

#[janus]
struct Model {
    w: Tensor,
}

fn main() {}
