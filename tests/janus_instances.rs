//! Every instantiation of a `#[janus]` function has its own cache (issue 9, item 4): generic
//! parameters of an enclosing `impl` (type and const), of a trait an impl implements and of the
//! function itself, in methods with and without a receiver.
//! A block's `static` is shared by all instantiations, so before the fix a graph compiled for
//! one instantiation replayed for another. Each test warms one instantiation up until it
//! replays, then runs the others over several input shapes and compares every call with eager
//! mode.

use janus::prelude::*;

trait Act: Default {
    fn apply(&self, x: &Tensor) -> Tensor;
}

#[derive(Default)]
struct Cube;
impl Act for Cube {
    fn apply(&self, x: &Tensor) -> Tensor {
        x * x * x
    }
}

#[derive(Default)]
struct Double;
impl Act for Double {
    fn apply(&self, x: &Tensor) -> Tensor {
        x * 2.0
    }
}

#[derive(Default)]
struct Shift;
impl Act for Shift {
    fn apply(&self, x: &Tensor) -> Tensor {
        x - 0.5
    }
}

/// Inputs of several shapes (several keys per instantiation).
fn inputs() -> Vec<Tensor> {
    [[2usize, 3], [4, 1], [3, 3]]
        .iter()
        .enumerate()
        .map(|(k, s)| (Tensor::randn_dtype(*s, DType::F64) * (0.5 + k as f64)).tanh())
        .collect()
}

/// Runs `calls` (one closure per instantiation) in janus mode and eagerly: first the first
/// instantiation alone until it has compiled and replayed, then all of them, round after round
/// (8 rounds, every input shape). Every result must equal the eager one bit for bit (same
/// kernels, and no value rewrite changes these expressions).
fn agree(function: &str, calls: &[&dyn Fn(&Tensor) -> Tensor]) {
    let xs = inputs();
    let check = |k: usize, x: &Tensor, round: usize| {
        let got = calls[k](x);
        let want = janus::with_mode(Mode::Eager, || calls[k](x));
        assert_eq!(got.dims(), want.dims());
        assert_eq!(
            got.to_vec::<f64>(),
            want.to_vec::<f64>(),
            "{function}: instantiation {k}, round {round}, shape {:?}\n{}",
            x.dims(),
            janus::explain()
        );
    };
    for round in 0..4 {
        check(0, &xs[0], round);
    }
    let first_hits: u64 = janus::stats().function(function).map(|f| f.hits).sum();
    assert!(first_hits > 0, "{function}: the first instantiation never replayed\n{}", janus::explain());
    for round in 0..8 {
        for (k, _) in calls.iter().enumerate() {
            for x in &xs {
                check(k, x, round);
            }
        }
    }
    let stats: Vec<_> = janus::stats().function(function).cloned().collect();
    let hits: u64 = stats.iter().map(|f| f.hits).sum();
    // Every (instantiation, shape) key compiles its own graph and replays it afterwards.
    let variants: usize = stats.iter().map(|f| f.variants).sum();
    assert_eq!(variants, calls.len() * xs.len(), "{function}\n{}", janus::explain());
    assert!(hits >= (calls.len() * xs.len() * 5) as u64, "{function}: {hits} hits\n{}", janus::explain());
}

struct Wrap<A>(A);

impl<A: Act> Wrap<A> {
    /// An associated function without a receiver: nothing in its signature names `A` or `Self`.
    #[janus(min_ops = 1, max_variants = 9)]
    fn wrap_assoc(x: &Tensor) -> Tensor {
        A::default().apply(x) + 1.0
    }

    /// A generic method of a generic impl: both parameter lists key the cache (a block's
    /// variant limit counts the keys of all instantiations).
    #[janus(min_ops = 1, max_variants = 12)]
    fn wrap_both<B: Act>(x: &Tensor) -> Tensor {
        let y = A::default().apply(x);
        B::default().apply(&y) * 0.5
    }
}

#[test]
fn type_parameters_of_an_impl_key_associated_functions() {
    agree(
        "wrap_assoc",
        &[&|x| Wrap::<Double>::wrap_assoc(x), &|x| Wrap::<Cube>::wrap_assoc(x), &|x| {
            Wrap::<Shift>::wrap_assoc(x)
        }],
    );
}

/// A layer generic over its activation, with a tensor field.
struct Layer<A> {
    w: Tensor,
    act: std::marker::PhantomData<A>,
}

impl<A: Act> Layer<A> {
    #[janus(min_ops = 1)]
    fn layer_method(&self, x: &Tensor) -> Tensor {
        let y = A::default().apply(&(x * &self.w)).tanh();
        y * 3.0
    }
}

#[test]
fn type_parameters_of_an_impl_key_methods() {
    let w = Tensor::from_vec(vec![0.5f64], [1]);
    let cube = Layer::<Cube> { w: w.clone(), act: Default::default() };
    let double = Layer::<Double> { w, act: Default::default() };
    agree("layer_method", &[&|x| cube.layer_method(x), &|x| double.layer_method(x)]);
}

#[test]
fn parameters_of_an_impl_and_of_its_method_key_together() {
    agree(
        "wrap_both",
        &[
            &|x| Wrap::<Double>::wrap_both::<Cube>(x),
            &|x| Wrap::<Cube>::wrap_both::<Double>(x),
            &|x| Wrap::<Double>::wrap_both::<Double>(x),
            &|x| Wrap::<Cube>::wrap_both::<Cube>(x),
        ],
    );
}

struct Scaler<const N: usize>;

impl<const N: usize> Scaler<N> {
    #[janus(min_ops = 1)]
    fn scale_assoc(x: &Tensor) -> Tensor {
        x * N as f64 + 1.0
    }

    #[janus(min_ops = 1)]
    fn scale_method(&self, x: &Tensor) -> Tensor {
        let y = x.tanh() * N as f64;
        y - 1.0
    }
}

#[test]
fn const_parameters_of_an_impl_key_associated_functions_and_methods() {
    agree("scale_assoc", &[&|x| Scaler::<3>::scale_assoc(x), &|x| Scaler::<4>::scale_assoc(x)]);
    agree("scale_method", &[&|x| Scaler::<2>.scale_method(x), &|x| Scaler::<5>.scale_method(x)]);
}

/// A trait generic over the activation, implemented once for a type that does not mention it:
/// `Self` is the same for both instantiations, only the trait's parameter differs.
trait Runner<A> {
    fn runner(x: &Tensor) -> Tensor;
}

struct Plain;

impl<A: Act> Runner<A> for Plain {
    #[janus(min_ops = 1)]
    fn runner(x: &Tensor) -> Tensor {
        let y = A::default().apply(x);
        y.sigmoid() + 0.25
    }
}

#[test]
fn parameters_of_an_implemented_trait_key_its_methods() {
    agree("runner", &[&|x| <Plain as Runner<Cube>>::runner(x), &|x| <Plain as Runner<Shift>>::runner(x)]);
}

#[janus(min_ops = 1, max_variants = 9)]
fn free_generic<A: Act, const K: usize>(x: &Tensor) -> Tensor {
    let y = A::default().apply(x);
    y * K as f64
}

#[test]
fn type_and_const_parameters_of_a_generic_function_key_the_cache() {
    agree(
        "free_generic",
        &[&|x| free_generic::<Cube, 2>(x), &|x| free_generic::<Cube, 3>(x), &|x| {
            free_generic::<Double, 2>(x)
        }],
    );
}
