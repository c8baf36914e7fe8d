//! Emission of one fragment (see docs/design.md, "Emission"): the `static` fragment, the probes
//! of its inputs, and a dispatch whose body arm runs the original statements once and hands their
//! outputs to the runtime, and whose replay arm rebuilds those outputs. Called by `expand.rs`
//! (each block) and `speculate.rs` (the whole function); it imports neither, only the context
//! (`ctx.rs`), the places (`reads.rs`) and names (`scope.rs`).

use super::ctx::Ctx;
use super::reads::Place;
use super::scope::{name, pattern_names};
use proc_macro2::Span;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident, Stmt};

/// What one fragment is made of, as the partition found it.
pub(crate) struct Fragment<'a> {
    /// The run's statements as emitted.
    pub(crate) stmts: &'a [Stmt],
    /// Closure definitions copied in front of them (see docs/design.md, "Closures and items").
    pub(crate) copies: &'a [Stmt],
    pub(crate) inputs: &'a [Place],
    /// Places assigned, restored on replay.
    pub(crate) assigned: Vec<&'a Place>,
    /// Places that may be mutated through `&mut`, restored on replay.
    pub(crate) inouts: Vec<&'a Place>,
    /// Locals whose binding cannot be restored, only checked.
    pub(crate) fixed: Vec<&'a Place>,
    /// The run's bindings that are used after it.
    pub(crate) defined: Vec<Ident>,
    /// The whole function's body (see docs/design.md, "Speculation"): a speculative fragment.
    /// Its `dynamic(..)` scalars stay host values (the blocks inside it make them runtime inputs).
    pub(crate) whole_function: bool,
}

/// Whether the statements hold a `for` loop, whose trip count may change between calls.
fn has_for_loop(stmts: &[Stmt]) -> bool {
    struct Find(bool);
    impl<'ast> syn::visit::Visit<'ast> for Find {
        fn visit_expr_for_loop(&mut self, _: &'ast syn::ExprForLoop) {
            self.0 = true;
        }
    }
    let mut find = Find(false);
    for s in stmts {
        syn::visit::Visit::visit_stmt(&mut find, s);
    }
    find.0
}

/// Emits the fragment's statements: the declarations of its exported bindings, the dispatch,
/// and the rebinding of the exported names.
// Long by design: one `quote!` template of the whole dispatch, read top to bottom.
pub(crate) fn fragment(f: Fragment<'_>, ctx: &mut Ctx) -> Vec<Stmt> {
    // Generated names resolve at the macro's call site (a body written inside a `macro_rules!`
    // has other hygiene than the attribute), while errors still point at the statements.
    // (`line!()` and `file!()` keep the statements' own span: resolved at the call site they
    // would give the attribute's line.)
    let at = f.stmts.first().map(|s| s.span()).unwrap_or_else(Span::call_site);
    let (file, line) = (quote_spanned!(at=> ::core::file!()), quote_spanned!(at=> ::core::line!()));
    let span = at.resolved_at(Span::call_site());
    // The block's extent in lines, for `explain()` (0 where the compiler gives no lines).
    let first_line = span.start().line;
    let last_line = (f.stmts.last().and_then(|s| s.to_token_stream().into_iter().last()))
        .map_or(first_line, |t| t.span().end().line);
    let more_lines = last_line.saturating_sub(first_line) as u32;
    let (index, part) = match &mut ctx.part {
        Some((base, next)) => {
            *next += 1;
            (*base, *next - 1)
        }
        None => {
            ctx.next += 1;
            (ctx.next - 1, 0)
        }
    };
    let (function, profile, max_variants, min_ops) =
        (&ctx.function, ctx.opts.profile, ctx.opts.max_variants, ctx.opts.min_ops);
    let (speculative, max_failures, dynamic_dims) =
        (f.whole_function, ctx.opts.max_failures, ctx.opts.dynamic_dims);
    let has_loop = has_for_loop(f.stmts);
    let dynamic: Vec<&Place> = f
        .inputs
        .iter()
        .filter(|p| {
            !f.whole_function && p.steps.is_empty() && ctx.opts.dynamic.iter().any(|d| name(d) == p.root)
        })
        .collect();
    let dyn_decl = dynamic.iter().map(|p| {
        let (v, tmp) = (&p.expr, format_ident!("__janus_dyn_{}", p.root));
        quote! { let #tmp = ::janus::__private::dynamic_scalar(#v); }
    });
    let dyn_shadow = dynamic.iter().map(|p| {
        let (v, tmp) = (&p.expr, format_ident!("__janus_dyn_{}", p.root));
        // A reference (`Copy`, like the scalar it replaces), so closures that use it stay `Fn`
        // and `s * 0.1` does not move it.
        quote! { let #v = &#tmp; }
    });
    let probes = f.inputs.iter().map(|p| {
        // A hoisted helper call's local is labelled with the call.
        let label = match ctx.labels.get(&p.root) {
            Some(call) if p.steps.is_empty() => call.clone(),
            _ => p.text(),
        };
        if dynamic.iter().any(|d| d.root == p.root && p.steps.is_empty()) {
            let tmp = format_ident!("__janus_dyn_{}", p.root);
            quote! { (&::janus::__private::Probe(&#tmp)).probe(#label) }
        } else {
            // A field of a value (`self.h`) whose type cannot be keyed falls back to the value
            // it lies in (`self`), which may be a module: the fragment then keys on more leaves.
            let e = &p.expr;
            let mut probe = quote! { (&::janus::__private::Probe(&#e)).probe(#label) };
            let mut at = e;
            while let Expr::Field(f) = at {
                at = &f.base;
                let outer = at.to_token_stream().to_string().replace(' ', "");
                probe = quote! {
                    ::janus::__private::probe_or(#probe, || (&::janus::__private::Probe(&#at)).probe(#outer))
                };
            }
            probe
        }
    });
    let bare = |d: &Ident| name(d).trim_start_matches('_').to_string();
    let witnesses: Vec<Ident> = f.defined.iter().map(|d| format_ident!("__janus_w_{}", bare(d))).collect();
    let values: Vec<Ident> = f.defined.iter().map(|d| format_ident!("__janus_v_{}", bare(d))).collect();
    let mut exit_outputs = Vec::new();
    let mut restores = Vec::new();
    for p in &f.assigned {
        let (e, label) = (&p.expr, p.text());
        exit_outputs.push(quote! { (&&&::janus::__private::Witness::of(&#e)).output(&#e, #label) });
        restores
            .push(quote! { (&&&::janus::__private::Witness::of(&#e)).restore(&mut #e, &mut __janus_out); });
    }
    for p in &f.fixed {
        let (id, label) = (p.root_ident(), &p.root);
        exit_outputs.push(quote! { (&&::janus::__private::Witness::of(&#id)).fixed_output(&#id, #label) });
    }
    for p in &f.inouts {
        // A `dynamic(..)` scalar reaches the statements as a shadowing `&Tensor`, so they cannot
        // change the host value: as an output, it would only key the recording by its value
        // (`opt.set_lr(lr)` passes it as a bare argument, which looks like an in-out).
        if dynamic.iter().any(|d| d.root == p.root && p.steps.is_empty()) {
            continue;
        }
        let (e, label) = (&p.expr, p.text());
        exit_outputs.push(quote! { (&&&::janus::__private::Witness::of(&#e)).inout_output(&#e, #label) });
        restores.push(
            quote! { (&&&::janus::__private::Witness::of(&#e)).inout_restore(&mut #e, &mut __janus_out); },
        );
    }
    // The statements run in an inner block that hands their live bindings out, so a `let` in
    // the run that shadows an in-out or assigned local cannot hide the outer binding from the
    // exit below.
    let moved: Vec<Ident> = f.defined.iter().map(|d| format_ident!("__janus_o_{}", bare(d))).collect();
    for ((d, w), o) in f.defined.iter().zip(&witnesses).zip(&moved) {
        let label =
            if d == "__janus_tail" || d == "__janus_ret" { "return value".to_string() } else { name(d) };
        exit_outputs.push(quote! { (&&&#w).output(&#o, #label) });
    }
    // The user's binding of a copied closure is used here, where the copy shadows it, so it
    // draws no `unused variable` warning.
    let copied: Vec<Ident> = f
        .copies
        .iter()
        .flat_map(|c| match c {
            Stmt::Local(l) => pattern_names(&l.pat),
            _ => Vec::new(),
        })
        .collect();
    let (stmts, copies, defined) = (f.stmts, f.copies, &f.defined);
    let takes = values.iter().zip(&witnesses).map(|(v, w)| quote! { #v = (&&&#w).take(&mut __janus_out); });
    // The statements, then the values they define moved out of their scope (nothing to move:
    // no unit tuple, which clippy would flag on the user's span).
    let run = if moved.is_empty() {
        quote_spanned! {span=> {
            #(#dyn_shadow)*
            #(let _ = &#copied;)*
            #(#copies)*
            #(#stmts)*
        } }
    } else {
        quote_spanned! {span=>
            let (#(#moved,)*) = {
                #(#dyn_shadow)*
                #(let _ = &#copied;)*
                #(#copies)*
                #(#stmts)*
                #(#witnesses.bind(&#defined);)*
                (#(#defined,)*)
            };
        }
    };
    let generated = quote_spanned! {span=>
        {
            #[allow(unused_imports)]
            use ::janus::__private::{
                FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _, InOutRef as _,
                OutputModule as _, OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
            };
            static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
                function: #function,
                file: #file,
                line: #line,
                more_lines: #more_lines,
                index: #index,
                part: #part,
                profile: #profile,
                max_variants: #max_variants,
                min_ops: #min_ops,
                speculative: #speculative,
                max_failures: #max_failures,
                dynamic_dims: #dynamic_dims,
                has_loop: #has_loop,
            });
            #(#dyn_decl)*
            #(let #witnesses = ::janus::__private::Witness::new();)*
            // The closure's type is generic over every parameter in scope, an enclosing `impl`'s
            // included, so it tells the instantiations apart (see docs/design.md, "Keys").
            match __JANUS_FRAGMENT.enter(|| [#(#probes),*], ::janus::__private::Instance::of(&|| ())) {
                ::janus::__private::Enter::Body(__janus_scope) => {
                    #run
                    __janus_scope.exit(::std::vec![#(#exit_outputs),*]);
                    #(#values = #moved;)*
                }
                ::janus::__private::Enter::Replay(mut __janus_out) => {
                    #(#restores)*
                    #(#takes)*
                }
            }
        }
    };
    let mut result: Vec<Stmt> =
        values.iter().map(|v| syn::parse_quote_spanned!(span=> #[allow(non_snake_case)] let #v;)).collect();
    match syn::parse2::<Expr>(generated.clone()) {
        Ok(e) => result.push(Stmt::Expr(e, None)),
        Err(e) => panic!("generated fragment does not parse: {e}\n{generated}"),
    }
    for (d, v) in f.defined.iter().zip(&values) {
        result.push(
            syn::parse_quote_spanned!(span=> #[allow(unused_variables, non_snake_case)] let mut #d = #v;),
        );
    }
    result
}
