//! `#[janus(profile = 2, max_variants = 8, min_ops = 3, unroll = true, speculate = true,
//! dynamic(lr, beta))]`.

use proc_macro2::TokenStream;
use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitBool, LitInt, Token};

/// The attribute's options.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) profile: u32,
    pub(crate) max_variants: u32,
    /// Blocks recording fewer ops than this on small tensors run eagerly (a replay's fixed cost
    /// would exceed what it saves).
    pub(crate) min_ops: u32,
    /// `for` loops whose body is all static stage inside their block, recorded unrolled (one
    /// graph per trip count); `false` keeps every loop on the host.
    pub(crate) unroll: bool,
    /// Whole-function speculation (DESIGN §8): the body is also one fragment, recorded with
    /// asserts on its decisions and replayed all-or-nothing.
    pub(crate) speculate: bool,
    /// Failed speculations after which a key stays on the fragment path.
    pub(crate) max_failures: u32,
    pub(crate) dynamic: Vec<Ident>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            profile: 2,
            max_variants: 8,
            min_ops: 3,
            unroll: true,
            speculate: true,
            max_failures: 3,
            dynamic: Vec::new(),
        }
    }
}

impl Parse for Options {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut o = Options::default();
        while !input.is_empty() {
            let name: Ident = input.parse()?;
            match name.to_string().as_str() {
                "max_failures" => {
                    input.parse::<Token![=]>()?;
                    let v: LitInt = input.parse()?;
                    o.max_failures = v.base10_parse()?;
                    if o.max_failures == 0 {
                        return Err(syn::Error::new(v.span(), "`max_failures` must be at least 1"));
                    }
                }
                "profile" | "max_variants" => {
                    input.parse::<Token![=]>()?;
                    let v: LitInt = input.parse()?;
                    let n: u32 = v.base10_parse()?;
                    if n == 0 {
                        return Err(syn::Error::new(v.span(), format!("`{name}` must be at least 1")));
                    }
                    if name == "profile" {
                        o.profile = n;
                    } else {
                        o.max_variants = n;
                    }
                }
                "min_ops" => {
                    input.parse::<Token![=]>()?;
                    o.min_ops = input.parse::<LitInt>()?.base10_parse()?;
                }
                "speculate" | "unroll" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse::<LitBool>()?.value;
                    if name == "unroll" {
                        o.unroll = v;
                    } else {
                        o.speculate = v;
                    }
                }
                "dynamic" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let names = content.parse_terminated(Ident::parse, Token![,])?;
                    o.dynamic.extend(names);
                }
                other => {
                    return Err(syn::Error::new(
                        name.span(),
                        format!(
                            "unknown option `{other}`; expected `profile = N`, `max_variants = N`, `min_ops = N`, `unroll = bool`, `speculate = bool`, `max_failures = N` or `dynamic(names)`"
                        ),
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(o)
    }
}

/// Parses the attribute's arguments.
pub(crate) fn parse(args: TokenStream) -> syn::Result<Options> {
    syn::parse2(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn parses_every_option_and_rejects_unknown_ones() {
        let o = parse(quote!(
            profile = 3,
            max_variants = 4,
            min_ops = 1,
            unroll = false,
            speculate = true,
            dynamic(lr, beta)
        ))
        .unwrap();
        assert_eq!((o.profile, o.max_variants, o.min_ops, o.unroll, o.speculate), (3, 4, 1, false, true));
        assert_eq!(o.dynamic.len(), 2);
        assert!(parse(quote!(fast = 1)).unwrap_err().to_string().contains("unknown option `fast`"));
        assert!(parse(quote!(profile = 0)).unwrap_err().to_string().contains("at least 1"));
    }
}
