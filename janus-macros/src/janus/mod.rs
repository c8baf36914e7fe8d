//! `#[janus]`: parse the item and options, check it is a function the macro can stage, then
//! expand it. Errors are `syn::Error`s spanned on the offending tokens; on error the original
//! function is still emitted beside them, so later diagnostics and the IDE keep working.
//!
//! The files import one way, with no cycle (`tests/layering.rs` checks it), top to bottom:
//! this file; `expand.rs` (the walk); `speculate.rs`; `emit.rs` and `partition.rs`;
//! `host_calls.rs`; `classify.rs`, `reads.rs` and `ctx.rs`; `options.rs`; `scope.rs`.

mod classify;
mod ctx;
mod emit;
mod expand;
mod host_calls;
mod options;
mod partition;
mod reads;
mod scope;
mod speculate;

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;

use crate::derive_module::combine;

/// Expands `#[janus(args)] item`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let f: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let span =
                syn::parse2::<syn::Item>(item.clone()).map(|i| i.span()).unwrap_or_else(|_| item.span());
            let err = syn::Error::new(span, "`#[janus]` applies to functions and methods with a body");
            return with_original(err, item);
        }
    };
    let mut errors: Option<syn::Error> = None;
    let mut fail = |span: proc_macro2::Span, msg: &str| combine(&mut errors, syn::Error::new(span, msg));
    if let Some(a) = &f.sig.asyncness {
        fail(a.span, "`#[janus]` does not support `async fn`: a graph cannot span `.await` points");
    }
    if let Some(c) = &f.sig.constness {
        fail(c.span, "`#[janus]` does not support `const fn`: there is nothing to stage at compile time");
    }
    if let Some(abi) = &f.sig.abi {
        fail(abi.span(), "`#[janus]` does not support `extern` functions");
    }
    if let Some(v) = &f.sig.variadic {
        fail(v.span(), "`#[janus]` does not support variadic functions");
    }
    let opts = options::parse(args).map_err(|e| combine(&mut errors, e)).ok();
    if let Some(Err(e)) = opts.as_ref().map(|o| options::check_dynamic(o, &f)) {
        combine(&mut errors, e);
    }
    let (Some(opts), true) = (opts, errors.is_none()) else {
        return with_original(errors.expect("an error was recorded"), item);
    };
    let mut ctx = ctx::Ctx::new(opts, scope::name(&f.sig.ident));
    let mut out = expand::function(f, &mut ctx);
    out.attrs.push(syn::parse_quote!(#[allow(unused_mut)]));
    quote!(#out)
}

fn with_original(err: syn::Error, item: TokenStream) -> TokenStream {
    let e = err.into_compile_error();
    quote! { #e #item }
}

#[cfg(test)]
mod snapshots;
