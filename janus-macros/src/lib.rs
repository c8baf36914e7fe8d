//! janus-macros: `#[janus]` and `#[derive(Module)]`. Pure syntax: the macros parse and emit
//! code that calls `::janus`; all logic works on `proc_macro2` so it is unit-testable.

use proc_macro::TokenStream;

mod derive_module;
mod janus;

/// Runs a function's static blocks as cached, compiled graphs; control flow stays host code and
/// dispatches to them through guards that fall back to the original statements.
///
/// Options: `profile = N` (recorded calls of a key before it compiles, default 2, at least 2),
/// `max_variants = N` (keys compiled per block, default 8), `min_ops = N` (smaller blocks stay
/// eager, default 3), `unroll = bool` (record all-static `for` loops unrolled, default true),
/// `speculate = bool` (whole-function graphs, default true), `dynamic_dims = bool` (keys that
/// differ only in leaf sizes share one shape-polymorphic graph once two sizes compiled,
/// default true), `max_failures = N` (failed
/// speculations before a key stays on the fragment path, default 3) and `dynamic(a, b)` (host
/// scalars passed to graphs at run time instead of baked in; each name must be a parameter or
/// local of the function). A misspelt option or name is a compile error.
///
/// # Examples
///
/// A training step: after two profiled calls, the whole step (forward, `backward()`, the
/// update) replays as one graph.
///
/// ```
/// use janus::prelude::*;
///
/// #[janus]
/// fn step(w: &mut Tensor, x: &Tensor, y: &Tensor) -> f32 {
///     let loss = (x.matmul(w) - y).square().mean_all();
///     let grads = loss.backward();
///     *w = no_grad(|| &*w - grads.get(w).unwrap() * 0.1).requires_grad();
///     loss.item()
/// }
///
/// let (x, y) = (Tensor::randn([8, 3]), Tensor::randn([8, 1]));
/// let mut w = Tensor::zeros([3, 1]).requires_grad();
/// let first = step(&mut w, &x, &y);
/// for _ in 0..20 {
///     step(&mut w, &x, &y);
/// }
/// assert!(step(&mut w, &x, &y) < first);
/// assert!(janus::stats().fragments.iter().any(|f| f.name == "step#fn" && f.hits > 0));
/// ```
///
/// Every option, on a function whose blocks run as separate graphs (`speculate = false`): a
/// learning rate that changes every call is `dynamic`, so it is a graph input rather than a
/// constant (no recompiles), and the time loop is kept on the host (`unroll = false`) so one
/// graph of its body serves every sequence length.
///
/// ```
/// use janus::prelude::*;
///
/// #[janus(profile = 3, max_variants = 4, min_ops = 1, unroll = false, speculate = false,
///         max_failures = 2, dynamic(lr))]
/// fn rnn_step(w: &Tensor, xs: &[Tensor], lr: f64) -> Tensor {
///     let mut h = Tensor::zeros([1, 4]);
///     for x in xs {
///         h = (x + h.matmul(w)).tanh();
///     }
///     h * lr
/// }
///
/// let w = Tensor::randn([4, 4]) * 0.3;
/// for k in 0..10 {
///     let xs: Vec<Tensor> = (0..2 + k % 3).map(|_| Tensor::randn([1, 4])).collect();
///     let lr = 0.1 / (1.0 + k as f64);
///     let eager = janus::with_mode(Mode::Eager, || rnn_step(&w, &xs, lr));
///     let staged = rnn_step(&w, &xs, lr);
///     assert!((staged - eager).abs().max_all().item() < 1e-6);
/// }
/// println!("{}", janus::explain()); // per block: hits, compiles, and why anything ran eagerly
/// ```
#[proc_macro_attribute]
pub fn janus(args: TokenStream, item: TokenStream) -> TokenStream {
    janus::expand(args.into(), item.into()).into()
}

/// Implements `janus::Module` for a struct or enum: tensor fields are leaves, integer, bool and
/// float fields are constant leaves, enum variants are constant leaves, and fields of other
/// module types (`Vec`, arrays, `Option`, `Box`, tuples, derived structs) are visited
/// recursively. Type parameters get a `Module` bound.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    derive_module::expand(&input).unwrap_or_else(syn::Error::into_compile_error).into()
}
