// The macro silences only what it generates: a user's own unused variable inside a `#[janus]`
// block still warns (here denied), as it would without the attribute. (`unused_mut` stays
// allowed on the function: the macro makes bindings mutable so replays can restore them.)
#![deny(unused_variables)]

use janus::prelude::*;

#[janus]
fn step(x: &Tensor) -> Tensor {
    let scaled = x * 2.0;
    let unused = x.exp();
    scaled + 1.0
}

fn main() {
    let _ = step(&Tensor::ones([2]));
}
