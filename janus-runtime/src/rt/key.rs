//! Fragment keys (see docs/design.md, "Keys"): per input leaf its dtype, shape, device and
//! grad flags; the constant leaves; the structure and type of every input (a `Grads` by its
//! length and which input leaves it holds); which leaves are the same tensor (alias classes);
//! the grad mode and execution mode; and the instantiation of the function (its generic
//! parameters and those of an enclosing `impl`). Compared by a precomputed fingerprint first,
//! then in full.

use super::instance::Instance;
use super::probe::Probed;
use crate::autograd::is_grad_enabled;
use crate::module::ConstLeaf;
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// A fragment key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    words: Vec<u64>,
    names: Vec<&'static str>,
    instance: Instance,
}

impl Key {
    /// A 64-bit fingerprint for the fast path of lookups: the words and the instantiation.
    /// The input type names are left out (hashing strings cost more than the rest of the key):
    /// keys that differ only in them share a bucket and are told apart by `==`.
    pub fn fingerprint(&self) -> u64 {
        let mut h = FxHasher::default();
        for &w in &self.words {
            h.write_u64(w);
        }
        self.instance.hash(&mut h);
        h.finish()
    }
}

/// The multiply-rotate hash of rustc's `FxHasher`: not DoS-resistant, but keys come from the
/// program itself, and on the hit path SipHash cost more than the rest of the key.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` hasher for keys that are already fingerprints.
pub(crate) type BuildFx = std::hash::BuildHasherDefault<FxHasher>;

/// Where key words go: a trip class's list, or a [`Sink`].
trait Words {
    fn word(&mut self, w: u64);
}

/// Where a key's words and input type names go: a new key ([`build`]), or a comparison with an
/// existing one ([`matches`]). One routine ([`emit`]) writes both, so they cannot drift apart.
trait Sink: Words {
    fn name(&mut self, n: &'static str);
}

impl Words for Vec<u64> {
    #[inline(always)]
    fn word(&mut self, w: u64) {
        self.push(w);
    }
}

/// A key under construction.
struct Building<'a> {
    words: &'a mut Vec<u64>,
    names: &'a mut Vec<&'static str>,
}

impl Words for Building<'_> {
    #[inline(always)]
    fn word(&mut self, w: u64) {
        self.words.push(w);
    }
}

impl Sink for Building<'_> {
    #[inline(always)]
    fn name(&mut self, n: &'static str) {
        self.names.push(n);
    }
}

/// A comparison of the words a call would write with an existing key's, as they are written.
struct Comparing<'k> {
    words: std::slice::Iter<'k, u64>,
    names: std::slice::Iter<'k, &'static str>,
    same: bool,
}

impl Words for Comparing<'_> {
    #[inline(always)]
    fn word(&mut self, w: u64) {
        self.same &= self.words.next() == Some(&w);
    }
}

impl Sink for Comparing<'_> {
    #[inline(always)]
    fn name(&mut self, n: &'static str) {
        // The same `type_name` is almost always the same static string: compare addresses
        // first.
        self.same &= self.names.next().is_some_and(|&m| std::ptr::eq(m, n) || m == n);
    }
}

fn const_words(c: &ConstLeaf, w: &mut impl Words) {
    let (tag, v) = match *c {
        // Both halves of the i128, so no two integers share a key.
        ConstLeaf::Int(x) => {
            w.word(1);
            w.word(x as u64);
            w.word((x >> 64) as u64);
            return;
        }
        ConstLeaf::Bool(b) => (2, b as u64),
        ConstLeaf::F32(b) => (3, b as u64),
        ConstLeaf::F64(b) => (4, b),
        ConstLeaf::Variant(v) => (5, v as u64),
        ConstLeaf::Len(n) => (6, n as u64),
    };
    w.word(tag);
    w.word(v);
}

/// A leaf's dtype, grad flags, rank and device in one word.
fn leaf_header(t: &Tensor) -> u64 {
    let flags = (t.is_leaf() as u64) | ((t.needs_grad() as u64) << 1);
    let device = match t.device() {
        crate::Device::Cpu => 0,
        crate::Device::Cuda(n) => n as u64 + 1,
    };
    t.dtype() as u64 | (flags << 8) | ((t.rank() as u64) << 16) | (device << 24)
}

fn leaf_words(t: &Tensor, w: &mut impl Words) {
    w.word(leaf_header(t));
    for &d in t.sizes() {
        w.word(d as u64);
    }
}

/// The leaves of a key's inputs, in order, with `Grads` entries resolved to the input leaves they
/// belong to (see docs/design.md, "Keys"): entries for leaves that are not inputs are ignored.
/// Borrowed from the probes: a hit takes no reference count for them (an atomic operation each,
/// see [`take_distinct`]).
pub(crate) fn gather_leaves(inputs: &[Probed]) -> LeafRefs<'_> {
    // Plain loops: `SmallVec::extend` over nested adapters costs more than the pushes on
    // this per-call path.
    let mut leaves = LeafRefs::new();
    let mut any_grads = false;
    for p in inputs {
        if p.grads.is_some() {
            any_grads = true;
            continue;
        }
        for l in &p.leaves {
            leaves.push(l);
        }
    }
    if !any_grads {
        return leaves;
    }
    let plain = leaves.clone();
    for p in inputs {
        if let Some(g) = &p.grads {
            for l in &plain {
                if let Some(gr) = g.get(l) {
                    leaves.push(gr);
                }
            }
        }
    }
    leaves
}

/// The leaves to pass to an executor, each distinct tensor once (aliases share a graph input),
/// moved out of the probes: the probes' clones become the executor's inputs, with no second
/// reference count taken and dropped per leaf (an atomic operation each; docs/perf/
/// 2026-12-01.md). The probes keep no leaves after this. Calls with a `Grads`
/// input clone instead (the gradients are the map's).
pub(crate) fn take_distinct(inputs: &mut [Probed], firsts: &[u32]) -> LeafList {
    if inputs.iter().any(|p| p.grads.is_some()) {
        return distinct_cloned(inputs, firsts);
    }
    let mut out = LeafList::new();
    let mut k = 0;
    for p in inputs {
        for t in p.leaves.drain(..) {
            if firsts[k] as usize == k {
                out.push(t);
            }
            k += 1;
        }
    }
    out
}

/// [`take_distinct`]'s leaves, cloned: the probes keep theirs.
pub(crate) fn distinct_cloned(inputs: &[Probed], firsts: &[u32]) -> LeafList {
    first_only(gather_leaves(inputs), firsts).cloned().collect()
}

/// Builds the key of a call; `firsts` are the leaves' [`first_occurrences`].
pub(crate) fn build(
    inputs: &[Probed],
    leaves: (&[&Tensor], &[u32]),
    instance: Instance,
    mode: super::Mode,
) -> Key {
    // The hit path builds a key per call only to look it up: reuse the last one's buffers.
    let (mut words, mut names) = SPARE.take().map_or_else(Default::default, |k| (k.words, k.names));
    words.clear();
    names.clear();
    emit(inputs, leaves, mode, &mut Building { words: &mut words, names: &mut names });
    Key { words, names, instance }
}

/// Whether [`build`] on these arguments would give `key`, found without building it (the hit
/// path of a call that repeats a memoised key).
pub(crate) fn matches(
    inputs: &[Probed],
    leaves: (&[&Tensor], &[u32]),
    instance: Instance,
    mode: super::Mode,
    key: &Key,
) -> bool {
    if key.instance != instance {
        return false;
    }
    let mut c = Comparing { words: key.words.iter(), names: key.names.iter(), same: true };
    emit(inputs, leaves, mode, &mut c);
    c.same && c.words.len() == 0 && c.names.len() == 0
}

/// A key's words and type names, in order.
#[inline(always)] // once per sink, on the hit path
fn emit(inputs: &[Probed], (leaves, firsts): (&[&Tensor], &[u32]), mode: super::Mode, w: &mut impl Sink) {
    w.word(mode as u64);
    w.word(is_grad_enabled() as u64);
    w.word(inputs.len() as u64);
    for p in inputs {
        w.name(p.type_name);
        w.word(p.leaves.len() as u64);
        w.word(p.consts.len() as u64);
        for c in &p.consts {
            const_words(c, w);
        }
        if let Some(g) = &p.grads {
            // Its structure: how many leaves have a gradient (`grads.len()` is a host value),
            // and which plain input leaves do, by position.
            w.word(g.len() as u64);
            let plain = inputs.iter().filter(|q| q.grads.is_none()).flat_map(|q| q.leaves.iter());
            for (k, l) in plain.enumerate() {
                if g.get(l).is_some() {
                    w.word(k as u64);
                }
            }
            w.word(u64::MAX);
        }
    }
    // Leaf types and alias classes (the position of each leaf's first occurrence).
    for (t, &first) in leaves.iter().zip(firsts) {
        leaf_words(t, w);
        w.word(first as u64);
    }
}

/// A call's *trip class*: its key with every sequence input (a slice or `Vec`, probed with a
/// `Len` constant) reduced to the distinct types of its elements, and its dims left out; and
/// the sequences' lengths. Calls of one class with other lengths differ in a loop's trip
/// count.
pub(crate) fn trip_class(inputs: &[Probed], instance: &Instance, mode: super::Mode) -> (u64, Vec<usize>) {
    let mut h = FxHasher::default();
    let mut lens = Vec::new();
    h.write_u64(mode as u64 | (is_grad_enabled() as u64) << 8);
    instance.hash(&mut h);
    for p in inputs {
        h.write(p.type_name.as_bytes());
        h.write_u64(p.grads.is_some() as u64);
        let mut sequence = false;
        let mut words = Vec::new();
        for c in &p.consts {
            match *c {
                ConstLeaf::Len(n) => {
                    sequence = true;
                    lens.push(n);
                }
                _ => const_words(c, &mut words),
            }
        }
        words.iter().for_each(|&x| h.write_u64(x));
        if sequence {
            let mut kinds: Vec<u64> = p.leaves.iter().map(leaf_header).collect();
            kinds.sort_unstable();
            kinds.dedup();
            kinds.iter().for_each(|&k| h.write_u64(k));
        } else {
            p.leaves.iter().for_each(|t| h.write_u64(leaf_header(t)));
        }
    }
    (h.finish(), lens)
}

/// `key` with its leaves' dimension sizes zeroed (ranks kept): what keys that differ only in
/// sizes share, so a shape-polymorphic variant can serve them. `leaves` are the key's leaves.
pub(crate) fn erase_dims(key: &Key, leaves: &[Tensor]) -> Key {
    let mut k = key.clone();
    let tail: usize = leaves.iter().map(|t| t.rank() + 2).sum();
    let mut i = k.words.len() - tail;
    for t in leaves {
        i += 1; // the leaf's dtype, flags, rank and device
        for _ in 0..t.rank() {
            k.words[i] = 0;
            i += 1;
        }
        i += 1; // its alias class
    }
    k
}

/// Whether a variant keyed `cand` can serve a call keyed `call` (`leaves` are the call's):
/// the keys are equal except that some float leaves needing no gradient in the call need one
/// in `cand` (where they may also differ in being a leaf). The graph is the same function of
/// its inputs; its backward computes a gradient for those inputs that autograd then drops, as
/// it drops any gradient reaching a tensor without history. Compares erased keys as well.
/// An RNN's first step (zero state, no history) is such a call of its later steps' graph.
pub(crate) fn subsumes(call: &Key, leaves: &[Tensor], cand: &Key) -> bool {
    const LEAF: u64 = 1 << 8;
    const NEEDS_GRAD: u64 = 1 << 9;
    if call.words.len() != cand.words.len() || call.names != cand.names || call.instance != cand.instance {
        return false;
    }
    let tail: usize = leaves.iter().map(|t| t.rank() + 2).sum();
    let Some(head) = call.words.len().checked_sub(tail) else { return false };
    if call.words[..head] != cand.words[..head] {
        return false;
    }
    let mut i = head;
    let mut upgraded = false;
    for t in leaves {
        let (a, b) = (call.words[i], cand.words[i]);
        if a != b {
            let others = !(LEAF | NEEDS_GRAD);
            if a & others != b & others || a & NEEDS_GRAD != 0 || b & NEEDS_GRAD == 0 {
                return false;
            }
            upgraded = true;
        }
        // Its dims and alias class.
        let rest = i + 1..i + t.rank() + 2;
        if call.words[rest.clone()] != cand.words[rest] {
            return false;
        }
        i += t.rank() + 2;
    }
    upgraded
}

thread_local! {
    /// A key whose buffers the next [`build`] on this thread reuses.
    static SPARE: std::cell::Cell<Option<Key>> = const { std::cell::Cell::new(None) };
}

/// Hands a key that was only looked up back to this thread's [`build`], which reuses its
/// buffers: a hit allocates no key.
pub(crate) fn recycle(key: Key) {
    SPARE.set(Some(key));
}

/// A call's input leaves, inline for a typical block (a hit allocates no list).
pub(crate) type LeafList = smallvec::SmallVec<[Tensor; 8]>;

/// A call's input leaves, borrowed from its probes ([`gather_leaves`]).
pub(crate) type LeafRefs<'a> = smallvec::SmallVec<[&'a Tensor; 8]>;

/// Positions of first occurrences, inline for the leaves of a typical block (`u32`: small
/// enough to be moved without a `memcpy` call on the hit path).
pub(crate) type Firsts = smallvec::SmallVec<[u32; 16]>;

/// For each leaf, the position of the first leaf that is the same tensor. A linear scan for the
/// few leaves of a typical block (cheaper than hashing on the hit path), a map beyond that.
pub(crate) fn first_occurrences(leaves: &[&Tensor]) -> Firsts {
    if leaves.len() <= 32 {
        let mut firsts = Firsts::new();
        for (k, t) in leaves.iter().enumerate() {
            firsts.push(leaves[..k].iter().position(|u| u.id() == t.id()).unwrap_or(k) as u32);
        }
        return firsts;
    }
    let mut first: HashMap<u64, u32> = HashMap::with_capacity(leaves.len());
    leaves.iter().enumerate().map(|(k, t)| *first.entry(t.id()).or_insert(k as u32)).collect()
}

/// The items at their leaf's first occurrence (`firsts[k] == k`): one per distinct leaf.
pub(crate) fn first_only<'f, T>(
    items: impl IntoIterator<Item = T, IntoIter: 'f>,
    firsts: &'f [u32],
) -> impl Iterator<Item = T> + 'f {
    items.into_iter().zip(firsts).enumerate().filter(|&(k, (_, &f))| k == f as usize).map(|(_, (t, _))| t)
}
