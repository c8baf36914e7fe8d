//! `#[janus]` functions whose bodies come from a `macro_rules!` expansion: the body's names
//! have the caller's hygiene, the attribute's expansion the macro's (issue 51: E0425 on a
//! generated name before the macro resolved its names at one site).

use janus::prelude::*;

macro_rules! staged {
    ($name:ident, fn ($($args:tt)*) -> $ret:ty $body:block) => {
        #[janus(min_ops = 1)]
        fn $name($($args)*) -> $ret $body
    };
}

staged!(double_tanh, fn (x: &Tensor, k: usize) -> Tensor {
    let y = x.tanh() * 2.0;
    let mut z = y.exp();
    for _ in 0..k {
        z = z.tanh();
    }
    z
});

staged!(read, fn (x: &mut Tensor) -> f32 {
    *x = x.tanh();
    x.sum_all().item()
});

fn main() {
    let mut x = Tensor::ones([2]);
    for k in 0..4 {
        let _ = double_tanh(&x, k);
        let _ = read(&mut x);
    }
}
