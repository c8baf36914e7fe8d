//! Scope analysis: which statements can be staged, and for a run of staged statements, the
//! places it reads (its inputs, DESIGN §13 rule 1) and the values it leaves behind (its
//! outputs: assigned places, locals mutated through an implicit `&mut` (rule 2), and locals it
//! defines that are used later).

use quote::ToTokens;
use std::collections::{HashMap, HashSet};
use syn::visit::Visit;
use syn::{Expr, Local, Pat, Stmt};

/// The locals in scope where a statement list is transformed.
#[derive(Clone, Default)]
pub(crate) struct Env {
    /// Each local's nesting level (0: parameters).
    pub(crate) level: HashMap<String, usize>,
    /// Locals known to hold references (so a mutation through them is visible to others).
    pub(crate) references: HashSet<String>,
    /// Locals bound mutably (only those can be mutated by a block, and restored).
    pub(crate) mutable: HashSet<String>,
    /// Locals known to be shared references (`x: &T` parameters, `let x = &e`): a block cannot
    /// mutate them, so they are never in-outs.
    pub(crate) shared: HashSet<String>,
    /// Non-`move` closures bound to a name, copied into later blocks that call them (rule 4).
    pub(crate) closures: HashMap<String, Stmt>,
    /// The level of the statement list being transformed.
    pub(crate) depth: usize,
    /// The function's own name: a recursive call is a host statement, so the tensor code
    /// around it can stage while the recursion follows the data.
    pub(crate) function: String,
    /// Whether `for` loops with all-static bodies stage inside their block (`unroll` option).
    pub(crate) unroll: bool,
}

impl Env {
    pub(crate) fn is_local(&self, name: &str) -> bool {
        self.level.contains_key(name)
    }

    /// A child scope one level deeper.
    pub(crate) fn nested(&self) -> Env {
        Env { depth: self.depth + 1, ..self.clone() }
    }

    pub(crate) fn declare(&mut self, name: String) {
        self.closures.remove(&name);
        self.references.remove(&name);
        self.mutable.remove(&name);
        self.shared.remove(&name);
        self.level.insert(name, self.depth);
    }
}

/// Names bound by a pattern.
pub(crate) fn pattern_names(p: &Pat) -> Vec<syn::Ident> {
    struct Names(Vec<syn::Ident>);
    impl<'a> Visit<'a> for Names {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(p.ident.clone());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut n = Names(Vec::new());
    n.visit_pat(p);
    n.0
}

/// Every identifier a piece of syntax mentions, including words inside macro arguments and
/// format strings (`println!("{loss}")`): an over-approximation used for liveness.
pub(crate) fn mentioned(tokens: proc_macro2::TokenStream, out: &mut HashSet<String>) {
    for tt in tokens {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            proc_macro2::TokenTree::Group(g) => mentioned(g.stream(), out),
            proc_macro2::TokenTree::Literal(l) => {
                let s = l.to_string();
                if s.starts_with('"') {
                    for w in s.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                        if !w.is_empty() {
                            out.insert(w.to_string());
                        }
                    }
                }
            }
            proc_macro2::TokenTree::Punct(_) => {}
        }
    }
}

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
const HOST_METHODS: &[&str] = &["backward", "backward_with", "item", "item_f64", "to_vec", "to_bool"];
const HOST_FUNCTIONS: &[&str] = &[
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
                    let recursive = m.method == self.env.function
                        && matches!(&*m.receiver, Expr::Path(p) if p.path.is_ident("self"));
                    if HOST_METHODS.contains(&m.method.to_string().as_str()) || recursive {
                        self.ok = false;
                        return;
                    }
                    // A receiver that is not a local (a static's atomic, a thread-local) has
                    // effects a graph cannot replay.
                    if let Expr::Path(p) = &*m.receiver
                        && (p.path.segments.len() != 1
                            || !self.env.is_local(&p.path.segments[0].ident.to_string()))
                    {
                        self.ok = false;
                        return;
                    }
                }
                Expr::Call(c) => {
                    if let Expr::Path(p) = &*c.func
                        && let Some(last) = p.path.segments.last()
                    {
                        let name = last.ident.to_string();
                        let recursive = name == self.env.function
                            && (p.path.segments.len() == 1 || p.path.segments[0].ident == "Self");
                        if HOST_FUNCTIONS.contains(&name.as_str()) || recursive {
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

/// Classifies one statement.
pub(crate) fn classify(s: &Stmt, env: &Env) -> Kind {
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
        inner.declare(n.to_string());
    }
    f.body.stmts.iter().all(|s| {
        let static_stmt = classify(s, &inner) == Kind::Static; // closure definitions are not
        if let Stmt::Local(l) = s {
            for n in pattern_names(&l.pat) {
                inner.declare(n.to_string());
            }
        }
        static_stmt
    })
}

/// A place a block reads or writes: a local, or a field/index/deref path from one.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    pub(crate) root: String,
    /// Path steps after the root (`.w`, `[t]`, `*`), for prefix comparison.
    pub(crate) steps: Vec<String>,
    pub(crate) expr: Expr,
}

impl Place {
    /// The source text (`xs[t]`, `m.wx`).
    pub(crate) fn text(&self) -> String {
        self.expr.to_token_stream().to_string().replace(' ', "")
    }

    fn covers(&self, other: &Place) -> bool {
        self.root == other.root
            && other.steps.len() >= self.steps.len()
            && other.steps[..self.steps.len()] == self.steps[..]
    }
}

/// What a run of static statements reads and leaves behind.
#[derive(Default, Debug)]
pub(crate) struct RunInfo {
    /// Places read from outside (no place is a prefix of another).
    pub(crate) inputs: Vec<Place>,
    /// Places assigned whose root is outside the run.
    pub(crate) assigned: Vec<Place>,
    /// Outside locals used as a method receiver, a bare call argument or `&mut x`.
    pub(crate) inouts: Vec<String>,
    /// Names the run binds, in order of binding.
    pub(crate) defs: Vec<syn::Ident>,
    /// Closures from the environment the run calls.
    pub(crate) closures: Vec<String>,
    /// Whether the run does any work (calls or operators) worth staging.
    pub(crate) has_work: bool,
}

struct Reads<'e> {
    env: &'e Env,
    defined: HashSet<String>,
    bound: Vec<HashSet<String>>,
    info: RunInfo,
}

impl Reads<'_> {
    fn outer(&self, name: &str) -> bool {
        self.env.is_local(name)
            && !self.defined.contains(name)
            && !self.bound.iter().any(|b| b.contains(name))
    }

    /// `e` as a place rooted at an outside local whose index expressions only use outside
    /// values, so it can be evaluated before the block.
    fn as_place(&self, e: &Expr) -> Option<Place> {
        let mut steps = Vec::new();
        let mut cur = e;
        loop {
            match cur {
                Expr::Path(p) if p.path.segments.len() == 1 && p.qself.is_none() => {
                    let root = p.path.segments[0].ident.to_string();
                    if !self.outer(&root) || self.env.closures.contains_key(&root) {
                        return None;
                    }
                    steps.reverse();
                    return Some(Place { root, steps, expr: e.clone() });
                }
                Expr::Field(f) => {
                    steps.push(format!(".{}", f.member.to_token_stream()));
                    cur = &f.base;
                }
                Expr::Index(i) => {
                    let mut names = HashSet::new();
                    mentioned(i.index.to_token_stream(), &mut names);
                    let simple =
                        matches!(&*i.index, Expr::Path(_) | Expr::Lit(_) | Expr::Binary(_) | Expr::Paren(_));
                    let inner = |n: &String| {
                        self.defined.contains(n)
                            || self.bound.iter().any(|b| b.contains(n))
                            || (self.env.is_local(n) && !self.outer(n))
                    };
                    if !simple || names.iter().any(inner) {
                        return None;
                    }
                    steps.push(format!("[{}]", i.index.to_token_stream()));
                    cur = &i.expr;
                }
                Expr::Paren(p) => cur = &p.expr,
                Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => {
                    steps.push("*".into());
                    cur = &u.expr;
                }
                _ => return None,
            }
        }
    }

    fn read_place(&mut self, p: Place) {
        if self.info.inputs.iter().any(|q| q.covers(&p)) {
            return;
        }
        self.info.inputs.retain(|q| !p.covers(q));
        self.info.inputs.push(p);
    }

    fn inout(&mut self, e: &Expr) {
        if let Some(p) = self.as_place(e)
            && p.steps.is_empty()
            && !self.info.inouts.contains(&p.root)
        {
            self.info.inouts.push(p.root.clone());
        }
    }

    /// Records the places an assignment's left side writes, looking through destructuring
    /// (`(h, c) = ..`, `[a, b] = ..`, `S { x, .. } = ..`, `T(a, _) = ..`).
    fn assign_target(&mut self, e: &Expr) {
        if let Some(p) = self.as_place(e) {
            self.info.assigned.push(p);
            return;
        }
        match e {
            Expr::Tuple(t) => t.elems.iter().for_each(|x| self.assign_target(x)),
            Expr::Array(a) => a.elems.iter().for_each(|x| self.assign_target(x)),
            Expr::Paren(p) => self.assign_target(&p.expr),
            Expr::Struct(s) => s.fields.iter().for_each(|f| self.assign_target(&f.expr)),
            Expr::Call(c) => c.args.iter().for_each(|x| self.assign_target(x)),
            Expr::Infer(_) | Expr::Range(_) => {}
            _ => self.mutated_through(e),
        }
    }

    /// A write through a place the block cannot name before it runs (`hs[k] = ..` with `k`
    /// computed inside): the whole root local is an in-out.
    fn mutated_through(&mut self, e: &Expr) {
        let mut root = e;
        while let Expr::Index(syn::ExprIndex { expr: inner, .. })
        | Expr::Field(syn::ExprField { base: inner, .. })
        | Expr::Paren(syn::ExprParen { expr: inner, .. }) = root
        {
            root = inner;
        }
        self.inout(root);
        self.visit_expr(e);
    }

    fn note_closure_call(&mut self, e: &Expr) {
        if let Expr::Path(p) = e
            && p.path.segments.len() == 1
        {
            let name = p.path.segments[0].ident.to_string();
            if self.env.closures.contains_key(&name)
                && !self.defined.contains(&name)
                && !self.info.closures.contains(&name)
            {
                self.info.closures.push(name);
            }
        }
    }
}

impl<'a> Visit<'a> for Reads<'_> {
    fn visit_expr(&mut self, e: &'a Expr) {
        if let Some(p) = self.as_place(e) {
            self.read_place(p);
            return;
        }
        match e {
            Expr::Assign(a) => {
                self.assign_target(&a.left);
                self.visit_expr(&a.right);
                return;
            }
            Expr::Binary(b) if is_compound(&b.op) => {
                if let Some(p) = self.as_place(&b.left) {
                    self.info.assigned.push(p.clone());
                    self.read_place(p);
                } else {
                    self.mutated_through(&b.left);
                }
                self.info.has_work = true;
                self.visit_expr(&b.right);
                return;
            }
            Expr::MethodCall(m) => {
                self.info.has_work = true;
                self.inout(&m.receiver);
                for a in &m.args {
                    self.arg(a);
                }
            }
            Expr::Call(c) => {
                self.info.has_work = true;
                self.note_closure_call(&c.func);
                for a in &c.args {
                    self.arg(a);
                }
            }
            Expr::Binary(_) | Expr::Unary(_) => self.info.has_work = true,
            Expr::Closure(c) => {
                let names: HashSet<String> =
                    c.inputs.iter().flat_map(pattern_names).map(|i| i.to_string()).collect();
                self.bound.push(names);
                self.visit_expr(&c.body);
                self.bound.pop();
                return;
            }
            Expr::ForLoop(f) => {
                // A staged loop: its variable and body locals are scoped to the body.
                self.visit_expr(&f.expr);
                self.bound.push(pattern_names(&f.pat).iter().map(|i| i.to_string()).collect());
                for s in &f.body.stmts {
                    self.visit_stmt(s);
                }
                self.bound.pop();
                self.info.has_work = true;
                return;
            }
            Expr::Block(b) => {
                self.bound.push(HashSet::new());
                for s in &b.block.stmts {
                    self.visit_stmt(s);
                }
                self.bound.pop();
                return;
            }
            _ => {}
        }
        syn::visit::visit_expr(self, e);
    }

    fn visit_local(&mut self, l: &'a Local) {
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
        }
        for n in pattern_names(&l.pat) {
            match self.bound.last_mut() {
                // A local of a nested body (loop, block, closure) ends with it.
                Some(scope) => {
                    scope.insert(n.to_string());
                }
                None => {
                    self.defined.insert(n.to_string());
                    self.info.defs.push(n);
                }
            }
        }
    }
}

impl Reads<'_> {
    fn arg(&mut self, a: &Expr) {
        match a {
            Expr::Reference(r) if r.mutability.is_some() => self.inout(&r.expr),
            Expr::Path(_) => self.inout(a),
            _ => {}
        }
    }
}

fn is_compound(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// Analyses a run of static statements in `env`.
pub(crate) fn run_info(stmts: &[Stmt], env: &Env) -> RunInfo {
    let mut r = Reads { env, defined: HashSet::new(), bound: Vec::new(), info: RunInfo::default() };
    for s in stmts {
        r.visit_stmt(s);
    }
    // A place whose root the run rebinds before reading is the run's own value, not an input.
    r.info
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

    fn info(src: &str, names: &[&str]) -> RunInfo {
        let block: syn::Block = syn::parse_str(&format!("{{ {src} }}")).unwrap();
        run_info(&block.stmts, &env(names))
    }

    #[test]
    fn places_are_minimal_and_hoist_outside_indices() {
        let i = info(
            "let g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b; let y = g.tanh();",
            &["xs", "t", "m", "h"],
        );
        let names: Vec<String> = i.inputs.iter().map(Place::text).collect();
        assert_eq!(names, ["xs[t]", "m.wx", "h", "m.wh", "m.b"]);
        assert_eq!(i.defs.iter().map(|d| d.to_string()).collect::<Vec<_>>(), ["g", "y"]);
        assert_eq!(i.inouts, ["h"]);
        assert!(i.has_work);
    }

    #[test]
    fn whole_local_covers_its_fields_and_calls_make_in_out_locals() {
        let i =
            info("opt.step(m, &grads); let w = m.w.exp(); hs.push(w.clone());", &["opt", "m", "grads", "hs"]);
        let names: Vec<String> = i.inputs.iter().map(Place::text).collect();
        assert_eq!(names, ["opt", "m", "grads", "hs"]);
        assert_eq!(i.inouts, ["opt", "m", "hs"]);
    }

    #[test]
    fn assignments_and_compound_assignments() {
        let i = info(
            "h = h.tanh(); loss += h.sum_all(); m.w = m.w.exp(); *p = q;",
            &["h", "loss", "m", "p", "q"],
        );
        let assigned: Vec<String> = i.assigned.iter().map(Place::text).collect();
        assert_eq!(assigned, ["h", "loss", "m.w", "*p"]);
        let i = info(
            "(h, c) = cell(&h, &c); [a, _] = pair(); S { x: m.w, .. } = s; T(q, ..) = t;",
            &["h", "c", "a", "m", "s", "q", "t"],
        );
        let assigned: Vec<String> = i.assigned.iter().map(Place::text).collect();
        assert_eq!(assigned, ["h", "c", "a", "m.w", "q"]);
    }

    #[test]
    fn closures_bind_their_parameters_and_classification() {
        let i = info("let ys: Vec<Tensor> = xs.iter().map(|x| x.exp() * s).collect();", &["xs", "s"]);
        let names: Vec<String> = i.inputs.iter().map(Place::text).collect();
        assert_eq!(names, ["xs", "s"]);
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
    }
}
