use janus::prelude::*;

trait Act: Default {
    fn apply(&self, x: &Tensor) -> Tensor;
}

#[derive(Default)]
struct Tanh;
impl Act for Tanh {
    fn apply(&self, x: &Tensor) -> Tensor {
        x.tanh()
    }
}

#[janus]
fn act<A: Act>(x: &Tensor) -> Tensor {
    let y = A::default().apply(x);
    y * 2.0
}

#[janus]
fn stack_n<const N: usize>(x: &Tensor) -> Tensor {
    let parts: Vec<Tensor> = (0..N).map(|_| x.clone()).collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    Tensor::cat(&refs, 0)
}

fn main() {
    let x = Tensor::ones([2]);
    let _ = act::<Tanh>(&x);
    let _ = stack_n::<3>(&x);
}
