use janus::prelude::*;

#[derive(Module)]
struct View<'a> {
    w: &'a Tensor,
}

fn main() {}
