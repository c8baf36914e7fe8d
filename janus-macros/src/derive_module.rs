//! `#[derive(Module)]`: emits `visit`, `visit_mut`, `map_tensors`, `unflatten` and
//! `prepare_load` that walk the fields in declaration order, with enum variants as constant
//! leaves.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Type};

/// Expands the derive, or reports every unsupported field at once.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let name = &input.ident;
    let mut generics = input.generics.clone();
    for p in generics.type_params_mut() {
        p.bounds.push(syn::parse_quote!(::janus::Module));
    }
    let (impl_g, ty_g, where_g) = generics.split_for_impl();
    let (visit, visit_mut, map, unflatten, prepare, training) = match &input.data {
        Data::Struct(s) => {
            check_fields(&s.fields)?;
            let (pat, names) = destructure(&s.fields);
            let body = bodies(&s.fields, &names)?;
            let (v, vm, m, u, p) = (&body.visit, &body.visit_mut, &body.map, &body.unflatten, &body.prepare);
            let t = &body.training;
            (
                quote! { let Self #pat = self; #v },
                quote! { let Self #pat = self; #vm },
                quote! { let Self #pat = self; Self #m },
                quote! { Self #u },
                quote! { let Self #pat = self; #p },
                quote! { let Self #pat = self; #t },
            )
        }
        Data::Enum(e) => {
            let mut errors: Option<syn::Error> = None;
            for v in &e.variants {
                if let Err(err) = check_fields(&v.fields) {
                    combine(&mut errors, err);
                }
            }
            if let Some(e) = errors {
                return Err(e);
            }
            let (mut visit, mut visit_mut, mut map, mut unflatten, mut prepare, mut training) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (i, v) in e.variants.iter().enumerate() {
                let ident = &v.ident;
                let idx = i as u32;
                let (pat, names) = destructure(&v.fields);
                let body = bodies(&v.fields, &names)?;
                let (bv, bvm, bm, bu) = (&body.visit, &body.visit_mut, &body.map, &body.unflatten);
                let bt = &body.training;
                training.push(quote! { Self::#ident #pat => { #bt } });
                visit.push(quote! { Self::#ident #pat => {
                    __v.constant(::janus::module::ConstLeaf::Variant(#idx));
                    #bv
                } });
                visit_mut.push(quote! { Self::#ident #pat => { #bvm } });
                let bp = &body.prepare;
                prepare.push(quote! { Self::#ident #pat => { #bp } });
                map.push(quote! { Self::#ident #pat => Self::#ident #bm, });
                unflatten.push(quote! { ::janus::module::ConstLeaf::Variant(#idx) => Self::#ident #bu, });
            }
            (
                quote! { match self { #(#visit)* } },
                quote! { match self { #(#visit_mut)* } },
                quote! { match self { #(#map)* } },
                quote! { match __l.constant() {
                    #(#unflatten)*
                    other => ::core::panic!("janus internal error: no variant for leaf {:?}", other),
                } },
                quote! { match self { #(#prepare)* } },
                quote! { match self { #(#training)* } },
            )
        }
        Data::Union(u) => {
            return Err(syn::Error::new(u.union_token.span, "`#[derive(Module)]` does not support unions"));
        }
    };
    Ok(quote! {
        #[automatically_derived]
        #[allow(unused_variables, non_shorthand_field_patterns)]
        impl #impl_g ::janus::Module for #name #ty_g #where_g {
            fn visit(&self, __v: &mut dyn ::janus::module::Visitor) {
                #visit
            }
            fn visit_mut(&mut self, __f: &mut dyn ::core::ops::FnMut(&mut ::janus::Tensor)) {
                #visit_mut
            }
            fn map_tensors(
                &self,
                __f: &mut dyn ::core::ops::FnMut(&::janus::Tensor) -> ::janus::Tensor,
            ) -> Self {
                #map
            }
            fn unflatten(__l: &mut dyn ::janus::module::Leaves) -> Self {
                #unflatten
            }
            fn prepare_load(&mut self, __s: &mut ::janus::module::SavedTensors<'_>) {
                #prepare
            }
            fn set_training(&mut self, __t: bool) {
                #training
            }
        }
        #[automatically_derived]
        impl #impl_g ::janus::__private::Input for #name #ty_g #where_g {
            fn probe(&self, __p: &mut ::janus::__private::Prober) {
                __p.module(self);
            }
        }
    })
}

/// Adds `e` to the errors collected so far (all are reported, each at its span).
pub(crate) fn combine(acc: &mut Option<syn::Error>, e: syn::Error) {
    match acc {
        Some(a) => a.combine(e),
        None => *acc = Some(e),
    }
}

/// Rejects field types that can never be module leaves, each spanned on its type.
fn check_fields(fields: &Fields) -> syn::Result<()> {
    let mut errors = None;
    for f in fields {
        let msg = match &f.ty {
            Type::Reference(_) => Some(
                "module fields cannot be references: a module owns its leaves (a `Tensor` is cheap to clone, store that)",
            ),
            Type::Ptr(_) => Some("module fields cannot be raw pointers"),
            Type::BareFn(_) | Type::ImplTrait(_) | Type::TraitObject(_) => {
                Some("module fields must be tensors, constants or modules, not functions or trait objects")
            }
            _ => None,
        };
        if let Some(msg) = msg {
            combine(&mut errors, syn::Error::new(f.ty.span(), msg));
        }
    }
    errors.map_or(Ok(()), Err)
}

/// A pattern binding every field (`{ a: __f0, .. }` or `(__f0, ..)`), and the binding names.
fn destructure(fields: &Fields) -> (TokenStream, Vec<syn::Ident>) {
    let names: Vec<syn::Ident> = (0..fields.len()).map(|i| format_ident!("__field{}", i)).collect();
    let pat = match fields {
        Fields::Named(f) => {
            let members = f.named.iter().map(|x| x.ident.as_ref().expect("named field"));
            quote! { { #(#members: #names),* } }
        }
        Fields::Unnamed(_) => quote! { ( #(#names),* ) },
        Fields::Unit => quote! {},
    };
    (pat, names)
}

struct Bodies {
    visit: TokenStream,
    visit_mut: TokenStream,
    map: TokenStream,
    unflatten: TokenStream,
    prepare: TokenStream,
    training: TokenStream,
}

/// Whether a field carries `#[module(training)]`: the struct's own train/eval flag, which
/// `set_training` assigns (it must be a `bool`).
fn is_training_flag(f: &syn::Field) -> syn::Result<bool> {
    let mut flag = false;
    for attr in f.attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("training") {
                flag = true;
                Ok(())
            } else {
                Err(meta.error("expected `#[module(training)]`"))
            }
        })?;
    }
    Ok(flag)
}

/// Per-field calls, spanned on each field's type so an unsupported type is reported there.
fn bodies(fields: &Fields, names: &[syn::Ident]) -> syn::Result<Bodies> {
    let mut visit = Vec::new();
    let mut visit_mut = Vec::new();
    let mut map = Vec::new();
    let mut unflatten = Vec::new();
    let mut prepare = Vec::new();
    let mut training = Vec::new();
    for (i, (f, b)) in fields.iter().zip(names).enumerate() {
        let span = f.ty.span();
        if is_training_flag(f)? {
            training.push(quote_spanned! {span=> *#b = __t; });
        } else {
            training.push(quote_spanned! {span=> ::janus::Module::set_training(#b, __t); });
        }
        let segment = match &f.ident {
            Some(id) => {
                let s = id.to_string();
                quote! { ::janus::module::PathSegment::Field(#s) }
            }
            None => quote! { ::janus::module::PathSegment::Index(#i) },
        };
        visit.push(quote_spanned! {span=>
            __v.enter(#segment);
            ::janus::Module::visit(#b, __v);
            __v.leave();
        });
        visit_mut.push(quote_spanned! {span=> ::janus::Module::visit_mut(#b, __f); });
        prepare.push(quote_spanned! {span=>
            __s.enter(#segment);
            ::janus::Module::prepare_load(#b, __s);
            __s.leave();
        });
        map.push(quote_spanned! {span=> ::janus::Module::map_tensors(#b, __f) });
        let ty = &f.ty;
        unflatten.push(quote_spanned! {span=> <#ty as ::janus::Module>::unflatten(__l) });
    }
    let construct = |values: &[TokenStream]| match fields {
        Fields::Named(f) => {
            let members = f.named.iter().map(|x| x.ident.as_ref().expect("named field"));
            quote! { { #(#members: #values),* } }
        }
        Fields::Unnamed(_) => quote! { ( #(#values),* ) },
        Fields::Unit => quote! {},
    };
    let (map, unflatten) = (construct(&map), construct(&unflatten));
    Ok(Bodies {
        visit: quote! { #(#visit)* },
        visit_mut: quote! { #(#visit_mut)* },
        map,
        unflatten,
        prepare: quote! { #(#prepare)* },
        training: quote! { #(#training)* },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(src: &str) -> Result<String, String> {
        let input: DeriveInput = syn::parse_str(src).unwrap();
        expand(&input).map(|t| t.to_string()).map_err(|e| e.to_string())
    }

    #[test]
    fn struct_fields_are_visited_in_order_with_paths() {
        let out = expand_str("struct Net { l1: Linear, w: Tensor }").unwrap();
        let l1 = out.find("Field (\"l1\")").unwrap();
        let w = out.find("Field (\"w\")").unwrap();
        assert!(l1 < w);
        assert!(out.contains("impl :: janus :: Module for Net"));
    }

    #[test]
    fn generics_get_module_bounds() {
        let out = expand_str("struct Pair<A, B> { a: A, b: B }").unwrap();
        assert!(out.contains("A : :: janus :: Module"), "{out}");
    }

    #[test]
    fn enum_variants_become_constant_leaves() {
        let out = expand_str("enum Act { Relu, Scaled(f32), Gate { w: Tensor } }").unwrap();
        assert!(out.contains("Variant (0u32)") && out.contains("Variant (2u32)"), "{out}");
    }

    #[test]
    fn references_and_unions_are_rejected() {
        let err = expand_str("struct Bad<'a> { w: &'a Tensor, p: *const f32 }").unwrap_err();
        assert!(err.contains("cannot be references"), "{err}");
        assert!(expand_str("union U { a: f32 }").unwrap_err().contains("unions"));
    }
}
