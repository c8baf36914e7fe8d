//! Elementwise fusion: maximal groups of elementwise nodes with one output shape become one
//! `fused` node running a register program (`janus_kernels::fused`). Operands of other shapes
//! (broadcasts) and views are read through strides; scalar fills become instruction constants.
//! A group never absorbs a node whose other operands depend on the group through outside nodes
//! (that would be a cycle); groups are then emitted in a topological order of their own.

use super::{PassStats, Rewriter};
use crate::DType;
use crate::graph::fused::FusedProgram;
use crate::graph::{Graph, Node, NodeId, NodeOp};
use crate::ops::{BinaryOp, Op, TensorType, UnaryOp};
use janus_kernels::fused::{FBinary, FUnary, Instr, Program, Reg};
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// Nodes per group at most, bounding program size and register files.
const MAX_GROUP: usize = 96;

/// The float class of a fusable node: `Some(dtype)`, or `None` for bool-only logic that fits
/// any group.
fn class(g: &Graph, n: &Node) -> Option<Option<DType>> {
    let op = n.op.as_op()?;
    let in_ty = |k: usize| g.node(n.inputs[k]).ty.dtype;
    let float = |d: DType| d.is_float().then_some(Some(d));
    match op {
        Op::Unary(UnaryOp::Not) => Some(None),
        Op::Unary(_) | Op::Powf(_) | Op::Clamp(_) => float(n.ty.dtype),
        Op::Binary(BinaryOp::And | BinaryOp::Or) => Some(None),
        Op::Binary(_) => float(n.ty.dtype),
        Op::Compare(_) => match in_ty(0) {
            DType::Bool => Some(None),
            d => float(d),
        },
        Op::Where => float(n.ty.dtype),
        Op::Cast(c) => match (in_ty(0), c.dtype) {
            (DType::Bool, d) if d.is_float() => Some(Some(d)),
            (s, DType::Bool | DType::I64) if s.is_float() => Some(Some(s)),
            _ => None,
        },
        _ => None,
    }
}

struct Group {
    members: BTreeSet<usize>,
    class: Option<DType>,
}

/// Groups fusable nodes greedily in node order: each joins the groups of its operands of its
/// shape and class, where that closes no cycle. `loners` (recomputed values) join no operand's
/// group but each other's: their readers' groups take them in. Returns the groups (some emptied by merges)
/// and each node's group.
fn group(g: &Graph, loners: &HashSet<usize>) -> (Vec<Group>, Vec<Option<usize>>) {
    let n = g.nodes.len();
    let classes: Vec<Option<Option<DType>>> = g.nodes.iter().map(|x| class(g, x)).collect();
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    let mut groups: Vec<Group> = Vec::new();
    for i in 0..n {
        let Some(cls) = classes[i] else { continue };
        let shape = &g.nodes[i].ty.shape;
        let mut members: BTreeSet<usize> = BTreeSet::from([i]);
        let mut merged: Vec<usize> = Vec::new();
        let mut class = cls;
        // A loner takes in only other loners (the rest of its recomputed chain).
        let loner = loners.contains(&i);
        for a in g.nodes[i].inputs.iter().filter(|a| !loner || loners.contains(&a.index())) {
            let Some(gid) = group_of[a.index()] else { continue };
            if merged.contains(&gid) || g.nodes[a.index()].ty.shape != *shape {
                continue;
            }
            let other = &groups[gid];
            let joined = match (class, other.class) {
                (Some(x), Some(y)) if x != y => continue,
                (x, y) => x.or(y),
            };
            if members.len() + other.members.len() > MAX_GROUP {
                continue;
            }
            let union: BTreeSet<usize> = members.union(&other.members).copied().collect();
            if closed(g, &union, &group_of, &groups) {
                members = union;
                merged.push(gid);
                class = joined;
            }
        }
        if !closed(g, &members, &group_of, &groups) {
            members = BTreeSet::from([i]);
            merged.clear();
            class = cls;
        }
        let gid = groups.len();
        for &gi in &merged {
            for &m in &groups[gi].members {
                group_of[m] = Some(gid);
            }
            groups[gi].members.clear();
        }
        group_of[i] = Some(gid);
        groups.push(Group { members, class });
    }
    (groups, group_of)
}

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    let (mut groups, mut group_of) = group(&g, &HashSet::new());
    let mut g = g;
    if let Some((recomputing, loners, count)) = rematerialize(&g, &group_of) {
        stats.add("fuse.recomputed", count);
        (groups, group_of) = group(&recomputing, &loners);
        g = recomputing;
    }
    let siblings = merge_siblings(&g, &mut groups, &mut group_of);
    stats.add("fuse.siblings", siblings);
    groups.retain(|gr| !gr.members.is_empty());
    let fused_ops: usize = groups.iter().map(|gr| gr.members.len()).sum();
    stats.add("fuse.groups", groups.len());
    stats.add("fuse.ops", fused_ops);
    emit(&g, groups)
}

/// The one operand of a cheap elementwise function of one value (scalar constants aside, no
/// broadcast): negation, square, |x|, `+ - *` with a constant, a float compared with a
/// constant, or a bool cast to a float (a mask such as a relu gradient's `(y > 0) as f32`).
fn cheap_operand(g: &Graph, node: &Node) -> Option<NodeId> {
    let op = node.op.as_op()?;
    let one_value = || {
        let mut values = node.inputs.iter().copied().filter(|a| scalar_fill(g, *a).is_none());
        let x = values.next()?;
        values.next().is_none().then_some(x)
    };
    let x = match op {
        Op::Unary(UnaryOp::Neg | UnaryOp::Square | UnaryOp::Abs) => node.inputs[0],
        Op::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul) => one_value()?,
        Op::Compare(_) => {
            let x = one_value()?;
            let xt = &g.node(x).ty;
            return (xt.dtype.is_float() && xt.shape == node.ty.shape).then_some(x);
        }
        Op::Cast(c) => {
            let xt = &g.node(node.inputs[0]).ty;
            let mask = xt.dtype == DType::Bool && c.dtype.is_float() && xt.shape == node.ty.shape;
            return mask.then_some(node.inputs[0]);
        }
        _ => return None,
    };
    (node.ty.dtype.is_float() && g.node(x).ty == node.ty).then_some(x)
}

/// Rematerialisation across groups: a group result that is a cheap function of a value stored
/// anyway (`1 - y`, `1 - y^2` of a sigmoid's or tanh's `y`, as their gradients need them), and
/// that only other groups read, is recomputed by each reader from that value instead of being
/// stored. An LSTM cell's forward program stored twelve `[B, H]` results for the backward, five
/// of them such functions of the other seven; each is written once and read once through
/// memory, where recomputing it is one instruction over a tile in L1. Returns the graph with
/// the readers' copies (their ids, which join no operand's group), and how many nodes were
/// copied, or `None` when there is nothing to recompute.
fn rematerialize(g: &Graph, group_of: &[Option<usize>]) -> Option<(Graph, HashSet<usize>, usize)> {
    let n = g.nodes.len();
    let mut users: Vec<SmallVec<[usize; 4]>> = vec![SmallVec::new(); n];
    for (i, node) in g.nodes.iter().enumerate() {
        for a in &node.inputs {
            if !users[a.index()].contains(&i) {
                users[a.index()].push(i);
            }
        }
    }
    let outputs: HashSet<usize> = g.outputs.iter().map(|o| o.index()).collect();
    // Per recomputed value: its chain of cheap nodes from the anchor's side, ending with it.
    let mut plan: HashMap<usize, SmallVec<[usize; 3]>> = HashMap::new();
    for m in 0..n {
        let Some(gm) = group_of[m] else { continue };
        let outside = || users[m].iter().filter(|&&u| group_of[u] != Some(gm));
        let fusable_readers =
            outside().all(|&u| group_of[u].is_some() && g.nodes[u].ty.shape == g.nodes[m].ty.shape);
        if outputs.contains(&m) || outside().next().is_none() || !fusable_readers {
            continue;
        }
        let Some(mut x) = cheap_operand(g, &g.nodes[m]) else { continue };
        let mut chain: SmallVec<[usize; 3]> = SmallVec::from_slice(&[m]);
        while group_of[x.index()] == Some(gm) && chain.len() < 3 {
            let Some(y) = cheap_operand(g, g.node(x)) else { break };
            chain.push(x.index());
            x = y;
        }
        let anchor = x.index();
        // The readers load the anchor instead: it must be stored anyway (read by its group from
        // outside, or by some reader outside that is not itself recomputed), and not be
        // recomputed itself (its readers' copies would keep the original stored as well).
        if plan.contains_key(&anchor) {
            continue;
        }
        let stored = group_of[anchor] != Some(gm)
            || outputs.contains(&anchor)
            || users[anchor]
                .iter()
                .any(|&u| group_of[u] != Some(gm) && cheap_operand(g, &g.nodes[u]).is_none());
        if stored {
            chain.reverse();
            plan.insert(m, chain);
        }
    }
    if plan.is_empty() {
        return None;
    }
    let mut r = Rewriter::new(g);
    let mut copies: Vec<NodeId> = Vec::new();
    for i in 0..n {
        let mut node = r.remapped(i);
        for (k, a) in g.nodes[i].inputs.iter().enumerate() {
            let Some(chain) = plan.get(&a.index()) else { continue };
            if group_of[i].is_none() || group_of[i] == group_of[a.index()] {
                continue;
            }
            // This reader's own copy of the chain, from the anchor.
            let mut prev: Option<(usize, NodeId)> = None;
            for &c in chain {
                let mut copy = r.remapped(c);
                if let Some((old, new)) = prev {
                    for (op, o) in copy.inputs.iter_mut().zip(&g.nodes[c].inputs) {
                        if o.index() == old {
                            *op = new;
                        }
                    }
                }
                let id = r.b.push(copy);
                copies.push(id);
                prev = Some((c, id));
            }
            node.inputs[k] = prev.expect("chains are not empty").1;
        }
        let id = r.b.push(node);
        r.map[i] = Some(id);
    }
    let count = copies.len();
    // The stored originals nothing reads now go.
    let (g, map) = super::dce::run_mapped(r.finish(), &mut PassStats::default());
    let loners = copies.iter().filter_map(|c| map[c.index()]).map(NodeId::index).collect();
    Some((g, loners, count))
}

/// Sibling fusion: a group whose outside operands all feed another group of its shape and
/// class joins that group, so the operands are read once and one step runs instead of two.
/// Neither waits longer than before: the joined group's operands are the larger group's
/// (scalar constants aside). An LSTM cell's backward computed one gate's gradient in a program
/// of its own, reading three of the eight values the program for the other three read (1.9 µs
/// per `[16, 128]` half in the LSTM step's timeline). `group_of` follows the moves. Returns how
/// many groups joined another.
fn merge_siblings(g: &Graph, groups: &mut [Group], group_of: &mut [Option<usize>]) -> usize {
    let operands = |gr: &Group| -> BTreeSet<usize> {
        let mut ops = BTreeSet::new();
        for &m in &gr.members {
            // Scalar fills (instruction constants, ready from the start) do not count.
            let outside = g.nodes[m].inputs.iter().filter(|&&a| scalar_fill(g, a).is_none());
            ops.extend(outside.map(|a| a.index()).filter(|a| !gr.members.contains(a)));
        }
        ops
    };
    let mut ops: Vec<BTreeSet<usize>> = groups.iter().map(operands).collect();
    // Per node, the groups reading it.
    let mut readers: HashMap<usize, Vec<usize>> = HashMap::new();
    for (gid, o) in ops.iter().enumerate() {
        for &x in o {
            readers.entry(x).or_default().push(gid);
        }
    }
    let mut joined = 0;
    for b in 0..groups.len() {
        let Some(&first) = ops[b].first() else { continue };
        let shape = &g.nodes[*groups[b].members.first().unwrap()].ty.shape;
        let into = readers[&first].iter().copied().find(|&a| {
            let (ga, gb) = (&groups[a], &groups[b]);
            a != b
                && !ga.members.is_empty()
                && ga.members.len() >= gb.members.len()
                && ga.members.len() + gb.members.len() <= MAX_GROUP
                && g.nodes[*ga.members.first().unwrap()].ty.shape == *shape
                && (ga.class.is_none() || gb.class.is_none() || ga.class == gb.class)
                && ops[b].is_subset(&ops[a])
                && closed(g, &ga.members.union(&gb.members).copied().collect(), group_of, groups)
        });
        let Some(a) = into else { continue };
        let moved = std::mem::take(&mut groups[b].members);
        moved.iter().for_each(|&m| group_of[m] = Some(a));
        groups[a].class = groups[a].class.or(groups[b].class);
        groups[a].members.extend(moved);
        ops[b].clear();
        joined += 1;
    }
    joined
}

/// Whether no outside operand of `set` depends on a member of `set`, walking back from the
/// outside operands; other groups count as units (reaching one member reaches all of its
/// operands). Nodes numbered below the set's first member cannot depend on it, which keeps the
/// walk short, but a group can mix early and late nodes, so this check can miss a cycle through
/// such a group; `order_units` catches those and splits the group.
fn closed(g: &Graph, set: &BTreeSet<usize>, group_of: &[Option<usize>], groups: &[Group]) -> bool {
    let lo = *set.first().unwrap();
    let mut seen: HashSet<usize> = HashSet::new();
    let mut seen_groups: HashSet<usize> = HashSet::new();
    let mut stack: Vec<usize> = Vec::new();
    for &m in set {
        for a in &g.nodes[m].inputs {
            let a = a.index();
            if !set.contains(&a) && a > lo && seen.insert(a) {
                stack.push(a);
            }
        }
    }
    while let Some(x) = stack.pop() {
        let mut sources: SmallVec<[usize; 8]> = SmallVec::from_slice(&[x]);
        if let Some(h) = group_of[x]
            && seen_groups.insert(h)
        {
            sources.extend(groups[h].members.iter().copied().filter(|&m| m > lo));
        }
        for src in sources {
            for a in &g.nodes[src].inputs {
                let a = a.index();
                if set.contains(&a) {
                    return false;
                }
                if a > lo && seen.insert(a) {
                    stack.push(a);
                }
            }
        }
    }
    true
}

/// Rebuilds the graph with each group as one fused node (plus projections), in a topological
/// order of units that follows the original order where it can.
fn emit(g: &Graph, mut groups: Vec<Group>) -> Graph {
    let (units, order) = loop {
        let units = make_units(g, &groups);
        match order_units(g, &units) {
            Ok(order) => break (units, order),
            Err(stuck) => {
                // A cycle through a group the cheap check missed: run the largest stuck group's
                // nodes as separate groups instead, and order again.
                let worst = stuck
                    .iter()
                    .copied()
                    .filter(|&u| u < groups.len())
                    .max_by_key(|&u| groups[u].members.len());
                let gone = groups
                    .swap_remove(worst.expect("the node graph is acyclic, so a cycle involves a group"));
                for m in gone.members {
                    groups.push(Group { members: BTreeSet::from([m]), class: gone.class });
                }
            }
        }
    };
    let uses = outside_uses(g, &unit_index(g, &units));
    let mut r = Rewriter::new(g);
    for u in order {
        if u < groups.len() {
            emit_group(&mut r, &units[u], groups[u].class.unwrap_or(DType::F32), &uses);
        } else {
            r.copy(units[u][0]);
        }
    }
    r.finish()
}

/// Units of execution: each group (first, by group index), then each node outside every group.
fn make_units(g: &Graph, groups: &[Group]) -> Vec<Vec<usize>> {
    let mut grouped = vec![false; g.nodes.len()];
    let mut units: Vec<Vec<usize>> = groups
        .iter()
        .map(|gr| {
            gr.members.iter().for_each(|&m| grouped[m] = true);
            gr.members.iter().copied().collect()
        })
        .collect();
    units.extend((0..g.nodes.len()).filter(|&i| !grouped[i]).map(|i| vec![i]));
    units
}

fn unit_index(g: &Graph, units: &[Vec<usize>]) -> Vec<usize> {
    let mut unit_of = vec![0; g.nodes.len()];
    for (u, members) in units.iter().enumerate() {
        for &m in members {
            unit_of[m] = u;
        }
    }
    unit_of
}

/// A topological order of the units (earliest last member first), or the units left over when
/// they depend on each other in a cycle.
fn order_units(g: &Graph, units: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let unit_of = unit_index(g, units);
    let mut deps: Vec<HashSet<usize>> = vec![HashSet::new(); units.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); units.len()];
    for (u, members) in units.iter().enumerate() {
        for &m in members {
            for a in &g.nodes[m].inputs {
                let du = unit_of[a.index()];
                if du != u && deps[u].insert(du) {
                    users[du].push(u);
                }
            }
        }
    }
    let position = |u: usize| *units[u].iter().max().unwrap();
    let mut pending: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> =
        (0..units.len()).filter(|&u| pending[u] == 0).map(|u| Reverse((position(u), u))).collect();
    let mut order = Vec::with_capacity(units.len());
    while let Some(Reverse((_, u))) = ready.pop() {
        order.push(u);
        for &v in &users[u] {
            pending[v] -= 1;
            if pending[v] == 0 {
                ready.push(Reverse((position(v), v)));
            }
        }
    }
    if order.len() == units.len() {
        Ok(order)
    } else {
        Err((0..units.len()).filter(|&u| pending[u] > 0).collect())
    }
}

/// For each node, whether its value is needed outside its own unit (or is a graph output).
fn outside_uses(g: &Graph, unit_of: &[usize]) -> Vec<bool> {
    let mut out = vec![false; g.nodes.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for a in &node.inputs {
            if unit_of[a.index()] != unit_of[i] {
                out[a.index()] = true;
            }
        }
    }
    for o in &g.outputs {
        out[o.index()] = true;
    }
    out
}

fn scalar_fill(g: &Graph, id: NodeId) -> Option<f64> {
    match &g.node(id).op {
        NodeOp::Op(Op::Full(f)) => Some(f.value.get()),
        _ => None,
    }
}

fn unary_fn(op: &Op) -> Option<FUnary> {
    Some(match op {
        Op::Unary(u) => FUnary::Op(*u),
        Op::Powf(p) => FUnary::Powf(p.exponent.get().to_bits()),
        Op::Clamp(c) => FUnary::Clamp(c.min.get().to_bits(), c.max.get().to_bits()),
        _ => return None,
    })
}

fn binary_fn(op: &Op) -> Option<FBinary> {
    Some(match op {
        Op::Binary(b) => FBinary::Op(*b),
        Op::Compare(c) => FBinary::Cmp(*c),
        _ => return None,
    })
}

/// Register allocation over one tile program: a register is reused once its value's last
/// reader ran, and an instruction never writes one of its own operands.
struct Regs {
    free: Vec<Reg>,
    count: Reg,
}

impl Regs {
    fn alloc(&mut self) -> Reg {
        self.free.pop().unwrap_or_else(|| {
            self.count += 1;
            self.count - 1
        })
    }
}

/// Per operand of a fused member, the scalar it is when it becomes an instruction constant: a
/// binary op's fill operand, at most one of the two (folding skips constants over its size
/// limit, so both can be fills; the left one is then loaded).
fn const_operands(g: &Graph, node: &Node) -> SmallVec<[Option<f64>; 3]> {
    let binary = node.op.as_op().is_some_and(|op| binary_fn(op).is_some());
    let mut consts: SmallVec<[Option<f64>; 3]> =
        node.inputs.iter().map(|a| if binary { scalar_fill(g, *a) } else { None }).collect();
    if consts.len() == 2 && consts.iter().all(Option::is_some) {
        consts[0] = None;
    }
    consts
}

// Long by design: one arm per fusable node kind, emitting into one register program.
fn emit_group(r: &mut Rewriter<'_>, members: &[usize], dtype: DType, escapes: &[bool]) {
    let g = r.old;
    let set: HashSet<usize> = members.iter().copied().collect();
    let last = *members.last().unwrap();
    // How many reads of each value remain inside the group (to free registers).
    let mut reads: HashMap<usize, usize> = HashMap::new();
    for &m in members {
        let consts = const_operands(g, &g.nodes[m]);
        for (k, a) in g.nodes[m].inputs.iter().enumerate() {
            if consts[k].is_none() {
                *reads.entry(a.index()).or_default() += 1;
            }
        }
    }
    let mut regs = Regs { free: Vec::new(), count: 0 };
    let mut reg_of: HashMap<usize, Reg> = HashMap::new();
    let mut instrs: Vec<Instr> = Vec::new();
    let mut inputs: Vec<NodeId> = Vec::new();
    let mut input_dtypes: Vec<DType> = Vec::new();
    let mut outputs: Vec<(usize, Reg)> = Vec::new();
    let mut ops: Vec<&'static str> = Vec::new();
    for &m in members {
        let node = &g.nodes[m];
        let op = node.op.as_op().unwrap();
        ops.push(op.name());
        // Operand registers, loading outside values on first use.
        let mut operand = |a: NodeId, regs: &mut Regs, instrs: &mut Vec<Instr>| -> Reg {
            if let Some(&reg) = reg_of.get(&a.index()) {
                return reg;
            }
            let reg = regs.alloc();
            let input = inputs.iter().position(|x| *x == a).unwrap_or_else(|| {
                inputs.push(a);
                input_dtypes.push(g.node(a).ty.dtype);
                inputs.len() - 1
            });
            instrs.push(Instr::Load { dst: reg, input: input as u16 });
            reg_of.insert(a.index(), reg);
            reg
        };
        let consts = const_operands(g, node);
        let mut srcs: SmallVec<[Reg; 3]> = SmallVec::new();
        for (k, a) in node.inputs.iter().enumerate() {
            if consts[k].is_none() {
                srcs.push(operand(*a, &mut regs, &mut instrs));
            }
        }
        // A bool -> float cast that reads its operand last (an operand that is no output of
        // the group): the operand's 0/1 register is the result, with no instruction. The copy
        // was a pass per tile, a third of a ReLU backward's `(x > 0) as f32 * g`.
        let a0 = node.inputs.first().map(|a| a.index());
        let alias = matches!(op, Op::Cast(c) if c.dtype != DType::Bool)
            && a0.is_some_and(|a| {
                g.nodes[a].ty.dtype == DType::Bool
                    && reads.get(&a) == Some(&1)
                    && !(set.contains(&a) && escapes[a])
            });
        let d = if alias { srcs[0] } else { regs.alloc() };
        if !alias {
            instrs.push(match (unary_fn(op), binary_fn(op), op) {
                (Some(f), _, _) => Instr::Unary { dst: d, f, a: srcs[0] },
                (_, Some(f), _) => match (consts[0], consts[1]) {
                    (None, None) => Instr::Binary { dst: d, f, a: srcs[0], b: srcs[1] },
                    (None, Some(c)) => {
                        Instr::BinaryConst { dst: d, f, a: srcs[0], c: c.to_bits(), const_left: false }
                    }
                    (Some(c), None) => {
                        Instr::BinaryConst { dst: d, f, a: srcs[0], c: c.to_bits(), const_left: true }
                    }
                    (Some(_), Some(_)) => unreachable!("one of two constant operands is loaded"),
                },
                (_, _, Op::Where) => Instr::Select { dst: d, c: srcs[0], a: srcs[1], b: srcs[2] },
                // bool -> float: 0/1 registers already are the values; NonZero copies them.
                (_, _, Op::Cast(c))
                    if c.dtype == DType::Bool || g.node(node.inputs[0]).ty.dtype == DType::Bool =>
                {
                    Instr::Unary { dst: d, f: FUnary::NonZero, a: srcs[0] }
                }
                (_, _, Op::Cast(_)) => Instr::Unary { dst: d, f: FUnary::Trunc, a: srcs[0] },
                _ => unreachable!("only fusable ops reach a group"),
            });
        }
        // Free operand registers whose last in-group read this was (outside values included).
        for (k, a) in node.inputs.iter().enumerate() {
            if consts[k].is_some() {
                continue;
            }
            let left = reads.get_mut(&a.index()).unwrap();
            *left -= 1;
            let keep = *left > 0 || (set.contains(&a.index()) && escapes[a.index()]);
            // (An aliased operand's register now holds the cast's value.)
            if !keep && !alias {
                regs.free.push(reg_of[&a.index()]);
            }
        }
        reg_of.insert(m, d);
        if escapes[m] {
            outputs.push((m, d));
        }
        if reads.get(&m).copied().unwrap_or(0) == 0 && !escapes[m] {
            regs.free.push(d);
        }
    }
    // Outputs ordered with the last member first is not required; keep member order.
    let mut program =
        Program { instrs, num_regs: regs.count, outputs: outputs.iter().map(|o| o.1).collect() };
    // A relu gradient's `mask * g` as one pass on the CPU (`janus_kernels::fused::masks`).
    program.adjoin_masks();
    let out_types: Vec<TensorType> = outputs.iter().map(|o| g.nodes[o.0].ty.clone()).collect();
    let fp = FusedProgram {
        program,
        dtype,
        shape: g.nodes[last].ty.shape.clone(),
        inputs: input_dtypes,
        outputs: out_types.clone(),
        ops,
    };
    let args: SmallVec<[NodeId; 4]> = inputs.iter().map(|a| r.get(*a)).collect();
    let span = g.nodes[outputs[0].0].span;
    let fused =
        r.b.push(Node { op: NodeOp::Fused(Arc::new(fp)), inputs: args, ty: out_types[0].clone(), span });
    r.map[outputs[0].0] = Some(fused);
    for (k, (m, _)) in outputs.iter().enumerate().skip(1) {
        let id = r.b.push(Node {
            op: NodeOp::Project(k),
            inputs: SmallVec::from_slice(&[fused]),
            ty: out_types[k].clone(),
            span: g.nodes[*m].span,
        });
        r.map[*m] = Some(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::passes::testing::{count, trace};

    #[test]
    fn fuses_a_chain_with_broadcast_and_two_outputs() {
        let g = trace(&[Tensor::ones([4, 8]), Tensor::ones([8])], |x| {
            let a = (&x[0] * 2.0 + &x[1]).sigmoid();
            let b = a.tanh() * &x[0];
            vec![a, b]
        });
        let mut s = PassStats::default();
        let out = run(g, &mut s);
        assert_eq!((s.get("fuse.groups"), s.get("fuse.ops")), (1, 5), "{out}");
        assert_eq!((count(&out, "fused"), count(&out, "project"), count(&out, "mul")), (1, 1, 0), "{out}");
    }

    /// Two groups with no edge between them: the one reading a subset of the other's operands
    /// joins it; one reading an operand the other does not read stays apart.
    #[test]
    fn a_sibling_reading_a_subset_of_the_operands_joins_the_group() {
        let f = |x: &[Tensor]| {
            let big = (&x[0] * &x[1] + &x[2]).tanh();
            let sibling = &x[0] * &x[2] - 1.0;
            let apart = &x[3] * &x[0] + 1.0;
            vec![big, sibling, apart]
        };
        let x: Vec<Tensor> = (0..4).map(|k| Tensor::randn([4, 4]) * (k as f64 + 0.5)).collect();
        let mut s = PassStats::default();
        let out = run(trace(&x, f), &mut s);
        crate::graph::verify(&out).unwrap();
        assert_eq!((s.get("fuse.siblings"), s.get("fuse.groups"), count(&out, "fused")), (1, 2, 2), "{out}");
        let (fused, eager) = (crate::exec::Executor::compile(out).run(&x), f(&x));
        for (a, b) in fused.iter().zip(&eager) {
            assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "fused and eager bits");
        }
    }

    /// `1 - y` of a stored `y`, read only by a group after a product, is recomputed there, and
    /// a chain `1 - t^2` moves whole: the first program stores neither.
    #[test]
    fn cheap_functions_of_stored_values_are_recomputed_by_their_readers() {
        let g = trace(&[Tensor::ones([4, 4]), Tensor::ones([4, 4])], |x| {
            let y = x[0].sigmoid();
            let t = x[0].tanh();
            let (d, e) = (1.0 - &y, 1.0 - t.square());
            let m = (&y + &t).matmul(&x[1]);
            // The later group reads `y` and `t` too (as gradients read a sigmoid's result).
            vec![(&m * &d).tanh() * &e * &y + &t]
        });
        let mut s = PassStats::default();
        let out = run(g, &mut s);
        crate::graph::verify(&out).unwrap();
        assert_eq!(s.get("fuse.recomputed"), 3, "{out}");
        // The first program stores `y`, `t` and `y + t`, not `1 - y` and `1 - t^2` (which
        // would be two more projections).
        assert_eq!((count(&out, "fused"), count(&out, "project")), (2, 2), "{out}");
    }

    /// A ReLU backward's mask, `(x > 0) as f32 * g` (the bool read once): the cast takes the
    /// comparison's register with no instruction; and a bool read again after its cast keeps its
    /// register and gets the copy. Both give eager's bits.
    #[test]
    fn a_bool_cast_read_last_takes_its_operands_register() {
        let f = |x: &[Tensor]| {
            let once = x[0].gt(&x[2]).to_dtype(DType::F32) * &x[1];
            let mask = x[1].lt(&x[2]);
            let twice = mask.to_dtype(DType::F32) * &x[0] + mask.to_dtype(DType::F64).to_dtype(DType::F32);
            vec![once, twice]
        };
        let x: Vec<Tensor> = vec![Tensor::randn([8, 16]), Tensor::randn([8, 16]), Tensor::zeros([8, 16])];
        let out = run(trace(&x, f), &mut PassStats::default());
        crate::graph::verify(&out).unwrap();
        let copies: usize = (out.nodes.iter())
            .filter_map(|n| match &n.op {
                NodeOp::Fused(fp) => Some(
                    fp.program
                        .instrs
                        .iter()
                        .filter(|i| matches!(i, Instr::Unary { f: FUnary::NonZero, .. }))
                        .count(),
                ),
                _ => None,
            })
            .sum();
        assert!(copies <= 1, "{copies} bool copies: {out}");
        let (fused, eager) = (crate::exec::Executor::compile(out).run(&x), f(&x));
        for (a, b) in fused.iter().zip(&eager) {
            let bits = |t: &Tensor| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "fused and eager bits");
        }
    }

    #[test]
    fn matmul_between_splits_groups_without_cycles() {
        let g = trace(&[Tensor::ones([4, 4])], |x| {
            let a = x[0].exp();
            let m = a.matmul(&x[0]); // depends on a
            vec![(&a + &m).tanh()] // joins a's shape, but through the matmul
        });
        let mut s = PassStats::default();
        let out = run(g, &mut s);
        crate::graph::verify(&out).unwrap();
        assert_eq!(s.get("fuse.groups"), 2, "{out}");
    }
}
