//! Expansion: every statement list of the function is partitioned (`partition.rs`: static runs,
//! control flow, host statements); each static run with work in it becomes a fragment dispatch
//! around the original statements, which appear once, verbatim (`emit.rs`), and control flow's
//! bodies are expanded in turn. See docs/design.md, "The macro".
//!
//! The driver, at the top of the macro's files: it calls partitioning, emission, speculation
//! and the helper-call rewriting, and none of them imports it back (the context it threads
//! through them is `ctx.rs`; the name helpers they share are `scope.rs`).

use super::classify::{Kind, leaves_borrow};
use super::ctx::Ctx;
use super::emit;
use super::host_calls::{self, Rewrite, Version};
use super::partition::{Segment, declare, partition, partition_in};
use super::reads::{Place, run_info};
use super::scope::{Env, mentioned, mutable_names, name, pattern_names};
use super::speculate;
use quote::ToTokens;
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, FnArg, Ident, ItemFn, Pat, Stmt};

/// Makes top-level bindings mutable (parameters, `let` and `for` patterns that are a plain
/// name), so the replay can restore such a local through `&mut` whatever its declared
/// mutability; the function allows `unused_mut`. Names inside destructuring patterns are left
/// alone (default binding modes forbid `mut` there): those are restored only if the user
/// declared them `mut`.
struct MakeMut;

fn make_mut(p: &mut Pat) {
    match p {
        Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none() && i.ident != "self" => {
            // The `mut` takes the name's span: with the macro's own span, rustc would treat the
            // binding as generated and stop reporting the user's unused variables.
            let span = i.ident.span();
            i.mutability.get_or_insert_with(|| syn::Token![mut](span));
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

/// Rewrites the function: bindings made mutable, every block's statement lists transformed.
pub(crate) fn function(mut f: ItemFn, ctx: &mut Ctx) -> ItemFn {
    // Whole-function speculation: decisions instrumented, the tail read taken off, before the
    // body's own blocks are expanded; the wrapper goes around them after.
    let speculate = ctx.opts.speculate && speculate::can_wrap(&f);
    ctx.opts.speculate = speculate;
    let mut_self = f
        .sig
        .inputs
        .iter()
        .any(|a| matches!(a, FnArg::Receiver(r) if r.reference.is_some() && r.mutability.is_some()));
    let tail_read = if speculate {
        speculate::Instrument { next: 0 }.visit_block_mut(&mut f.block);
        speculate::take_tail_read(&mut f.block)
    } else {
        None
    };
    let mut env = Env { function: ctx.function.clone(), unroll: ctx.opts.unroll, ..Env::default() };
    for arg in f.sig.inputs.iter_mut() {
        match arg {
            FnArg::Receiver(r) => {
                env.declare("self".into());
                env.references.insert("self".into());
                env.mutable.insert("self".into());
                if r.reference.is_some() && r.mutability.is_none() {
                    env.shared.insert("self".into());
                }
                // `&mut self` becomes `mut self: &mut Self`: same receiver, mutable binding.
                r.mutability = Some(Default::default());
                r.reference = None;
                r.colon_token = Some(Default::default());
            }
            FnArg::Typed(t) => {
                make_mut(&mut t.pat);
                for n in pattern_names(&t.pat) {
                    env.declare(name(&n));
                    if let syn::Type::Reference(r) = &*t.ty {
                        env.references.insert(name(&n));
                        if r.mutability.is_none() {
                            env.shared.insert(name(&n));
                        }
                    }
                }
                env.mutable.extend(mutable_names(&t.pat));
            }
        }
    }
    MakeMut.visit_block_mut(&mut f.block);
    block(&mut f.block, &env, ctx);
    if speculate {
        speculate::wrap(&mut f, tail_read, mut_self, ctx);
    }
    f
}

/// Transforms one statement list: partitions it, then emits each segment.
fn block(b: &mut Block, parent: &Env, ctx: &mut Ctx) {
    let stmts = std::mem::take(&mut b.stmts);
    b.stmts = emit_segments(partition(stmts, parent), ctx);
}

/// Emits segments: runs as fragments, control flow with its bodies transformed, host code.
fn emit_segments(segments: Vec<Segment>, ctx: &mut Ctx) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::new();
    for seg in segments {
        match seg {
            Segment::Run { stmts, envs, env, live_after } => {
                run(stmts, envs, &env, &live_after, &mut out, ctx)
            }
            Segment::Control { mut stmt, env } => {
                control(&mut stmt, &env, ctx);
                out.push(stmt);
            }
            Segment::Host { mut stmt, effect, env } => {
                // Host code runs on every call; a helper's value it reads still tells an
                // enclosing recording (a whole-function one, or a caller's block).
                host_calls::notify(&mut stmt, &env);
                if effect && ctx.opts.speculate {
                    // A whole-function recording that meets an effect is unusable.
                    let (at, span) = (stmt.span(), stmt.span().resolved_at(proc_macro2::Span::call_site()));
                    let line = quote::quote_spanned!(at=> ::core::line!());
                    out.push(syn::parse_quote_spanned!(span=> ::janus::__private::host_statement(#line);));
                }
                out.push(stmt);
            }
        }
    }
    out
}

/// Emits a run of static statements (see `flush`).
fn run(
    stmts: Vec<Stmt>,
    envs: Vec<Env>,
    env: &Env,
    live_after: &HashSet<String>,
    out: &mut Vec<Stmt>,
    ctx: &mut Ctx,
) {
    // The run as written (what the analysis reads) and as emitted (staged loops carry their
    // partitioned bodies).
    let mut emitted: Vec<Stmt> =
        stmts.iter().zip(&envs).map(|(s, e)| with_fallback(s.clone(), e, ctx)).collect();
    let mut stmts = stmts;
    flush((&mut stmts, &mut emitted), env, live_after, out, ctx);
}

/// Emits a run that the borrow rules leave whole. One with a hoistable helper call
/// (`host_calls.rs`) is emitted twice, as written and split around those calls; a flag set at
/// run time, once such a call returns a host scalar, picks the split version from then on.
fn versions(
    (stmts, emitted): (Vec<Stmt>, Vec<Stmt>),
    env: &Env,
    live_after: &HashSet<String>,
    out: &mut Vec<Stmt>,
    ctx: &mut Ctx,
) {
    // The scope before each statement (a local closure is no helper).
    let mut envs = Vec::with_capacity(stmts.len());
    let mut scope = env.clone();
    for s in &stmts {
        envs.push(scope.clone());
        declare(&mut scope, s, Kind::Static);
    }
    // Rewrites both forms of the run alike (loop bodies are left to their own blocks).
    let rewrite = |(mut stmts, mut emitted): (Vec<Stmt>, Vec<Stmt>), version: Version, ctx: &mut Ctx| {
        for ((s, e), env) in stmts.iter_mut().zip(emitted.iter_mut()).zip(&envs) {
            Rewrite::new(env, version, &mut ctx.hoisted).statement(s);
            Rewrite::new(env, version, &mut ctx.hoisted).statement(e);
        }
        (stmts, emitted)
    };
    // The split version: each hoistable call a host statement before its statement.
    let (mut list, mut labels) = (Vec::new(), Vec::new());
    let mut next = ctx.hoisted;
    for (mut s, e) in stmts.iter().cloned().zip(&envs) {
        let mut r = Rewrite::new(e, Version::Split, &mut next);
        r.statement(&mut s);
        labels.append(&mut r.labels);
        list.append(&mut r.hoisted);
        list.push(s);
    }
    if labels.is_empty() {
        let (stmts, emitted) = rewrite((stmts, emitted), Version::Notify, ctx);
        return fragment_of((stmts, emitted), env, live_after, out, ctx);
    }
    ctx.hoisted = next;
    ctx.labels.extend(labels);
    let exported = host_calls::exported(&stmts, live_after);
    let span = stmts[0].span().resolved_at(proc_macro2::Span::call_site());
    let base = ctx.next;
    let mut plain = Vec::new();
    let written = rewrite((stmts, emitted), Version::Plain, ctx);
    fragment_of(written, env, live_after, &mut plain, ctx);
    let outer_part = ctx.part.replace((base, 1));
    let split = emit_segments(partition_in(list, env, live_after), ctx);
    ctx.part = outer_part;
    let flag = quote::quote_spanned! {span=>
        static __JANUS_SPLIT: ::janus::__private::Split = ::janus::__private::Split::new();
    };
    if exported.is_empty() {
        out.push(syn::parse_quote_spanned! {span=>
            { #flag if __JANUS_SPLIT.get() { #(#split)* } else { #(#plain)* } }
        });
    } else {
        let tuple = quote::quote! { (#(#exported,)*) };
        out.push(syn::parse_quote_spanned! {span=>
            let (#(mut #exported,)*) = {
                #flag
                if __JANUS_SPLIT.get() { #(#split)* #tuple } else { #(#plain)* #tuple }
            };
        });
    }
}

/// Flushes a run split in two, `between` (a statement kept as host code) in the middle.
fn flush_in_two(
    (mut first, mut first_emitted): (Vec<Stmt>, Vec<Stmt>),
    between: Option<Stmt>,
    (mut rest, mut rest_emitted): (Vec<Stmt>, Vec<Stmt>),
    env: &Env,
    live_after: &HashSet<String>,
    out: &mut Vec<Stmt>,
    ctx: &mut Ctx,
) {
    let mut live = live_after.clone();
    for s in between.iter().chain(&rest) {
        mentioned(s.to_token_stream(), &mut live);
    }
    let mut after = env.clone();
    for s in first.iter().chain(&between) {
        declare(&mut after, s, Kind::Static);
    }
    flush((&mut first, &mut first_emitted), env, &live, out, ctx);
    if let Some(mut s) = between {
        host_calls::notify(&mut s, &after);
        out.push(s);
    }
    flush((&mut rest, &mut rest_emitted), &after, live_after, out, ctx);
}

/// Where a run must end because of a `&mut` borrow (see `flush`): after the last statement that
/// uses a mutably borrowing local, when a later statement mentions what it borrows. Uses
/// through a copied closure count.
fn borrow_ends(stmts: &[Stmt], env: &Env) -> Option<usize> {
    let mentions: Vec<HashSet<String>> = stmts
        .iter()
        .map(|s| {
            let mut m = HashSet::new();
            mentioned(s.to_token_stream(), &mut m);
            let called: Vec<&Stmt> =
                env.closures.iter().filter(|(c, _)| m.contains(*c)).map(|(_, d)| d).collect();
            for d in called {
                mentioned(d.to_token_stream(), &mut m);
            }
            m
        })
        .collect();
    env.borrows
        .iter()
        .filter(|(_, b)| b.mutable)
        .filter_map(|(r, b)| {
            let last = mentions.iter().rposition(|m| m.contains(r))?;
            mentions[last + 1..]
                .iter()
                .any(|m| b.roots.iter().any(|root| m.contains(root)))
                .then_some(last + 1)
        })
        .min()
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
    // Headers run on every call; a helper's value they read still tells an enclosing recording.
    match e {
        Expr::If(i) => host_calls::notify_expr(&mut i.cond, env),
        Expr::While(w) => host_calls::notify_expr(&mut w.cond, env),
        Expr::ForLoop(f) => host_calls::notify_expr(&mut f.expr, env),
        Expr::Match(m) => host_calls::notify_expr(&mut m.expr, env),
        _ => {}
    }
    match e {
        Expr::If(i) => {
            let mut inner = env.clone();
            if let Expr::Let(l) = &*i.cond {
                for n in pattern_names(&l.pat) {
                    inner.declare(name(&n));
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
                    inner.declare(name(&n));
                }
            }
            block(&mut w.body, &inner, ctx);
        }
        Expr::ForLoop(f) => {
            let mut inner = env.clone();
            for n in pattern_names(&f.pat) {
                inner.declare(name(&n));
            }
            inner.mutable.extend(mutable_names(&f.pat));
            block(&mut f.body, &inner, ctx);
        }
        Expr::Loop(l) => block(&mut l.body, env, ctx),
        Expr::Match(m) => {
            for arm in &mut m.arms {
                let mut inner = env.clone();
                for n in pattern_names(&arm.pat) {
                    inner.declare(name(&n));
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

/// Emits the pending run, split where a borrow must not cross a block's boundary.
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
    let mut stmts = std::mem::take(run);
    let mut emitted = std::mem::take(emit);
    // A binding that may hold a borrow must not leave a block (see `leaves_borrow`): such a
    // statement whose binding is used after the run stays host code between two runs. One that
    // ends within the run (a staged loop's body, `let refs = ..; Tensor::cat(&refs, 0)`) stays.
    let escapes = |s: &Stmt| {
        let mut bound = HashSet::new();
        match s {
            Stmt::Local(l) => mentioned(l.pat.to_token_stream(), &mut bound),
            Stmt::Expr(Expr::Assign(a), _) => mentioned(a.left.to_token_stream(), &mut bound),
            _ => {}
        }
        leaves_borrow(s) && bound.iter().any(|n| live_after.contains(n))
    };
    if let Some(at) = stmts.iter().position(escapes) {
        let rest = (stmts.split_off(at + 1), emitted.split_off(at + 1));
        let borrow = stmts.pop().expect("the split statement");
        emitted.pop();
        return flush_in_two((stmts, emitted), Some(borrow), rest, env, live_after, out, ctx);
    }
    // A run that uses a `&mut` borrow and later mentions what it borrows (`*s = ..; v.push(..)`,
    // valid once `s` is dead) ends after the borrow's last use: its inputs are probed before its
    // statements, and its outputs read after them, where the borrow would still be live.
    if let Some(at) = borrow_ends(&stmts, env) {
        let rest = (stmts.split_off(at), emitted.split_off(at));
        return flush_in_two((stmts, emitted), None, rest, env, live_after, out, ctx);
    }
    versions((stmts, emitted), env, live_after, out, ctx);
}

/// Emits a run as one fragment when it does work, as plain statements otherwise.
// Long by design: the analysis of one run (inputs, outputs, in-outs) feeds one emission.
fn fragment_of(
    (stmts, emitted): (Vec<Stmt>, Vec<Stmt>),
    env: &Env,
    live_after: &HashSet<String>,
    out: &mut Vec<Stmt>,
    ctx: &mut Ctx,
) {
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
    // A place matters after the run if its root outlives it, is used later or may be a
    // reference; a write through `*` always goes somewhere else. Other places are dead, and may
    // even have been moved by the run, so they are not touched.
    let kept = |p: &Place| {
        outer(&p.root)
            || env.references.contains(&p.root)
            || live_after.contains(&p.root)
            || p.steps.iter().any(|s| s == "*")
    };
    let assigned: Vec<&Place> = info.assigned.iter().filter(|p| kept(p)).collect();
    // In-out places are restored on replay when their root's binding is `mut`; the others (loop
    // and match pattern bindings, which cannot be made `mut` without changing how they bind)
    // are only checked, as a whole: nothing to restore for values and shared references, and a
    // `&mut` binding among them makes the block run eagerly.
    // A local captured by a closure that is used after the run cannot be mutated by it (the
    // user's code would not borrow-check), and restoring it would conflict with the capture.
    let mut captured = HashSet::new();
    for (name, def) in &env.closures {
        if live_after.contains(name) {
            mentioned(def.to_token_stream(), &mut captured);
        }
    }
    let mut inouts: Vec<&Place> = Vec::new();
    let mut fixed: Vec<&Place> = Vec::new();
    // A local borrowed by a reference that is used after the run cannot have been mutated by it,
    // and restoring it would conflict with that borrow.
    let borrowed =
        |root: &str| env.borrows.iter().any(|(r, b)| live_after.contains(r) && b.roots.contains(root));
    for p in &info.inouts {
        if !kept(p) || env.shared.contains(&p.root) || assigned.iter().any(|a| a.covers(p)) {
            continue;
        }
        if env.mutable.contains(&p.root) && !captured.contains(&p.root) && !borrowed(&p.root) {
            inouts.push(p);
        } else if !fixed.iter().any(|f| f.root == p.root) {
            fixed.push(p);
        }
    }
    let mut defined: Vec<Ident> = Vec::new();
    // Copied closures are defined outside the run too: only the run's own bindings leave it.
    for d in info.defs.iter().rev().filter(|d| own.defs.contains(d)) {
        if live_after.contains(&name(d)) && !defined.iter().any(|x| name(x) == name(d)) {
            defined.push(d.clone());
        }
    }
    defined.reverse();
    let f = emit::Fragment {
        stmts: &emitted,
        copies: &copies,
        inputs: &info.inputs,
        assigned,
        inouts,
        fixed,
        defined,
        whole_function: false,
    };
    out.extend(emit::fragment(f, ctx));
}
