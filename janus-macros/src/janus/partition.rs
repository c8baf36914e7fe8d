//! Partitioning (see docs/design.md, "Classification"): a statement list becomes typed segments,
//! in order: maximal runs of static statements (each with the scope it starts in and the names
//! that must stay bound after it), control flow, and host statements. A static tail expression
//! joins the run before it, bound to `__janus_tail`. Emission (`expand.rs`) turns runs into
//! fragment dispatches and recurses into control flow; this stage decides nothing about code.
//! It sits below `expand.rs`, which calls it, and imports only the analyses (`classify.rs`,
//! `host_calls.rs`, `scope.rs`).

use super::classify::{Kind, borrow_of, classify, is_effect, leaves_borrow, mutates_captures};
use super::host_calls;
use super::scope::{Env, mentioned, mutable_names, name, pattern_names};
use quote::ToTokens;
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::{Expr, Pat, Stmt};

/// One segment of a statement list.
pub(crate) enum Segment {
    /// A maximal run of static statements: the statements, the scope before each (for staged
    /// loops' fallback bodies), the scope at the run's start, and the names it must leave bound.
    Run { stmts: Vec<Stmt>, envs: Vec<Env>, env: Env, live_after: HashSet<String> },
    /// Control flow, whose bodies are partitioned in turn, in the scope `env`.
    Control { stmt: Stmt, env: Box<Env> },
    /// Host code kept as it is: host statements, closure definitions, items, a bare tail;
    /// `effect` when it has effects a whole-function graph could not replay; `env` its scope.
    Host { stmt: Stmt, effect: bool, env: Box<Env> },
}

/// The segments of `stmts` (the block's tail expression, if any, last) in scope `parent`.
pub(crate) fn partition(mut stmts: Vec<Stmt>, parent: &Env) -> Vec<Segment> {
    let tail = match stmts.last() {
        Some(Stmt::Expr(_, None)) => stmts.pop(),
        _ => None,
    };
    segments(stmts, tail, parent.nested(), &HashSet::new())
}

/// The segments of a statement list without a tail, in scope `env` (not a nested one), whose
/// names in `live_after` must stay bound after it: a block's split version (`host_calls.rs`).
pub(crate) fn partition_in(stmts: Vec<Stmt>, env: &Env, live_after: &HashSet<String>) -> Vec<Segment> {
    segments(stmts, None, env.clone(), live_after)
}

fn segments(
    stmts: Vec<Stmt>,
    tail: Option<Stmt>,
    mut env: Env,
    live_after: &HashSet<String>,
) -> Vec<Segment> {
    // Names mentioned from statement i on (the tail included): what a run must leave bound.
    // This over-approximates liveness on purpose: a binding a run defines must also survive it
    // when a later statement only assigns it (`let mut v = a; ..; v = b;`): its value is dead,
    // but the name must exist.
    let mut used_from: Vec<HashSet<String>> = vec![live_after.clone(); stmts.len() + 1];
    if let Some(t) = &tail {
        mentioned(t.to_token_stream(), &mut used_from[stmts.len()]);
    }
    for i in (0..stmts.len()).rev() {
        let mut here = used_from[i + 1].clone();
        mentioned(stmts[i].to_token_stream(), &mut here);
        used_from[i] = here;
    }
    let mut out = Vec::new();
    let mut run: Option<(Vec<Stmt>, Vec<Env>, Env)> = None;
    let end =
        |run: &mut Option<(Vec<Stmt>, Vec<Env>, Env)>, live: &HashSet<String>, out: &mut Vec<Segment>| {
            if let Some((stmts, envs, env)) = run.take() {
                out.push(Segment::Run { stmts, envs, env, live_after: live.clone() });
            }
        };
    for (i, mut s) in stmts.into_iter().enumerate() {
        let kind = classify(&s, &env);
        if kind == Kind::ClosureDef {
            // Copied into the blocks that call it: its helper calls tell their recordings.
            host_calls::notify(&mut s, &env);
        }
        if kind != Kind::Static {
            end(&mut run, &used_from[i], &mut out);
        }
        let before = env.clone();
        declare(&mut env, &s, kind);
        match kind {
            Kind::Static => {
                let r = run.get_or_insert_with(|| (Vec::new(), Vec::new(), before.clone()));
                r.0.push(s);
                r.1.push(before);
            }
            Kind::Control => out.push(Segment::Control { stmt: s, env: Box::new(before) }),
            Kind::Host => {
                let effect = is_effect(&s, &before);
                out.push(Segment::Host { stmt: s, effect, env: Box::new(before) });
            }
            Kind::ClosureDef | Kind::Item => {
                out.push(Segment::Host { stmt: s, effect: false, env: Box::new(before) })
            }
        }
    }
    let last = &used_from[used_from.len() - 1];
    match tail {
        // A static tail expression is bound to a local, so it stages with the run before it.
        Some(Stmt::Expr(e, None)) if is_tail_static(&e, &env) => {
            let span = e.span().resolved_at(proc_macro2::Span::call_site());
            let bound: Stmt = syn::parse_quote_spanned!(span=> let __janus_tail = #e;);
            let r = run.get_or_insert_with(|| (Vec::new(), Vec::new(), env.clone()));
            r.0.push(bound);
            r.1.push(env.clone());
            end(&mut run, &HashSet::from(["__janus_tail".to_string()]), &mut out);
            let stmt = Stmt::Expr(syn::parse_quote_spanned!(span=> __janus_tail), None);
            out.push(Segment::Host { stmt, effect: false, env: Box::new(env) });
        }
        Some(t) => {
            end(&mut run, last, &mut out);
            if classify(&t, &env) == Kind::Control {
                out.push(Segment::Control { stmt: t, env: Box::new(env) });
            } else {
                let effect = is_effect(&t, &env);
                out.push(Segment::Host { stmt: t, effect, env: Box::new(env) });
            }
        }
        None => end(&mut run, last, &mut out),
    }
    out
}

/// Declares the locals a statement of kind `kind` binds.
pub(crate) fn declare(env: &mut Env, s: &Stmt, kind: Kind) {
    let Stmt::Local(l) = s else { return };
    let borrow = leaves_borrow(s).then(|| borrow_of(s, env));
    for n in pattern_names(&l.pat) {
        env.declare(name(&n));
        if let Some(b) = &borrow {
            env.references.insert(name(&n));
            env.borrows.insert(name(&n), b.clone());
        }
    }
    env.mutable.extend(mutable_names(&l.pat));
    if let (Pat::Ident(p), Some(init)) = (strip_type(&l.pat), &l.init) {
        match &*init.expr {
            Expr::Reference(r) if r.mutability.is_none() => {
                env.shared.insert(name(&p.ident));
            }
            Expr::Closure(c) if kind == Kind::ClosureDef => {
                env.closures.insert(name(&p.ident), s.clone());
                if mutates_captures(c) {
                    env.mutating.insert(name(&p.ident));
                }
            }
            _ => {}
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(body: &str) -> Vec<String> {
        let b: syn::Block = syn::parse_str(body).unwrap();
        let mut env = Env::default();
        for p in ["x", "m", "xs"] {
            env.declare(p.into());
        }
        partition(b.stmts, &env)
            .iter()
            .map(|s| match s {
                Segment::Run { stmts, live_after, .. } => {
                    // `mentioned` over-approximates (any identifier); keep the locals.
                    let mut live: Vec<&String> =
                        live_after.iter().filter(|n| n.len() == 1 || n.starts_with("__")).collect();
                    live.sort();
                    format!("run {} -> {live:?}", stmts.len())
                }
                Segment::Control { .. } => "control".into(),
                Segment::Host { effect, .. } => if *effect { "effect" } else { "host" }.into(),
            })
            .collect()
    }

    #[test]
    fn runs_control_and_host_statements_in_order() {
        let got = kinds(
            "{ let a = x.exp(); let b = &a * 2.0; println!(\"{}\", 1); if c { b } else { a }; let d = a + b; d.tanh() }",
        );
        let want = [
            "run 2 -> [\"a\", \"b\", \"c\", \"d\"]",
            "effect",
            "control",
            "run 2 -> [\"__janus_tail\"]",
            "host",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_bare_tail_stays_host_code() {
        assert_eq!(kinds("{ let y = x.exp(); y }"), ["run 1 -> [\"y\"]", "host"]);
    }
}
