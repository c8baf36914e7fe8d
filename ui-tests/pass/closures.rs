use janus::prelude::*;

#[janus]
fn closures(xs: &[Tensor], scale: f64) -> Tensor {
    let f = |t: &Tensor| t.square() * scale;
    let g = move |t: Tensor| t + 1.0;
    let parts: Vec<Tensor> = xs.iter().map(f).collect();
    let total = parts.iter().fold(Tensor::zeros([2]), |acc, p| acc + p);
    let again = f(&total);
    g(again)
}

fn main() {
    let _ = closures(&[Tensor::ones([2]), Tensor::ones([2])], 0.5);
}
