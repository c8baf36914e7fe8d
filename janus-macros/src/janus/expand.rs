//! Expansion: every statement list of the function is partitioned (static runs, control flow,
//! host statements); each static run with work in it becomes a fragment dispatch around the
//! original statements (DESIGN §5), which appear once, verbatim.

use super::analyze::{Env, Kind, Place, classify, mentioned, pattern_names, run_info};
use super::options::Options;
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, FnArg, Ident, ItemFn, Pat, Stmt};

/// What the expansion of one function needs to know.
pub(crate) struct Ctx {
    pub(crate) opts: Options,
    pub(crate) function: String,
    /// `type_name` expressions of the generic parameters (and `Self`), keying every fragment.
    pub(crate) generics: Vec<TokenStream>,
    pub(crate) next: u32,
}

/// Makes top-level bindings mutable (parameters, `let` and `for` patterns that are a plain
/// name), so the replay can restore such a local through `&mut` whatever its declared
/// mutability; the function allows `unused_mut`. Names inside destructuring patterns are left
/// alone (default binding modes forbid `mut` there): those are restored only if the user
/// declared them `mut`.
struct MakeMut;

fn make_mut(p: &mut Pat) {
    match p {
        Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none() && i.ident != "self" => {
            i.mutability.get_or_insert_with(Default::default);
        }
        Pat::Type(t) => make_mut(&mut t.pat),
        _ => {}
    }
}

impl VisitMut for MakeMut {
    fn visit_local_mut(&mut self, l: &mut syn::Local) {
        make_mut(&mut l.pat);
        syn::visit_mut::visit_local_mut(self, l);
    }
    fn visit_expr_for_loop_mut(&mut self, f: &mut syn::ExprForLoop) {
        make_mut(&mut f.pat);
        syn::visit_mut::visit_expr_for_loop_mut(self, f);
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// Names a pattern binds mutably (after [`MakeMut`]).
fn mutable_names(p: &Pat) -> Vec<String> {
    struct Muts(Vec<String>);
    impl<'a> syn::visit::Visit<'a> for Muts {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            if p.mutability.is_some() {
                self.0.push(p.ident.to_string());
            }
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut m = Muts(Vec::new());
    syn::visit::Visit::visit_pat(&mut m, p);
    m.0
}

/// Rewrites the function: bindings made mutable, every block's statement lists transformed.
pub(crate) fn function(mut f: ItemFn, ctx: &mut Ctx) -> ItemFn {
    let mut env = Env { function: ctx.function.clone(), unroll: ctx.opts.unroll, ..Env::default() };
    for arg in f.sig.inputs.iter_mut() {
        match arg {
            FnArg::Receiver(r) => {
                env.declare("self".into());
                env.references.insert("self".into());
                env.mutable.insert("self".into());
                // `&mut self` becomes `mut self: &mut Self`: same receiver, mutable binding.
                r.mutability = Some(Default::default());
                r.reference = None;
                r.colon_token = Some(Default::default());
            }
            FnArg::Typed(t) => {
                make_mut(&mut t.pat);
                for n in pattern_names(&t.pat) {
                    env.declare(n.to_string());
                    if let syn::Type::Reference(r) = &*t.ty {
                        env.references.insert(n.to_string());
                        if r.mutability.is_none() {
                            env.shared.insert(n.to_string());
                        }
                    }
                }
                env.mutable.extend(mutable_names(&t.pat));
            }
        }
    }
    MakeMut.visit_block_mut(&mut f.block);
    block(&mut f.block, &env, ctx);
    f
}

/// Transforms one statement list.
fn block(b: &mut Block, parent: &Env, ctx: &mut Ctx) {
    let mut env = parent.nested();
    let mut stmts = std::mem::take(&mut b.stmts);
    let tail = match stmts.last() {
        Some(Stmt::Expr(_, None)) => stmts.pop(),
        _ => None,
    };
    // Names mentioned from statement i on (the tail included): what a run must leave bound.
    // This over-approximates liveness on purpose: a binding a run defines must also survive it
    // when a later statement only assigns it (`let mut v = a; ..; v = b;`): its value is dead,
    // but the name must exist.
    let mut used_from: Vec<HashSet<String>> = vec![HashSet::new(); stmts.len() + 1];
    if let Some(t) = &tail {
        mentioned(t.to_token_stream(), &mut used_from[stmts.len()]);
    }
    for i in (0..stmts.len()).rev() {
        let mut here = used_from[i + 1].clone();
        mentioned(stmts[i].to_token_stream(), &mut here);
        used_from[i] = here;
    }
    let mut out: Vec<Stmt> = Vec::new();
    // The run as written (what the analysis reads) and as emitted (staged loops carry their
    // partitioned bodies).
    let mut run: Vec<Stmt> = Vec::new();
    let mut emit: Vec<Stmt> = Vec::new();
    let mut run_env = env.clone();
    for (i, mut s) in stmts.into_iter().enumerate() {
        let kind = classify(&s, &env);
        if kind != Kind::Static {
            flush((&mut run, &mut emit), &run_env, &used_from[i], &mut out, ctx);
        }
        match kind {
            Kind::Static => {
                if run.is_empty() {
                    run_env = env.clone();
                }
                run.push(s.clone());
                emit.push(with_fallback(s.clone(), &env, ctx));
            }
            Kind::Control => {
                control(&mut s, &env, ctx);
                out.push(s.clone());
            }
            Kind::ClosureDef | Kind::Host | Kind::Item => out.push(s.clone()),
        }
        if let Stmt::Local(l) = &s {
            for n in pattern_names(&l.pat) {
                env.declare(n.to_string());
            }
            env.mutable.extend(mutable_names(&l.pat));
            if let (Pat::Ident(p), Some(init)) = (strip_type(&l.pat), &l.init) {
                match &*init.expr {
                    Expr::Reference(r) => {
                        env.references.insert(p.ident.to_string());
                        if r.mutability.is_none() {
                            env.shared.insert(p.ident.to_string());
                        }
                    }
                    Expr::Closure(_) if kind == Kind::ClosureDef => {
                        env.closures.insert(p.ident.to_string(), s.clone());
                    }
                    _ => {}
                }
            }
        }
    }
    // A static tail expression is bound to a local, so it stages with the run before it.
    let end = used_from.len() - 1;
    match tail {
        Some(Stmt::Expr(e, None)) if is_tail_static(&e, &env) => {
            if run.is_empty() {
                run_env = env.clone();
            }
            let span = e.span();
            let bound: Stmt = syn::parse_quote_spanned!(span=> let __janus_tail = #e;);
            run.push(bound.clone());
            emit.push(with_fallback(bound, &env, ctx));
            let live = HashSet::from(["__janus_tail".to_string()]);
            flush((&mut run, &mut emit), &run_env, &live, &mut out, ctx);
            out.push(Stmt::Expr(syn::parse_quote_spanned!(span=> __janus_tail), None));
        }
        Some(mut t) => {
            flush((&mut run, &mut emit), &run_env, &used_from[end], &mut out, ctx);
            if classify(&t, &env) == Kind::Control {
                control(&mut t, &env, ctx);
            }
            out.push(t);
        }
        None => flush((&mut run, &mut emit), &run_env, &used_from[end], &mut out, ctx),
    }
    b.stmts = out;
}

/// A tail expression worth staging: static, and more than a bare local (`y`), which the run
/// before it already leaves behind.
fn is_tail_static(e: &Expr, env: &Env) -> bool {
    !matches!(e, Expr::Path(_))
        && classify(&Stmt::Expr(e.clone(), Some(Default::default())), env) == Kind::Static
}

fn strip_type(p: &Pat) -> &Pat {
    match p {
        Pat::Type(t) => strip_type(&t.pat),
        p => p,
    }
}

/// A staged `for` loop also partitions a copy of its body, for the calls on which its block
/// runs the statements (a key being profiled, past the variant limit or unstageable): each trip
/// then dispatches to the body's own cached graph, as an unstaged loop would. While the block
/// is being recorded, those inner fragments record inline.
fn with_fallback(mut s: Stmt, env: &Env, ctx: &mut Ctx) -> Stmt {
    if let Stmt::Local(l) = &mut s {
        if let Some(init) = l.init.as_mut().filter(|i| matches!(&*i.expr, Expr::ForLoop(_))) {
            control_expr(&mut init.expr, env, ctx);
        }
    } else if matches!(&s, Stmt::Expr(Expr::ForLoop(_), _)) {
        control(&mut s, env, ctx);
    }
    s
}

/// Recurses into the bodies of control flow; conditions and headers stay host code.
fn control(s: &mut Stmt, env: &Env, ctx: &mut Ctx) {
    let Stmt::Expr(e, _) = s else { return };
    control_expr(e, env, ctx);
}

fn control_expr(e: &mut Expr, env: &Env, ctx: &mut Ctx) {
    match e {
        Expr::If(i) => {
            let mut inner = env.clone();
            if let Expr::Let(l) = &*i.cond {
                for n in pattern_names(&l.pat) {
                    inner.declare(n.to_string());
                }
            }
            block(&mut i.then_branch, &inner, ctx);
            if let Some((_, els)) = &mut i.else_branch {
                control_expr(els, env, ctx);
            }
        }
        Expr::Block(b) => block(&mut b.block, env, ctx),
        Expr::While(w) => {
            let mut inner = env.clone();
            if let Expr::Let(l) = &*w.cond {
                for n in pattern_names(&l.pat) {
                    inner.declare(n.to_string());
                }
            }
            block(&mut w.body, &inner, ctx);
        }
        Expr::ForLoop(f) => {
            let mut inner = env.clone();
            for n in pattern_names(&f.pat) {
                inner.declare(n.to_string());
            }
            inner.mutable.extend(mutable_names(&f.pat));
            block(&mut f.body, &inner, ctx);
        }
        Expr::Loop(l) => block(&mut l.body, env, ctx),
        Expr::Match(m) => {
            for arm in &mut m.arms {
                let mut inner = env.clone();
                for n in pattern_names(&arm.pat) {
                    inner.declare(n.to_string());
                }
                if !matches!(&*arm.body, Expr::Block(_)) {
                    // `Pat => expr` is `Pat => { expr }`, whose statement list can be staged.
                    let body = &arm.body;
                    *arm.body = syn::parse_quote_spanned!(body.span()=> { #body });
                }
                if let Expr::Block(b) = &mut *arm.body {
                    block(&mut b.block, &inner, ctx);
                }
            }
        }
        _ => {}
    }
}

/// Emits the pending run: as a fragment when it does work, as plain statements otherwise.
fn flush(
    (run, emit): (&mut Vec<Stmt>, &mut Vec<Stmt>),
    env: &Env,
    live_after: &HashSet<String>,
    out: &mut Vec<Stmt>,
    ctx: &mut Ctx,
) {
    if run.is_empty() {
        return;
    }
    let stmts = std::mem::take(run);
    let emitted = std::mem::take(emit);
    let own = run_info(&stmts, env);
    let copies: Vec<Stmt> = own.closures.iter().filter_map(|c| env.closures.get(c).cloned()).collect();
    // With closures copied in, analyse the run as it will be emitted; otherwise that is `own`.
    let with_copies = (!copies.is_empty()).then(|| run_info(&[&copies[..], &stmts[..]].concat(), env));
    let info = with_copies.as_ref().unwrap_or(&own);
    if !info.has_work {
        out.extend(emitted);
        return;
    }
    let outer = |root: &str| env.level.get(root).is_some_and(|&l| l < env.depth);
    let kept = |root: &str| outer(root) || env.references.contains(root) || live_after.contains(root);
    let assigned: Vec<&Place> = info.assigned.iter().filter(|p| kept(&p.root)).collect();
    // In-out locals are restored on replay when their binding is `mut`; the others (loop and
    // match pattern bindings, which cannot be made `mut` without changing how they bind) are
    // only checked: nothing to restore for values and shared references, and a `&mut`
    // binding among them makes the block run eagerly.
    // A local captured by a closure that is used after the run cannot be mutated by it (the
    // user's code would not borrow-check), and restoring it would conflict with the capture.
    let mut captured = HashSet::new();
    for (name, def) in &env.closures {
        if live_after.contains(name) {
            mentioned(def.to_token_stream(), &mut captured);
        }
    }
    let (inouts, fixed): (Vec<&String>, Vec<&String>) = info
        .inouts
        .iter()
        .filter(|n| kept(n) && !env.shared.contains(*n))
        .filter(|n| !assigned.iter().any(|p| p.steps.is_empty() && &&p.root == n))
        .partition(|n| env.mutable.contains(*n) && !captured.contains(*n));
    let mut defined: Vec<Ident> = Vec::new();
    // Copied closures are defined outside the run too: only the run's own bindings leave it.
    for d in info.defs.iter().rev().filter(|d| own.defs.contains(d)) {
        let name = d.to_string();
        if live_after.contains(&name) && !defined.iter().any(|x| *x == name) {
            defined.push(d.clone());
        }
    }
    defined.reverse();
    out.extend(fragment(&emitted, &copies, &info.inputs, &assigned, (&inouts, &fixed), &defined, ctx));
}

fn fragment(
    stmts: &[Stmt],
    copies: &[Stmt],
    inputs: &[Place],
    assigned: &[&Place],
    (inouts, fixed): (&[&String], &[&String]),
    defined: &[Ident],
    ctx: &mut Ctx,
) -> Vec<Stmt> {
    let span = stmts.first().map(|s| s.span()).unwrap_or_else(Span::call_site);
    let index = ctx.next;
    ctx.next += 1;
    let (function, profile, max_variants, min_ops) =
        (&ctx.function, ctx.opts.profile, ctx.opts.max_variants, ctx.opts.min_ops);
    let generics = &ctx.generics;
    let dynamic: Vec<&Place> = inputs
        .iter()
        .filter(|p| p.steps.is_empty() && ctx.opts.dynamic.iter().any(|d| *d == p.root))
        .collect();
    let dyn_decl = dynamic.iter().map(|p| {
        let (v, tmp) = (&p.expr, format_ident!("__janus_dyn_{}", p.root));
        quote! { let #tmp = ::janus::rt::dynamic_scalar(#v); }
    });
    let dyn_shadow = dynamic.iter().map(|p| {
        let (v, tmp) = (&p.expr, format_ident!("__janus_dyn_{}", p.root));
        // A reference (`Copy`, like the scalar it replaces), so closures that use it stay `Fn`
        // and `s * 0.1` does not move it.
        quote! { let #v = &#tmp; }
    });
    let probes = inputs.iter().map(|p| {
        let name = p.text();
        if dynamic.iter().any(|d| d.root == p.root && p.steps.is_empty()) {
            let tmp = format_ident!("__janus_dyn_{}", p.root);
            quote! { (&::janus::rt::Probe(&#tmp)).probe(#name) }
        } else {
            let e = &p.expr;
            quote! { (&::janus::rt::Probe(&#e)).probe(#name) }
        }
    });
    let bare = |d: &Ident| d.to_string().trim_start_matches('_').to_string();
    let witnesses: Vec<Ident> = defined.iter().map(|d| format_ident!("__janus_w_{}", bare(d))).collect();
    let values: Vec<Ident> = defined.iter().map(|d| format_ident!("__janus_v_{}", bare(d))).collect();
    let mut exit_outputs = Vec::new();
    let mut restores = Vec::new();
    for p in assigned {
        let (e, name) = (&p.expr, p.text());
        exit_outputs.push(quote! { (&&&::janus::rt::Witness::of(&#e)).output(&#e, #name) });
        restores.push(quote! { (&&&::janus::rt::Witness::of(&#e)).restore(&mut #e, &mut __janus_out); });
    }
    for n in fixed {
        let id = Ident::new(n, span);
        exit_outputs.push(quote! { (&&::janus::rt::Witness::of(&#id)).fixed_output(&#id, #n) });
    }
    for n in inouts {
        let id = Ident::new(n, span);
        exit_outputs.push(quote! { (&&&::janus::rt::Witness::of(&#id)).inout_output(&#id, #n) });
        restores
            .push(quote! { (&&&::janus::rt::Witness::of(&#id)).inout_restore(&mut #id, &mut __janus_out); });
    }
    // The statements run in an inner block that hands their live bindings out, so a `let` in
    // the run that shadows an in-out or assigned local cannot hide the outer binding from the
    // exit below.
    let moved: Vec<Ident> = defined.iter().map(|d| format_ident!("__janus_o_{}", bare(d))).collect();
    for ((d, w), o) in defined.iter().zip(&witnesses).zip(&moved) {
        let name = if d == "__janus_tail" { "return value".to_string() } else { d.to_string() };
        exit_outputs.push(quote! { (&&&#w).output(&#o, #name) });
    }
    let takes = values.iter().zip(&witnesses).map(|(v, w)| quote! { #v = (&&&#w).take(&mut __janus_out); });
    let generated = quote_spanned! {span=>
        #[allow(unused_mut, unused_variables, unused_assignments, unused_imports, unreachable_code, non_snake_case, clippy::all)]
        {
            use ::janus::rt::{
                FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _, InOutRef as _,
                OutputModule as _, OutputModuleRef as _, OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
            };
            static __JANUS_FRAGMENT: ::janus::rt::Fragment = ::janus::rt::Fragment::new(::janus::rt::Site {
                function: #function,
                file: ::core::file!(),
                line: ::core::line!(),
                index: #index,
                profile: #profile,
                max_variants: #max_variants,
                min_ops: #min_ops,
            });
            #(#dyn_decl)*
            #(let #witnesses = ::janus::rt::Witness::new();)*
            match __JANUS_FRAGMENT.enter(|| ::std::vec![#(#probes),*], &[#(#generics),*]) {
                ::janus::rt::Enter::Body(__janus_scope) => {
                    let (#(#moved,)*) = {
                        #(#dyn_shadow)*
                        #(#copies)*
                        #(#stmts)*
                        #(#witnesses.bind(&#defined);)*
                        (#(#defined,)*)
                    };
                    __janus_scope.exit(::std::vec![#(#exit_outputs),*]);
                    #(#values = #moved;)*
                }
                ::janus::rt::Enter::Replay(mut __janus_out) => {
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
    for (d, v) in defined.iter().zip(&values) {
        result.push(
            syn::parse_quote_spanned!(span=> #[allow(unused_variables, non_snake_case)] let mut #d = #v;),
        );
    }
    result
}

/// The `type_name` expressions keying a function's fragments: its type and const generics, and
/// `Self` in methods (DESIGN §13 rule 10).
pub(crate) fn generic_keys(f: &ItemFn) -> Vec<TokenStream> {
    let mut keys: Vec<TokenStream> = Vec::new();
    for p in f.sig.generics.params.iter() {
        match p {
            syn::GenericParam::Type(t) => {
                let id = &t.ident;
                keys.push(quote! { ::std::any::type_name::<#id>() });
            }
            syn::GenericParam::Const(c) => {
                let id = &c.ident;
                keys.push(quote! { ::std::any::type_name::<[(); #id]>() });
            }
            syn::GenericParam::Lifetime(_) => {}
        }
    }
    let has_receiver = f.sig.inputs.iter().any(|a| matches!(a, FnArg::Receiver(_)));
    let mut names = HashSet::new();
    mentioned(f.to_token_stream(), &mut names);
    if has_receiver || names.contains("Self") {
        keys.push(quote! { ::std::any::type_name::<Self>() });
    }
    keys
}
