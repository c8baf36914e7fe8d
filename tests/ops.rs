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

/// `F.conv2d` as nested loops over `[N, C, H, W]` values.
fn conv_ref(x: &Tensor, w: &Tensor, b: Option<&Tensor>, o: janus::Conv2dOptions) -> Vec<f64> {
    let (xd, wd) = (x.dims().to_vec(), w.dims().to_vec());
    let (xv, wv) = (x.to_vec::<f64>(), w.to_vec::<f64>());
    let bv = b.map(|b| b.to_vec::<f64>());
    let out =
        |d: usize| (xd[2 + d] + 2 * o.padding[d] - o.dilation[d] * (wd[2 + d] - 1) - 1) / o.stride[d] + 1;
    let (oh, ow) = (out(0), out(1));
    let (cg, og) = (wd[1], wd[0] / o.groups);
    let mut y = Vec::new();
    for n in 0..xd[0] {
        for oc in 0..wd[0] {
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = bv.as_ref().map_or(0.0, |b| b[oc]);
                    for c in 0..cg {
                        let ic = (oc / og) * cg + c;
                        for ki in 0..wd[2] {
                            for kj in 0..wd[3] {
                                let h =
                                    (i * o.stride[0] + ki * o.dilation[0]) as isize - o.padding[0] as isize;
                                let v =
                                    (j * o.stride[1] + kj * o.dilation[1]) as isize - o.padding[1] as isize;
                                if h < 0 || v < 0 || h >= xd[2] as isize || v >= xd[3] as isize {
                                    continue;
                                }
                                let xi = ((n * xd[1] + ic) * xd[2] + h as usize) * xd[3] + v as usize;
                                acc += xv[xi] * wv[((oc * cg + c) * wd[2] + ki) * wd[3] + kj];
                            }
                        }
                    }
                    y.push(acc);
                }
            }
        }
    }
    y
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| (p - q).abs() <= tol * (1.0 + q.abs()))
}

fn seq(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n).map(|i| ((i as u64 * 7919 + seed * 104729) % 97) as f64 / 48.0 - 1.0).collect::<Vec<_>>(),
        shape,
    )
}

#[test]
fn conv2d_matches_nested_loops_for_every_option() {
    use janus::Conv2dOptions;
    let mut cases = 0;
    for stride in [[1, 1], [2, 1], [2, 3]] {
        for padding in [[0, 0], [1, 2]] {
            for dilation in [[1, 1], [2, 1]] {
                for (groups, c, o) in [(1, 3, 4), (2, 4, 6), (4, 4, 4)] {
                    let opts = Conv2dOptions { stride, padding, dilation, groups };
                    let x = seq(&[2, c, 7, 6], cases);
                    let w = seq(&[o, c / groups, 3, 2], cases + 1);
                    let b = seq(&[o], cases + 2);
                    let bias = if cases % 2 == 0 { Some(&b) } else { None };
                    let y = x.conv2d(&w, bias, opts);
                    let want = conv_ref(&x, &w, bias, opts);
                    assert!(close(&y.to_vec::<f64>(), &want, 1e-12), "{opts:?}");
                    // f32 agrees too.
                    let y32 = x.to_dtype(DType::F32).conv2d(&w.to_dtype(DType::F32), None, opts);
                    let want = conv_ref(&x, &w, None, opts);
                    assert!(close(&y32.to_vec::<f64>(), &want, 1e-5), "f32 {opts:?}");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(
        Conv2dOptions::default(),
        Conv2dOptions { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 }
    );
}

/// A kernel column that lies wholly in the padding (width 3, padding 2, a 4-wide kernel dilated
/// by 2: one output column, and tap 0 reads only padding). `unfold` once computed that empty
/// range's start left of the image and panicked on valid input.
#[test]
fn conv2d_with_a_kernel_column_wholly_in_the_padding() {
    use janus::Conv2dOptions;
    let opts = Conv2dOptions { stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 1 };
    let (x, w) = (seq(&[1, 3, 4, 3], 5).requires_grad(), seq(&[2, 3, 2, 4], 6));
    let y = x.conv2d(&w, None, opts);
    assert_eq!(y.dims(), [1, 2, 3, 1]);
    assert!(close(&y.to_vec::<f64>(), &conv_ref(&x, &w, None, opts), 1e-12));
    // The input gradient (through `fold`, over the same windows): the sum of the outputs is
    // linear in x, so each element's gradient is the change one unit in it makes.
    let dx = y.sum_all().backward().get(&x).unwrap().to_vec::<f64>();
    let base: f64 = conv_ref(&x, &w, None, opts).iter().sum();
    let xv = x.to_vec::<f64>();
    for (i, d) in dx.iter().enumerate() {
        let mut e = xv.clone();
        e[i] += 1.0;
        let moved: f64 = conv_ref(&Tensor::from_vec(e, [1, 3, 4, 3]), &w, None, opts).iter().sum();
        assert!((moved - base - d).abs() < 1e-9, "element {i}: {d} vs {}", moved - base);
    }
}

#[test]
fn pooling_with_padding_matches_pytorch() {
    // 4x4 values 0..16, a 3x3 window, stride 2, padding 1 (PyTorch's values).
    let x = Tensor::from_vec((0..16).map(|v| v as f64).collect::<Vec<_>>(), [1, 1, 4, 4]);
    assert_eq!(x.max_pool2d([3, 3], [2, 2], [1, 1]).to_vec::<f64>(), [5.0, 7.0, 13.0, 15.0]);
    let avg = x.avg_pool2d([3, 3], [2, 2], [1, 1]).to_vec::<f64>();
    // count_include_pad: the corner window sums 0+1+4+5 over 9 taps.
    assert!(close(&avg, &[10.0 / 9.0, 24.0 / 9.0, 51.0 / 9.0, 90.0 / 9.0], 1e-15), "{avg:?}");
    // Negative values are not beaten by the padding; shapes follow (H + 2p - k) / s + 1.
    let neg = -(&x) - 1.0;
    assert_eq!(neg.max_pool2d([2, 2], [1, 1], [1, 1]).dims(), &[1, 1, 5, 5]);
    assert_eq!(neg.max_pool2d([2, 2], [2, 2], [1, 1]).to_vec::<f64>()[0], -1.0);
    // The gradient goes to the first maximum of each window.
    let ties = Tensor::ones([1, 1, 2, 2]).to_dtype(DType::F64).requires_grad();
    let g = ties.max_pool2d([2, 2], [2, 2], [0, 0]).sum_all().backward();
    assert_eq!(g.get(&ties).unwrap().to_vec::<f64>(), [1.0, 0.0, 0.0, 0.0]);
    let msg = std::panic::catch_unwind(|| x.max_pool2d([2, 2], [2, 2], [2, 0])).unwrap_err();
    assert!(msg.downcast_ref::<String>().unwrap().contains("max_pool2d"));
}

#[test]
fn layer_norm_and_batch_norm_values() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 6.0, 8.0], [2, 3]);
    let w = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], [3]);
    let b = Tensor::from_vec(vec![0.0f64, 1.0, -1.0], [3]);
    let y = x.layer_norm(&[3], Some(&w), Some(&b), 0.0).to_vec::<f64>();
    let s = (2.0f64 / 3.0).sqrt(); // row 0: mean 2, biased var 2/3
    assert!(close(&y[..3], &[-1.0 / s, 1.0, 3.0 / s - 1.0], 1e-12), "{y:?}");
    // Batch norm over [N=2, C=2, 2] per channel.
    let x = Tensor::from_vec(vec![1.0f64, 3.0, 0.0, 0.0, 5.0, 7.0, 4.0, 8.0], [2, 2, 2]);
    let (rm, rv) = (Tensor::from_vec(vec![0.5f64, -1.0], [2]), Tensor::from_vec(vec![2.0f64, 3.0], [2]));
    let (y, m, v) = x.batch_norm(&rm, &rv, None, None, true, 0.1, 1e-5);
    // Channel 0: values 1 3 5 7, mean 4, biased var 5, unbiased 20/3.
    // Channel 1: values 0 0 4 8, mean 3, biased var 11, unbiased 44/3.
    assert!(close(&m.to_vec::<f64>(), &[0.9 * 0.5 + 0.4, -0.9 + 0.3], 1e-12));
    assert!(close(&v.to_vec::<f64>(), &[0.9 * 2.0 + 0.1 * 20.0 / 3.0, 0.9 * 3.0 + 0.1 * 44.0 / 3.0], 1e-12));
    let yv = y.to_vec::<f64>();
    assert!(close(&[yv[0], yv[2]], &[-3.0 / 5.00001f64.sqrt(), -3.0 / 11.00001f64.sqrt()], 1e-12), "{yv:?}");
    // Eval mode uses the running statistics and returns them unchanged.
    let (ye, me, ve) =
        x.batch_norm(&rm, &rv, None, Some(&Tensor::from_vec(vec![1.0f64, 0.0], [2])), false, 0.1, 0.0);
    assert!(me.same(&rm) || me.to_vec::<f64>() == rm.to_vec::<f64>());
    assert_eq!(ve.to_vec::<f64>(), rv.to_vec::<f64>());
    assert!(close(&ye.to_vec::<f64>()[..2], &[0.5 / 2f64.sqrt() + 1.0, 2.5 / 2f64.sqrt() + 1.0], 1e-12));
    // No gradient reaches the running statistics.
    let xg = x.clone().requires_grad();
    let (_, m, v) = xg.batch_norm(&rm, &rv, None, None, true, 0.1, 1e-5);
    assert!(!m.needs_grad() && !v.needs_grad());
}

#[test]
fn dropout_masks_scales_and_replays_the_stream() {
    janus::manual_seed(3);
    let x = Tensor::ones([10_000]);
    let y = x.dropout(0.25, true).to_vec::<f32>();
    let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / 1e4;
    assert!(
        y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6) && (kept - 0.75).abs() < 0.02,
        "{kept}"
    );
    janus::manual_seed(3);
    assert_eq!(x.dropout(0.25, true).to_vec::<f32>(), y);
    assert!(x.dropout(0.25, false).same(&x) && x.dropout(0.0, true).same(&x));
    assert!(std::panic::catch_unwind(|| x.dropout(1.0, true)).is_err());
    assert!(std::panic::catch_unwind(|| x.dropout(-0.1, true)).is_err());
}

#[test]
fn masks_triangles_and_batched_matmul() {
    let x = Tensor::from_vec((1..=12).map(|v| v as f32).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(v32(&x.tril(0)), [1.0, 0.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 9.0, 10.0, 11.0, 0.0]);
    assert_eq!(v32(&x.tril(-1)), [0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 9.0, 10.0, 0.0, 0.0]);
    assert_eq!(v32(&x.triu(1)), [0.0, 2.0, 3.0, 4.0, 0.0, 0.0, 7.0, 8.0, 0.0, 0.0, 0.0, 12.0]);
    assert_eq!(x.broadcast_to([2, 3, 4]).triu(2).sum_all().item(), 2.0 * (3.0 + 4.0 + 8.0));
    // A causal mask, as attention builds it.
    let causal = Tensor::ones([3, 3]).triu(1).gt_scalar(0.0);
    let s = Tensor::zeros([2, 3, 3]).masked_fill(&causal, f64::NEG_INFINITY).softmax(-1);
    assert_eq!(
        v32(&s.narrow(0, 0, 1).reshape([9])),
        [1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]
    );
    assert!(
        std::panic::catch_unwind(|| x.masked_fill(&Tensor::ones([2, 3, 4]).gt_scalar(0.0), 0.0)).is_err()
    );
    // Four-dimensional batches broadcast, like attention's [B, H, T, d].
    let a = seq(&[2, 3, 4, 5], 1);
    let b = seq(&[3, 5, 2], 2);
    let y = a.matmul(&b);
    assert_eq!(y.dims(), &[2, 3, 4, 2]);
    let want = a.narrow(0, 1, 1).squeeze(0).matmul(&b);
    assert_eq!(y.narrow(0, 1, 1).squeeze(0).to_vec::<f64>(), want.to_vec::<f64>());
    assert_eq!(a.matmul(&seq(&[5, 7], 3)).dims(), &[2, 3, 4, 7]);
}

#[test]
fn bad_shapes_name_the_op_the_shapes_and_the_caller() {
    let message = |f: &dyn Fn()| {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let x = Tensor::ones([2, 3, 5, 5]);
    let line = line!() + 1;
    let m = message(&|| drop(x.conv2d(&Tensor::ones([4, 2, 3, 3]), None, Default::default())));
    assert!(
        m.contains("janus::conv2d") && m.contains("[4, 2, 3, 3]") && m.contains(&format!("ops.rs:{line}")),
        "{m}"
    );
    let m = message(&|| drop(x.conv2d(&Tensor::ones([4, 3, 7, 7]), None, Default::default())));
    assert!(m.contains("conv2d") && m.contains("does not fit"), "{m}");
    let m = message(&|| drop(x.layer_norm(&[4], None, None, 1e-5)));
    assert!(m.contains("janus::layer_norm") && m.contains("[2, 3, 5, 5]"), "{m}");
    let m =
        message(&|| drop(x.batch_norm(&Tensor::zeros([2]), &Tensor::ones([3]), None, None, true, 0.1, 1e-5)));
    assert!(m.contains("janus::batch_norm") && m.contains("running_mean [2]"), "{m}");
    let m = message(&|| drop(Tensor::ones([3]).tril(0)));
    assert!(m.contains("janus::tril"), "{m}");
}

/// GELU far out on both sides, in both float types: `x` for large positive inputs, -0 for
/// large negative ones (f32's erf is exactly -1 there, as on CUDA; it once stopped at
/// -0.9999995, which made gelu(-1e6) -0.06), and the limits at the infinities: +inf, and -0 at
/// -inf, where the formula `x * 0.5 * (1 + erf(x / √2))` gives `-inf * 0 = NaN` (PyTorch's
/// does, a known bug).
#[test]
fn gelu_saturates_in_both_float_types() {
    for d in [DType::F32, DType::F64] {
        let x = Tensor::from_vec(vec![-1e6, -40.0, -6.0, 6.0, 40.0, f64::NEG_INFINITY, f64::INFINITY], [7])
            .to_dtype(d);
        let y = x.gelu().to_vec::<f64>();
        assert!(y[0] == 0.0 && y[1] == 0.0, "{d}: {y:?}");
        assert!(y[2].abs() < 1e-7, "{d}: {y:?}");
        assert!((y[3] - 6.0).abs() < 1e-7 && y[4] == 40.0, "{d}: {y:?}");
        assert!(y[5] == 0.0 && y[5].is_sign_negative() && y[6] == f64::INFINITY, "{d}: {y:?}");
    }
}

/// Every float unary op in f32 against the same op in f64 (rounded to f32), at ordinary and
/// extreme inputs, eagerly and in a compiled graph: within 8 ulp or 2e-6 absolute (the f32 `erf` approximation's error, which
/// GELU inherits near 0), and with NaN and the infinities where f64 has them. This is how a
/// saturation bug shows: f32 `erf` once stopped at ±0.9999995, which made `gelu(-1e6)` -0.06.
#[test]
fn f32_unary_ops_agree_with_f64_at_the_extremes() {
    let mut xs: Vec<f64> =
        vec![0.0, -0.0, 1e-30, 1e-7, 0.1, 0.5, 1.0, 2.5, 3.9, 4.0, 6.0, 9.5, 15.0, 20.0, 40.0];
    xs.extend([87.0, 89.0, 100.0, 1e4, 1e6, 1e30, f64::INFINITY]);
    xs.extend(xs.clone().iter().map(|v| -v));
    xs.push(f64::NAN);
    type UnaryFn = fn(&Tensor) -> Tensor;
    let ops: Vec<(&str, UnaryFn)> = vec![
        ("exp", |t| t.exp()),
        ("log", |t| t.log()),
        ("sqrt", |t| t.sqrt()),
        ("tanh", |t| t.tanh()),
        ("sigmoid", |t| t.sigmoid()),
        ("recip", |t| t.recip()),
        ("exp2", |t| t.exp2()),
        ("log2", |t| t.log2()),
        ("log1p", |t| t.log1p()),
        ("expm1", |t| t.expm1()),
        ("erf", |t| t.erf()),
        ("gelu", |t| t.gelu()),
        ("silu", |t| t.silu()),
        ("softplus", |t| t.softplus()),
        ("rsqrt", |t| t.rsqrt()),
        ("relu", |t| t.relu()),
        ("square", |t| t.square()),
    ];
    let mut bad = Vec::new();
    for (name, f) in ops {
        let x64 = Tensor::from_vec(xs.clone(), [xs.len()]);
        let want: Vec<f32> = f(&x64).to_vec::<f64>().iter().map(|&v| v as f32).collect();
        let x32 = x64.to_dtype(DType::F32);
        // Eagerly, and compiled (a fused program, with the op between two others).
        let eager = f(&x32).to_vec::<f32>();
        let traced = trace(move |a: &[Tensor]| vec![f(&(&a[0] * 1.0)) + 0.0]);
        let fused = (0..2).map(|_| traced.run(std::slice::from_ref(&x32))[0].to_vec::<f32>()).last().unwrap();
        assert!(traced.compiled().is_some(), "{name}: the traced op was compiled");
        let both = [("eager", &eager), ("compiled", &fused)];
        for (path, ((&x, &g), &w)) in
            both.iter().flat_map(|(p, got)| xs.iter().zip(got.iter()).zip(&want).map(move |v| (p, v)))
        {
            let ulp = (w.abs().max(f32::MIN_POSITIVE) * f32::EPSILON) as f64;
            let ok = if w.is_nan() || w.is_infinite() {
                g.is_nan() == w.is_nan() && (w.is_nan() || g == w)
            } else {
                g.is_finite() && ((g - w) as f64).abs() <= (8.0 * ulp).max(2e-6)
            };
            if !ok {
                bad.push(format!("{name}({x:e}), {path}: f32 {g:e}, f64 {w:e}"));
            }
        }
    }
    assert!(bad.is_empty(), "{} disagreements:\n{}", bad.len(), bad.join("\n"));
}
