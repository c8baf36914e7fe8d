use janus::prelude::*;

struct Pair {
    a: Tensor,
    b: Tensor,
}

#[janus]
fn patterns(x: &Tensor, p: &Pair, v: Option<Tensor>) -> Tensor {
    let (s, t) = (x.exp(), x.tanh());
    let Pair { a, b } = p;
    let [c, d] = x.chunk::<2>(0);
    let Some(w) = v else {
        return s + t;
    };
    let out = s + t + a + b + c.sum_all() + d.sum_all() + w;
    out
}

fn main() {
    let p = Pair { a: Tensor::ones([4]), b: Tensor::zeros([4]) };
    let _ = patterns(&Tensor::ones([4]), &p, Some(Tensor::ones([4])));
    let _ = patterns(&Tensor::ones([4]), &p, None);
}
