use janus::prelude::*;

#[janus]
fn shadowing(x: &Tensor) -> Tensor {
    let x = x.exp();
    let x = x * 2.0;
    let y = {
        let x = x.tanh();
        x + 1.0
    };
    let x = x + &y;
    x
}

fn main() {
    let _ = shadowing(&Tensor::ones([2]));
}
