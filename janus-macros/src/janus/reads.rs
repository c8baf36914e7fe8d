//! Scope analysis of a run of static statements: the places it reads (its inputs) and the places
//! it leaves changed (its outputs: assigned places, and places it may mutate through an implicit
//! or explicit `&mut`), and the locals it defines. See docs/design.md, "Scope analysis: inputs
//! and outputs".

use super::scope::{Env, mentioned, name, pattern_names};
use quote::ToTokens;
use std::collections::HashSet;
use syn::visit::Visit;
use syn::{Expr, Local, Stmt};

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

    pub(crate) fn covers(&self, other: &Place) -> bool {
        self.root == other.root
            && other.steps.len() >= self.steps.len()
            && other.steps[..self.steps.len()] == self.steps[..]
    }

    /// The root local as written (`r#type` stays raw).
    pub(crate) fn root_ident(&self) -> syn::Ident {
        let mut cur = &self.expr;
        loop {
            cur = match cur {
                Expr::Field(f) => &f.base,
                Expr::Index(i) => &i.expr,
                Expr::Paren(p) => &p.expr,
                Expr::Unary(u) => &u.expr,
                Expr::Path(p) => return p.path.segments[0].ident.clone(),
                _ => unreachable!("a place is a path, field, index or deref"),
            }
        }
    }

    /// The whole root local.
    fn root_place(&self) -> Place {
        let id = self.root_ident();
        Place { root: self.root.clone(), steps: Vec::new(), expr: syn::parse_quote!(#id) }
    }

    /// The names the place's index expressions mention.
    fn index_names(&self) -> HashSet<String> {
        let mut names = HashSet::new();
        let mut cur = &self.expr;
        loop {
            cur = match cur {
                Expr::Field(f) => &f.base,
                Expr::Index(i) => {
                    mentioned(i.index.to_token_stream(), &mut names);
                    &i.expr
                }
                Expr::Paren(p) => &p.expr,
                Expr::Unary(u) => &u.expr,
                _ => return names,
            }
        }
    }
}

/// Adds `p` to a list kept minimal: no place in it covers another.
fn push_minimal(list: &mut Vec<Place>, p: Place) {
    if list.iter().any(|q| q.covers(&p)) {
        return;
    }
    list.retain(|q| !p.covers(q));
    list.push(p);
}

/// What a run of static statements reads and leaves behind.
#[derive(Default, Debug)]
pub(crate) struct RunInfo {
    /// Places read from outside (no place is a prefix of another).
    pub(crate) inputs: Vec<Place>,
    /// Places assigned whose root is outside the run.
    pub(crate) assigned: Vec<Place>,
    /// Outside places used as a method receiver, a bare call argument or under `&mut` (no place
    /// is a prefix of another).
    pub(crate) inouts: Vec<Place>,
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
    /// How many lazily evaluated positions enclose the expression being visited (closure
    /// bodies, right operands of `&&`/`||`, staged loop bodies): an index there may never be
    /// evaluated (`opt.unwrap_or_else(|| hs[0].clone())` with `hs` empty), so it is not hoisted
    /// before the block; its container is the input instead.
    lazy: usize,
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
                    let root = name(&p.path.segments[0].ident);
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
                Expr::Index(_) if self.lazy > 0 => return None,
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

    /// The place `e` is, or the longest one it lies in that can be named (`hs` for `hs[k]`
    /// with `k` computed inside the run).
    fn place_within(&self, e: &Expr) -> Option<Place> {
        let mut cur = e;
        loop {
            if let Some(p) = self.as_place(cur) {
                return Some(p);
            }
            cur = match cur {
                Expr::Index(i) => &i.expr,
                Expr::Field(f) => &f.base,
                Expr::Paren(p) => &p.expr,
                Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => &u.expr,
                _ => return None,
            };
        }
    }

    fn read_place(&mut self, p: Place) {
        push_minimal(&mut self.info.inputs, p);
    }

    /// A place the run may mutate through `&mut` (an explicit one, or a method's receiver).
    fn inout(&mut self, e: &Expr) {
        if let Some(p) = self.place_within(e) {
            push_minimal(&mut self.info.inouts, p);
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
    /// computed inside): the longest place that contains it is an in-out.
    fn mutated_through(&mut self, e: &Expr) {
        self.inout(e);
        self.visit_expr(e);
    }

    fn note_closure_call(&mut self, e: &Expr) {
        if let Expr::Path(p) = e
            && p.path.segments.len() == 1
        {
            let called = name(&p.path.segments[0].ident);
            if self.env.closures.contains_key(&called)
                && !self.defined.contains(&called)
                && !self.info.closures.contains(&called)
            {
                self.info.closures.push(called);
            }
        }
    }

    fn arg(&mut self, a: &Expr) {
        // `&mut x` is handled where any reference is visited.
        if let Expr::Path(_) | Expr::Field(_) = a {
            self.inout(a);
        }
    }

    fn lazily(&mut self, e: &Expr) {
        self.lazy += 1;
        self.visit_expr(e);
        self.lazy -= 1;
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
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_) | syn::BinOp::Or(_)) => {
                self.visit_expr(&b.left);
                self.lazily(&b.right);
                return;
            }
            Expr::Reference(r) if r.mutability.is_some() => self.inout(&r.expr),
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
                    c.inputs.iter().flat_map(pattern_names).map(|i| name(&i)).collect();
                self.bound.push(names);
                self.lazily(&c.body);
                self.bound.pop();
                return;
            }
            Expr::ForLoop(f) => {
                // A staged loop: its variable and body locals are scoped to the body, which
                // may run no trip at all.
                self.visit_expr(&f.expr);
                self.bound.push(pattern_names(&f.pat).iter().map(name).collect());
                self.lazy += 1;
                for s in &f.body.stmts {
                    self.visit_stmt(s);
                }
                self.lazy -= 1;
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
                    scope.insert(name(&n));
                }
                None => {
                    self.defined.insert(name(&n));
                    self.info.defs.push(n);
                }
            }
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
    let mut r = Reads { env, defined: HashSet::new(), bound: Vec::new(), lazy: 0, info: RunInfo::default() };
    for s in stmts {
        r.visit_stmt(s);
    }
    let mut info = r.info;
    // A place whose index the run changes (`hs[k] = ..; k += 1; .. hs[k]`) names different
    // elements before the statements (where inputs are read), after them (where outputs are)
    // and at a replay's restore: its whole container stands in for it.
    let changed: HashSet<String> = info.assigned.iter().chain(&info.inouts).map(|p| p.root.clone()).collect();
    let moves = |p: &Place| p.index_names().iter().any(|n| changed.contains(n));
    let (moving, assigned): (Vec<Place>, Vec<Place>) = info.assigned.into_iter().partition(moves);
    let (moving_inouts, inouts): (Vec<Place>, Vec<Place>) = info.inouts.into_iter().partition(moves);
    let (moving_inputs, inputs): (Vec<Place>, Vec<Place>) = info.inputs.into_iter().partition(moves);
    (info.assigned, info.inouts, info.inputs) = (assigned, inouts, inputs);
    for p in moving.iter().chain(&moving_inouts) {
        push_minimal(&mut info.inouts, p.root_place());
    }
    for p in moving.iter().chain(&moving_inouts).chain(&moving_inputs) {
        push_minimal(&mut info.inputs, p.root_place());
    }
    info
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

    fn texts(ps: &[Place]) -> Vec<String> {
        ps.iter().map(Place::text).collect()
    }

    #[test]
    fn places_are_minimal_and_hoist_outside_indices() {
        let i = info(
            "let g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b; let y = g.tanh();",
            &["xs", "t", "m", "h"],
        );
        assert_eq!(texts(&i.inputs), ["xs[t]", "m.wx", "h", "m.wh", "m.b"]);
        assert_eq!(i.defs.iter().map(|d| d.to_string()).collect::<Vec<_>>(), ["g", "y"]);
        assert_eq!(texts(&i.inouts), ["xs[t]", "h"]);
        assert!(i.has_work);
    }

    #[test]
    fn whole_local_covers_its_fields_and_calls_make_in_out_places() {
        let i =
            info("opt.step(m, &grads); let w = m.w.exp(); hs.push(w.clone());", &["opt", "m", "grads", "hs"]);
        assert_eq!(texts(&i.inputs), ["opt", "m", "grads", "hs"]);
        assert_eq!(texts(&i.inouts), ["opt", "m", "hs"]);
        let i = info(
            "self.opt.step(&mut self.net, &g); let s = &mut v[0]; *s = x.tanh(); decay(t.m);",
            &["self", "g", "v", "x", "t"],
        );
        assert_eq!(texts(&i.inouts), ["self.opt", "self.net", "v[0]", "x", "t.m"]);
    }

    #[test]
    fn assignments_and_compound_assignments() {
        let i = info(
            "h = h.tanh(); loss += h.sum_all(); m.w = m.w.exp(); *p = q;",
            &["h", "loss", "m", "p", "q"],
        );
        assert_eq!(texts(&i.assigned), ["h", "loss", "m.w", "*p"]);
        let i = info(
            "(h, c) = cell(&h, &c); [a, _] = pair(); S { x: m.w, .. } = s; T(q, ..) = t;",
            &["h", "c", "a", "m", "s", "q", "t"],
        );
        assert_eq!(texts(&i.assigned), ["h", "c", "a", "m.w", "q"]);
    }

    #[test]
    fn a_place_whose_index_the_run_changes_is_its_container() {
        let i = info("hs[k] = x.tanh(); k += 1; let y = &hs[k] + &ys[k];", &["hs", "k", "x", "ys"]);
        assert_eq!(texts(&i.assigned), ["k"]);
        assert_eq!(texts(&i.inouts), ["x", "hs"]);
        assert_eq!(texts(&i.inputs), ["x", "k", "hs", "ys"]);
    }

    #[test]
    fn closures_bind_their_parameters_and_lazy_indices_are_not_hoisted() {
        let i = info("let ys: Vec<Tensor> = xs.iter().map(|x| x.exp() * s).collect();", &["xs", "s"]);
        assert_eq!(texts(&i.inputs), ["xs", "s"]);
        let i = info(
            "let h = init.clone().unwrap_or_else(|| hs[0].clone() * m.w[j]);",
            &["init", "hs", "m", "j"],
        );
        assert_eq!(texts(&i.inputs), ["init", "hs", "m.w", "j"]);
        let i = info("let ok = n > 0 && xs[n - 1].dims()[0] > 1; let y = &ys[0] * 2.0;", &["n", "xs", "ys"]);
        assert_eq!(texts(&i.inputs), ["n", "xs", "ys[0]"]);
        let i = info("for _ in 0..n { h = &h + &hs[0]; }", &["n", "h", "hs"]);
        assert_eq!(texts(&i.inputs), ["n", "h", "hs"]);
    }

    #[test]
    fn raw_identifiers_are_their_names() {
        let i = info("let r#loop = r#type.exp() + &m.r#in; r#type = r#loop.tanh();", &["type", "m"]);
        assert_eq!(texts(&i.inputs), ["r#type", "m.r#in"]);
        assert_eq!(i.assigned[0].root, "type");
        assert_eq!(i.assigned[0].root_ident().to_string(), "r#type");
        assert_eq!(i.defs[0].to_string(), "r#loop");
    }
}
