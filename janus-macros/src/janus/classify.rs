//! Classification: which statements a block can stage, which stay host code, and which staged
//! statements leave a borrow behind that must not cross a block's boundary. See docs/design.md,
//! "Classification". It also names janus's host functions and methods and recognises
//! assertions, for `host_calls.rs` above it; it imports only `scope.rs`.

use super::scope::{Borrow, Env, mentioned, name, pattern_names};
use quote::ToTokens;
use std::collections::HashSet;
use syn::visit::Visit;
use syn::{Expr, Local, Pat, Stmt};

/// How a statement is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Part of a static block, staged as a fragment.
    Static,
    /// `if`/`match`/loops/blocks: kept as host code, bodies transformed recursively.
    Control,
    /// Kept as host code and run on every call.
    Host,
    /// `let f = |..| ..;` (not `move`): kept in place, and copied into later blocks using `f`.
    ClosureDef,
    /// An item (`fn`, `struct`, `const`, `use`): left where it is.
    Item,
}

/// Methods and functions whose call ends a trace or has effects a graph cannot replay.
pub(crate) const HOST_METHODS: &[&str] =
    &["backward", "backward_with", "item", "item_f64", "to_vec", "to_bool"];
pub(crate) const HOST_FUNCTIONS: &[&str] = &[
    "save",
    "load",
    "manual_seed",
    "explain",
    "stats",
    "reset_caches",
    "set_mode",
    "with_mode",
    "set_stream_position",
];

/// Whether `e` is built only from the expression kinds a static statement may contain.
fn is_static_expr(e: &Expr, env: &Env) -> bool {
    struct Check<'e> {
        ok: bool,
        env: &'e Env,
        in_closure: usize,
    }
    impl<'a> Visit<'a> for Check<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if !self.ok {
                return;
            }
            match e {
                Expr::Closure(c) => {
                    self.in_closure += 1;
                    syn::visit::visit_expr_closure(self, c);
                    self.in_closure -= 1;
                    return;
                }
                Expr::MethodCall(m) => {
                    let recursive = name(&m.method) == self.env.function
                        && matches!(&*m.receiver, Expr::Path(p) if p.path.is_ident("self"));
                    if HOST_METHODS.contains(&name(&m.method).as_str()) || recursive {
                        self.ok = false;
                        return;
                    }
                    // A receiver that is not a local (a static's atomic, a thread-local) has
                    // effects a graph cannot replay.
                    if let Expr::Path(p) = &*m.receiver
                        && (p.path.segments.len() != 1
                            || !self.env.is_local(&name(&p.path.segments[0].ident)))
                    {
                        self.ok = false;
                        return;
                    }
                }
                Expr::Call(c) => {
                    if let Expr::Path(p) = &*c.func
                        && let Some(last) = p.path.segments.last()
                    {
                        let called = name(&last.ident);
                        let recursive = called == self.env.function
                            && (p.path.segments.len() == 1 || p.path.segments[0].ident == "Self");
                        // A helper call hoisted into a host statement (`host_calls.rs`), and the
                        // tensor of a tail read (`speculate.rs`): host code.
                        let hoisted = matches!(called.as_str(), "host_call" | "tail_tensor")
                            && p.path.segments.iter().any(|s| s.ident == "__private");
                        if HOST_FUNCTIONS.contains(&called.as_str()) || recursive || hoisted {
                            self.ok = false;
                            return;
                        }
                    }
                }
                Expr::Path(_)
                | Expr::Lit(_)
                | Expr::Field(_)
                | Expr::Index(_)
                | Expr::Reference(_)
                | Expr::Unary(_)
                | Expr::Binary(_)
                | Expr::Assign(_)
                | Expr::Tuple(_)
                | Expr::Array(_)
                | Expr::Cast(_)
                | Expr::Paren(_)
                | Expr::Group(_)
                | Expr::Range(_)
                | Expr::Repeat(_)
                | Expr::Struct(_) => {}
                // Anything else may appear inside a closure body (run when called), but not
                // in the statement itself.
                _ if self.in_closure > 0
                    && !matches!(e, Expr::Macro(_) | Expr::Await(_) | Expr::Unsafe(_)) => {}
                _ => {
                    self.ok = false;
                    return;
                }
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let mut c = Check { ok: true, env, in_closure: 0 };
    c.visit_expr(e);
    c.ok
}

/// Whether a `let` binds one name to a non-`move` closure.
fn closure_def(l: &Local) -> bool {
    matches!((&l.pat, l.init.as_ref().map(|i| &*i.expr)), (Pat::Ident(_), Some(Expr::Closure(c))) if c.capture.is_none())
}

/// Whether `s` mentions a closure that mutates what it captures (see `Env::mutating`).
fn uses_mutating_closure(s: &Stmt, env: &Env) -> bool {
    if env.mutating.is_empty() {
        return false;
    }
    let mut words = HashSet::new();
    mentioned(s.to_token_stream(), &mut words);
    env.mutating.iter().any(|c| words.contains(c))
}

/// Whether a closure's body mutates a value it captures: assigns to it, takes `&mut` of it,
/// or calls a mutating method on it (`push`, `insert`, `set`, any `*_mut`, ...).
pub(crate) fn mutates_captures(c: &syn::ExprClosure) -> bool {
    const MUTATORS: &[&str] = &[
        "push",
        "push_str",
        "insert",
        "extend",
        "append",
        "clear",
        "pop",
        "remove",
        "truncate",
        "retain",
        "set",
        "swap",
        "replace",
        "take",
        "sort",
        "sort_by",
        "dedup",
        "fetch_add",
        "fetch_sub",
        "store",
        "drain",
    ];
    struct Find {
        own: HashSet<String>,
        found: bool,
    }
    fn root(e: &Expr) -> Option<String> {
        match e {
            Expr::Path(p) if p.path.segments.len() == 1 => Some(name(&p.path.segments[0].ident)),
            Expr::Field(f) => root(&f.base),
            Expr::Index(i) => root(&i.expr),
            Expr::Paren(p) => root(&p.expr),
            Expr::Unary(u) => root(&u.expr),
            _ => None,
        }
    }
    impl Find {
        fn outer(&mut self, e: &Expr) {
            if root(e).is_some_and(|r| !self.own.contains(&r)) {
                self.found = true;
            }
        }
    }
    impl<'a> Visit<'a> for Find {
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                Expr::Assign(a) => self.outer(&a.left),
                Expr::Binary(b)
                    if matches!(
                        b.op,
                        syn::BinOp::AddAssign(_)
                            | syn::BinOp::SubAssign(_)
                            | syn::BinOp::MulAssign(_)
                            | syn::BinOp::DivAssign(_)
                            | syn::BinOp::RemAssign(_)
                            | syn::BinOp::BitOrAssign(_)
                            | syn::BinOp::BitAndAssign(_)
                            | syn::BinOp::BitXorAssign(_)
                            | syn::BinOp::ShlAssign(_)
                            | syn::BinOp::ShrAssign(_)
                    ) =>
                {
                    self.outer(&b.left)
                }
                Expr::Reference(r) if r.mutability.is_some() => self.outer(&r.expr),
                Expr::MethodCall(m) => {
                    let method = name(&m.method);
                    if MUTATORS.contains(&method.as_str()) || method.ends_with("_mut") {
                        self.outer(&m.receiver);
                    }
                }
                _ => {}
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.own.insert(name(&p.ident));
        }
    }
    let mut f = Find { own: HashSet::new(), found: false };
    for input in &c.inputs {
        f.visit_pat(input);
    }
    // Every name the body binds counts as its own (an over-approximation that errs towards
    // copying, as before).
    f.visit_expr(&c.body);
    f.found
}

/// Classifies one statement.
pub(crate) fn classify(s: &Stmt, env: &Env) -> Kind {
    if !matches!(s, Stmt::Item(_)) && uses_mutating_closure(s, env) {
        return Kind::Host;
    }
    match s {
        Stmt::Item(_) => Kind::Item,
        Stmt::Macro(_) => Kind::Host,
        Stmt::Local(l) => match &l.init {
            None => Kind::Host,
            Some(init) if init.diverge.is_some() => Kind::Host,
            Some(_) if closure_def(l) => Kind::ClosureDef,
            Some(init) if is_static_expr(&init.expr, env) => Kind::Static,
            Some(_) => Kind::Host,
        },
        Stmt::Expr(e, _) => match e {
            Expr::ForLoop(f) if env.unroll && is_static_loop(f, env) => Kind::Static,
            Expr::If(_)
            | Expr::Match(_)
            | Expr::While(_)
            | Expr::ForLoop(_)
            | Expr::Loop(_)
            | Expr::Block(_) => Kind::Control,
            e if is_static_expr(e, env) => Kind::Static,
            _ => Kind::Host,
        },
    }
}

/// A `for` loop that stages inside a block: no label, an iterator built from the block's
/// values (so its trip count is fixed by the block's key), and a body of static statements
/// only. Recording unrolls it; there is no decision left to guard.
fn is_static_loop(f: &syn::ExprForLoop, env: &Env) -> bool {
    if f.label.is_some() || !is_static_expr(&f.expr, env) {
        return false;
    }
    let mut inner = env.nested();
    for n in pattern_names(&f.pat) {
        inner.declare(name(&n));
    }
    f.body.stmts.iter().all(|s| {
        let static_stmt = classify(s, &inner) == Kind::Static; // closure definitions are not
        if let Stmt::Local(l) = s {
            for n in pattern_names(&l.pat) {
                inner.declare(name(&n));
            }
        }
        static_stmt
    })
}

/// Methods that return a borrow of their receiver by convention (besides every `*_mut` one).
const BORROWING_METHODS: &[&str] = &[
    "iter",
    "first",
    "last",
    "get",
    "as_ref",
    "as_slice",
    "as_deref",
    "split_at",
    "split_first",
    "split_last",
    "chunks",
    "windows",
    "borrow",
    "lock",
    "read",
    "write",
    "keys",
    "values",
    "as_str",
    "deref",
];

/// Methods whose result holds whatever borrow their receiver holds (`v.last_mut().unwrap()`,
/// `v.iter().zip(w).collect()`); `map`, `cloned` and the like produce new values and are not
/// among them.
const PASSING_METHODS: &[&str] = &[
    "unwrap",
    "expect",
    "unwrap_unchecked",
    "collect",
    "into_iter",
    "rev",
    "zip",
    "enumerate",
    "skip",
    "take",
    "chain",
    "peekable",
    "step_by",
];

/// Whether a static statement leaves a binding that may hold a borrow: `let r = &a;`,
/// `let s = &mut v[0];`, `let s = v.last_mut().unwrap();`, `let (a, b) = v.split_at_mut(1);`,
/// `let refs: Vec<&Tensor> = ..`, `let ref mut s = ..`, or such a value assigned to a place.
///
/// Such a statement stays host code. In a block, the binding would outlive the borrowed value's
/// handling at the block's end: the exit reads every in-out local after the statements
/// (`&v` while `s` mutably borrows `v` is E0502), and bindings defined in the block are moved
/// out of it (moving `a` while `r` borrows it is E0505). A reference cannot be rebuilt on
/// replay anyway. The statements around it still stage, and a write through the binding later
/// (`*s = ..`) is an assigned place of the block that makes it.
///
/// A function that is not named like an accessor (`fn pick(v: &mut Vec<T>) -> &mut T`) is not
/// recognised: writing its call in a block, `let s = { pick(v) };`, keeps it on the host.
pub(crate) fn leaves_borrow(s: &Stmt) -> bool {
    match s {
        Stmt::Local(l) => {
            let borrowed_type = match &l.pat {
                Pat::Type(t) => has_reference(&t.ty),
                _ => false,
            };
            borrowed_type || binds_by_ref(&l.pat) || l.init.as_ref().is_some_and(|i| holds_borrow(&i.expr))
        }
        Stmt::Expr(Expr::Assign(a), _) => holds_borrow(&a.right),
        _ => false,
    }
}

/// What the bindings of a statement that [`leaves_borrow`] may borrow: the roots of the places
/// its value may point into (not the locals in their indices), and what those borrow in turn.
pub(crate) fn borrow_of(s: &Stmt, env: &Env) -> Borrow {
    let Stmt::Local(l) = s else { return Borrow::default() };
    let mut words = HashSet::new();
    let mut direct = HashSet::new();
    if let Some(init) = &l.init {
        mentioned(init.expr.to_token_stream(), &mut words);
        borrowed_roots(&init.expr, &mut direct);
    }
    // The pattern's own `mut` was added by the expansion (`MakeMut`); `ref mut` was not.
    let ref_mut = {
        struct RefMut(bool);
        impl<'a> Visit<'a> for RefMut {
            fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
                self.0 |= p.by_ref.is_some() && p.mutability.is_some();
                syn::visit::visit_pat_ident(self, p);
            }
        }
        let mut r = RefMut(false);
        r.visit_pat(&l.pat);
        r.0
    };
    let mutable = ref_mut || words.iter().any(|w| w == "mut" || w.ends_with("_mut"));
    let mut roots = HashSet::new();
    for w in direct.into_iter().filter(|w| env.is_local(w)) {
        if let Some(b) = env.borrows.get(&w) {
            roots.extend(b.roots.iter().cloned());
        }
        roots.insert(w);
    }
    Borrow { roots, mutable }
}

/// The locals `e`'s value may borrow from: the roots of referenced places, receivers, and the
/// arguments of calls passed by reference or by name (`pick(v)` reborrows `v`).
fn borrowed_roots(e: &Expr, out: &mut HashSet<String>) {
    match e {
        Expr::Path(p) if p.path.segments.len() == 1 && p.qself.is_none() => {
            out.insert(name(&p.path.segments[0].ident));
        }
        Expr::Reference(r) => borrowed_roots(&r.expr, out),
        Expr::Paren(p) => borrowed_roots(&p.expr, out),
        Expr::Group(g) => borrowed_roots(&g.expr, out),
        Expr::Field(f) => borrowed_roots(&f.base, out),
        Expr::Index(i) => borrowed_roots(&i.expr, out),
        Expr::Unary(u) => borrowed_roots(&u.expr, out),
        Expr::Tuple(t) => t.elems.iter().for_each(|x| borrowed_roots(x, out)),
        Expr::Array(a) => a.elems.iter().for_each(|x| borrowed_roots(x, out)),
        Expr::Struct(s) => s.fields.iter().for_each(|f| borrowed_roots(&f.expr, out)),
        Expr::MethodCall(m) => {
            borrowed_roots(&m.receiver, out);
            m.args.iter().filter(|a| matches!(a, Expr::Reference(_))).for_each(|a| borrowed_roots(a, out));
        }
        Expr::Call(c) => c
            .args
            .iter()
            .filter(|a| matches!(a, Expr::Reference(_) | Expr::Path(_)))
            .for_each(|a| borrowed_roots(a, out)),
        _ => {}
    }
}

fn has_reference(t: &syn::Type) -> bool {
    struct Refs(bool);
    impl<'a> Visit<'a> for Refs {
        fn visit_type_reference(&mut self, _: &'a syn::TypeReference) {
            self.0 = true;
        }
    }
    let mut r = Refs(false);
    r.visit_type(t);
    r.0
}

fn binds_by_ref(p: &Pat) -> bool {
    struct ByRef(bool);
    impl<'a> Visit<'a> for ByRef {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0 |= p.by_ref.is_some();
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut r = ByRef(false);
    r.visit_pat(p);
    r.0
}

/// Whether the value of `e` may be, or contain, a borrow; see [`leaves_borrow`].
fn holds_borrow(e: &Expr) -> bool {
    match e {
        Expr::Reference(_) => true,
        Expr::Paren(p) => holds_borrow(&p.expr),
        Expr::Group(g) => holds_borrow(&g.expr),
        Expr::Tuple(t) => t.elems.iter().any(holds_borrow),
        Expr::Array(a) => a.elems.iter().any(holds_borrow),
        Expr::Struct(s) => s.fields.iter().any(|f| holds_borrow(&f.expr)),
        Expr::Field(f) => holds_borrow(&f.base),
        Expr::Call(c) => match &*c.func {
            Expr::Path(p) => {
                let last = p.path.segments.last().map(|s| name(&s.ident)).unwrap_or_default();
                // `Some(&mut x)`, `Pair(&a, &b)`: a constructor holds what it is given.
                let constructor = last.starts_with(|c: char| c.is_uppercase());
                last.ends_with("_mut") || (constructor && c.args.iter().any(holds_borrow))
            }
            _ => false,
        },
        Expr::MethodCall(m) => {
            let method = name(&m.method);
            method.ends_with("_mut")
                || BORROWING_METHODS.contains(&method.as_str())
                || (PASSING_METHODS.contains(&method.as_str()) && holds_borrow(&m.receiver))
        }
        _ => false,
    }
}

/// The arguments of an assertion (`assert!`, `assert_eq!`, `debug_assert!`, ...), when they
/// parse as expressions. Such a statement only checks: it fails on the same calls in a replay
/// as in eager mode when its operands are keyed (sizes, host scalars passed in) or host reads
/// (which end the recording), and its helper calls are wrapped like any other's, so it is not
/// an effect that keeps a function from being speculated.
pub(crate) fn assertion_args(m: &syn::Macro) -> Option<syn::punctuated::Punctuated<Expr, syn::Token![,]>> {
    const ASSERTIONS: [&str; 6] =
        ["assert", "assert_eq", "assert_ne", "debug_assert", "debug_assert_eq", "debug_assert_ne"];
    let last = m.path.segments.last().map(|s| name(&s.ident))?;
    if !ASSERTIONS.contains(&last.as_str()) {
        return None;
    }
    m.parse_body_with(syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated).ok()
}

/// Whether a host statement has effects a whole-function graph could not replay: a macro
/// (`println!`, `assert!`), `unsafe`, a call of a janus host function (`save`, `manual_seed`,
/// ...), or a method call on something that is not a local (a static's atomic, a thread-local).
/// Host reads and `backward()` are not effects: the runtime sees those itself.
pub(crate) fn is_effect(s: &Stmt, env: &Env) -> bool {
    struct Find<'e> {
        found: bool,
        env: &'e Env,
    }
    impl<'a> Visit<'a> for Find<'_> {
        fn visit_macro(&mut self, m: &'a syn::Macro) {
            // Compile-time macros have no effects (the macro's own `line!()` among them).
            const PURE: [&str; 8] =
                ["line", "column", "file", "module_path", "stringify", "concat", "cfg", "include_str"];
            let last = m.path.segments.last().map(|s| name(&s.ident)).unwrap_or_default();
            // An assertion only checks (see `assertion_args`).
            if !PURE.contains(&last.as_str()) && assertion_args(m).is_none() {
                self.found = true;
            }
        }
        fn visit_expr_unsafe(&mut self, _: &'a syn::ExprUnsafe) {
            self.found = true;
        }
        fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'a syn::Item) {}
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let Expr::Path(p) = &*c.func
                && let Some(last) = p.path.segments.last()
                && HOST_FUNCTIONS.contains(&name(&last.ident).as_str())
            {
                self.found = true;
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            if let Expr::Path(p) = &*m.receiver
                && (p.path.segments.len() != 1 || !self.env.is_local(&name(&p.path.segments[0].ident)))
            {
                self.found = true;
            }
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut f = Find { found: uses_mutating_closure(s, env), env };
    f.visit_stmt(s);
    f.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(names: &[&str]) -> Env {
        let mut e = Env::default();
        for n in names {
            e.declare(n.to_string());
        }
        e.depth = 1;
        e
    }

    #[test]
    fn classification() {
        let e = env(&["loss"]);
        let k = |s: &str| classify(&syn::parse_str::<Stmt>(s).unwrap(), &e);
        assert_eq!(k("let a = loss.exp();"), Kind::Static);
        assert_eq!(k("let v = loss.item();"), Kind::Host);
        assert_eq!(k("println!(\"{}\", 1);"), Kind::Host);
        assert_eq!(k("COUNTER.fetch_add(1, Ordering::SeqCst);"), Kind::Host);
        assert_eq!(k("if c { a; }"), Kind::Control);
        assert_eq!(k("let f = |x: &Tensor| x.exp();"), Kind::ClosureDef);
        assert_eq!(k("let y = x?;"), Kind::Host);
        assert_eq!(k("janus::save(\"p\", &m);"), Kind::Host);
        let e = env(&["v"]);
        let effect = |s: &str| is_effect(&syn::parse_str::<Stmt>(s).unwrap(), &e);
        assert!(effect("println!(\"{}\", 1);"));
        assert!(!effect("::janus::__private::branch(3, ::core::line!(), true);"));
        assert_eq!(k("let r#type = loss.exp();"), Kind::Static);
    }

    #[test]
    fn statements_that_leave_a_borrow() {
        let b = |s: &str| leaves_borrow(&syn::parse_str::<Stmt>(s).unwrap());
        for s in [
            "let r = &a;",
            "let s = &mut v[0];",
            "let s = v.last_mut().unwrap();",
            "let (a, b) = v.split_at_mut(1);",
            "let h = hs.last().expect(\"one\");",
            "let refs: Vec<&Tensor> = parts.iter().collect();",
            "let refs = parts.iter().zip(&qs).collect::<Vec<_>>();",
            "let o = Some(&mut m.w);",
            "let ref mut s = v[0];",
            "r = &a;",
        ] {
            assert!(b(s), "{s}");
        }
        let mut e = env(&["v", "w", "a"]);
        e.borrows.insert("w".into(), Borrow { roots: ["a".to_string()].into(), mutable: false });
        let of = |s: &str| borrow_of(&syn::parse_str::<Stmt>(s).unwrap(), &e);
        let b = of("let mut s = v.last_mut().unwrap();");
        assert!(b.mutable && b.roots == ["v".to_string()].into());
        let b = of("let mut r = &w;");
        assert!(!b.mutable && b.roots == ["w".to_string(), "a".to_string()].into());
        // An index is read, not borrowed.
        assert_eq!(of("let mut r = &v[a];").roots, ["v".to_string()].into());
        assert!(of("let ref mut s = v;").mutable);
        let b = |s: &str| leaves_borrow(&syn::parse_str::<Stmt>(s).unwrap());
        for s in [
            "let y = x.tanh();",
            "let y = step(&mut net, &x);",
            "let ys: Vec<Tensor> = xs.iter().map(|x| x.exp()).collect();",
            "let h = hs.last().cloned();",
            "let v = hs.iter().fold(x.clone(), |a, h| a + h);",
            "let g = grads.get(&w).unwrap() * 0.1;",
            "h = h.tanh();",
        ] {
            assert!(!b(s), "{s}");
        }
    }
}
