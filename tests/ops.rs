//! Forward values of ops against hand-computed results, RNG reproducibility, views and edge
//! shapes (scalars, size-0 and size-1 dimensions).

use janus::prelude::*;

fn v32(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>()
}

#[test]
fn arithmetic_broadcasting_and_scalars() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    let col = Tensor::from_vec(vec![10.0f32, 20.0], [2, 1]);
    assert_eq!(v32(&(&a + &col)), [11.0, 12.0, 13.0, 24.0, 25.0, 26.0]);
    assert_eq!(v32(&(1.0 - &a * 2.0)), [-1.0, -3.0, -5.0, -7.0, -9.0, -11.0]);
    assert_eq!(v32(&(&a / 2.0f32)), [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
    let mut acc = Tensor::zeros([2, 3]);
    acc += &a;
    acc *= 3.0;
    assert_eq!(v32(&acc), [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]);
    let i = Tensor::arange(4);
    assert_eq!((&i * 3.0 - 1.0).to_vec::<i64>(), [-1, 2, 5, 8]);
}

#[test]
fn comparisons_where_and_casts() {
    let a = Tensor::from_vec(vec![-1.0f32, 0.0, 2.0], [3]);
    let m = a.gt_scalar(0.0);
    assert_eq!(m.dtype(), DType::Bool);
    assert_eq!(m.to_vec::<bool>(), [false, false, true]);
    assert_eq!(v32(&m.where_cond(&a, &Tensor::scalar(9.0))), [9.0, 9.0, 2.0]);
    assert_eq!(a.to_dtype(DType::I64).to_vec::<i64>(), [-1, 0, 2]);
    assert_eq!(m.logical_not().logical_or(&a.eq_scalar(2.0)).to_vec::<bool>(), [true, true, true]);
    assert_eq!(v32(&a.clamp(-0.5, 1.0)), [-0.5, 0.0, 1.0]);
    assert_eq!(v32(&a.maximum(&Tensor::scalar(0.5))), [0.5, 0.5, 2.0]);
}

#[test]
fn reductions_and_softmax() {
    let x = Tensor::from_vec(vec![1.0f64, 5.0, 3.0, 2.0, 0.0, 4.0], [2, 3]);
    assert_eq!(x.sum(1).to_vec::<f64>(), [9.0, 6.0]);
    assert_eq!(x.mean(0).to_vec::<f64>(), [1.5, 2.5, 3.5]);
    assert_eq!(x.max(1).to_vec::<f64>(), [5.0, 4.0]);
    assert_eq!(x.min(-1).to_vec::<f64>(), [1.0, 0.0]);
    assert_eq!(x.argmax(1).to_vec::<i64>(), [1, 2]);
    assert_eq!(x.sum_keepdim(0).dims(), &[1, 3]);
    let s = x.softmax(1).sum(1).to_vec::<f64>();
    assert!(s.iter().all(|v| (v - 1.0).abs() < 1e-15));
    let lse = x.logsumexp(1).to_vec::<f64>();
    assert!((lse[0] - (1f64.exp() + 5f64.exp() + 3f64.exp()).ln()).abs() < 1e-14);
    let ls = x.log_softmax(1).exp().to_vec::<f64>();
    let sm = x.softmax(1).to_vec::<f64>();
    assert!(ls.iter().zip(&sm).all(|(a, b)| (a - b).abs() < 1e-15));
}

#[test]
fn views_share_storage_and_copies_are_right() {
    let x = Tensor::from_vec((0..24).map(|i| i as f32).collect::<Vec<_>>(), [2, 3, 4]);
    let t = x.transpose(0, 2); // [4, 3, 2], a view
    assert_eq!(t.dims(), &[4, 3, 2]);
    assert_eq!(v32(&t.narrow(0, 1, 1).reshape([-1])), [1.0, 13.0, 5.0, 17.0, 9.0, 21.0]);
    let [a, b] = x.chunk::<2>(2);
    assert_eq!(v32(&b.narrow(1, 0, 1)), [2.0, 3.0, 14.0, 15.0]);
    assert_eq!(v32(&Tensor::cat(&[&a, &b], 2)), v32(&x));
    let s = Tensor::stack(&[&a, &b], 0);
    assert_eq!(s.dims(), &[2, 2, 3, 2]);
    assert_eq!(v32(&x.pad(1, 1, 0).narrow(1, 0, 1)), [0.0; 8]);
    assert_eq!(x.unsqueeze(-1).dims(), &[2, 3, 4, 1]);
    assert_eq!(x.broadcast_to([5, 2, 3, 4]).sum(0).to_vec::<f32>(), v32(&(&x * 5.0)));
    assert_eq!(v32(&t.contiguous().reshape([4, 6]).narrow(0, 3, 1)), [3.0, 15.0, 7.0, 19.0, 11.0, 23.0]);
}

#[test]
fn indexing_and_one_hot() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [3, 2]);
    let idx = Tensor::from_vec(vec![2i64, 2, 0], [3]);
    assert_eq!(v32(&x.index_select(0, &idx)), [5.0, 6.0, 5.0, 6.0, 1.0, 2.0]);
    let g = Tensor::from_vec(vec![1i64, 0, 1], [3, 1]);
    assert_eq!(v32(&x.gather(1, &g)), [2.0, 3.0, 6.0]);
    let oh = Tensor::from_vec(vec![1i64, 0], [2]).one_hot(3);
    assert_eq!(v32(&oh), [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn manual_seed_reproduces_streams_and_draws_advance() {
    janus::manual_seed(42);
    let a = Tensor::randn([1000]);
    let b = Tensor::rand([5]);
    janus::manual_seed(42);
    assert_eq!(v32(&Tensor::randn([1000])), v32(&a));
    assert_eq!(v32(&Tensor::rand([5])), v32(&b));
    assert_ne!(v32(&Tensor::randn([1000])), v32(&a));
    let mean = a.mean_all().item();
    assert!(mean.abs() < 0.1, "{mean}");
    // Another thread draws from its own stream, and does not disturb this one.
    janus::manual_seed(7);
    let here = v32(&Tensor::rand([3]));
    let other = std::thread::spawn(|| Tensor::rand([3]).to_vec::<f32>()).join().unwrap();
    assert_ne!(here, other);
    janus::manual_seed(7);
    assert_eq!(v32(&Tensor::rand([3])), here);
}

#[test]
fn multinomial_samples_by_weight() {
    janus::manual_seed(5);
    let probs = Tensor::from_vec(vec![0.0f32, 0.2, 0.8], [1, 3]).broadcast_to([4000, 3]);
    let s = probs.multinomial().to_vec::<i64>();
    let twos = s.iter().filter(|&&c| c == 2).count() as f64 / 4000.0;
    assert!(s.iter().all(|&c| c == 1 || c == 2) && (twos - 0.8).abs() < 0.03, "{twos}");
    let one = Tensor::from_vec(vec![0.0f32, 1.0], [2]).multinomial();
    assert_eq!((one.dims(), one.to_vec::<i64>()), (&[][..], vec![1]));
}

#[test]
fn scalars_and_empty_dimensions() {
    let s = Tensor::scalar(3.0);
    assert_eq!((s.rank(), s.item()), (0, 3.0));
    assert_eq!((&s * &Tensor::ones([2])).to_vec::<f32>(), [3.0, 3.0]);
    let e = Tensor::zeros([0, 3]);
    assert_eq!((&e + &Tensor::ones([3])).dims(), &[0, 3]);
    assert_eq!(e.sum(0).to_vec::<f32>(), [0.0, 0.0, 0.0]);
    assert_eq!(e.matmul(&Tensor::ones([3, 2])).dims(), &[0, 2]);
    assert_eq!(Tensor::ones([2, 0]).matmul(&Tensor::ones([0, 3])).to_vec::<f32>(), [0.0; 6]);
    assert!(Tensor::zeros([0]).mean_all().item().is_nan());
}
