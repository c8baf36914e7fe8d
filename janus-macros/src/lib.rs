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
/// `speculate = bool` (whole-function graphs, default true), `max_failures = N` (failed
/// speculations before a key stays on the fragment path, default 3) and `dynamic(a, b)` (host
/// scalars passed to graphs at run time instead of baked in; each name must be a parameter or
/// local of the function). A misspelt option or name is a compile error.
#[proc_macro_attribute]
pub fn janus(args: TokenStream, item: TokenStream) -> TokenStream {
    janus::expand(args.into(), item.into()).into()
}

/// Implements `janus::Module` for a struct or enum: tensor fields are leaves, integer, bool and
/// float fields are constant leaves, enum variants are constant leaves, and fields of other
/// module types (`Vec`, arrays, `Option`, `Box`, tuples, derived structs) are visited
/// recursively. Type parameters get a `Module` bound.
#[proc_macro_derive(Module)]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    derive_module::expand(&input).unwrap_or_else(syn::Error::into_compile_error).into()
}
