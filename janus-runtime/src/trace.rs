//! Tracing by execution (DESIGN §3): while a recording is active on this thread, every op
//! computes as usual *and* appends a node. Tensors registered as inputs become graph inputs; an
//! op on an unregistered tensor, or a host read, leaves the values correct but marks the
//! recording unusable, with a typed reason. Recordings nest (a thread-local stack); ops record
//! into the innermost.
//!
//! Identity is a tensor's unique id (DESIGN §13 rule 8): the node of each tensor lives in a side
//! table keyed by id, which holds a strong reference so the id stays meaningful until the
//! recording ends.

use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{Op, TensorType};
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::panic::Location;

/// Why a recording cannot become a graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// A tensor value was read on the host (`item`, `to_vec`, `to_bool`).
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
        }
    }
}

/// The state of one active recording.
pub struct Recording {
    pub(crate) builder: GraphBuilder,
    values: HashMap<u64, NodeId>,
    keep: Vec<Tensor>,
    unusable: Option<Unusable>,
    backward_seen: bool,
}

impl Recording {
    pub(crate) fn new(builder: GraphBuilder) -> Self {
        Recording { builder, values: HashMap::new(), keep: Vec::new(), unusable: None, backward_seen: false }
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

/// Called by every op after it computed `out`; `alias` is another handle of the same value (the
/// copy an autograd node saves).
#[inline]
#[track_caller]
pub(crate) fn record(op: &Op, inputs: &[&Tensor], out: &Tensor, alias: Option<&Tensor>) {
    if is_recording() {
        record_slow(op, inputs, out, alias, Location::caller());
    }
}

#[cold]
fn record_slow(
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
        for t in inputs {
            match r.node_of(t) {
                Some(n) => args.push(n),
                None => {
                    r.mark(Unusable::Unregistered { op: op.name(), shape: t.shape().clone(), at });
                    return;
                }
            }
        }
        let ty = TensorType { shape: out.shape().clone(), dtype: out.dtype() };
        let id = r.builder.push(Node { op: NodeOp::Op(op.clone()), inputs: args, ty, span: Some(at) });
        r.bind(out, id);
        if let Some(a) = alias {
            r.bind(a, id);
        }
    });
}

/// Called when `new` is another handle of `of`'s value (`requires_grad`, `detach`).
#[inline]
pub(crate) fn alias(new: &Tensor, of: &Tensor) {
    if is_recording() {
        with_top(|r| {
            if let Some(n) = r.node_of(of) {
                r.bind(new, n);
            }
        });
    }
}

/// Called by host reads (`item`, `to_vec`, `to_bool`).
#[inline]
pub(crate) fn note_host_read(what: &'static str) {
    if is_recording() {
        with_top(|r| r.mark(Unusable::HostRead { what }));
    }
}

/// Called when `backward()` starts: the VJP ops that follow are recorded like any other.
#[inline]
pub(crate) fn on_backward(_root: &Tensor) {
    if is_recording() {
        with_top(|r| r.backward_seen = true);
    }
}

/// Called by `random::take`: inside a recording, the stream-state tensor becomes a node that
/// offsets the graph's stream input, so replays draw from the caller's stream position.
pub(crate) fn record_rng_state(state: &Tensor, blocks: u64) {
    if is_recording() {
        with_top(|r| {
            let input = r.builder.rng_input();
            let offset = r.builder.consume_rng(blocks);
            let ty = TensorType { shape: state.shape().clone(), dtype: state.dtype() };
            let mut inputs = SmallVec::new();
            inputs.push(input);
            let id = r.builder.push(Node { op: NodeOp::RngState { offset }, inputs, ty, span: None });
            r.bind(state, id);
        });
    }
}

/// An active recording on this thread; ends with [`finish`](RecordingGuard::finish), or is
/// discarded when dropped (e.g. while a panic unwinds), leaving the runtime consistent.
pub struct RecordingGuard {
    depth: usize,
    done: bool,
}

/// Starts recording on this thread, nested inside any active recording.
pub fn start() -> RecordingGuard {
    start_with(GraphBuilder::new())
}

pub(crate) fn start_with(builder: GraphBuilder) -> RecordingGuard {
    STACK.with(|s| s.borrow_mut().push(Recording::new(builder)));
    let depth = DEPTH.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    RecordingGuard { depth, done: false }
}

impl RecordingGuard {
    /// Makes `t` graph input `name` (an already registered tensor keeps its first input).
    pub fn register_input(&self, t: &Tensor, name: impl Into<String>) {
        self.with(|r| {
            if r.node_of(t).is_none() {
                let ty = TensorType { shape: t.shape().clone(), dtype: t.dtype() };
                let id = r.builder.input(name, ty);
                r.bind(t, id);
            }
        });
    }

    /// Marks the recording unusable (first reason wins).
    pub fn mark_unusable(&self, why: Unusable) {
        self.with(|r| r.mark(why));
    }

    /// Whether `backward()` ran during the recording.
    pub fn saw_backward(&self) -> bool {
        self.with(|r| r.backward_seen)
    }

    fn with<R>(&self, f: impl FnOnce(&mut Recording) -> R) -> R {
        STACK.with(|s| f(&mut s.borrow_mut()[self.depth - 1]))
    }

    /// Ends the recording; returns the graph computing `outputs` from the registered inputs.
    pub fn finish(mut self, outputs: &[&Tensor]) -> Result<Graph, Unusable> {
        self.done = true;
        let rec = self.pop();
        if let Some(why) = rec.unusable {
            return Err(why);
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for (index, t) in outputs.iter().enumerate() {
            outs.push(rec.node_of(t).ok_or(Unusable::UnknownOutput { index })?);
        }
        Ok(rec.builder.finish(outs))
    }

    fn pop(&mut self) -> Recording {
        DEPTH.with(|d| d.set(d.get() - 1));
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
