//! A body ending in `.item()` on a tensor held by reference: a `&Tensor` or `&mut Tensor`
//! parameter, a field behind a reference, a slice element, and a parenthesised expression
//! (issue 51: each was E0308/E0507, and the last a misleading `unused_parens` suggestion).
#![deny(unused_parens)]

use janus::prelude::*;

#[janus]
fn by_ref(x: &Tensor) -> f32 {
    let _y = x.tanh();
    x.item()
}

#[janus]
fn by_mut_ref(x: &mut Tensor) -> f32 {
    *x = x.tanh();
    x.item()
}

struct Holder {
    t: Tensor,
}

#[janus]
fn field_behind_ref(h: &Holder) -> f32 {
    let _y = h.t.exp();
    h.t.item()
}

#[janus]
fn slice_element(xs: &[Tensor]) -> f64 {
    let _y = xs[0].exp();
    xs[0].item_f64()
}

#[janus]
fn parenthesised(a: &Tensor, b: &Tensor) -> f32 {
    (a + b).item()
}

fn main() {
    let mut x = Tensor::scalar(0.5);
    let h = Holder { t: Tensor::scalar(2.0) };
    let total = by_ref(&x) + by_mut_ref(&mut x) + field_behind_ref(&h) + parenthesised(&x, &h.t);
    let _ = (total, slice_element(&[x]));
}
