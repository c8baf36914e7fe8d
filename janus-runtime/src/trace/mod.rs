//! Tracing by execution (see docs/design.md, "Recording by execution"): while a recording is
//! active on this thread, every op computes as usual *and* appends a node. Tensors registered as
//! inputs become graph inputs; an op on an unregistered tensor, a host read, or a panic (even a
//! caught one) leaves the values correct but marks the recording unusable, with a typed reason.
//! Recordings nest (a thread-local stack); ops record into the innermost.
//!
//! Identity is a tensor's unique id: the node of each tensor lives in a side table keyed by id,
//! which holds a strong reference so the id stays meaningful until the recording ends.
//!
//! **Autograd boundaries.** The symbolic backward of a recording must cut the autograd graph
//! exactly where eager mode cut it. So the recording tracks, per node, whether the value is
//! differentiable in the graph (it depends, through differentiable ops, on an input that needs
//! gradients or on a fresh leaf), and compares that with what eager mode did:
//! - where eager mode attached no autograd node to a differentiable value (an op under
//!   `no_grad`, including the VJP ops that a `backward()` inside the block runs), the value is
//!   bound to an [`Op::Detach`] of the op's node;
//! - where an op reads a handle without gradient history whose node is differentiable
//!   (`detach()`, the output copy an autograd node saves), it reads a `Detach` of that node;
//! - `requires_grad()` appends an [`Op::FreshLeaf`]: a new leaf, whose gradient the
//!   derivation reports and to which no gradient flows from it.
//!
//! Eager mode attaching history to a value the graph finds not differentiable cannot be
//! reproduced, and makes the recording unusable.

mod roll;

pub(crate) use roll::{Trip, roll_finished};

use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{Op, TensorType};
use crate::tensor::Tensor;
use smallvec::{SmallVec, smallvec};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::panic::Location;

/// Why a recording cannot become a graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// A tensor value was read on the host (`item`, `to_vec`, `to_bool`, formatting, saving).
    HostRead {
        /// Which read.
        what: &'static str,
    },
    /// An op used a tensor that is neither a registered input nor produced inside the recording
    /// (a global, or a tensor hidden in an opaque value).
    Unregistered {
        /// The op that used it.
        op: &'static str,
        /// Its shape, to help find it.
        shape: crate::Shape,
        /// Where the op was called.
        at: &'static Location<'static>,
    },
    /// An output is not produced inside the recording.
    UnknownOutput {
        /// Index of the output.
        index: usize,
    },
    /// The recording was abandoned (a panic unwound through it).
    Aborted,
    /// A panic happened while recording, even if user code caught it: the recorded path
    /// depends on it.
    Panicked,
    /// Eager mode gave a value gradient history that the graph cannot reproduce.
    GradHistory {
        /// The op whose result it was.
        op: &'static str,
        /// Where the op was called.
        at: &'static Location<'static>,
    },
    /// An output is another handle of an input's value (not the input itself).
    OutputAliasesInput {
        /// Index of the output.
        index: usize,
    },
    /// A host statement (a macro such as `println!`, an effect on a static) ran during a
    /// whole-function recording: a replay would skip it.
    HostStatement {
        /// Where it is.
        line: u32,
    },
    /// A helper call returned a host scalar that no key can see (a value it read from a
    /// global, a thread-local or a `static`): a graph would bake it in.
    HostValue {
        /// The call's source text.
        call: &'static str,
        /// Made for a host effect (it returned `()`), rather than for a value.
        effect: bool,
        /// Where it is.
        at: &'static Location<'static>,
    },
    /// User code moved the random stream (`manual_seed`, `set_stream_position`) during the
    /// recording: a replay would skip it.
    Reseeded {
        /// Which function.
        what: &'static str,
    },
    /// Values on two devices (other than rank-0 CPU scalars): a graph runs on one device.
    MixedDevices {
        /// The device seen first.
        first: crate::Device,
        /// The other one.
        other: crate::Device,
    },
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::HostRead { what } => write!(f, "host read `{what}()` during the recording"),
            Unusable::Unregistered { op, shape, at } => write!(
                f,
                "`{op}` at {}:{} used a tensor {shape:?} that is not an input (a global, or inside an opaque value)",
                at.file(),
                at.line()
            ),
            Unusable::UnknownOutput { index } => {
                write!(f, "output {index} was not computed inside the recording")
            }
            Unusable::Aborted => write!(f, "the recording was abandoned by a panic"),
            Unusable::Panicked => write!(f, "a panic happened during the recording (even if caught)"),
            Unusable::GradHistory { op, at } => write!(
                f,
                "`{op}` at {}:{} has gradient history that the graph cannot reproduce",
                at.file(),
                at.line()
            ),
            Unusable::OutputAliasesInput { index } => {
                write!(f, "output {index} is another handle of an input's value")
            }
            Unusable::HostStatement { line } => {
                write!(
                    f,
                    "a host statement (line {line}) runs on every call: a whole-function graph would skip it"
                )
            }
            Unusable::HostValue { call, effect: false, at } => write!(
                f,
                "`{call}` at {}:{} returned a host value no key can see (it runs on every call; pass it as an argument to key the graph on it)",
                at.file(),
                at.line()
            ),
            Unusable::HostValue { call, effect: true, at } => write!(
                f,
                "`{call}` at {}:{} has a host effect (it runs on every call, which a graph would skip)",
                at.file(),
                at.line()
            ),
            Unusable::Reseeded { what } => {
                write!(f, "`{what}` moved the random stream during the recording: a replay would skip it")
            }
            Unusable::MixedDevices { first, other } => write!(
                f,
                "values on {first} and {other} in one block (move data with to_device outside the block)"
            ),
        }
    }
}

/// The state of one active recording.
pub struct Recording {
    pub(crate) builder: GraphBuilder,
    values: HashMap<u64, NodeId>,
    keep: Vec<Tensor>,
    unusable: Option<Unusable>,
    /// The tensor ids of the roots `backward()` was called on during the recording.
    backward_roots: Vec<u64>,
    /// Whether autograd boundaries are recorded (see the module docs): on for recordings of
    /// user code, off while a derivation records VJP rules over symbolic values.
    boundaries: bool,
    /// Per node: whether its value is differentiable in the graph (with `boundaries`).
    active: Vec<bool>,
    /// The `Detach` node of each node that needed one.
    detached: HashMap<NodeId, NodeId>,
    /// The tensor id of each input node.
    input_ids: HashMap<NodeId, u64>,
    /// This thread's panic count when the recording started.
    panics_at_start: u64,
    /// The device of the recorded values (rank-0 CPU scalars aside), once one is seen.
    device: Option<crate::Device>,
    /// A whole-function recording (see docs/design.md, "Speculation"): decisions on tensor
    /// values become asserts, host statements make it unusable.
    speculative: bool,
    /// The decisions on tensor values taken, as asserts: `(predicate node, value taken)`.
    asserts: Vec<(NodeId, bool)>,
    /// The host decisions taken (`if` and `while` conditions), in order: the path.
    path: Vec<Decision>,
    /// The first place the statements read a tensor's dims (`dims()`, `shape()`, `numel()`),
    /// if they did: a size that reached host code, which a shape-polymorphic graph cannot
    /// follow.
    shape_read: Option<&'static Location<'static>>,
    /// Runs of inner blocks' statements (a staged loop's trips), for rolling (`roll.rs`).
    trips: Vec<Trip>,
    /// The trips that began and have not ended, innermost last.
    open_trips: Vec<usize>,
    /// Whether an input is a stacked sequence (see `register_rows`).
    stacked: bool,
}

impl Recording {
    fn new(builder: GraphBuilder, boundaries: bool) -> Self {
        Recording {
            builder,
            values: HashMap::new(),
            keep: Vec::new(),
            unusable: None,
            backward_roots: Vec::new(),
            boundaries,
            active: Vec::new(),
            detached: HashMap::new(),
            input_ids: HashMap::new(),
            panics_at_start: crate::panics::count(),
            device: None,
            speculative: false,
            asserts: Vec::new(),
            path: Vec::new(),
            shape_read: None,
            trips: Vec::new(),
            open_trips: Vec::new(),
            stacked: false,
        }
    }

    /// Notes `t`'s device: a graph holds values of one device (plus rank-0 CPU scalars, which
    /// ops on any device accept).
    fn note_device(&mut self, t: &Tensor) {
        let d = t.device();
        if d == crate::Device::Cpu && t.rank() == 0 {
            return;
        }
        match self.device {
            None => self.device = Some(d),
            Some(first) if first != d => self.mark(Unusable::MixedDevices { first, other: d }),
            Some(_) => {}
        }
    }

    /// Maps `t` to `node` (its value in the graph).
    pub(crate) fn bind(&mut self, t: &Tensor, node: NodeId) {
        self.values.insert(t.id(), node);
        self.keep.push(t.clone());
    }

    pub(crate) fn node_of(&self, t: &Tensor) -> Option<NodeId> {
        self.values.get(&t.id()).copied()
    }

    fn mark(&mut self, why: Unusable) {
        if self.unusable.is_none() {
            self.unusable = Some(why);
        }
    }

    fn set_active(&mut self, id: NodeId, on: bool) {
        if self.boundaries {
            if self.active.len() <= id.index() {
                self.active.resize(id.index() + 1, false);
            }
            self.active[id.index()] = on;
        }
    }

    fn is_active(&self, id: NodeId) -> bool {
        self.active.get(id.index()).copied().unwrap_or(false)
    }

    /// `n` with gradients stopped: one `Detach` node per node, made on first use.
    fn detach_of(&mut self, n: NodeId) -> NodeId {
        if let Some(&d) = self.detached.get(&n) {
            return d;
        }
        let ty = self.builder.node(n).ty.clone();
        let d = self.builder.push(Node { op: NodeOp::Op(Op::Detach), inputs: smallvec![n], ty, span: None });
        self.set_active(d, false);
        self.detached.insert(n, d);
        d
    }

    /// The node an op reads for operand `t` bound to `n`: a `Detach` of it where eager mode
    /// sees no gradient history but the graph value is differentiable.
    fn operand(&mut self, t: &Tensor, n: NodeId) -> NodeId {
        if self.boundaries && !t.needs_grad() && self.is_active(n) { self.detach_of(n) } else { n }
    }
}

thread_local! {
    static STACK: RefCell<Vec<Recording>> = const { RefCell::new(Vec::new()) };
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Whether a recording is active on this thread (cheap: one thread-local read).
#[inline]
pub(crate) fn is_recording() -> bool {
    DEPTH.with(Cell::get) > 0
}

pub(crate) fn with_top<R>(f: impl FnOnce(&mut Recording) -> R) -> Option<R> {
    if !is_recording() {
        return None;
    }
    STACK.with(|s| s.borrow_mut().last_mut().map(f))
}

#[cold]
fn record_op(
    op: &Op,
    inputs: &[&Tensor],
    out: &Tensor,
    alias: Option<&Tensor>,
    at: &'static Location<'static>,
) {
    with_top(|r| {
        if r.unusable.is_some() {
            return;
        }
        let mut args = SmallVec::new();
        let mut any_active = false;
        for t in inputs {
            match r.node_of(t) {
                Some(n) => {
                    let n = r.operand(t, n);
                    any_active |= r.is_active(n);
                    args.push(n);
                }
                None => {
                    r.mark(Unusable::Unregistered { op: op.name(), shape: t.shape_ref().clone(), at });
                    return;
                }
            }
        }
        let ty = TensorType { shape: out.shape_ref().clone(), dtype: out.dtype() };
        let id = r.builder.push(Node { op: NodeOp::Op(op.clone()), inputs: args, ty, span: Some(at) });
        let active = any_active && op.is_differentiable();
        r.set_active(id, active);
        let mut bound = id;
        if r.boundaries && active != out.needs_grad() {
            if active {
                // Eager mode attached no autograd node (`no_grad`): neither does the graph.
                bound = r.detach_of(id);
            } else {
                r.mark(Unusable::GradHistory { op: op.name(), at });
            }
        }
        r.bind(out, bound);
        if let Some(a) = alias {
            r.bind(a, id); // without history: `operand` detaches it where an op reads it
        }
        if out.is_concrete() {
            r.note_device(out);
            // A copy to the host inside a graph on a device would synchronise mid-graph and
            // change where the value lives: such a block runs eagerly.
            if let Op::ToDevice(t) = op
                && let Some(src) = inputs.first().map(|t| t.device()).filter(|&d| d != t.device)
                && t.device == crate::Device::Cpu
            {
                r.mark(Unusable::MixedDevices { first: src, other: t.device });
            }
        }
    });
}

/// Called when the statements of an inner block (`site`) start inside the active recording,
/// with its input leaves and their names: a trip, when the block is a staged loop's body.
pub(crate) fn trip_begin(site: usize, leaves: &[Tensor], names: Vec<&'static str>) {
    with_top(|r| {
        // Each trip makes its own `Detach` nodes: a trip's body then reads only its inputs.
        r.detached.clear();
        let ins = leaves.iter().map(|t| r.node_of(t)).collect();
        let depth = r.open_trips.len() as u32;
        r.open_trips.push(r.trips.len());
        let (start, path_start) = (r.builder.len(), r.path.len());
        let trip =
            Trip { site, depth, start, end: None, ins, names, outs: Vec::new(), path_start, path_end: 0 };
        r.trips.push(trip);
    });
}

/// Called when the inner block's statements of the innermost open trip end, with its outputs.
pub(crate) fn trip_end(outs: &[&Tensor]) {
    with_top(|r| {
        r.detached.clear();
        let Some(k) = r.open_trips.pop() else { return };
        let outs = outs.iter().map(|t| r.node_of(t)).collect();
        let (end, path_end) = (r.builder.len(), r.path.len());
        let trip = &mut r.trips[k];
        trip.end = Some(end);
        trip.outs = outs;
        trip.path_end = path_end;
    });
}

/// Called when `new` is `of` with gradients stopped (`detach()`).
fn record_detached(new: &Tensor, of: &Tensor) {
    with_top(|r| {
        if let Some(n) = r.node_of(of) {
            let d = if r.boundaries { r.detach_of(n) } else { n };
            r.bind(new, d);
        }
    });
}

/// Called when `leaf` is a new gradient leaf over `of`'s value (`requires_grad()`).
fn record_fresh_leaf(leaf: &Tensor, of: &Tensor) {
    with_top(|r| {
        if let Some(n) = r.node_of(of) {
            let ty = r.builder.node(n).ty.clone();
            let node = Node { op: NodeOp::Op(Op::FreshLeaf), inputs: smallvec![n], ty, span: None };
            let id = r.builder.push(node);
            r.set_active(id, true);
            r.bind(leaf, id);
        }
    });
}

/// Called by host reads (`item`, `to_vec`, `to_bool`).
fn record_host_read(what: &'static str) {
    with_top(|r| r.mark(Unusable::HostRead { what }));
}

/// Called when `backward()` starts: the VJP ops that follow are recorded like any other.
fn record_backward(root: &Tensor) {
    with_top(|r| r.backward_roots.push(root.id()));
}

/// Called by `random::take`: inside a recording, the stream-state tensor becomes a node that
/// offsets the graph's stream input, so replays draw from the caller's stream position.
fn record_rng(state: &Tensor, blocks: u64) {
    with_top(|r| {
        let input = r.builder.rng_input();
        let offset = r.builder.consume_rng(blocks);
        let ty = TensorType { shape: state.shape_ref().clone(), dtype: state.dtype() };
        let mut inputs = SmallVec::new();
        inputs.push(input);
        let id = r.builder.push(Node { op: NodeOp::RngState { offset }, inputs, ty, span: None });
        r.bind(state, id);
    });
}

/// The recorder tracing installs while a recording is active (see [`crate::recorder`]).
struct Tracer;

impl crate::recorder::Recorder for Tracer {
    fn op(
        &self,
        op: &Op,
        inputs: &[&Tensor],
        out: &Tensor,
        alias: Option<&Tensor>,
        at: &'static Location<'static>,
    ) {
        record_op(op, inputs, out, alias, at);
    }
    fn host_read(&self, what: &'static str) {
        record_host_read(what);
    }
    fn detached(&self, new: &Tensor, of: &Tensor) {
        record_detached(new, of);
    }
    fn fresh_leaf(&self, leaf: &Tensor, of: &Tensor) {
        record_fresh_leaf(leaf, of);
    }
    fn backward(&self, root: &Tensor) {
        record_backward(root);
    }
    fn rng_state(&self, state: &Tensor, blocks: u64) {
        record_rng(state, blocks);
    }
    fn assertion(&self, predicate: &Tensor, value: bool) -> bool {
        with_top(|r| {
            if !r.speculative {
                return false;
            }
            match r.node_of(predicate) {
                Some(n) => {
                    r.asserts.push((n, value));
                    true
                }
                None => false,
            }
        })
        .unwrap_or(false)
    }
    fn host_statement(&self, line: u32) {
        with_top(|r| {
            if r.speculative {
                r.mark(Unusable::HostStatement { line });
            }
        });
    }
    fn shape_read(&self, at: &'static Location<'static>) {
        with_top(|r| {
            r.shape_read.get_or_insert(at);
        });
    }
    fn host_value(&self, call: &'static str, effect: bool, at: &'static Location<'static>) {
        with_top(|r| r.mark(Unusable::HostValue { call, effect, at }));
    }
    fn reseeded(&self, what: &'static str) {
        with_top(|r| r.mark(Unusable::Reseeded { what }));
    }
    fn decision(&self, d: Decision) {
        with_top(|r| {
            if r.speculative {
                r.path.push(d);
            }
        });
    }
}

/// A finished recording: its graph (the outputs, then one predicate per assert), what each
/// assert must be, and the host decisions taken.
pub(crate) struct Finished {
    pub(crate) graph: Graph,
    pub(crate) asserts: Vec<bool>,
    pub(crate) path: Vec<Decision>,
    /// Where the statements first read a tensor's dims, if they did.
    pub(crate) shape_read: Option<&'static Location<'static>>,
    /// Whether the statements called `backward()` (what they computed then depends on which
    /// inputs need gradients).
    pub(crate) backward: bool,
    /// The inner blocks' runs, in order of their start.
    pub(crate) trips: Vec<Trip>,
    /// Whether an input is a stacked sequence whose rows the statements read.
    pub(crate) stacked: bool,
    /// Whether every value is on the CPU.
    pub(crate) cpu: bool,
}

pub use crate::recorder::Decision;

/// An active recording on this thread; ends with [`finish`](RecordingGuard::finish), or is
/// discarded when dropped (e.g. while a panic unwinds), leaving the runtime consistent.
pub struct RecordingGuard {
    depth: usize,
    done: bool,
}

/// Starts a whole-function recording (see docs/design.md, "Speculation"): decisions on tensor
/// values become asserts, host statements make it unusable.
pub(crate) fn start_speculative() -> RecordingGuard {
    let mut rec = Recording::new(GraphBuilder::new(), true);
    rec.speculative = true;
    start_recording(rec)
}

/// Starts recording on this thread, nested inside any active recording.
pub fn start() -> RecordingGuard {
    crate::panics::install_hook();
    start_recording(Recording::new(GraphBuilder::new(), true))
}

/// Starts recording the VJP rules of a derivation over `builder`'s symbolic values (no
/// autograd boundaries: every value there is a plain graph value).
pub(crate) fn start_derivation(builder: GraphBuilder) -> RecordingGuard {
    start_recording(Recording::new(builder, false))
}

fn start_recording(rec: Recording) -> RecordingGuard {
    STACK.with(|s| s.borrow_mut().push(rec));
    let depth = DEPTH.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    crate::recorder::install(Some(&Tracer));
    RecordingGuard { depth, done: false }
}

impl RecordingGuard {
    /// Makes `t` graph input `name` (an already registered tensor keeps its first input).
    pub fn register_input(&self, t: &Tensor, name: impl Into<String>) {
        self.with(|r| {
            if r.node_of(t).is_none() {
                let ty = TensorType { shape: t.shape_ref().clone(), dtype: t.dtype() };
                let id = r.builder.input(name, ty);
                r.set_active(id, t.needs_grad() && t.dtype().is_float());
                r.input_ids.insert(id, t.id());
                r.bind(t, id);
                if t.is_concrete() {
                    r.note_device(t);
                }
            }
        });
    }

    /// Makes each of `rows` row `t` of registered input `stacked` (a `narrow` of its first
    /// dimension, squeezed): a sequence passed as one stacked input, whose elements the
    /// statements read one by one.
    #[track_caller]
    pub fn register_rows(&self, stacked: &Tensor, rows: &[Tensor]) {
        let at = Location::caller();
        self.with(|r| {
            let Some(src) = r.node_of(stacked) else { return };
            r.stacked = true;
            // The statements read the sequence's length on the host (`xs.len()`), which a
            // shape-polymorphic graph cannot follow: as for a size read, every new length is
            // validated by a recording.
            r.shape_read.get_or_insert(at);
            let active = r.is_active(src);
            let ty = &r.builder.node(src).ty;
            let (dtype, rest): (crate::DType, Vec<usize>) =
                (ty.dtype, ty.shape.iter().skip(1).copied().collect());
            for (t, row) in rows.iter().enumerate() {
                let mut one = vec![1];
                one.extend(&rest);
                let narrow = Node {
                    op: NodeOp::Op(Op::Narrow(crate::ops::Narrow { dim: 0, start: t, len: 1 })),
                    inputs: smallvec![src],
                    ty: TensorType { shape: one.into(), dtype },
                    span: None,
                };
                let n = r.builder.push(narrow);
                r.set_active(n, active);
                let squeeze = Node {
                    op: NodeOp::Op(Op::Reshape(crate::ops::Reshape { shape: rest.clone().into() })),
                    inputs: smallvec![n],
                    ty: TensorType { shape: rest.clone().into(), dtype },
                    span: None,
                };
                let m = r.builder.push(squeeze);
                r.set_active(m, active);
                r.bind(row, m);
                // A replay cannot hand back an element itself (it has only the stack): a row
                // output makes the recording unusable, as an input's other handle does.
                r.input_ids.insert(m, u64::MAX);
            }
        });
    }

    /// Marks the recording unusable (first reason wins).
    pub fn mark_unusable(&self, why: Unusable) {
        self.with(|r| r.mark(why));
    }

    /// Whether `backward()` was called on `t` during the recording.
    pub fn was_backward_root(&self, t: &Tensor) -> bool {
        self.with(|r| r.backward_roots.contains(&t.id()))
    }

    fn with<R>(&self, f: impl FnOnce(&mut Recording) -> R) -> R {
        STACK.with(|s| f(&mut s.borrow_mut()[self.depth - 1]))
    }

    /// Ends the recording; returns the graph computing `outputs` from the registered inputs.
    pub fn finish(self, outputs: &[&Tensor]) -> Result<Graph, Unusable> {
        self.finish_speculative(outputs).map(|f| f.graph)
    }

    /// Ends the recording; returns the graph computing `outputs` followed by the asserted
    /// predicates, the values they must have, and the path of host decisions.
    pub(crate) fn finish_speculative(mut self, outputs: &[&Tensor]) -> Result<Finished, Unusable> {
        self.done = true;
        let rec = self.pop();
        if let Some(why) = rec.unusable {
            return Err(why);
        }
        if crate::panics::count() != rec.panics_at_start {
            return Err(Unusable::Panicked);
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for (index, t) in outputs.iter().enumerate() {
            let n = rec.node_of(t).ok_or(Unusable::UnknownOutput { index })?;
            // A replay hands back the input itself for an input node (see docs/design.md,
            // "Keys", aliasing).
            if rec.input_ids.get(&n).is_some_and(|&id| id != t.id()) {
                return Err(Unusable::OutputAliasesInput { index });
            }
            outs.push(n);
        }
        let expected = rec.asserts.iter().map(|a| a.1).collect();
        outs.extend(rec.asserts.iter().map(|a| a.0));
        Ok(Finished {
            graph: rec.builder.finish(outs),
            asserts: expected,
            path: rec.path,
            shape_read: rec.shape_read,
            backward: !rec.backward_roots.is_empty(),
            trips: rec.trips.into_iter().filter(|t| t.end.is_some()).collect(),
            stacked: rec.stacked,
            cpu: rec.device.is_none_or(|d| d == crate::Device::Cpu),
        })
    }

    fn pop(&mut self) -> Recording {
        if DEPTH.with(|d| {
            d.set(d.get() - 1);
            d.get()
        }) == 0
        {
            crate::recorder::install(None);
        }
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            assert_eq!(s.len(), self.depth, "recordings end in reverse order of their start");
            s.pop().expect("recording present")
        })
    }
}

impl Drop for RecordingGuard {
    fn drop(&mut self) {
        if !self.done {
            self.pop();
        }
    }
}
