use janus::prelude::*;

#[janus]
fn control(x: &Tensor, n: usize) -> Result<Tensor, String> {
    let mut h = x.clone();
    for i in 0..n {
        if i % 2 == 0 {
            h = h.tanh();
        } else {
            match i {
                1 => {
                    h = &h * 2.0;
                }
                _ => {
                    let k = h.sigmoid();
                    h = k + 1.0;
                }
            }
        }
        while h.max_all().item() > 10.0 {
            h = &h * 0.5;
        }
    }
    if h.sum_all().item().is_nan() {
        return Err("nan".into());
    }
    let out = h.exp();
    Ok(out)
}

fn main() {
    let _ = control(&Tensor::ones([3]), 5);
}
