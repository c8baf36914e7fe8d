//! A non-`move` closure that mutates what it captures, called in a loop, with the captured
//! value read after the loop (issue 51: E0502/E0499 in the expansion, which copied the closure
//! into the block and so borrowed the counter twice).

use janus::prelude::*;

#[janus]
fn counted(xs: &[Tensor]) -> (Tensor, usize) {
    let mut count = 0;
    let mut f = |t: &Tensor| {
        count += 1;
        t.tanh()
    };
    let mut acc = Tensor::zeros([2]);
    for x in xs {
        acc = acc + f(x);
    }
    (acc, count)
}

#[janus]
fn logged(xs: &[Tensor]) -> (Tensor, Vec<f64>) {
    let mut log = Vec::new();
    let mut note = |t: Tensor| {
        log.push(1.0);
        t * 2.0
    };
    let y = note(xs[0].exp());
    let z = note(y.tanh());
    (z, log)
}

fn main() {
    let xs = [Tensor::ones([2]), Tensor::ones([2])];
    let (_, n) = counted(&xs);
    assert_eq!(n, 2);
    let (_, log) = logged(&xs);
    assert_eq!(log.len(), 2);
}
