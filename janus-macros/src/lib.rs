//! janus-macros: `#[derive(Module)]` (and, later, `#[janus]`). Pure syntax: the macros parse and
//! emit code that calls `::janus`; all logic works on `proc_macro2` so it is unit-testable.

use proc_macro::TokenStream;

mod derive_module;

/// Implements `janus::Module` for a struct or enum: tensor fields are leaves, integer, bool and
/// float fields are constant leaves, enum variants are constant leaves, and fields of other
/// module types (`Vec`, arrays, `Option`, `Box`, tuples, derived structs) are visited
/// recursively. Type parameters get a `Module` bound.
#[proc_macro_derive(Module)]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    derive_module::expand(&input).unwrap_or_else(syn::Error::into_compile_error).into()
}
