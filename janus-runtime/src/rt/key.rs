//! Fragment keys (DESIGN §6, §13 rules 8-10, 12): per input leaf its dtype, shape and grad
//! flags; the constant leaves; the structure and type of every input; which leaves are the same
//! tensor (alias classes); the grad mode and execution mode; and the function's generic
//! parameters. Compared by a precomputed fingerprint first, then in full.

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
}

impl Key {
    /// A 64-bit fingerprint for the fast path of lookups.
    pub fn fingerprint(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }
}

fn const_words(c: &ConstLeaf, w: &mut Vec<u64>) {
    let (tag, v) = match *c {
        ConstLeaf::Int(x) => (1, x as u64 ^ ((x >> 64) as u64).rotate_left(17)),
        ConstLeaf::Bool(b) => (2, b as u64),
        ConstLeaf::F32(b) => (3, b as u64),
        ConstLeaf::F64(b) => (4, b),
        ConstLeaf::Variant(v) => (5, v as u64),
        ConstLeaf::Len(n) => (6, n as u64),
    };
    w.push(tag);
    w.push(v);
}

fn leaf_words(t: &Tensor, w: &mut Vec<u64>) {
    let flags = (t.is_leaf() as u64) | ((t.needs_grad() as u64) << 1);
    w.push(t.dtype() as u64 | (flags << 8) | ((t.rank() as u64) << 16));
    w.extend(t.dims().iter().map(|&d| d as u64));
}

/// The leaves of a key's inputs, in order, with `Grads` entries resolved to the input leaves they
/// belong to (DESIGN §13 rule 12): entries for leaves that are not inputs are ignored.
pub(crate) fn gather_leaves(inputs: &[Probed]) -> Vec<Tensor> {
    let mut leaves: Vec<Tensor> =
        inputs.iter().filter(|p| p.grads.is_none()).flat_map(|p| p.leaves.iter().cloned()).collect();
    let plain = leaves.clone();
    for p in inputs {
        if let Some(g) = &p.grads {
            for l in &plain {
                if let Some(gr) = g.get(l) {
                    leaves.push(gr.clone());
                }
            }
        }
    }
    leaves
}

/// Builds the key of a call.
pub(crate) fn build(
    inputs: &[Probed],
    leaves: &[Tensor],
    generics: &[&'static str],
    mode: super::Mode,
) -> Key {
    let mut words = vec![mode as u64, is_grad_enabled() as u64, inputs.len() as u64];
    let mut names: Vec<&'static str> = generics.to_vec();
    for p in inputs {
        names.push(p.type_name);
        words.push(p.leaves.len() as u64);
        words.push(p.consts.len() as u64);
        for c in &p.consts {
            const_words(c, &mut words);
        }
        if let Some(g) = &p.grads {
            // Which plain input leaves have a gradient, by position.
            let plain = inputs.iter().filter(|q| q.grads.is_none()).flat_map(|q| q.leaves.iter());
            for (k, l) in plain.enumerate() {
                if g.get(l).is_some() {
                    words.push(k as u64);
                }
            }
            words.push(u64::MAX);
        }
    }
    // Leaf types and alias classes.
    let mut first: HashMap<u64, usize> = HashMap::new();
    for (k, t) in leaves.iter().enumerate() {
        leaf_words(t, &mut words);
        words.push(*first.entry(t.id()).or_insert(k) as u64);
    }
    Key { words, names }
}

/// The leaves to pass to an executor: each distinct tensor once (aliases share a graph input).
pub(crate) fn distinct(leaves: &[Tensor]) -> Vec<Tensor> {
    let mut seen = std::collections::HashSet::new();
    leaves.iter().filter(|t| seen.insert(t.id())).cloned().collect()
}
