use janus::prelude::*;

#[derive(Module)]
struct Layer {
    w: Tensor,
    b: Tensor,
}

impl Layer {
    #[janus]
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = x.matmul(&self.w) + &self.b;
        y.relu()
    }

    #[janus]
    fn shrink(&mut self, factor: f64) {
        self.w = &self.w * factor;
        self.b = &self.b * factor;
    }
}

fn main() {
    let mut l = Layer { w: Tensor::ones([2, 3]), b: Tensor::zeros([3]) };
    for _ in 0..3 {
        l.shrink(0.5);
        let _ = l.forward(&Tensor::ones([4, 2]));
    }
}
