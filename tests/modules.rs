//! `#[derive(Module)]`, layers, optimisers and checkpoints.

use janus::module::{ConstLeaf, Visitor};
use janus::prelude::*;

#[derive(Module, Clone)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

#[derive(Module)]
enum Activation {
    Relu,
    Scaled(f32),
}

#[derive(Module)]
struct Everything<T> {
    layers: Vec<nn::Linear>,
    pair: (Tensor, i64),
    fixed: [Tensor; 2],
    maybe: Option<Tensor>,
    boxed: Box<Tensor>,
    act: Activation,
    generic: T,
    steps: usize,
    training: bool,
}

struct Constants(Vec<ConstLeaf>, usize);
impl Visitor for Constants {
    fn tensor(&mut self, _t: &Tensor) {
        self.1 += 1;
    }
    fn constant(&mut self, c: ConstLeaf) {
        self.0.push(c);
    }
}

#[test]
fn derive_enumerates_paths_constants_and_rebuilds() {
    janus::manual_seed(1);
    let m = Everything {
        layers: vec![nn::Linear::new(2, 3), nn::Linear::no_bias(3, 1)],
        pair: (Tensor::zeros([1]), 7),
        fixed: [Tensor::ones([2]), Tensor::ones([3])],
        maybe: None,
        boxed: Box::new(Tensor::zeros([4])),
        act: Activation::Scaled(0.5),
        generic: Tensor::zeros([5]),
        steps: 3,
        training: true,
    };
    let names: Vec<String> = m.named_tensors().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "layers.0.weight",
            "layers.0.bias",
            "layers.1.weight",
            "pair.0",
            "fixed.0",
            "fixed.1",
            "boxed",
            "generic"
        ]
    );
    let mut c = Constants(Vec::new(), 0);
    m.visit(&mut c);
    assert_eq!(c.1, 8);
    assert!(c.0.contains(&ConstLeaf::Len(2)));
    assert!(c.0.contains(&ConstLeaf::Int(7)));
    assert!(c.0.contains(&ConstLeaf::Variant(1)));
    assert!(c.0.contains(&ConstLeaf::F32(0.5f32.to_bits())));
    assert!(c.0.contains(&ConstLeaf::Bool(true)));
    let doubled = m.map_tensors(&mut |t| t * 2.0);
    assert_eq!(doubled.fixed[0].to_vec::<f32>(), vec![2.0, 2.0]);
    assert_eq!(doubled.steps, 3);
    assert!(matches!(doubled.act, Activation::Scaled(s) if s == 0.5));
    let _ = Activation::Relu;
}

fn mlp_loss(m: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    m.l2.forward(&m.l1.forward(x).tanh()).cross_entropy(y)
}

fn data() -> (Tensor, Tensor) {
    let x = Tensor::from_vec((0..32).map(|i| ((i * 7 % 11) as f32 - 5.0) / 5.0).collect::<Vec<_>>(), [8, 4]);
    let y = Tensor::from_vec(vec![0i64, 1, 2, 1, 0, 2, 2, 1], [8]);
    (x, y)
}

#[test]
fn sgd_momentum_and_adam_reduce_the_loss() {
    janus::manual_seed(2);
    let (x, y) = data();
    let init = Mlp { l1: nn::Linear::new(4, 16), l2: nn::Linear::new(16, 3) };
    let first = mlp_loss(&init, &x, &y).item();
    let mut sgd_net = init.clone();
    let mut sgd = optim::Sgd::new(0.5).momentum(0.9);
    let mut adam_net = init.clone();
    let mut adam = optim::Adam::new(0.05);
    for _ in 0..60 {
        let g = mlp_loss(&sgd_net, &x, &y).backward();
        sgd.step(&mut sgd_net, &g);
        let g = mlp_loss(&adam_net, &x, &y).backward();
        adam.step(&mut adam_net, &g);
    }
    let (s, a) = (mlp_loss(&sgd_net, &x, &y).item(), mlp_loss(&adam_net, &x, &y).item());
    assert!(s < 0.2 * first && a < 0.2 * first, "first {first}, sgd {s}, adam {a}");
    assert!(sgd_net.l1.weight.is_leaf() && adam_net.l2.bias.as_ref().unwrap().is_leaf());
}

#[test]
fn adam_matches_the_closed_form_first_step() {
    // After one step with bias correction, Adam moves each weight by lr * g / (|g| + eps').
    let mut w = Tensor::from_vec(vec![1.0f64, -2.0], [2]).requires_grad();
    let loss = (&w * &Tensor::from_vec(vec![3.0f64, -0.5], [2])).sum_all();
    let g = loss.backward();
    let mut opt = optim::Adam::new(0.1);
    opt.step(&mut w, &g);
    let got = w.to_vec::<f64>();
    let want = [1.0 - 0.1 * 3.0 / (3.0 + 1e-8), -2.0 + 0.1 * 0.5 / (0.5 + 1e-8)];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("janus-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn checkpoint_round_trips_with_optimizer_state() {
    janus::manual_seed(3);
    let (x, y) = data();
    let mut net = Mlp { l1: nn::Linear::new(4, 8), l2: nn::Linear::new(8, 3) };
    let mut opt = optim::Adam::new(0.01);
    let g = mlp_loss(&net, &x, &y).backward();
    opt.step(&mut net, &g);
    let (pn, po) = (tmp("net.safetensors"), tmp("opt.safetensors"));
    janus::save(&pn, &net).unwrap();
    janus::save(&po, &opt).unwrap();
    let mut net2 = Mlp { l1: nn::Linear::new(4, 8), l2: nn::Linear::new(8, 3) };
    let mut opt2 = optim::Adam::new(0.01);
    opt2.step(&mut net2.clone(), &mlp_loss(&net2, &x, &y).backward());
    janus::load(&pn, &mut net2).unwrap();
    janus::load(&po, &mut opt2).unwrap();
    for ((_, a), (_, b)) in net.named_tensors().iter().zip(net2.named_tensors()) {
        assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>());
        assert!(b.is_leaf());
    }
    // Both continue identically.
    let g = mlp_loss(&net, &x, &y).backward();
    opt.step(&mut net, &g);
    let g2 = mlp_loss(&net2, &x, &y).backward();
    opt2.step(&mut net2, &g2);
    assert_eq!(net.l1.weight.to_vec::<f32>(), net2.l1.weight.to_vec::<f32>());
}

#[test]
fn corrupt_and_mismatched_checkpoints_are_clear_errors() {
    let net = Mlp { l1: nn::Linear::new(4, 8), l2: nn::Linear::new(8, 3) };
    let p = tmp("good.safetensors");
    janus::save(&p, &net).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let truncated = tmp("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let mut target = net.clone();
    let err = janus::load(&truncated, &mut target).unwrap_err().to_string();
    assert!(err.contains("truncated.safetensors") && err.contains("not a valid safetensors file"), "{err}");
    let mut wider = Mlp { l1: nn::Linear::new(4, 9), l2: nn::Linear::new(9, 3) };
    let err = janus::load(&p, &mut wider).unwrap_err().to_string();
    assert!(err.contains("`l1.weight`") && err.contains("[8, 4]") && err.contains("[9, 4]"), "{err}");
    let mut other = (Tensor::zeros([2]),);
    let err = janus::load(&p, &mut other).unwrap_err().to_string();
    assert!(err.contains("missing tensor `0`"), "{err}");
    let mut f64_weights = (Tensor::zeros_dtype([8, 4], DType::F64),);
    let err = janus::load(&p, &mut f64_weights).unwrap_err().to_string();
    assert!(err.contains("missing tensor `0`"), "{err}");
    let mut renamed = Mlp { l1: nn::Linear::new(4, 8), l2: nn::Linear::new(8, 3) };
    renamed.l1.weight = Tensor::zeros_dtype([8, 4], DType::F64);
    let err = janus::load(&p, &mut renamed).unwrap_err().to_string();
    assert!(err.contains("`l1.weight`") && err.contains("dtype"), "{err}");
}

#[test]
fn interrupted_write_leaves_the_old_checkpoint_intact() {
    let p = tmp("atomic.safetensors");
    let old = (Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]),);
    janus::save(&p, &old).unwrap();
    let before = std::fs::read(&p).unwrap();
    let new = (Tensor::from_vec(vec![9.0f32; 1000], [1000]),);
    janus::checkpoint::testing::fail_next_write_after(100);
    assert!(janus::save(&p, &new).is_err());
    assert_eq!(std::fs::read(&p).unwrap(), before);
    let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("atomic.safetensors.tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary file left behind");
}

#[test]
fn layers_have_pytorch_shapes() {
    let l = nn::Linear::new(3, 5);
    assert_eq!(l.forward(&Tensor::zeros([2, 3])).dims(), &[2, 5]);
    let cell = nn::LstmCell::new(3, 4);
    let (h, c) = cell.forward(&Tensor::zeros([2, 3]), (&Tensor::zeros([2, 4]), &Tensor::zeros([2, 4])));
    assert_eq!((h.dims(), c.dims()), (&[2usize, 4][..], &[2usize, 4][..]));
    let e = nn::Embedding::new(10, 6);
    assert_eq!(e.forward(&Tensor::from_vec(vec![1i64, 2, 3, 9], [2, 2])).dims(), &[2, 2, 6]);
}
