//! Expansion snapshots of three representative functions, pinned in `janus-macros/snapshots/`
//! so a reader can see what the macro emits. `JANUS_BLESS=1 cargo test -p janus-macros`
//! rewrites them after an intended change.

fn expand(args: &str, src: &str) -> String {
    let out = super::expand(args.parse().unwrap(), src.parse().unwrap());
    let file: syn::File = syn::parse2(out).expect("the expansion is valid Rust");
    prettyplease::unparse(&file)
}

fn check(name: &str, args: &str, src: &str) {
    let got = expand(args, src);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots").join(format!("{name}.rs"));
    if std::env::var("JANUS_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(got == want, "expansion of `{name}` changed; rerun with JANUS_BLESS=1 if intended:\n{got}");
}

#[test]
fn training_step() {
    check(
        "training_step",
        "",
        "fn train_step(m: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
            let h = m.l1.forward(x).tanh();
            let loss = m.l2.forward(&h).cross_entropy(y);
            let grads = loss.backward();
            opt.step(m, &grads);
            loss.item()
        }",
    );
}

#[test]
fn lstm_loop() {
    check(
        "lstm_loop",
        "",
        "fn lstm(m: &Lstm, xs: &[Tensor], ys: &[Tensor]) -> Tensor {
            let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
            let mut h = Tensor::zeros([bsz, hid]);
            let mut c = Tensor::zeros([bsz, hid]);
            let mut loss = Tensor::scalar(0.0);
            for t in 0..xs.len() {
                let g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
                let [i, f, gg, o] = g.chunk::<4>(1);
                c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
                h = o.sigmoid() * c.tanh();
                loss = loss + (h.matmul(&m.wy) + &m.by).cross_entropy(&ys[t]);
            }
            loss / xs.len() as f64
        }",
    );
}

#[test]
fn method_with_closure_and_dynamic_scalar() {
    check(
        "method_with_closure",
        "dynamic(lr)",
        "fn update<A: Act>(&mut self, grads: &[Tensor], lr: f64) {
            let scale = |g: &Tensor| A::default().apply(g) * lr;
            for (w, g) in self.params.iter_mut().zip(grads) {
                *w = &*w - scale(g);
            }
        }",
    );
}
