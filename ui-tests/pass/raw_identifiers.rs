#![deny(warnings)]
// Raw identifiers as parameters, locals, closures, in-outs and `dynamic(..)` names.
use janus::prelude::*;

#[janus(dynamic(r#as))]
fn raw(r#in: &Tensor, r#mut: &mut Tensor, r#as: f64) -> Tensor {
    let r#fn = |t: &Tensor| t.tanh() * r#as;
    let r#type = r#fn(r#in) * 2.0;
    let r#loop = &r#type + r#in;
    *r#mut = &*r#mut + &r#loop;
    println!("{}", r#loop.sum_all().item());
    r#loop * r#type
}

fn main() {
    let mut acc = Tensor::zeros([2]);
    for _ in 0..3 {
        let _ = raw(&Tensor::ones([2]), &mut acc, 0.5);
    }
}
