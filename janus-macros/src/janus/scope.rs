//! Names and scopes: the locals in scope where a statement list is transformed, the names a
//! pattern binds (and which of them mutably), and the names a piece of syntax mentions (for
//! liveness). A name is compared without its raw prefix, since `r#type` and `type` would be
//! one identifier were `type` not a keyword (`r#foo` and `foo` are the same local). The bottom
//! of the macro's files: it imports none of them.

use std::collections::{HashMap, HashSet};
use syn::visit::Visit;
use syn::{Pat, Stmt};

/// The locals in scope where a statement list is transformed.
#[derive(Clone, Default)]
pub(crate) struct Env {
    /// Each local's nesting level (0: parameters).
    pub(crate) level: HashMap<String, usize>,
    /// Locals known to hold references (so a mutation through them is visible to others).
    pub(crate) references: HashSet<String>,
    /// Locals bound mutably (only those can be mutated by a block, and restored).
    pub(crate) mutable: HashSet<String>,
    /// Locals known to be shared references (`x: &T` parameters, `&self`, `let x = &e`): a block
    /// cannot mutate them, so they are never in-outs.
    pub(crate) shared: HashSet<String>,
    /// Locals bound to a borrow (see `classify::leaves_borrow`), with what they may borrow.
    pub(crate) borrows: HashMap<String, Borrow>,
    /// Non-`move` closures bound to a name, copied into later blocks that call them (rule 4).
    pub(crate) closures: HashMap<String, Stmt>,
    /// Those of them that mutate what they capture (`|t| { count += 1; t.tanh() }`): a copy
    /// would borrow it a second time, and a replay would skip the mutation, so a statement
    /// that uses one is host code.
    pub(crate) mutating: HashSet<String>,
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
        self.mutating.remove(&name);
        self.borrows.remove(&name);
        self.references.remove(&name);
        self.mutable.remove(&name);
        self.shared.remove(&name);
        self.level.insert(name, self.depth);
    }
}

/// What a local bound to a borrow may borrow: every local its initialiser mentions (and what
/// those borrow in turn), an over-approximation.
#[derive(Clone, Debug, Default)]
pub(crate) struct Borrow {
    pub(crate) roots: HashSet<String>,
    /// Whether the borrow may be mutable (`&mut`, a `*_mut` accessor, `ref mut`).
    pub(crate) mutable: bool,
}

/// The name of an identifier as the analysis compares it: without a raw prefix.
pub(crate) fn name(i: &syn::Ident) -> String {
    syn::ext::IdentExt::unraw(i).to_string()
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

/// Names a pattern binds mutably (`mut x`): after `expand.rs` has made the plain top-level
/// bindings `mut`, the locals a block can restore.
pub(crate) fn mutable_names(p: &Pat) -> Vec<String> {
    struct Muts(Vec<String>);
    impl<'a> Visit<'a> for Muts {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            if p.mutability.is_some() {
                self.0.push(name(&p.ident));
            }
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut m = Muts(Vec::new());
    m.visit_pat(p);
    m.0
}

/// Every identifier a piece of syntax mentions, including words inside macro arguments and
/// format strings (`println!("{loss}")`): an over-approximation used for liveness.
pub(crate) fn mentioned(tokens: proc_macro2::TokenStream, out: &mut HashSet<String>) {
    for tt in tokens {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                out.insert(name(&i));
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
