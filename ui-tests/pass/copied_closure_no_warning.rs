#![deny(warnings)]
// Non-`move` closures are copied into the blocks that call them (see docs/design.md, "Closures
// and items"), where the copy shadows the user's binding; neither may be reported as unused, in
// any shape of use.
use janus::prelude::*;

#[janus(dynamic(s))]
fn one_block(x: &Tensor, s: f64) -> Tensor {
    let f = |t: &Tensor| (t * s).tanh();
    let y = f(x) + 1.0;
    y
}

#[janus]
fn two_blocks(x: &Tensor) -> Tensor {
    let f = |t: &Tensor| t.tanh();
    let a = f(x);
    println!("{}", a.sum_all().item());
    let b = f(&a);
    b
}

#[janus]
fn staged_loop(xs: &[Tensor]) -> Tensor {
    let f = |t: &Tensor| t.tanh();
    let mut h = xs[0].clone();
    for x in xs {
        h = f(x) + &h;
    }
    h
}

#[janus(unroll = false)]
fn host_loop(xs: &[Tensor]) -> Tensor {
    let f = |t: &Tensor| t.tanh();
    let mut h = xs[0].clone();
    for x in xs {
        if x.sum_all().item() > 0.0 {
            h = f(x) + &h;
        }
    }
    h
}

#[janus]
fn nested(x: &Tensor) -> Tensor {
    let g = |t: &Tensor| t.exp();
    let f = |t: &Tensor| g(t).tanh();
    let y = f(x) + 1.0;
    y
}

fn main() {
    let xs = [Tensor::ones([2]), Tensor::ones([2])];
    for _ in 0..3 {
        let _ = (one_block(&xs[0], 0.5), two_blocks(&xs[0]), staged_loop(&xs), host_loop(&xs), nested(&xs[0]));
    }
}
