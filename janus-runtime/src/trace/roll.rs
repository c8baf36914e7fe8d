//! Rolling a recorded loop: a run of trips of one inner block (a staged `for` loop's body,
//! which records inline, once per trip) becomes one loop node when the trips recorded the same
//! graph. Each trip's nodes form its *body*: its inputs are the block's input leaves, its
//! outputs the block's outputs. An input is
//!
//! - *invariant* when every trip reads the same value from before the loop (a weight),
//! - *carried* when each trip reads what the trip before output (the state `h`),
//! - *sliced* when each trip reads another value from before the loop (`xs[t]`): the values
//!   are stacked for the loop, or, when they are consecutive rows of one value (`x.narrow`
//!   row by row), that value is the loop's operand as it is.
//!
//! Nodes after the loop may read only the last trip's outputs; leading trips that recorded
//! another graph (a first step without gradient history, say) stay unrolled before the loop.
//! Anything else leaves the trips unrolled: rolling is an optimisation, never a requirement.

use crate::graph::loops::{LoopIn, LoopSpec, same_graph};
use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{Axis, Narrow, Op, Reshape, TensorType};
use smallvec::{SmallVec, smallvec};
use std::collections::HashMap;
use std::sync::Arc;

/// One run of an inner block's statements inside a recording.
#[derive(Clone, Debug)]
pub(crate) struct Trip {
    /// The block (its fragment's address).
    pub(crate) site: usize,
    /// How many trips were open around it.
    pub(crate) depth: u32,
    /// Its nodes are `start..end`.
    pub(crate) start: usize,
    pub(crate) end: Option<usize>,
    /// The node of each input leaf when it began (`None`: not a value of the recording).
    pub(crate) ins: Vec<Option<NodeId>>,
    /// The inputs' names.
    pub(crate) names: Vec<&'static str>,
    /// The node of each output leaf when it ended.
    pub(crate) outs: Vec<Option<NodeId>>,
    /// Its host decisions are `path_start..path_end` of the recording's path.
    pub(crate) path_start: usize,
    pub(crate) path_end: usize,
}

impl Trip {
    fn end(&self) -> usize {
        self.end.expect("only ended trips are kept")
    }
}

/// Rolls `f`'s loops (see [`roll`]); the decisions of the rolled trips leave its path (a
/// staged loop's trips are implied by its trip count, which the loop now takes from its
/// operands). Returns whether a loop rolled.
pub(crate) fn roll_finished(f: &mut super::Finished, min_trips: usize) -> bool {
    let Some((g, runs)) = roll_runs(&f.graph, &f.trips, min_trips) else { return false };
    f.graph = g;
    let mut keep = vec![true; f.path.len()];
    for (start, end) in runs {
        for t in f.trips.iter().filter(|t| t.start >= start && t.end() <= end) {
            keep[t.path_start..t.path_end].iter_mut().for_each(|k| *k = false);
        }
    }
    let mut k = keep.into_iter();
    f.path.retain(|_| k.next().unwrap_or(true));
    true
}

/// A run of trips rolled into a loop.
struct Rolled {
    /// The nodes the loop replaces: from the first rolled trip's start to the last one's end.
    start: usize,
    end: usize,
    spec: LoopSpec,
    /// Per body input, the recording's node(s) it reads: one, or one per trip (sliced).
    operands: Vec<Vec<NodeId>>,
    /// The last trip's output nodes, by body output.
    finals: Vec<NodeId>,
}

/// `g` with every run of at least `min_trips` agreeing trips rolled into a loop node, or `None`
/// when no run rolled; and the number of trips rolled.
#[cfg(test)]
pub(crate) fn roll(g: &Graph, trips: &[Trip], min_trips: usize) -> Option<(Graph, usize)> {
    let (g, _) = roll_runs(g, trips, min_trips)?;
    let n =
        g.nodes.iter().filter_map(|n| if let NodeOp::Loop(l) = &n.op { Some(l.trips) } else { None }).sum();
    Some((g, n))
}

/// [`roll`], returning the node ranges (of `g`) the loops replaced.
fn roll_runs(g: &Graph, trips: &[Trip], min_trips: usize) -> Option<(Graph, Vec<(usize, usize)>)> {
    // Runs of one depth at a time, outermost first: a loop inside a rolled loop's body stays
    // unrolled there, one inside a trip that did not roll may roll on its own.
    let mut runs: Vec<Rolled> = Vec::new();
    let depths = trips.iter().map(|t| t.depth).max().map_or(0, |d| d + 1);
    for depth in 0..depths {
        let level: Vec<&Trip> = trips.iter().filter(|t| t.depth == depth).collect();
        let mut i = 0;
        while i < level.len() {
            let mut j = i + 1;
            while j < level.len() && level[j].site == level[i].site && level[j].start == level[j - 1].end() {
                j += 1;
            }
            let run: Vec<Trip> = level[i..j].iter().map(|t| (*t).clone()).collect();
            let taken = |r: &Rolled| run[0].start < r.end && r.start < run[j - i - 1].end();
            if run.len() >= min_trips
                && !runs.iter().any(taken)
                && let Some(r) = roll_run(g, &run, min_trips)
            {
                runs.push(r);
            }
            i = j;
        }
    }
    if runs.is_empty() {
        return None;
    }
    runs.sort_by_key(|r| r.start);
    let ranges = runs.iter().map(|r| (r.start, r.end)).collect();
    // The loop reads whole values where the trips read their rows: those rows go.
    let g = crate::passes::dce::run(rebuild(g, runs), &mut Default::default());
    Some((g, ranges))
}

/// The body trip `t` recorded: its nodes, reading its input leaves as inputs (the used ones,
/// in leaf order) and returning its output leaves. `None` when the trip reads another node
/// from before it, or outputs one that is not among its inputs.
fn body_of(g: &Graph, t: &Trip) -> Option<(Graph, Vec<usize>)> {
    let (start, end) = (t.start, t.end());
    let mut used = vec![false; t.ins.len()];
    let pos = |n: NodeId| t.ins.iter().position(|&i| i == Some(n));
    for node in &g.nodes[start..end] {
        for a in &node.inputs {
            if a.index() < start {
                used[pos(*a)?] = true;
            }
        }
    }
    for o in &t.outs {
        let o = (*o)?;
        if o.index() < start {
            used[pos(o)?] = true;
        }
    }
    let mut b = GraphBuilder::new();
    let mut map: HashMap<usize, NodeId> = HashMap::new();
    let mut inputs = Vec::new();
    for (k, &u) in used.iter().enumerate() {
        if u {
            let n = t.ins[k].expect("a used input has a node");
            map.insert(n.index(), b.input(t.names[k], g.node(n).ty.clone()));
            inputs.push(k);
        }
    }
    for (i, node) in g.nodes.iter().enumerate().take(end).skip(start) {
        if matches!(node.op, NodeOp::Input(_) | NodeOp::RngState { .. })
            || node.op == NodeOp::Op(Op::FreshLeaf)
        {
            return None; // a new graph input, random numbers or a new gradient leaf: not a loop body
        }
        let inputs = node.inputs.iter().map(|a| map[&a.index()]).collect();
        map.insert(i, b.push(Node { op: node.op.clone(), inputs, ty: node.ty.clone(), span: node.span }));
    }
    let outs = t.outs.iter().map(|o| map[&o.expect("checked above").index()]).collect();
    Some((b.finish(outs), inputs))
}

/// Rolls the longest tail of `trips` that recorded one body, if it has `min_trips` trips and
/// its inputs and outputs are used as a loop's are.
fn roll_run(g: &Graph, trips: &[Trip], min_trips: usize) -> Option<Rolled> {
    let last = trips.last()?;
    let (body, inputs) = body_of(g, last)?;
    let mut first = trips.len() - 1;
    while first > 0 {
        match body_of(g, &trips[first - 1]) {
            Some((b, ins)) if ins == inputs && same_graph(&b, &body) => first -= 1,
            _ => break,
        }
    }
    let run = &trips[first..];
    if run.len() < min_trips {
        return None;
    }
    let (start, end) = (run[0].start, last.end());
    let node = |t: &Trip, k: usize| t.ins[k].expect("used inputs have nodes");
    let mut ins = Vec::with_capacity(inputs.len());
    let mut operands = Vec::with_capacity(inputs.len());
    for &k in &inputs {
        let vals: Vec<NodeId> = run.iter().map(|t| node(t, k)).collect();
        let before = |n: &NodeId| n.index() < start;
        if vals.iter().all(|&v| v == vals[0]) && before(&vals[0]) {
            ins.push(LoopIn::Invariant);
            operands.push(vec![vals[0]]);
            continue;
        }
        // Carried: fed by the same output of the trip before, on every trip after the first.
        let from = run[0].outs.iter().position(|&o| o == Some(vals[1]));
        let carried = from
            .is_some_and(|j| before(&vals[0]) && (1..run.len()).all(|t| run[t - 1].outs[j] == Some(vals[t])));
        if carried {
            ins.push(LoopIn::Carried { from: from.expect("checked") });
            operands.push(vec![vals[0]]);
        } else if vals.iter().all(before) {
            ins.push(LoopIn::Sliced);
            operands.push(vals);
        } else {
            return None;
        }
    }
    let finals: Vec<NodeId> = last.outs.iter().map(|o| o.expect("body outputs have nodes")).collect();
    // Nothing after the loop reads a trip's values other than the last trip's outputs.
    let inside = |n: NodeId| (start..end).contains(&n.index());
    let escapes = g.nodes[end..].iter().flat_map(|n| n.inputs.iter()).chain(&g.outputs);
    if escapes.copied().any(|n| inside(n) && !finals.contains(&n)) {
        return None;
    }
    let spec = LoopSpec {
        finals: body.outputs.len(),
        body,
        trips: run.len(),
        ins,
        stacked: Vec::new(),
        reverse: false,
    };
    Some(Rolled { start, end, spec, operands, finals })
}

/// `g` with each run's nodes replaced by its loop.
fn rebuild(g: &Graph, runs: Vec<Rolled>) -> Graph {
    let mut b = GraphBuilder::like(g);
    let mut map: Vec<Option<NodeId>> = vec![None; g.nodes.len()];
    let copy = |b: &mut GraphBuilder, map: &mut Vec<Option<NodeId>>, i: usize| {
        let n = &g.nodes[i];
        let inputs = n.inputs.iter().map(|a| map[a.index()].expect("operands precede users")).collect();
        map[i] = Some(b.push(Node { op: n.op.clone(), inputs, ty: n.ty.clone(), span: n.span }));
    };
    let mut at = 0;
    for r in runs {
        while at < r.start {
            copy(&mut b, &mut map, at);
            at += 1;
        }
        let operands: SmallVec<[NodeId; 4]> = (r.operands.iter().zip(&r.spec.ins))
            .map(|(vals, kind)| match kind {
                LoopIn::Sliced => stack(&mut b, g, &map, vals),
                _ => map[vals[0].index()].expect("loop operands precede it"),
            })
            .collect();
        let types = r.spec.out_types();
        let span = r.spec.body.nodes.iter().find_map(|n| n.span);
        let spec = Arc::new(r.spec);
        let l = b.push(Node { op: NodeOp::Loop(spec), inputs: operands, ty: types[0].clone(), span });
        let outs: Vec<NodeId> = std::iter::once(l)
            .chain(types.iter().enumerate().skip(1).map(|(k, ty)| {
                b.push(Node { op: NodeOp::Project(k), inputs: smallvec![l], ty: ty.clone(), span })
            }))
            .collect();
        for (j, &f) in r.finals.iter().enumerate() {
            // An output that is a trip's input passed through keeps that node (before the loop).
            if (r.start..r.end).contains(&f.index()) {
                map[f.index()] = Some(outs[j]);
            }
        }
        at = r.end;
    }
    while at < g.nodes.len() {
        copy(&mut b, &mut map, at);
        at += 1;
    }
    b.finish(g.outputs.iter().map(|o| map[o.index()].expect("outputs are kept")).collect())
}

/// The per-trip values `vals` stacked along a new first dimension: a view of their source when
/// they are its consecutive rows, else a concatenation.
fn stack(b: &mut GraphBuilder, g: &Graph, map: &[Option<NodeId>], vals: &[NodeId]) -> NodeId {
    let m = |n: NodeId| map[n.index()].expect("sliced values precede the loop");
    let ty = g.node(vals[0]).ty.clone();
    let mut dims = vec![vals.len()];
    dims.extend(ty.shape.iter());
    let stacked = TensorType { shape: dims.into(), dtype: ty.dtype };
    if let Some((src, first)) = consecutive_rows(g, vals) {
        let src_ty = &g.node(src).ty;
        let mut v = m(src);
        if first != 0 || src_ty.shape[0] != vals.len() {
            let mut d: Vec<usize> = src_ty.shape.iter().copied().collect();
            d[0] = vals.len();
            let rows = TensorType { shape: d.into(), dtype: src_ty.dtype };
            let op = NodeOp::Op(Op::Narrow(Narrow { dim: 0, start: first, len: vals.len() }));
            v = b.push(Node { op, inputs: smallvec![v], ty: rows, span: None });
        }
        if src_ty.shape.rank() == stacked.shape.rank() {
            return v;
        }
        let op = NodeOp::Op(Op::Reshape(Reshape { shape: stacked.shape.clone() }));
        return b.push(Node { op, inputs: smallvec![v], ty: stacked, span: None });
    }
    let mut one = vec![1];
    one.extend(ty.shape.iter());
    let row = TensorType { shape: one.into(), dtype: ty.dtype };
    let parts: SmallVec<[NodeId; 4]> = (vals.iter())
        .map(|&v| {
            let op = NodeOp::Op(Op::Reshape(Reshape { shape: row.shape.clone() }));
            b.push(Node { op, inputs: smallvec![m(v)], ty: row.clone(), span: None })
        })
        .collect();
    b.push(Node { op: NodeOp::Op(Op::Cat(Axis { dim: 0 })), inputs: parts, ty: stacked, span: None })
}

/// If `vals[t]` is row `first + t` of one value `src` along its first dimension (a `narrow`
/// of length 1, or that `narrow` with the dimension squeezed away by a reshape),
/// `(src, first)`.
fn consecutive_rows(g: &Graph, vals: &[NodeId]) -> Option<(NodeId, usize)> {
    let row = |v: NodeId| -> Option<(NodeId, usize)> {
        let mut n = g.node(v);
        if let NodeOp::Op(Op::Reshape(_)) = n.op {
            let inner = g.node(n.inputs[0]);
            // Only the reshape that drops the narrowed dimension.
            if !inner.ty.shape.iter().skip(1).eq(n.ty.shape.iter()) {
                return None;
            }
            n = inner;
        }
        match &n.op {
            NodeOp::Op(Op::Narrow(p)) if p.dim == 0 && p.len == 1 => Some((n.inputs[0], p.start)),
            _ => None,
        }
    };
    let (src, first) = row(vals[0])?;
    vals.iter().enumerate().all(|(t, v)| row(*v) == Some((src, first + t))).then_some((src, first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Executor;
    use crate::tensor::Tensor;
    use crate::trace::{start, trip_begin, trip_end};

    /// Records `h = tanh(h @ w + x_t); total += sum(h)` over `xs`, each step marked as a trip,
    /// and returns the recording, its trips and the inputs in order.
    fn record(h0: &Tensor, w: &Tensor, xs: &[Tensor], stacked: Option<&Tensor>) -> (Graph, Vec<Trip>) {
        let rec = start();
        rec.register_input(h0, "h0");
        rec.register_input(w, "w");
        match stacked {
            Some(s) => rec.register_input(s, "xs"),
            None => xs.iter().for_each(|x| rec.register_input(x, "xs")),
        }
        let rows: Vec<Tensor> = match stacked {
            Some(s) => (0..xs.len()).map(|t| s.narrow(0, t, 1).squeeze(0)).collect(),
            None => xs.to_vec(),
        };
        let (mut h, mut total) = (h0.clone(), Tensor::scalar(0.0));
        for x in &rows {
            trip_begin(7, &[x.clone(), h.clone(), w.clone(), total.clone()], vec!["x", "h", "w", "total"]);
            h = (h.matmul(w) + x).tanh();
            total = &total + h.sum_all();
            trip_end(&[&h, &total]);
        }
        let out = &h * 2.0;
        let f = rec.finish_speculative(&[&out, &total]).unwrap();
        (f.graph, f.trips)
    }

    fn run(g: &Graph, inputs: &[Tensor]) -> Vec<Vec<f32>> {
        Executor::compile(crate::passes::optimize(g.clone()).0)
            .run(inputs)
            .iter()
            .map(|t| t.to_vec())
            .collect()
    }

    fn loops(g: &Graph) -> Vec<&LoopSpec> {
        g.nodes.iter().filter_map(|n| if let NodeOp::Loop(l) = &n.op { Some(&**l) } else { None }).collect()
    }

    #[test]
    fn agreeing_trips_roll_into_one_loop_that_computes_the_same() {
        crate::manual_seed(1);
        let (h0, w) = (Tensor::randn([3, 4]), Tensor::randn([4, 4]) * 0.5f32);
        let xs: Vec<Tensor> = (0..6).map(|_| Tensor::randn([3, 4])).collect();
        let (g, trips) = record(&h0, &w, &xs, None);
        assert_eq!(trips.len(), 6);
        let (rolled, n) = roll(&g, &trips, 2).expect("the trips agree");
        crate::graph::verify(&rolled).unwrap();
        assert_eq!(n, 6);
        let l = loops(&rolled);
        assert_eq!(l.len(), 1);
        assert_eq!(
            l[0].ins,
            [LoopIn::Sliced, LoopIn::Carried { from: 0 }, LoopIn::Invariant, LoopIn::Carried { from: 1 }]
        );
        assert!(rolled.op_count() < g.op_count() / 2, "{} vs {} ops", rolled.op_count(), g.op_count());
        let mut inputs = vec![h0, w];
        inputs.extend(xs);
        let (a, b) = (run(&g, &inputs), run(&rolled, &inputs));
        for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
            assert!((x - y).abs() <= 1e-6 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }

    #[test]
    fn rows_of_one_value_are_read_in_place_and_too_few_trips_stay_unrolled() {
        crate::manual_seed(2);
        let (h0, w, all) = (Tensor::randn([2, 3]), Tensor::randn([3, 3]), Tensor::randn([5, 2, 3]));
        let xs: Vec<Tensor> = (0..5).map(|t| all.narrow(0, t, 1).squeeze(0)).collect();
        let (g, trips) = record(&h0, &w, &xs, Some(&all));
        let (rolled, _) = roll(&g, &trips, 2).unwrap();
        assert_eq!(rolled.nodes.iter().filter(|n| n.op.name() == "cat").count(), 0, "{rolled}");
        let (a, b) = (run(&g, &[h0.clone(), w.clone(), all.clone()]), run(&rolled, &[h0, w, all]));
        assert_eq!(a, b);
        assert!(roll(&g, &trips, 6).is_none());
    }

    #[test]
    fn a_value_of_an_earlier_trip_read_after_the_loop_keeps_it_unrolled() {
        let (h0, w) = (Tensor::ones([2, 2]), Tensor::ones([2, 2]) * 0.1f32);
        let xs: Vec<Tensor> = (0..4).map(|_| Tensor::ones([2, 2])).collect();
        let rec = start();
        for (t, name) in [(&h0, "h0"), (&w, "w")] {
            rec.register_input(t, name);
        }
        xs.iter().for_each(|x| rec.register_input(x, "xs"));
        let mut h = h0.clone();
        let mut kept = Vec::new();
        for x in &xs {
            trip_begin(9, &[x.clone(), h.clone(), w.clone()], vec!["x", "h", "w"]);
            h = (h.matmul(&w) + x).tanh();
            trip_end(&[&h]);
            kept.push(h.clone());
        }
        let out = &kept[1] + &h;
        let f = rec.finish_speculative(&[&out]).unwrap();
        assert!(roll(&f.graph, &f.trips, 2).is_none());
    }
}
