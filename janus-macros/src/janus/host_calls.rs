//! Helper calls whose values the key cannot see (see `janus_runtime::rt::host_values` for the
//! runtime half, and docs/design.md, "Host values the key cannot see").
//!
//! A *helper call* is a call of a free or associated function that is not the standard
//! library's or janus's own (`temperature()`, `Config::depth()`), or of a method of `self`
//! (`self.scale()`). The macro cannot see what a helper reads, nor its type, so:
//!
//! - **Wrapped.** Every helper call in a block becomes `__private::host_value(flag, "text",
//!   effect, call)`: the same value, evaluated in place, which at run time tells an active
//!   recording when it is a host scalar, or `()` from a free function given nothing by `&mut`
//!   (`effect`: a call made for a host effect), and sets the block's split flag; the recording
//!   is then unusable.
//! - **Hoisted.** A block with a *hoistable* helper call (evaluated where its statement starts:
//!   outside closures and staged loop bodies, with plain arguments, and with no other call
//!   evaluated before it in its statement) also has a *split version*, chosen once the flag is
//!   set: each hoistable call becomes a host statement `let __janus_cN = host_call(..);` right
//!   before its statement, so the statements before and after it form separate blocks and the
//!   value is an input of the second, keyed like any host scalar. Source order holds: the call
//!   runs where its statement starts, once per call.
//!
//! What is not a helper (janus's host functions and methods) and what an assertion is come from
//! `classify.rs`, below this file; `partition.rs` and `expand.rs` call the rewriting.

use super::classify::{HOST_FUNCTIONS, HOST_METHODS, assertion_args};
use super::scope::{Env, mentioned, name, pattern_names};
use quote::{ToTokens, quote_spanned};
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Expr, Ident, Stmt};

/// First path segments of functions that cannot read user state: the standard library,
/// primitive types' associated functions, and janus's own types.
const PURE_ROOTS: &[&str] = &[
    "std", "core", "alloc", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32",
    "u64", "u128", "usize", "bool", "char", "str", "Tensor", "DType", "Shape", "Device", "Grads", "nn",
    "optim", "Vec", "Box", "String", "Rc", "Arc", "Cell", "RefCell", "HashMap", "HashSet", "BTreeMap",
    "VecDeque", "Option", "Result", "Default",
];

/// janus functions that cannot read user state (or are handled as host statements elsewhere).
const PURE_FUNCTIONS: &[&str] = &["no_grad", "is_grad_enabled", "trace", "dynamic_scalar", "drop", "default"];

/// Whether a call is one of the macro's own wrappers (already handled).
fn is_wrapper(c: &syn::ExprCall) -> bool {
    matches!(&*c.func, Expr::Path(p) if p.path.segments.iter().any(|s| s.ident == "__private"))
}

/// Whether `e` is a helper call (see the module docs).
pub(crate) fn is_helper_call(e: &Expr, env: &Env) -> bool {
    match e {
        Expr::Call(c) => {
            let Expr::Path(p) = &*c.func else { return false };
            if p.qself.is_some() || is_wrapper(c) {
                return false;
            }
            let mut segs: Vec<String> = p.path.segments.iter().map(|s| name(&s.ident)).collect();
            if segs.len() > 1 && segs[0] == "janus" && PURE_ROOTS.contains(&segs[1].as_str()) {
                segs.remove(0); // `janus::Tensor::clone`
            }
            let (first, last) = (&segs[0], &segs[segs.len() - 1]);
            let local = segs.len() == 1 && env.is_local(first);
            let constructor = last.starts_with(|c: char| c.is_uppercase());
            let recursive = *last == env.function && (segs.len() == 1 || first == "Self");
            !(local
                || constructor
                || recursive
                || PURE_ROOTS.contains(&first.as_str())
                || PURE_FUNCTIONS.contains(&last.as_str())
                || HOST_FUNCTIONS.contains(&last.as_str()))
        }
        Expr::MethodCall(m) => {
            let on_self = matches!(&*m.receiver, Expr::Path(p) if p.path.is_ident("self"));
            let recursive = name(&m.method) == env.function;
            on_self && !recursive && !HOST_METHODS.contains(&name(&m.method).as_str())
        }
        _ => false,
    }
}

/// An argument the call can be hoisted with: evaluated without calls (a literal, a place, a
/// reference to one, a cast or negation of one).
fn plain(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Path(_) => true,
        Expr::Reference(r) => plain(&r.expr),
        Expr::Field(f) => plain(&f.base),
        Expr::Index(i) => plain(&i.expr) && plain(&i.index),
        Expr::Cast(c) => plain(&c.expr),
        Expr::Unary(u) => plain(&u.expr),
        Expr::Paren(p) => plain(&p.expr),
        Expr::Group(g) => plain(&g.expr),
        _ => false,
    }
}

fn plain_args(e: &Expr) -> bool {
    match e {
        Expr::Call(c) => c.args.iter().all(plain),
        Expr::MethodCall(m) => plain(&m.receiver) && m.args.iter().all(plain),
        _ => false,
    }
}

/// What the rewriting does with the helper calls it meets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// Wrap every helper call in place, without a flag (control headers, host statements,
    /// closure definitions, a block without hoistable calls).
    Notify,
    /// The block as written: hoistable calls wrapped with the flag, the rest without.
    Plain,
    /// The split version: hoistable calls moved into host statements before their statement.
    Split,
}

/// Rewrites one statement's helper calls (see [`Version`]); in `Split`, returns the host
/// statements to put before it.
pub(crate) struct Rewrite<'e> {
    env: &'e Env,
    version: Version,
    /// Nesting of lazily evaluated positions (closure bodies, `&&`/`||` right operands).
    lazy: usize,
    /// Whether no call has been evaluated yet in this statement, other than hoistable ones.
    prefix: bool,
    /// Names bound inside the statement (closure parameters): a call mentioning them is lazy.
    bound: Vec<HashSet<String>>,
    /// Hoisted host statements, in order (`Split`).
    pub(crate) hoisted: Vec<Stmt>,
    /// The function's counter for hoisted locals.
    next: &'e mut u32,
    /// `(local, call text)` of each hoisted local, for the probes' labels.
    pub(crate) labels: Vec<(String, String)>,
}

impl<'e> Rewrite<'e> {
    pub(crate) fn new(env: &'e Env, version: Version, next: &'e mut u32) -> Self {
        Rewrite {
            env,
            version,
            lazy: 0,
            prefix: true,
            bound: Vec::new(),
            hoisted: Vec::new(),
            next,
            labels: Vec::new(),
        }
    }

    /// Rewrites a statement of a block; a staged `for` loop's body is left alone (it is
    /// partitioned into blocks of its own, which handle their calls).
    pub(crate) fn statement(&mut self, s: &mut Stmt) {
        self.prefix = true;
        match s {
            Stmt::Expr(Expr::ForLoop(f), _) => self.visit_expr_mut(&mut f.expr),
            Stmt::Local(l) => {
                if let Some(init) = &mut l.init
                    && let Expr::ForLoop(f) = &mut *init.expr
                {
                    self.visit_expr_mut(&mut f.expr);
                } else {
                    self.visit_local_mut(l);
                }
            }
            _ => self.visit_stmt_mut(s),
        }
    }

    fn lazily(&mut self, f: impl FnOnce(&mut Self)) {
        self.lazy += 1;
        f(self);
        self.lazy -= 1;
    }

    fn mentions_bound(&self, e: &Expr) -> bool {
        let mut words = HashSet::new();
        mentioned(e.to_token_stream(), &mut words);
        self.bound.iter().any(|b| b.iter().any(|n| words.contains(n)))
    }

    /// A helper call, its operands already rewritten.
    fn helper(&mut self, e: &mut Expr) {
        let hoist = self.lazy == 0 && self.prefix && plain_args(e) && !self.mentions_bound(e);
        if !hoist {
            self.prefix &= self.lazy > 0;
        }
        let span = e.span().resolved_at(proc_macro2::Span::call_site());
        let text = e.to_token_stream().to_string().replace(' ', "");
        let call = e.clone();
        // A free function that takes nothing by `&mut` and returns `()` was called for a host
        // effect (`log(..)`); one that takes `&mut` updates what it is given (staged).
        let effect = matches!(e, Expr::Call(c) if !c.args.iter().any(|a| matches!(a, Expr::Reference(r) if r.mutability.is_some())));
        match (self.version, hoist) {
            (Version::Split, true) => {
                *self.next += 1;
                let local = quote::format_ident!("__janus_c{}", *self.next);
                self.labels.push((local.to_string(), text.clone()));
                self.hoisted.push(syn::parse_quote_spanned! {span=>
                    let #local = ::janus::__private::host_call(&__JANUS_SPLIT, #text, #effect, #call);
                });
                *e = syn::parse_quote_spanned!(span=> #local);
            }
            (Version::Plain, true) => {
                *e = syn::parse2(quote_spanned! {span=>
                    ::janus::__private::host_value(::core::option::Option::Some(&__JANUS_SPLIT), #text, #effect, #call)
                })
                .expect("a wrapped call parses");
            }
            _ => {
                *e = syn::parse2(quote_spanned! {span=>
                    ::janus::__private::host_value(::core::option::Option::None, #text, #effect, #call)
                })
                .expect("a wrapped call parses");
            }
        }
    }
}

impl VisitMut for Rewrite<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::Closure(c) => {
                let names = c.inputs.iter().flat_map(pattern_names).map(|i| name(&i)).collect();
                self.bound.push(names);
                self.lazily(|me| me.visit_expr_mut(&mut c.body));
                self.bound.pop();
                return;
            }
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_) | syn::BinOp::Or(_)) => {
                self.visit_expr_mut(&mut b.left);
                self.lazily(|me| me.visit_expr_mut(&mut b.right));
                return;
            }
            // Bodies of loops, conditionals and blocks inside an expression (in a closure, or a
            // control header) run zero or many times.
            Expr::ForLoop(f) => {
                self.visit_expr_mut(&mut f.expr);
                self.lazily(|me| me.visit_block_mut(&mut f.body));
                return;
            }
            Expr::While(_) | Expr::Loop(_) | Expr::If(_) | Expr::Match(_) | Expr::Block(_) => {
                self.lazily(|me| syn::visit_mut::visit_expr_mut(me, e));
                return;
            }
            Expr::Call(c) if is_wrapper(c) => {
                // Already handled: one more call evaluated.
                self.prefix &= self.lazy > 0;
                return;
            }
            _ => {}
        }
        syn::visit_mut::visit_expr_mut(self, e);
        if is_helper_call(e, self.env) {
            self.helper(e);
        } else if matches!(e, Expr::Call(_) | Expr::MethodCall(_) | Expr::Macro(_)) && self.lazy == 0 {
            self.prefix = false;
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}

    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        // An assertion's condition and message are expressions: their helper calls tell an
        // enclosing recording, like any other host code's.
        if let Some(mut args) = assertion_args(m) {
            for a in args.iter_mut() {
                self.lazily(|me| me.visit_expr_mut(a));
            }
            m.tokens = args.to_token_stream();
        }
    }
}

/// Wraps every helper call of `s` without a flag (see [`Version::Notify`]).
pub(crate) fn notify(s: &mut Stmt, env: &Env) {
    let mut next = 0;
    Rewrite::new(env, Version::Notify, &mut next).visit_stmt_mut(s);
}

/// Wraps every helper call of an expression without a flag.
pub(crate) fn notify_expr(e: &mut Expr, env: &Env) {
    let mut next = 0;
    Rewrite::new(env, Version::Notify, &mut next).visit_expr_mut(e);
}

/// The names a block's top-level `let`s bind that are used after it, in binding order (the
/// last binding of a shadowed name).
pub(crate) fn exported(stmts: &[Stmt], live_after: &HashSet<String>) -> Vec<Ident> {
    let mut out: Vec<Ident> = Vec::new();
    for s in stmts {
        if let Stmt::Local(l) = s {
            for n in pattern_names(&l.pat) {
                if live_after.contains(&name(&n)) {
                    out.retain(|o| name(o) != name(&n));
                    out.push(n);
                }
            }
        }
    }
    out
}
