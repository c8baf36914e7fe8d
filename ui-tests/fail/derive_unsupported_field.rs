use janus::prelude::*;

#[derive(Module)]
struct State {
    h: Tensor,
    label: String,
}

fn main() {}
