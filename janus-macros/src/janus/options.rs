//! `#[janus(profile = 2, max_variants = 8, min_ops = 3, unroll = true, speculate = true,
//! dynamic_dims = true, dynamic(lr, beta))]`: parsing, and the checks that need the function (`dynamic(..)` names
//! must be its parameters or locals). Every mistake is a spanned error quoting the user's
//! syntax, so a typo cannot silently leave a value baked into the graph.

use proc_macro2::TokenStream;
use syn::parse::{Parse, ParseStream};
use syn::visit::Visit;
use syn::{Ident, LitBool, LitInt, Token};

use super::scope::name;
use crate::derive_module::combine;

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
    /// Whether a block's graphs generalise over input dimensions that change between calls.
    pub(crate) dynamic_dims: bool,
    /// Whole-function speculation (see docs/design.md, "Speculation"): the body is also one
    /// fragment, recorded with asserts on its decisions and replayed all-or-nothing.
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
            dynamic_dims: true,
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
                "profile" => {
                    input.parse::<Token![=]>()?;
                    let v: LitInt = input.parse()?;
                    o.profile = v.base10_parse()?;
                    if o.profile < 2 {
                        return Err(syn::Error::new(
                            v.span(),
                            "`profile` must be at least 2: a key compiles only once two recorded calls agree",
                        ));
                    }
                }
                "max_variants" => {
                    input.parse::<Token![=]>()?;
                    let v: LitInt = input.parse()?;
                    o.max_variants = v.base10_parse()?;
                    if o.max_variants == 0 {
                        return Err(syn::Error::new(v.span(), "`max_variants` must be at least 1"));
                    }
                }
                "min_ops" => {
                    input.parse::<Token![=]>()?;
                    o.min_ops = input.parse::<LitInt>()?.base10_parse()?;
                }
                "speculate" | "unroll" | "dynamic_dims" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse::<LitBool>()?.value;
                    match name.to_string().as_str() {
                        "unroll" => o.unroll = v,
                        "speculate" => o.speculate = v,
                        _ => o.dynamic_dims = v,
                    }
                }
                "dynamic" if input.peek(Token![=]) => {
                    let eq: Token![=] = input.parse()?;
                    // Everything up to the next option, to quote it back inside parentheses.
                    let mut value = TokenStream::new();
                    while !input.is_empty() && !input.peek(Token![,]) {
                        value.extend([input.parse::<proc_macro2::TokenTree>()?]);
                    }
                    let value = value.to_string();
                    let value = value.trim_matches(|c| matches!(c, '"' | '[' | ']' | ' '));
                    return Err(syn::Error::new(
                        eq.span,
                        format!("`dynamic` takes a list of names: write `dynamic({value})`"),
                    ));
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
                            "unknown option `{other}`; expected `profile = N`, `max_variants = N`, `min_ops = N`, `unroll = bool`, `speculate = bool`, `dynamic_dims = bool`, `max_failures = N` or `dynamic(names)`"
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

/// Checks that every `dynamic(..)` name is a parameter or a local of `f`: a name that binds
/// nothing would leave the scalar it meant baked into the graph (one variant per value, then
/// eager), so it is an error spanned on the name, suggesting the closest binding.
pub(crate) fn check_dynamic(opts: &Options, f: &syn::ItemFn) -> syn::Result<()> {
    if opts.dynamic.is_empty() {
        return Ok(());
    }
    #[derive(Default)]
    struct Bindings(Vec<String>);
    impl<'a> Visit<'a> for Bindings {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(name(&p.ident));
            syn::visit::visit_pat_ident(self, p);
        }
        // Items nested in the body have bindings of their own, out of the macro's reach.
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut bound = Bindings::default();
    for input in &f.sig.inputs {
        if let syn::FnArg::Typed(t) = input {
            bound.visit_pat(&t.pat);
        }
    }
    let params = bound.0.len();
    bound.visit_block(&f.block);
    let mut errors = None;
    for d in &opts.dynamic {
        let wanted = name(d);
        if bound.0.contains(&wanted) {
            continue;
        }
        let closest = bound
            .0
            .iter()
            .enumerate()
            .map(|(i, b)| (edit_distance(&wanted, b), i >= params, b))
            .filter(|(dist, _, b)| *dist <= b.len().max(wanted.len()) / 3 + 1)
            .min();
        let hint = match closest {
            Some((_, _, b)) => format!("; did you mean `{b}`?"),
            None if params == 0 => String::new(),
            None => format!("; its parameters are {}", list(&bound.0[..params])),
        };
        let fn_name = &f.sig.ident;
        combine(
            &mut errors,
            syn::Error::new(
                d.span(),
                format!("`dynamic({wanted})` names no parameter or local variable of `{fn_name}`{hint}"),
            ),
        );
    }
    errors.map_or(Ok(()), Err)
}

/// `` `a`, `b` and `c` ``.
fn list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// Levenshtein distance between `a` and `b`, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
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
            dynamic_dims = false,
            dynamic(lr, beta)
        ))
        .unwrap();
        assert_eq!((o.profile, o.max_variants, o.min_ops, o.unroll, o.speculate), (3, 4, 1, false, true));
        assert!(!o.dynamic_dims);
        assert_eq!(o.dynamic.len(), 2);
        assert!(parse(quote!(fast = 1)).unwrap_err().to_string().contains("unknown option `fast`"));
        assert!(parse(quote!(profile = 0)).unwrap_err().to_string().contains("at least 2"));
        assert!(parse(quote!(profile = 1)).unwrap_err().to_string().contains("at least 2"));
        assert!(parse(quote!(max_variants = 0)).unwrap_err().to_string().contains("at least 1"));
    }

    #[test]
    fn dynamic_with_equals_suggests_the_list_form() {
        for args in
            [quote!(dynamic = lr), quote!(dynamic = "lr"), quote!(min_ops = 1, dynamic = lr, profile = 2)]
        {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.contains("write `dynamic(lr)`"), "{e}");
        }
    }

    #[test]
    fn dynamic_names_must_bind_something() {
        let f: syn::ItemFn = syn::parse_quote! {
            fn step(x: &Tensor, lr: f64, (a, b): (f32, f32)) -> Tensor {
                let scale = 2.0;
                x * lr * scale * a * b
            }
        };
        let check = |args: TokenStream| check_dynamic(&parse(args).unwrap(), &f);
        assert!(check(quote!(dynamic(lr, scale, b))).is_ok());
        let e = check(quote!(dynamic(lrr))).unwrap_err().to_string();
        assert_eq!(e, "`dynamic(lrr)` names no parameter or local variable of `step`; did you mean `lr`?");
        let e = check(quote!(dynamic(momentum))).unwrap_err();
        assert!(e.to_string().ends_with("its parameters are `x`, `lr`, `a` and `b`"), "{e}");
        // Every unknown name is reported, not only the first.
        assert_eq!(check(quote!(dynamic(lrr, lr, scal))).unwrap_err().into_iter().count(), 2);
    }

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("lrr", "lr"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
