//! Whole-function speculation (see docs/design.md, "Speculation"), the macro's part:
//!
//! - the **path**: every `if`/`while` condition reports the way it went
//!   (`__private::branch`), every `match` arm and host `for` loop trip reports that it ran, so
//!   two profiled recordings can be compared decision by decision;
//! - **asserts**: `A.item() <op> B` in such a condition becomes `__private::item_cmp`, a
//!   predicate tensor that a speculative recording turns into an assert (`to_bool()` does the
//!   same on its own);
//! - the **tail reads**: a body ending in `loss.item()`, `(recon.item(), kl.item())` or
//!   `acc.item() as usize` (reads combined by tuples, casts and operators, and with no
//!   `return`) hands the tensors out of the function graph and reads them after it;
//! - the **wrapper**: the transformed body runs inside one more fragment (`function#fn`), whose
//!   inputs are the parameters and whose outputs are the return value and the `&mut`
//!   parameters.
//!
//! `expand.rs` calls these around its walk of the body; this file emits the wrapper through
//! `emit.rs` and imports nothing from the walk.

use super::ctx::Ctx;
use super::emit;
use super::reads::Place;
use super::scope::name;
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{BinOp, Block, Expr, FnArg, Ident, ItemFn, Pat, ReturnType, Stmt, Type};

/// Instruments decisions (see the module docs). Closures and nested items are left alone:
/// their decisions belong to whoever calls them.
pub(crate) struct Instrument {
    pub(crate) next: u32,
}

impl Instrument {
    fn site(&mut self) -> u32 {
        self.next += 1;
        self.next
    }
}

/// The source line of `span`, for `explain()` (0 where the compiler gives none).
fn line_of(span: proc_macro2::Span) -> u32 {
    span.start().line as u32
}

/// `A.item()` or `A.item_f64()` with no arguments: the receiver and whether it reads `f64`.
fn item_read(e: &Expr) -> Option<(&Expr, bool)> {
    match e {
        Expr::MethodCall(m) if m.args.is_empty() && (m.method == "item" || m.method == "item_f64") => {
            Some((&m.receiver, m.method == "item_f64"))
        }
        Expr::Paren(p) => item_read(&p.expr),
        _ => None,
    }
}

/// `A.item() <op> B` (either side) as an `item_cmp` call.
fn rewrite_comparison(e: &Expr) -> Option<Expr> {
    let Expr::Binary(b) = e else { return None };
    let (op, flip) = match b.op {
        BinOp::Gt(_) => ("Gt", "Lt"),
        BinOp::Ge(_) => ("Ge", "Le"),
        BinOp::Lt(_) => ("Lt", "Gt"),
        BinOp::Le(_) => ("Le", "Ge"),
        BinOp::Eq(_) => ("Eq", "Eq"),
        BinOp::Ne(_) => ("Ne", "Ne"),
        _ => return None,
    };
    let ty = |f64_read: bool| if f64_read { quote!(f64) } else { quote!(f32) };
    match (item_read(&b.left), item_read(&b.right)) {
        (Some((t, f64_read)), _) => {
            let (op, ty, rhs) = (Ident::new(op, proc_macro2::Span::call_site()), ty(f64_read), &b.right);
            Some(syn::parse_quote! {
                ::janus::__private::item_cmp(&(#t), ::janus::__private::Cmp::#op, (#rhs as #ty) as f64, #f64_read)
            })
        }
        // `lhs < t.item()`: Rust evaluates `lhs` first, so it is bound before `t` runs.
        (None, Some((t, f64_read))) => {
            let (op, ty, lhs) = (Ident::new(flip, proc_macro2::Span::call_site()), ty(f64_read), &b.left);
            Some(syn::parse_quote! {
                {
                    let __janus_lhs = (#lhs as #ty) as f64;
                    ::janus::__private::item_cmp(&(#t), ::janus::__private::Cmp::#op, __janus_lhs, #f64_read)
                }
            })
        }
        _ => None,
    }
}

/// Rewrites the comparisons of host reads in a condition (through `&&`, `||`, `!` and parens).
fn rewrite_condition(e: &mut Expr) {
    if let Some(r) = rewrite_comparison(e) {
        *e = r;
        return;
    }
    match e {
        Expr::Binary(b) if matches!(b.op, BinOp::And(_) | BinOp::Or(_)) => {
            rewrite_condition(&mut b.left);
            rewrite_condition(&mut b.right);
        }
        Expr::Unary(u) => rewrite_condition(&mut u.expr),
        Expr::Paren(p) => rewrite_condition(&mut p.expr),
        _ => {}
    }
}

impl VisitMut for Instrument {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::Closure(_) => return,
            Expr::If(i) if !matches!(&*i.cond, Expr::Let(_)) => {
                rewrite_condition(&mut i.cond);
                let (site, cond, line) = (self.site(), &i.cond, line_of(i.if_token.span));
                *i.cond = syn::parse_quote!(::janus::__private::branch(#site, #line, #cond));
            }
            Expr::While(w) if !matches!(&*w.cond, Expr::Let(_)) => {
                rewrite_condition(&mut w.cond);
                let (site, cond, line) = (self.site(), &w.cond, line_of(w.while_token.span));
                *w.cond = syn::parse_quote!(::janus::__private::branch(#site, #line, #cond));
            }
            Expr::ForLoop(f) => {
                let (site, line) = (self.site(), line_of(f.for_token.span));
                // The report takes the body's first statement's place (and line, for
                // `explain()`'s line ranges), with the macro's hygiene.
                let at = f.body.stmts.first().map_or(f.for_token.span, |s| s.span());
                let span = at.resolved_at(proc_macro2::Span::call_site());
                f.body.stmts.insert(
                    0,
                    syn::parse_quote_spanned!(span=> ::janus::__private::branch(#site, #line, true);),
                );
            }
            Expr::Match(m) => {
                for arm in &mut m.arms {
                    let (site, line, body) = (self.site(), line_of(arm.pat.span()), &arm.body);
                    let span = body.span().resolved_at(proc_macro2::Span::call_site());
                    *arm.body = syn::parse_quote_spanned!(span=> { ::janus::__private::branch(#site, #line, true); #body });
                }
            }
            _ => {}
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// Whether the tokens contain the keyword `return` anywhere (conservatively, closures too).
fn contains_return(ts: proc_macro2::TokenStream) -> bool {
    ts.into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => i == "return",
        proc_macro2::TokenTree::Group(g) => contains_return(g.stream()),
        _ => false,
    })
}

/// The host reads a body's tail makes, taken off it (see [`take_tail_read`]): the tensor
/// expressions read, and the tail rebuilt over `__janus_reads`, to evaluate after the graph.
pub(crate) struct TailRead {
    /// One per read, in order.
    tensors: Vec<Expr>,
    /// The tail with read `k` turned into `__janus_reads.k.item()` (or `item_f64`).
    after: Expr,
}

/// A handle of the tensor a read reads, whatever holds it (`x` of a `&Tensor` parameter, a
/// field behind a reference, a slice element, `(a + b)`).
fn handle(receiver: &Expr) -> Expr {
    let tight = matches!(
        receiver,
        Expr::Path(_)
            | Expr::Field(_)
            | Expr::Index(_)
            | Expr::Call(_)
            | Expr::MethodCall(_)
            | Expr::Paren(_)
    );
    if tight {
        syn::parse_quote_spanned!(receiver.span()=> ::janus::__private::tail_tensor(&#receiver))
    } else {
        syn::parse_quote_spanned!(receiver.span()=> ::janus::__private::tail_tensor(&(#receiver)))
    }
}

/// Takes the reads off a tail made of them: `loss.item()`, `(recon.item(), kl.item())`,
/// `a.item() as usize`, `[x.item_f64(), y.item_f64() * 0.5]`: reads combined by tuples,
/// arrays, casts, operators and literals. Anything else in the tail (a local, a call) keeps the
/// reads where they are.
fn split_reads(e: &Expr, tensors: &mut Vec<Expr>) -> Option<Expr> {
    let mut again = |x: &Expr| split_reads(x, tensors);
    Some(match e {
        Expr::MethodCall(m) if m.args.is_empty() && (m.method == "item" || m.method == "item_f64") => {
            let k = syn::Index::from(tensors.len());
            tensors.push(handle(&m.receiver));
            let method = &m.method;
            let span = m.span().resolved_at(proc_macro2::Span::call_site());
            syn::parse_quote_spanned!(span=> __janus_reads.#k.#method())
        }
        Expr::Tuple(t) => {
            let elems = t.elems.iter().map(&mut again).collect::<Option<Vec<_>>>()?;
            syn::parse_quote!((#(#elems,)*))
        }
        Expr::Array(a) => {
            let elems = a.elems.iter().map(&mut again).collect::<Option<Vec<_>>>()?;
            syn::parse_quote!([#(#elems),*])
        }
        Expr::Paren(p) => {
            let inner = again(&p.expr)?;
            syn::parse_quote!((#inner))
        }
        Expr::Cast(c) => {
            let (inner, ty) = (again(&c.expr)?, &c.ty);
            syn::parse_quote!(#inner as #ty)
        }
        Expr::Binary(b) => {
            let (l, r, op) = (again(&b.left)?, again(&b.right)?, &b.op);
            syn::parse_quote!(#l #op #r)
        }
        Expr::Unary(u) => {
            let (inner, op) = (again(&u.expr)?, &u.op);
            syn::parse_quote!(#op #inner)
        }
        Expr::Lit(_) => e.clone(),
        _ => return None,
    })
}

/// A body ending in host reads (see [`split_reads`]), and with no `return`: the tail becomes
/// the read tensors (one, or a tuple of them), handed out of the function graph, and the
/// reads are made after it.
pub(crate) fn take_tail_read(b: &mut Block) -> Option<TailRead> {
    if contains_return(b.to_token_stream()) {
        return None;
    }
    let Some(Stmt::Expr(e, None)) = b.stmts.last_mut() else { return None };
    let mut tensors = Vec::new();
    let after = split_reads(e, &mut tensors)?;
    match tensors.len() {
        0 => return None,
        1 => *e = tensors[0].clone(),
        _ => *e = syn::parse_quote!((#(#tensors,)*)),
    }
    Some(TailRead { tensors, after })
}

/// Whether a type names an `impl Trait` (a closure cannot be annotated with it).
fn has_impl_trait(t: &Type) -> bool {
    t.to_token_stream().into_iter().any(|t| matches!(&t, proc_macro2::TokenTree::Ident(i) if i == "impl"))
}

/// The parameters as places (inputs) and which of them are `&mut` (in-outs); `None` when a
/// parameter is a pattern the wrapper cannot name.
fn params(f: &ItemFn, mut_self: bool) -> Option<(Vec<Place>, Vec<bool>)> {
    let (mut places, mut inout) = (Vec::new(), Vec::new());
    for arg in &f.sig.inputs {
        let (ident, is_mut): (Ident, bool) = match arg {
            FnArg::Receiver(_) => (Ident::new("self", proc_macro2::Span::call_site()), mut_self),
            FnArg::Typed(t) => {
                let Pat::Ident(p) = &*t.pat else { return None };
                let m = matches!(&*t.ty, Type::Reference(r) if r.mutability.is_some());
                (p.ident.clone(), m)
            }
        };
        places.push(Place { root: name(&ident), steps: Vec::new(), expr: syn::parse_quote!(#ident) });
        inout.push(is_mut);
    }
    Some((places, inout))
}

/// Whether the function can be wrapped: named parameters, and a return type a closure can be
/// annotated with.
pub(crate) fn can_wrap(f: &ItemFn) -> bool {
    let ret_ok = match &f.sig.output {
        ReturnType::Default => true,
        ReturnType::Type(_, t) => !has_impl_trait(t),
    };
    ret_ok && params(f, false).is_some()
}

/// Wraps the (already transformed) body in the whole-function fragment. `tail_read` is the
/// host read taken off the tail; `mut_self` whether the receiver was `&mut self`.
pub(crate) fn wrap(f: &mut ItemFn, tail_read: Option<TailRead>, mut_self: bool, ctx: &mut Ctx) -> bool {
    let ret: Type = match (&f.sig.output, &tail_read) {
        (_, Some(r)) if r.tensors.len() == 1 => syn::parse_quote!(::janus::Tensor),
        (_, Some(r)) => {
            let each = r.tensors.iter().map(|_| quote!(::janus::Tensor));
            syn::parse_quote!((#(#each,)*))
        }
        (ReturnType::Default, None) => syn::parse_quote!(()),
        (ReturnType::Type(_, t), None) if has_impl_trait(t) => return false,
        (ReturnType::Type(_, t), None) => (**t).clone(),
    };
    let Some((inputs, inout)) = params(f, mut_self) else { return false };
    let body = &f.block;
    let run: Stmt = syn::parse_quote! {
        #[allow(clippy::redundant_closure_call)]
        let __janus_ret = (|| -> #ret #body)();
    };
    let ret_ident: Ident = syn::parse_quote!(__janus_ret);
    let frag = emit::Fragment {
        stmts: std::slice::from_ref(&run),
        copies: &[],
        inputs: &inputs,
        assigned: Vec::new(),
        inouts: inputs.iter().zip(&inout).filter(|(_, m)| **m).map(|(p, _)| p).collect(),
        fixed: Vec::new(),
        defined: vec![ret_ident],
        whole_function: true,
    };
    let mut stmts = emit::fragment(frag, ctx);
    match tail_read {
        Some(r) => {
            let after = r.after;
            let reads: Stmt = if r.tensors.len() == 1 {
                syn::parse_quote!(let __janus_reads = (__janus_ret,);)
            } else {
                syn::parse_quote!(let __janus_reads = __janus_ret;)
            };
            stmts.push(reads);
            stmts.push(Stmt::Expr(after, None));
        }
        None => stmts.push(Stmt::Expr(syn::parse_quote!(__janus_ret), None)),
    }
    f.block.stmts = stmts;
    true
}
