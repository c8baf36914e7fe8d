//! Shape-polymorphic graphs: one graph recorded (and optimised) at several input shapes, fitted
//! into a [`Template`] whose sizes and size-derived constants are expressions of symbolic
//! dimensions, then instantiated for new sizes without recording or optimising again.
//!
//! A graph's *slots* are every size it holds (value shapes, and the sizes in op parameters such
//! as a reshape's target, a slice's bounds or a fill's shape) and every float constant it holds
//! (a fill's value, a fused program's immediates). Graphs fit one template when they are equal
//! with every slot erased. Each slot then gets the one expression of the symbols that
//! reproduces it in every sample:
//!
//! - a size: a constant, `k·m` for a monomial `m` of degree 1 or 2, or `k·s + c` for a symbol
//!   `s` (a concatenation with a fixed part), with integer `k` and `c`;
//! - a float: a constant, `k / m` (a mean's `1/n`) or `k · m`, reproduced bit for bit.
//!
//! Two candidate expressions that both reproduce the samples (sizes that scaled alike) make the
//! fit fail rather than guess: a later sample tells them apart. An instance is checked by the
//! graph verifier, so sizes that an op's shape rule computes differently (a strided window's
//! floor division) fail there instead of running wrong.
//!
//! What the fit cannot see is a size read on the host and turned into something that is not a
//! slot. The fragment runtime refuses to generalise a recording whose statements read a
//! tensor's dims for that reason (see `rt::fragment`).

use super::{Graph, NodeOp, verify};
use crate::ops::{F64Bits, Op};
use crate::shape::Shape;
use janus_kernels::fused::{FUnary, Instr};
use smallvec::SmallVec;
use std::sync::Arc;

/// A product of symbols, by index (degree 1 or 2).
type Mono = SmallVec<[u8; 2]>;

/// Symbols beyond this many are not generalised (the monomials to try grow quadratically).
const MAX_SYMBOLS: usize = 8;

/// A size as a function of the symbols.
#[derive(Clone, Debug, PartialEq)]
enum SizeExpr {
    Const(usize),
    /// `k · mono + c`.
    Affine {
        k: i64,
        mono: Mono,
        c: i64,
    },
}

/// A float constant (by its `f64` bits) as a function of the symbols; `f32` when the value
/// was rounded to `f32` (a constant of an `f32` graph, widened back).
#[derive(Clone, Debug, PartialEq)]
enum FloatExpr {
    Const(u64),
    /// `k / (den · mono)`: a mean's `1/n`, or `1/(4n)` over a fixed dim of 4.
    Recip {
        k: f64,
        den: i64,
        mono: Mono,
        f32: bool,
    },
    /// `k · mono`.
    Scaled {
        k: f64,
        mono: Mono,
        f32: bool,
    },
}

/// A graph with symbolic sizes: the skeleton (the first sample) and one expression per slot.
#[derive(Clone, Debug)]
pub struct Template {
    skeleton: Graph,
    sizes: Vec<SizeExpr>,
    floats: Vec<FloatExpr>,
}

enum Slot<'a> {
    Size(&'a mut usize),
    Float(&'a mut u64),
}

impl Template {
    /// Fits graphs recorded at several shapes; `symbols[i]` holds the symbols' values in
    /// sample `i`. Fails, naming why, when the graphs differ in more than their slots or a slot
    /// has no unique expression.
    pub fn fit(graphs: &[&Graph], symbols: &[Vec<usize>]) -> Result<Template, String> {
        assert_eq!(graphs.len(), symbols.len(), "one symbol assignment per sample");
        if graphs.len() < 2 {
            return Err("fewer than two samples".into());
        }
        if symbols[0].len() > MAX_SYMBOLS {
            return Err(format!("{} symbolic dimensions (at most {MAX_SYMBOLS})", symbols[0].len()));
        }
        if graphs.iter().any(|g| g.rng.is_some()) {
            return Err("draws random numbers (stream offsets depend on sizes)".into());
        }
        let erased: Vec<(Graph, Vec<usize>, Vec<u64>)> = graphs.iter().map(|g| erase(g)).collect();
        if let Some(i) = (1..erased.len()).find(|&i| !super::loops::same_graph(&erased[0].0, &erased[i].0)) {
            return Err(format!("the graph at sample {i} differs in more than its sizes"));
        }
        let monos = monomials(symbols[0].len());
        let sizes = (0..erased[0].1.len())
            .map(|j| {
                let vals: Vec<i64> = erased.iter().map(|e| e.1[j] as i64).collect();
                fit_size(&vals, symbols, &monos)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let floats = (0..erased[0].2.len())
            .map(|j| {
                let vals: Vec<u64> = erased.iter().map(|e| e.2[j]).collect();
                fit_float(&vals, symbols, &monos)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Template { skeleton: graphs[0].clone(), sizes, floats })
    }

    /// The graph for these symbol values, checked by the verifier.
    pub fn instantiate(&self, values: &[usize]) -> Result<Graph, String> {
        let mut g = self.skeleton.clone();
        let (mut si, mut fi) = (0, 0);
        let mut bad: Option<String> = None;
        walk(&mut g, &mut |slot| match slot {
            Slot::Size(d) => {
                match eval_size(&self.sizes[si], values) {
                    Some(v) => *d = v,
                    None => bad = bad.take().or(Some(format!("size {:?} is negative", self.sizes[si]))),
                }
                si += 1;
            }
            Slot::Float(b) => {
                *b = eval_float(&self.floats[fi], values);
                fi += 1;
            }
        });
        if let Some(why) = bad {
            return Err(why);
        }
        verify(&g).map_err(|e| format!("the instance fails verification: {e}"))?;
        Ok(g)
    }

    /// Number of slots that depend on a symbol.
    pub fn symbolic_slots(&self) -> usize {
        let sizes = self.sizes.iter().filter(|e| !matches!(e, SizeExpr::Const(_))).count();
        sizes + self.floats.iter().filter(|e| !matches!(e, FloatExpr::Const(_))).count()
    }
}

/// A copy of `g` with every slot zeroed, and the slots' values in walk order.
fn erase(g: &Graph) -> (Graph, Vec<usize>, Vec<u64>) {
    let mut g = g.clone();
    let (mut sizes, mut floats) = (Vec::new(), Vec::new());
    walk(&mut g, &mut |slot| match slot {
        Slot::Size(d) => sizes.push(std::mem::take(d)),
        Slot::Float(b) => floats.push(std::mem::take(b)),
    });
    (g, sizes, floats)
}

/// Visits every slot of `g` in a fixed order.
fn walk(g: &mut Graph, f: &mut dyn FnMut(Slot<'_>)) {
    for i in &mut g.inputs {
        shape(&mut i.ty.shape, f);
    }
    for n in &mut g.nodes {
        shape(&mut n.ty.shape, f);
        match &mut n.op {
            NodeOp::Op(op) => op_slots(op, f),
            NodeOp::Fused(p) => {
                let p = Arc::make_mut(p);
                shape(&mut p.shape, f);
                for o in &mut p.outputs {
                    shape(&mut o.shape, f);
                }
                for ins in &mut p.program.instrs {
                    match ins {
                        Instr::BinaryConst { c, .. } => f(Slot::Float(c)),
                        Instr::Unary { f: FUnary::Powf(e), .. } => f(Slot::Float(e)),
                        Instr::Unary { f: FUnary::Clamp(lo, hi), .. } => {
                            f(Slot::Float(lo));
                            f(Slot::Float(hi));
                        }
                        Instr::Load { .. }
                        | Instr::Unary { .. }
                        | Instr::Binary { .. }
                        | Instr::Select { .. } => {}
                    }
                }
            }
            NodeOp::Loop(l) => {
                let l = Arc::make_mut(l);
                f(Slot::Size(&mut l.trips));
                walk(&mut l.body, f);
            }
            NodeOp::Input(_) | NodeOp::RngState { .. } | NodeOp::Project(_) | NodeOp::MatMulAdd => {}
        }
    }
}

fn shape(s: &mut Shape, f: &mut dyn FnMut(Slot<'_>)) {
    for d in s.0.iter_mut() {
        f(Slot::Size(d));
    }
}

fn float(v: &mut F64Bits, f: &mut dyn FnMut(Slot<'_>)) {
    let mut bits = v.get().to_bits();
    f(Slot::Float(&mut bits));
    *v = F64Bits::new(f64::from_bits(bits));
}

/// The slots of an op's parameters. Exhaustive on purpose: a new op with a size in its
/// parameters must say so here, or templates would keep the first sample's size.
fn op_slots(op: &mut Op, f: &mut dyn FnMut(Slot<'_>)) {
    match op {
        Op::Full(p) => {
            shape(&mut p.shape, f);
            float(&mut p.value, f);
        }
        Op::Arange(p) => f(Slot::Size(&mut p.n)),
        Op::Constant(c) => shape(&mut c.shape, f),
        Op::RandUniform(p) | Op::RandNormal(p) => shape(&mut p.shape, f),
        Op::Powf(p) => float(&mut p.exponent, f),
        Op::Clamp(p) => {
            float(&mut p.min, f);
            float(&mut p.max, f);
        }
        Op::Reshape(p) => shape(&mut p.shape, f),
        Op::Narrow(p) => {
            f(Slot::Size(&mut p.start));
            f(Slot::Size(&mut p.len));
        }
        Op::Pad(p) => {
            f(Slot::Size(&mut p.before));
            f(Slot::Size(&mut p.after));
        }
        Op::BroadcastTo(p) => shape(&mut p.shape, f),
        Op::IndexAdd(p) => f(Slot::Size(&mut p.size)),
        Op::ScatterAdd(p) => shape(&mut p.shape, f),
        Op::OneHot(p) => f(Slot::Size(&mut p.classes)),
        Op::Unfold(p) => float(&mut p.pad_value, f),
        Op::Fold(p) => {
            f(Slot::Size(&mut p.size[0]));
            f(Slot::Size(&mut p.size[1]));
        }
        Op::Multinomial
        | Op::Unary(_)
        | Op::Cast(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Where
        | Op::Sum(_)
        | Op::Max(_)
        | Op::Min(_)
        | Op::ArgMax(_)
        | Op::ArgSort(_)
        | Op::LogSumExp(_)
        | Op::Softmax(_)
        | Op::LogSoftmax(_)
        | Op::MatMul
        | Op::Permute(_)
        | Op::Cat(_)
        | Op::IndexSelect(_)
        | Op::Gather(_)
        | Op::MaxPool2d(_)
        | Op::MaxPool2dBackward(_)
        | Op::ToDevice(_)
        | Op::Detach
        | Op::FreshLeaf => {}
    }
}

/// Monomials of degree 1 and 2 over `n` symbols.
fn monomials(n: usize) -> Vec<Mono> {
    let mut v: Vec<Mono> = (0..n as u8).map(|s| SmallVec::from_slice(&[s])).collect();
    for a in 0..n as u8 {
        for b in a..n as u8 {
            v.push(SmallVec::from_slice(&[a, b]));
        }
    }
    v
}

fn mono_value(m: &Mono, values: &[usize]) -> i64 {
    m.iter().map(|&s| values[s as usize] as i64).product()
}

fn unique<T: std::fmt::Debug>(
    fits: Vec<T>,
    what: &str,
    vals: &dyn std::fmt::Debug,
) -> Result<Option<T>, String> {
    match fits.len() {
        0 => Ok(None),
        1 => Ok(fits.into_iter().next()),
        _ => Err(format!("{what} {vals:?} fits several expressions ({:?}, {:?})", fits[0], fits[1])),
    }
}

fn fit_size(vals: &[i64], symbols: &[Vec<usize>], monos: &[Mono]) -> Result<SizeExpr, String> {
    if vals.iter().all(|&v| v == vals[0]) {
        return Ok(SizeExpr::Const(vals[0] as usize));
    }
    let ms = |m: &Mono| -> Vec<i64> { symbols.iter().map(|s| mono_value(m, s)).collect() };
    // Products first: `k · m`.
    let products: Vec<SizeExpr> = (monos.iter())
        .filter_map(|m| {
            let mv = ms(m);
            let k = (mv[0] != 0 && vals[0] % mv[0] == 0).then(|| vals[0] / mv[0])?;
            (k >= 1 && vals.iter().zip(&mv).all(|(&v, &x)| v == k * x)).then(|| SizeExpr::Affine {
                k,
                mono: m.clone(),
                c: 0,
            })
        })
        .collect();
    if let Some(e) = unique(products, "size", &vals)? {
        return Ok(e);
    }
    // Then `k · s + c` over single symbols.
    let affine: Vec<SizeExpr> = (monos.iter().filter(|m| m.len() == 1))
        .filter_map(|m| {
            let mv = ms(m);
            let i = (1..mv.len()).find(|&i| mv[i] != mv[0])?;
            let (dv, dm) = (vals[i] - vals[0], mv[i] - mv[0]);
            let k = (dv % dm == 0).then(|| dv / dm).filter(|&k| k != 0)?;
            let c = vals[0] - k * mv[0];
            vals.iter().zip(&mv).all(|(&v, &x)| v == k * x + c).then(|| SizeExpr::Affine {
                k,
                mono: m.clone(),
                c,
            })
        })
        .collect();
    unique(affine, "size", &vals)?
        .ok_or_else(|| format!("size {vals:?} follows no expression of the symbols"))
}

fn fit_float(vals: &[u64], symbols: &[Vec<usize>], monos: &[Mono]) -> Result<FloatExpr, String> {
    if vals.iter().all(|&v| v == vals[0]) {
        return Ok(FloatExpr::Const(vals[0]));
    }
    let first = f64::from_bits(vals[0]);
    let mut fits = Vec::new();
    for m in monos {
        let m0 = mono_value(m, &symbols[0]) as f64;
        for f32 in [false, true] {
            // An `f32` constant's factor is the `f32` nearest the product (`-1/n`'s -1).
            let k = |k: f64| if f32 { k as f32 as f64 } else { k };
            let mut candidates = vec![
                FloatExpr::Recip { k: k(first * m0), den: 1, mono: m.clone(), f32 },
                FloatExpr::Scaled { k: k(first / m0), mono: m.clone(), f32 },
            ];
            // `±1 / (den · m)` with an integer `den`.
            let den = (1.0 / (first * m0)).abs().round();
            if (2.0..1e9).contains(&den) {
                let k = first.signum();
                candidates.push(FloatExpr::Recip { k, den: den as i64, mono: m.clone(), f32 });
            }
            for e in candidates {
                if symbols.iter().zip(vals).all(|(s, &v)| eval_float(&e, s) == v) && !fits.contains(&e) {
                    fits.push(e);
                }
            }
        }
    }
    // A value that is exact in both widths fits both ways, and `1/n` fits as `k/n` and as
    // `1/(1·n)`: keep the first reading of each (by its value at twice the first sample's size).
    let at = |e: &FloatExpr| eval_float(e, &symbols[0].iter().map(|v| 2 * v + 1).collect::<Vec<_>>());
    let mut distinct: Vec<FloatExpr> = Vec::new();
    for e in fits {
        if !distinct.iter().any(|d| at(d) == at(&e)) {
            distinct.push(e);
        }
    }
    let fits = distinct;
    let vals_f: Vec<f64> = vals.iter().map(|&v| f64::from_bits(v)).collect();
    unique(fits, "constant", &vals_f)?
        .ok_or_else(|| format!("constant {vals_f:?} follows no expression of the symbols"))
}

fn eval_size(e: &SizeExpr, values: &[usize]) -> Option<usize> {
    match e {
        SizeExpr::Const(v) => Some(*v),
        SizeExpr::Affine { k, mono, c } => usize::try_from(k * mono_value(mono, values) + c).ok(),
    }
}

fn eval_float(e: &FloatExpr, values: &[usize]) -> u64 {
    match e {
        FloatExpr::Const(b) => *b,
        FloatExpr::Recip { k, den, mono, f32 } => {
            round(k / (den * mono_value(mono, values)) as f64, *f32).to_bits()
        }
        FloatExpr::Scaled { k, mono, f32 } => round(k * mono_value(mono, values) as f64, *f32).to_bits(),
    }
}

fn round(v: f64, f32: bool) -> f64 {
    if f32 { v as f32 as f64 } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::GraphBuilder;
    use crate::graph::Node;
    use crate::ops::{BinaryOp, Full, Reshape, Sum, TensorType};
    use crate::{DType, Device};

    /// `mean(reshape(x, [b*t]) * 2) `-like graph for `x: [b, t]`, written out by hand.
    fn graph(b: usize, t: usize) -> Graph {
        let mut g = GraphBuilder::new();
        let ty = |d: &[usize]| TensorType { shape: Shape(SmallVec::from_slice(d)), dtype: DType::F32 };
        let node = |op: Op, inputs: &[crate::graph::NodeId], d: &[usize]| Node {
            op: NodeOp::Op(op),
            inputs: SmallVec::from_slice(inputs),
            ty: ty(d),
            span: None,
        };
        let x = g.input("x", ty(&[b, t]));
        let r = g.push(node(
            Op::Reshape(Reshape { shape: Shape(SmallVec::from_slice(&[b * t])) }),
            &[x],
            &[b * t],
        ));
        let s = g.push(node(Op::Sum(Sum { dims: SmallVec::from_slice(&[0]), keepdim: false }), &[r], &[]));
        let full = Full {
            shape: Shape::scalar(),
            dtype: DType::F32,
            value: F64Bits::new(1.0 / (b * t) as f64),
            device: Device::Cpu,
        };
        let c = g.push(node(Op::Full(full), &[], &[]));
        let m = g.push(node(Op::Binary(BinaryOp::Mul), &[s, c], &[]));
        g.finish(vec![m])
    }

    fn sizes_of(g: &Graph) -> Vec<usize> {
        erase(g).1
    }

    #[test]
    fn a_template_reproduces_a_third_shape() {
        let (a, b) = (graph(4, 6), graph(8, 10));
        let t = Template::fit(&[&a, &b], &[vec![4, 6], vec![8, 10]]).unwrap();
        let c = t.instantiate(&[5, 7]).unwrap();
        let want = graph(5, 7);
        assert!(super::super::loops::same_graph(&erase(&c).0, &erase(&want).0));
        assert_eq!(sizes_of(&c), sizes_of(&want));
        assert_eq!(erase(&c).2, erase(&want).2, "the mean's 1/n is recomputed bit for bit");
    }

    #[test]
    fn sizes_that_scale_alike_are_ambiguous_until_a_third_sample() {
        // b and t double together: `b*t` could be `b*t` or `4·b·b`... and `t` could be `2b`.
        let (a, b) = (graph(2, 4), graph(4, 8));
        let err = Template::fit(&[&a, &b], &[vec![2, 4], vec![4, 8]]).unwrap_err();
        assert!(err.contains("several expressions"), "{err}");
        let c = graph(3, 5);
        let t = Template::fit(&[&a, &b, &c], &[vec![2, 4], vec![4, 8], vec![3, 5]]).unwrap();
        assert_eq!(sizes_of(&t.instantiate(&[6, 9]).unwrap()), sizes_of(&graph(6, 9)));
    }

    #[test]
    fn a_constant_that_follows_no_expression_fails_the_fit() {
        let (a, mut b) = (graph(4, 6), graph(8, 10));
        // A float that is no function of the sizes (a host value baked in).
        if let NodeOp::Op(Op::Full(p)) = &mut b.nodes[3].op {
            p.value = F64Bits::new(0.3);
        }
        let err = Template::fit(&[&a, &b], &[vec![4, 6], vec![8, 10]]).unwrap_err();
        assert!(err.contains("no expression"), "{err}");
    }

    #[test]
    fn an_instance_that_breaks_a_shape_rule_fails_verification() {
        let (mut a, mut b) = (graph(4, 6), graph(8, 10));
        // The reshape's target keeps a fixed size: wrong for any other `b*t`.
        for g in [&mut a, &mut b] {
            if let NodeOp::Op(Op::Reshape(p)) = &mut g.nodes[1].op {
                p.shape = Shape(SmallVec::from_slice(&[24]));
            }
        }
        // (The samples themselves are inconsistent for b=8, t=10, but the fit only sees sizes.)
        let t = Template::fit(&[&a, &b], &[vec![4, 6], vec![8, 10]]).unwrap();
        assert!(t.instantiate(&[5, 7]).unwrap_err().contains("verification"));
    }

    #[test]
    fn an_affine_size_fits() {
        let vals = [12i64, 20];
        let e = fit_size(&vals, &[vec![8], vec![16]], &monomials(1)).unwrap();
        assert_eq!(eval_size(&e, &[10]), Some(14), "{e:?}"); // s + 4
    }
}
