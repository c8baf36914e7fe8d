//! The recursive-network workload: a TreeRNN over random binary "sentences" with synthetic
//! sentiment labels, shared by the `tree_rnn` example and the bench entry.
//!
//! Words carry a valence (+1, -1 or 0); the word `not` as a left child negates its sibling
//! subtree; a tree's label is whether its total valence is positive. Getting negation right
//! needs the tree structure, not just a bag of words.
#![allow(dead_code)]

use janus::prelude::*;

/// Vocabulary: `not`, 8 positive, 8 negative and 8 neutral words.
pub const VOCAB: usize = 25;
/// The negation word.
pub const NOT: usize = 0;
/// Hidden size.
pub const HID: usize = 64;

/// A parse tree; leaves hold their word as an index tensor, so every leaf shares one compiled
/// graph (a word id as a host integer would be a constant of the graph, one variant per word).
pub enum Tree {
    /// A word: its id and the `i64 [1]` index tensor.
    Leaf(usize, Tensor),
    /// An inner node.
    Node(Box<Tree>, Box<Tree>),
}

impl Tree {
    /// Number of nodes.
    pub fn size(&self) -> usize {
        match self {
            Tree::Leaf(..) => 1,
            Tree::Node(l, r) => 1 + l.size() + r.size(),
        }
    }

    fn valence(&self) -> i32 {
        match self {
            Tree::Leaf(w, _) => match w {
                1..=8 => 1,
                9..=16 => -1,
                _ => 0,
            },
            Tree::Node(l, r) if matches!(**l, Tree::Leaf(NOT, _)) => -r.valence(),
            Tree::Node(l, r) => l.valence() + r.valence(),
        }
    }
}

/// A small deterministic generator (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

fn leaf(w: usize) -> Tree {
    Tree::Leaf(w, Tensor::from_vec(vec![w as i64], [1]))
}

/// A random tree over `words` non-negation leaves; a fifth of its subtrees are negated.
fn random_tree(rng: &mut Rng, words: usize) -> Tree {
    let t = if words == 1 {
        leaf(1 + rng.below(VOCAB - 1))
    } else {
        let left = 1 + rng.below(words - 1);
        Tree::Node(Box::new(random_tree(rng, left)), Box::new(random_tree(rng, words - left)))
    };
    if rng.below(5) == 0 { Tree::Node(Box::new(leaf(NOT)), Box::new(t)) } else { t }
}

/// `n` labelled trees of 2 to 10 words, half of each label (trees of total valence 0 are
/// redrawn).
pub fn dataset(rng: &mut Rng, n: usize) -> Vec<(Tree, Tensor)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let words = 2 + rng.below(9);
        let t = random_tree(rng, words);
        let want = out.len() % 2 == 0;
        match t.valence() {
            v if v != 0 && (v > 0) == want => out.push((t, Tensor::from_vec(vec![want as i64], [1]))),
            _ => {}
        }
    }
    out
}

/// Parameters: word embeddings, the composition and the classifier.
#[derive(Module, Clone)]
pub struct TreeRnn {
    /// `[VOCAB, HID]`.
    pub emb: Tensor,
    /// `[HID, HID]` applied to the left child.
    pub wl: Tensor,
    /// `[HID, HID]` applied to the right child.
    pub wr: Tensor,
    /// `[HID]`.
    pub b: Tensor,
    /// `[HID, 2]`.
    pub wo: Tensor,
    /// `[2]`.
    pub bo: Tensor,
}

impl TreeRnn {
    /// Random weights from the thread's seeded stream.
    pub fn new() -> TreeRnn {
        let w = |r: usize, c: usize, s: f32| no_grad(|| (Tensor::randn([r, c]) * s).requires_grad());
        let s = 1.0 / (HID as f32).sqrt();
        TreeRnn {
            emb: w(VOCAB, HID, 0.5),
            wl: w(HID, HID, s),
            wr: w(HID, HID, s),
            b: Tensor::zeros([HID]).requires_grad(),
            wo: w(HID, 2, s),
            bo: Tensor::zeros([2]).requires_grad(),
        }
    }
}

impl TreeRnn {
    /// The same weights on `device` (still gradient leaves).
    pub fn to_device(&self, d: Device) -> TreeRnn {
        let mv = |t: &Tensor| no_grad(|| t.to_device(d)).requires_grad();
        TreeRnn {
            emb: mv(&self.emb),
            wl: mv(&self.wl),
            wr: mv(&self.wr),
            b: mv(&self.b),
            wo: mv(&self.wo),
            bo: mv(&self.bo),
        }
    }
}

/// A copy of an example with its index tensors on `device` (trees hold immutable handles, so
/// a copy on the same device is cheap).
pub fn example_on((t, y): &(Tree, Tensor), d: Device) -> (Tree, Tensor) {
    fn go(t: &Tree, d: Device) -> Tree {
        match t {
            Tree::Leaf(w, x) => Tree::Leaf(*w, x.to_device(d)),
            Tree::Node(l, r) => Tree::Node(Box::new(go(l, d)), Box::new(go(r, d))),
        }
    }
    (go(t, d), y.to_device(d))
}

impl Default for TreeRnn {
    fn default() -> Self {
        TreeRnn::new()
    }
}

/// The tree's representation `[1, HID]`, recursing through the host: each leaf and each node
/// runs as one cached compiled graph (two variants in all, whatever the tree's shape).
#[janus]
pub fn encode(t: &Tree, p: &TreeRnn) -> Tensor {
    match t {
        Tree::Leaf(_, word) => p.emb.index_select(0, word).tanh(),
        Tree::Node(l, r) => {
            let a = encode(l, p);
            let b = encode(r, p);
            (a.matmul(&p.wl) + b.matmul(&p.wr) + &p.b).tanh()
        }
    }
}

/// Class logits `[1, 2]` of an encoded tree.
#[janus]
pub fn classify(p: &TreeRnn, h: &Tensor) -> Tensor {
    h.matmul(&p.wo) + &p.bo
}

/// One optimiser step on a minibatch; returns the mean loss.
#[janus]
pub fn train_step<O: Optimizer>(p: &mut TreeRnn, opt: &mut O, batch: &[(Tree, Tensor)]) -> f32 {
    let mut total = Tensor::scalar(0.0); // a rank-0 CPU scalar joins any device
    for (t, y) in batch {
        let h = encode(t, p);
        total += classify(p, &h).cross_entropy(y);
    }
    let loss = total / batch.len() as f64;
    let grads = loss.backward();
    opt.step(p, &grads);
    loss.item()
}

/// Fraction of trees classified correctly.
pub fn accuracy(p: &TreeRnn, data: &[(Tree, Tensor)]) -> f64 {
    let right = no_grad(|| {
        data.iter()
            .filter(|(t, y)| {
                let pred = classify(p, &encode(t, p)).argmax(1);
                pred.to_vec::<i64>() == y.to_vec::<i64>()
            })
            .count()
    });
    right as f64 / data.len() as f64
}
