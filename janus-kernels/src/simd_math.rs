//! Vectorisable f32 `exp`, `log`, `tanh` and `sigmoid` with runtime CPU-feature dispatch.
//!
//! The `*_lane` functions are branch-free scalar kernels meant to be inlined into
//! elementwise loops, where LLVM turns them into SIMD code. The slice functions run
//! such loops under [`with_best_simd`], which recompiles the loop for AVX-512 or
//! AVX2+FMA when the CPU has them. Every path uses `mul_add`, so results are
//! bit-identical whichever level runs; without FMA hardware (the `Baseline` level)
//! `mul_add` becomes a correctly rounded but slow libm call.

use std::sync::OnceLock;

/// Instruction-set level that [`with_best_simd`] compiles for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimdLevel {
    /// AVX-512 F/VL/DQ together with AVX2, FMA and BMI2.
    Avx512,
    /// AVX2 with FMA.
    Avx2Fma,
    /// Only what the compilation target guarantees (SSE2 on x86_64).
    Baseline,
}

/// Returns the best [`SimdLevel`] this CPU supports; detected once, then cached.
pub fn simd_level() -> SimdLevel {
    static LEVEL: OnceLock<SimdLevel> = OnceLock::new();
    *LEVEL.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> SimdLevel {
    use std::arch::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("fma");
    if avx2 && has!("avx512f") && has!("avx512vl") && has!("avx512dq") && has!("bmi2") {
        SimdLevel::Avx512
    } else if avx2 {
        SimdLevel::Avx2Fma
    } else {
        SimdLevel::Baseline
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> SimdLevel {
    SimdLevel::Baseline
}

// The trampolines rely on LLVM inlining `f` (and the lane functions inside it) into a
// function carrying the target features, so the loop is vectorised with them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma,bmi2")]
fn run_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn run_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Runs `f` compiled for `level`.
///
/// # Safety
/// The CPU must support `level` (anything up to [`simd_level()`]).
#[inline(always)]
unsafe fn with_simd_level<R>(level: SimdLevel, f: impl FnOnce() -> R) -> R {
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller guarantees the CPU has these features.
        SimdLevel::Avx512 => unsafe { run_avx512(f) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller guarantees the CPU has these features.
        SimdLevel::Avx2Fma => unsafe { run_avx2(f) },
        _ => f(),
    }
}

/// Runs `f` compiled for the best instruction set this CPU supports.
///
/// Put the hot loop inside `f` and call `#[inline(always)]` code from it (such as the
/// `*_lane` functions) so that everything is inlined into the feature-enabled copy.
#[inline(always)]
pub fn with_best_simd<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: `simd_level()` only reports features detected on this CPU.
    unsafe { with_simd_level(simd_level(), f) }
}

/// Cody-Waite split of ln 2: `LN2_HI` has few bits so `n * LN2_HI` is exact even without FMA.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding 1.5 * 2^23 rounds to an integer without a round instruction (absent in SSE2)
/// and leaves that integer in the low mantissa bits.
const SHIFTER: f32 = 12_582_912.0;

/// Returns e^x. Max relative error ~8.4e-8 (1 ulp); overflows to +inf above ~88.72,
/// underflows gradually through denormals to 0 below ~-103.97; NaN stays NaN.
#[inline(always)]
pub fn exp_lane(x: f32) -> f32 {
    // Clamp so 2^n splits into two normal factors; the bounds themselves still
    // overflow / underflow. Selects rather than min/max so NaN passes through.
    let x = if x > 88.8 { 88.8 } else { x };
    let x = if x < -104.0 { -104.0 } else { x };
    let (y, k) = exp_parts(x);
    // Two scale factors: n reaches 128 near overflow and -150 for denormal results,
    // neither of which is a normal power of two; the second multiply rounds only once.
    let k1 = k >> 1;
    let k2 = k - k1;
    let s1 = f32::from_bits(((k1 + 127) << 23) as u32);
    let s2 = f32::from_bits(((k2 + 127) << 23) as u32);
    y * s1 * s2
}

/// e^x for `x` in [-87, 87], where 2^n is a normal number: one scale factor instead of
/// [`exp_lane`]'s two, and the same bits (scaling a normal `y` by normal powers of two is exact
/// until the last multiply, which rounds the same product).
#[inline(always)]
fn exp_normal_range(x: f32) -> f32 {
    let (y, k) = exp_parts(x);
    y * f32::from_bits(((k + 127) << 23) as u32)
}

/// e^x = y * 2^k for a finite, clamped `x`: the reduced argument's e^r (Cephes expf) and `k`.
#[inline(always)]
fn exp_parts(x: f32) -> (f32, i32) {
    let t = x.mul_add(std::f32::consts::LOG2_E, SHIFTER);
    let n = t - SHIFTER;
    let r = (-n).mul_add(LN2_HI, x);
    let r = (-n).mul_add(LN2_LO, r);
    // Cephes expf minimax polynomial for e^r on |r| <= ln2/2.
    let p = 1.987_569_1e-4f32;
    let p = p.mul_add(r, 1.398_199_9e-3);
    let p = p.mul_add(r, 8.333_452e-3);
    let p = p.mul_add(r, 4.166_579_6e-2);
    let p = p.mul_add(r, 1.666_666_5e-1);
    let p = p.mul_add(r, 0.5);
    let y = p.mul_add(r * r, r) + 1.0;
    (y, (t.to_bits() as i32).wrapping_sub(SHIFTER.to_bits() as i32))
}

/// Returns ln x. Max relative error ~8.1e-8 (1 ulp), denormal inputs included;
/// log(±0) = -inf, log(+inf) = +inf, negative or NaN gives NaN.
#[inline(always)]
pub fn log_lane(x: f32) -> f32 {
    // Denormals lack the implicit leading bit; scaling makes the bit tricks below valid.
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 8_388_608.0 } else { x };
    let bias = if tiny { 23.0 } else { 0.0 };
    // Offsetting the bits by those of sqrt(1/2) puts the mantissa m in [sqrt(1/2), sqrt(2))
    // in one step, so the polynomial argument stays small on both sides of 1.
    let ix = xs.to_bits().wrapping_sub(0x3f35_04f3);
    let e = (ix as i32 >> 23) as f32 - bias;
    let m = f32::from_bits((ix & 0x007f_ffff) + 0x3f35_04f3);
    let f = m - 1.0;
    let z = f * f;
    // Cephes logf polynomial: log(1+f) = f - f^2/2 + f^3 P(f).
    let p = 7.037_683_6e-2f32;
    let p = p.mul_add(f, -1.151_461e-1);
    let p = p.mul_add(f, 1.167_699_9e-1);
    let p = p.mul_add(f, -1.242_014_1e-1);
    let p = p.mul_add(f, 1.424_932_3e-1);
    let p = p.mul_add(f, -1.666_805_8e-1);
    let p = p.mul_add(f, 2.000_071_4e-1);
    let p = p.mul_add(f, -2.499_999_4e-1);
    let p = p.mul_add(f, 3.333_333e-1);
    let y = (p * f) * z;
    let y = e.mul_add(LN2_LO, y);
    let y = (-0.5f32).mul_add(z, y);
    // Adding the large, exact e * LN2_HI last keeps the small terms' precision.
    let r = e.mul_add(LN2_HI, f + y);
    // `x < inf` is false for +inf and NaN, both of which are their own logarithm.
    let r = if x < f32::INFINITY { r } else { x };
    let r = if x < 0.0 { f32::NAN } else { r };
    if x == 0.0 { f32::NEG_INFINITY } else { r }
}

/// Returns tanh x. Max relative error ~1.1e-7 (1 ulp); exactly x for tiny x, ±1 for
/// large |x| including ±inf; NaN stays NaN.
#[inline(always)]
pub fn tanh_lane(x: f32) -> f32 {
    let a = x.abs();
    // Cephes tanhf odd polynomial, where 1 - 2/(e^2a + 1) would cancel badly.
    let z = a * a;
    let p = -5.704_988_7e-3f32;
    let p = p.mul_add(z, 2.063_909e-2);
    let p = p.mul_add(z, -5.373_971_6e-2);
    let p = p.mul_add(z, 1.333_144_2e-1);
    let p = p.mul_add(z, -3.333_328e-1);
    let small = (p * z).mul_add(a, a);
    // tanh rounds to 1 beyond ~9.01; clamping keeps e^2a finite for the error term below, and
    // within the range of one scale factor (NaN passes the select and stays NaN).
    let s = exp_normal_range(2.0 * if a > 10.0 { 10.0 } else { a });
    let big = 1.0 - recip_refined(2.0, s, 1.0);
    let r = if a < 0.625 { small } else { big };
    // Working on |x| and restoring the sign also gives tanh(-0) = -0.
    r.copysign(x)
}

/// Returns 1 / (1 + e^-x). Max relative error ~1.2e-7 (1 ulp), also for very negative x
/// (it underflows gradually to 0 below ~-87); sigmoid(+inf) = 1, sigmoid(-inf) = 0.
#[inline(always)]
pub fn sigmoid_lane(x: f32) -> f32 {
    // e^-|x| never overflows; for x < 0 using e/(1+e) keeps e's relative accuracy.
    let e = exp_lane(-x.abs());
    recip_refined(if x < 0.0 { e } else { 1.0 }, 1.0, e)
}

/// Returns erf(x): a rational approximation (Eigen's `generic_fast_erf_float`), branch-free
/// so it vectorises; libm's `erff` branches per element and did not, which made an f32 GELU
/// 5 ns per element. Max absolute error 4.2e-7 (7 ulp, near |x| = 3.3; measured against f64
/// `erf` in the tests); odd, exactly ±1 from |x| = 4 on (where f32 `erf` rounds to ±1), NaN
/// stays NaN.
#[inline(always)]
pub fn erf_lane(x: f32) -> f32 {
    const A: [f32; 7] = [
        -1.609_603_3e-2,
        -2.954_6e-3,
        -7.349_906_3e-4,
        -5.692_506_4e-5,
        -2.101_024e-6,
        2.770_681_4e-8,
        -2.726_142_3e-10,
    ];
    const B: [f32; 5] = [-1.426_473_9e-2, -7.373_329e-3, -1.682_827e-3, -2.133_740_6e-4, -1.456_607_2e-5];
    // `clamp` keeps a NaN input NaN.
    let c = x.clamp(-4.0, 4.0);
    let x2 = c * c;
    let mut p = A[6];
    for &a in A[..6].iter().rev() {
        p = p * x2 + a;
    }
    let mut q = B[4];
    for &b in B[..4].iter().rev() {
        q = q * x2 + b;
    }
    // Beyond |x| = 4, erf rounds to ±1 in f32: return exactly that, so 1 + erf(x) is exactly 0
    // for very negative x (GELU's factor: gelu(-1e6) is -0, not -0.24), as CUDA's `erff` has it.
    if x.abs() >= 4.0 { 1.0f32.copysign(x) } else { c * p / q }
}

/// Returns num / (a + b) for |a| >= |b|, nearly correctly rounded. Plain `num / (a + b)`
/// adds a rounding of a + b that cost tanh and sigmoid ~0.5 ulp, so that error is
/// recovered exactly (Fast2Sum) and folded into one Newton step on the quotient.
#[inline(always)]
fn recip_refined(num: f32, a: f32, b: f32) -> f32 {
    let d = a + b;
    let d_err = (a - d) + b;
    let inv = 1.0 / d;
    let q = num * inv;
    let res = (-q).mul_add(d, num);
    let res = (-q).mul_add(d_err, res);
    res.mul_add(inv, q)
}

#[inline(always)]
fn map(src: &[f32], dst: &mut [f32], lane: impl Fn(f32) -> f32) {
    assert_eq!(src.len(), dst.len(), "source and destination lengths differ");
    with_best_simd(|| {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = lane(s);
        }
    })
}

#[inline(always)]
fn map_inplace(buf: &mut [f32], lane: impl Fn(f32) -> f32) {
    with_best_simd(|| {
        for v in buf.iter_mut() {
            *v = lane(*v);
        }
    })
}

/// Writes e^x of each `src` element to `dst`. Panics if the lengths differ.
pub fn exp(src: &[f32], dst: &mut [f32]) {
    map(src, dst, exp_lane)
}

/// Writes ln x of each `src` element to `dst`. Panics if the lengths differ.
pub fn log(src: &[f32], dst: &mut [f32]) {
    map(src, dst, log_lane)
}

/// Writes tanh x of each `src` element to `dst`. Panics if the lengths differ.
pub fn tanh(src: &[f32], dst: &mut [f32]) {
    map(src, dst, tanh_lane)
}

/// Writes 1 / (1 + e^-x) of each `src` element to `dst`. Panics if the lengths differ.
pub fn sigmoid(src: &[f32], dst: &mut [f32]) {
    map(src, dst, sigmoid_lane)
}

/// Replaces each element of `buf` with its e^x.
pub fn exp_inplace(buf: &mut [f32]) {
    map_inplace(buf, exp_lane)
}

/// Replaces each element of `buf` with its ln x.
pub fn log_inplace(buf: &mut [f32]) {
    map_inplace(buf, log_lane)
}

/// Replaces each element of `buf` with its tanh x.
pub fn tanh_inplace(buf: &mut [f32]) {
    map_inplace(buf, tanh_lane)
}

/// Replaces each element of `buf` with its 1 / (1 + e^-x).
pub fn sigmoid_inplace(buf: &mut [f32]) {
    map_inplace(buf, sigmoid_lane)
}

#[cfg(test)]
mod tests {
    use super::*;

    type SliceFn = fn(&[f32], &mut [f32]);
    type LaneFn = fn(f32) -> f32;
    #[test]
    fn erf_lane_is_within_its_stated_error() {
        let mut worst: f64 = 0.0;
        for i in -600_000..=600_000 {
            let x = i as f32 * 1e-5;
            worst = worst.max((erf_lane(x) as f64 - libm::erf(x as f64)).abs());
        }
        assert!(worst < 4.5e-7, "erf: max absolute error {worst:e}");
        let tiny = 1e-30f32;
        assert!(
            (erf_lane(tiny) as f64 / (tiny as f64 * std::f64::consts::FRAC_2_SQRT_PI) - 1.0).abs() < 1e-6
        );
        for x in [4.0, 9.0, 1e30, f32::INFINITY] {
            assert!(erf_lane(x) == 1.0 && erf_lane(-x) == -1.0, "{x}");
        }
        assert!((erf_lane(3.999) - 1.0).abs() < 5e-7 && erf_lane(3.999) <= 1.0);
        assert!(erf_lane(f32::NAN).is_nan());
    }

    const FUNCS: [(&str, SliceFn, LaneFn); 4] = [
        ("exp", exp, exp_lane),
        ("log", log, log_lane),
        ("tanh", tanh, tanh_lane),
        ("sigmoid", sigmoid, sigmoid_lane),
    ];

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// Max relative error against the f64 reference (not rounded, so a correctly
    /// rounded result can show up to half an ulp) over every 97th f32 bit pattern
    /// accepted by `keep`; returns (error, where, max ulps vs the rounded reference).
    fn sweep(f: SliceFn, reference: fn(f64) -> f64, keep: fn(f32) -> bool) -> (f64, f32, u32) {
        let xs: Vec<f32> = (0..=u32::MAX).step_by(97).map(f32::from_bits).filter(|&x| keep(x)).collect();
        let mut ys = vec![0.0; xs.len()];
        f(&xs, &mut ys);
        let (mut worst, mut at, mut ulps) = (0.0, 0.0, 0);
        for (&x, &y) in xs.iter().zip(&ys) {
            let r = reference(x as f64);
            let err = (y as f64 - r).abs() / r.abs();
            if err > worst {
                (worst, at) = (err, x);
            }
            ulps = ulps.max(y.to_bits().abs_diff((r as f32).to_bits()));
        }
        (worst, at, ulps)
    }

    fn check(name: &str, f: SliceFn, reference: fn(f64) -> f64, keep: fn(f32) -> bool) {
        let (err, at, ulps) = sweep(f, reference, keep);
        eprintln!("{name}: max rel err {err:.3e} at x = {at:e} ({ulps} ulp max)");
        assert!(err <= 2e-7, "{name}: {err:e} at {at:e}");
    }

    #[test]
    fn exp_accuracy() {
        check("exp", exp, f64::exp, |x| (-87.0..=88.0).contains(&x));
    }

    #[test]
    fn one_scale_factor_gives_the_bits_of_two_in_the_normal_range() {
        // tanh's e^2a takes the one-factor path: it must change no bit of the result.
        let mut bits = 0u32;
        while bits < 0x4300_0000 {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                if x.abs() <= 87.0 {
                    assert_eq!(exp_normal_range(x).to_bits(), exp_lane(x).to_bits(), "e^{x:e}");
                }
            }
            bits += 61;
        }
    }

    #[test]
    fn log_accuracy() {
        // Denormals included: the 2^23 rescale makes them as accurate as normals.
        check("log", log, f64::ln, |x| x > 0.0 && x.is_finite());
    }

    #[test]
    fn tanh_accuracy() {
        // For tiny x, tanh(x) and x agree far beyond f32 precision, so |tanh x| is
        // the same denominator as |x|.
        check("tanh", tanh, f64::tanh, |x| x.is_finite() && x != 0.0);
    }

    #[test]
    fn sigmoid_accuracy() {
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        check("sigmoid", sigmoid, sig, |x| (-87.0..=87.0).contains(&x));
    }

    #[test]
    fn special_values() {
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let e100 = (-100f64).exp() as f32;
        #[rustfmt::skip]
        let cases: [(LaneFn, f32, f32); 35] = [
            (exp_lane, 0.0, 1.0), (exp_lane, -0.0, 1.0), (exp_lane, inf, inf),
            (exp_lane, -inf, 0.0), (exp_lane, nan, nan), (exp_lane, 88.73, inf),
            (exp_lane, f32::MAX, inf), (exp_lane, -103.98, 0.0), (exp_lane, f32::MIN, 0.0),
            (exp_lane, 1e-30, 1.0), (exp_lane, -100.0, e100),
            (log_lane, 0.0, -inf), (log_lane, -0.0, -inf), (log_lane, inf, inf),
            (log_lane, -inf, nan), (log_lane, nan, nan), (log_lane, -1.0, nan),
            (log_lane, 1.0, 0.0), (log_lane, f32::from_bits(1), -103.27893),
            (tanh_lane, 0.0, 0.0), (tanh_lane, -0.0, -0.0), (tanh_lane, inf, 1.0),
            (tanh_lane, -inf, -1.0), (tanh_lane, nan, nan), (tanh_lane, 100.0, 1.0),
            (tanh_lane, -100.0, -1.0), (tanh_lane, 1e-40, 1e-40),
            (sigmoid_lane, 0.0, 0.5), (sigmoid_lane, -0.0, 0.5), (sigmoid_lane, inf, 1.0),
            (sigmoid_lane, -inf, 0.0), (sigmoid_lane, nan, nan), (sigmoid_lane, 100.0, 1.0),
            (sigmoid_lane, -100.0, e100), (sigmoid_lane, -104.0, 0.0),
        ];
        for (i, &(f, x, want)) in cases.iter().enumerate() {
            assert!(same(f(x), want), "case {i}: f({x:e}) = {:e}, want {want:e}", f(x));
        }
        assert!(exp_lane(88.72).is_finite());
        let s = sigmoid_lane(-80.0) as f64;
        assert!((s / (-80f64).exp() - 1.0).abs() < 2e-7, "sigmoid(-80) = {s:e}");
        // Slices agree with lanes, so these also cover the slice functions.
        let mut buf = [-0.0, 1e-45, 1.0];
        log_inplace(&mut buf);
        assert!(same(buf[0], -inf) && (buf[1] + 103.27893).abs() < 1e-5 && buf[2] == 0.0);
    }

    #[test]
    fn all_levels_match_lanes_bit_for_bit() {
        let mut xs: Vec<f32> = (0..=u32::MAX).step_by(9973).map(f32::from_bits).collect();
        xs.extend([0.0, -0.0, f32::INFINITY, -f32::INFINITY, f32::NAN, 0.625, -0.625]);
        let levels: &[SimdLevel] = match simd_level() {
            SimdLevel::Avx512 => &[SimdLevel::Avx512, SimdLevel::Avx2Fma, SimdLevel::Baseline],
            SimdLevel::Avx2Fma => &[SimdLevel::Avx2Fma, SimdLevel::Baseline],
            SimdLevel::Baseline => &[SimdLevel::Baseline],
        };
        let inplace: [fn(&mut [f32]); 4] = [exp_inplace, log_inplace, tanh_inplace, sigmoid_inplace];
        for ((name, slice_fn, lane), inplace_fn) in FUNCS.into_iter().zip(inplace) {
            let want: Vec<f32> = xs.iter().map(|&x| lane(x)).collect();
            let mut got = vec![0.0; xs.len()];
            slice_fn(&xs, &mut got);
            assert!(want.iter().zip(&got).all(|(&a, &b)| same(a, b)), "{name} slice");
            got.copy_from_slice(&xs);
            inplace_fn(&mut got);
            assert!(want.iter().zip(&got).all(|(&a, &b)| same(a, b)), "{name} in place");
            for &level in levels {
                // SAFETY: `levels` only lists levels up to the detected one.
                unsafe {
                    with_simd_level(level, || {
                        for (d, &s) in got.iter_mut().zip(&xs) {
                            *d = lane(s);
                        }
                    })
                };
                let ok = want.iter().zip(&got).all(|(&a, &b)| same(a, b));
                assert!(ok, "{name} at {level:?}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn length_mismatch_panics() {
        exp(&[1.0, 2.0], &mut [0.0]);
    }
}
