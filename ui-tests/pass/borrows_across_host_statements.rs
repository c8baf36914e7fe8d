#![deny(warnings)]
// Bindings that hold a borrow, used after a host statement (`println!`): each compiles, and the
// statements around them still stage.
use janus::prelude::*;

#[janus]
fn last_mut(x: &Tensor) -> Vec<Tensor> {
    let mut v = vec![x.clone(), x * 2.0];
    let s = v.last_mut().unwrap();
    let y = (x * 3.0).tanh();
    println!("{}", y.sum_all().item());
    *s = &*s + y;
    v
}

#[janus]
fn split_at_mut(x: &Tensor) -> Vec<Tensor> {
    let mut v = vec![x.clone(), x * 2.0];
    let (a, b) = v.split_at_mut(1);
    let y = (x * 3.0).tanh();
    println!("{}", y.sum_all().item());
    a[0] = &b[0] + y;
    v
}

#[janus]
fn element(x: &Tensor, v: &mut Vec<Tensor>) {
    let s = &mut v[0];
    let y = (x * 3.0).tanh();
    println!("{}", y.sum_all().item());
    *s = &*s + y;
}

#[janus]
fn shared(x: &Tensor) -> Tensor {
    let a = x.tanh() * 2.0;
    let r = &a;
    let parts = vec![x.exp(), x * 2.0];
    let refs: Vec<&Tensor> = parts.iter().collect();
    println!("{}", r.sum_all().item());
    Tensor::cat(&refs, 0).sum_all() + r + &a
}

fn main() {
    let x = Tensor::ones([2]);
    let mut v = vec![x.clone()];
    for _ in 0..3 {
        let _ = (last_mut(&x), split_at_mut(&x), shared(&x));
        element(&x, &mut v);
    }
}
