//! Keys served by another key's graph: a call whose float leaves need no gradient where a
//! compiled key's need one, and which is otherwise that key (see [`key::subsumes`]), replays
//! the other key's graph instead of compiling its own. Its backward computes gradients for
//! those inputs that autograd drops, as it drops any gradient reaching a tensor without
//! history. The first step of an RNN (zero state, no history) is the common case: without
//! this it compiles a graph of its own at every size the later steps compile at.

use super::*;

/// Compiles a fragment defers at most (see [`Fragment::defers`]): a bound on the recorded
/// eager runs a subsumed key can cost while it waits for a graph that serves it.
const MAX_DEFERRED: u64 = 16;

impl Fragment {
    /// For a key with no variant of its own yet (or one still profiling): a variant that
    /// serves it, made from a compiled key that subsumes it at the same sizes, or an instance
    /// of a generic variant whose erased key subsumes its erased key.
    #[inline(never)] // off the hit path
    pub(super) fn upgraded(
        &'static self,
        st: &State,
        fp: u64,
        key: &Key,
        leaves: &[Tensor],
        inputs: &[Probed],
    ) -> Option<Arc<Variant>> {
        if self.site.speculative || !leaves.iter().any(|t| t.dtype().is_float() && !t.needs_grad()) {
            return None;
        }
        let needs = needs_of(leaves);
        let serves = |v: &Variant| v.staged.get().is_some_and(|s| s.serves(&needs));
        let source = (st.variants.read().unwrap().values().flatten())
            .find(|v| key::subsumes(key, leaves, &v.key) && serves(v))
            .cloned();
        if let Some(src) = source {
            let staged = src.staged.get().expect("found staged").alias();
            let v = Arc::new(Variant {
                staged: OnceLock::from(Arc::new(staged)),
                instance: true,
                ..Variant::new(key.clone(), src.erased.clone(), shapes::signature(inputs), leaves)
            });
            return Some(self.install_instance(st, fp, v));
        }
        if !self.site.dynamic_dims {
            return None;
        }
        // A generic variant whose samples (compiled variants of its erased key) serve the call.
        let erased = key::erase_dims(key, leaves);
        let generic =
            st.generic.read().unwrap().keys().find(|e| key::subsumes(&erased, leaves, e)).cloned()?;
        let sampled = (st.variants.read().unwrap().values().flatten())
            .any(|v| !v.instance && v.erased == generic && serves(v));
        if !sampled {
            return None;
        }
        self.instance_of(st, (fp, key), generic, leaves, inputs)
    }

    /// Whether `v`, about to compile, waits instead: a compiled key subsumes it at some size
    /// and serves it, so once that key's graph is at `v`'s sizes (compiled there, or
    /// generalised over them), `v`'s calls replay it. Until then they run recorded (eagerly),
    /// at most [`MAX_DEFERRED`] times per fragment.
    pub(super) fn defers(&self, st: &State, v: &Variant, leaves: &[Tensor]) -> bool {
        if self.site.speculative || v.instance || st.deferred.load(Ordering::Relaxed) >= MAX_DEFERRED {
            return false;
        }
        let needs = needs_of(leaves);
        let subsumed = (st.variants.read().unwrap().values().flatten()).any(|u| {
            key::subsumes(&v.erased, leaves, &u.erased) && u.staged.get().is_some_and(|s| s.serves(&needs))
        });
        if subsumed {
            st.deferred.fetch_add(1, Ordering::Relaxed);
        }
        subsumed
    }
}

/// Whether each graph input (the distinct leaves, in order) needs gradients.
pub(super) fn needs_of(leaves: &[Tensor]) -> Vec<bool> {
    let refs: key::LeafRefs = leaves.iter().collect();
    let firsts = key::first_occurrences(&refs);
    key::first_only(leaves, &firsts).map(|t| t.needs_grad() && t.dtype().is_float()).collect()
}

impl Staged {
    /// Whether a call of a key this one's subsumes, its inputs needing gradients as `needs`
    /// says, may replay it: valid, no `backward()` inside its recording (what that computed
    /// depends on which inputs need gradients), and every output's history as eager mode
    /// would give it.
    fn serves(&self, needs: &[bool]) -> bool {
        !self.invalid.load(Ordering::Relaxed) && !self.ran_backward && self.compiled.keeps_histories(needs)
    }

    /// A variant of its own replaying this one's graph (statistics and checks of its own; the
    /// sampled checks numbered with this one's instances, if it is one).
    pub(super) fn alias(&self) -> Staged {
        Staged {
            compiled: self.compiled.clone(),
            consts: self.consts.clone(),
            asserts: self.asserts.clone(),
            path: self.path.clone(),
            shape_read: self.shape_read,
            kinds: self.kinds.clone(),
            ran_backward: self.ran_backward,
            replays: AtomicU64::new(0),
            shared_replays: self.shared_replays.clone(),
            counts: ReplayCounts::default(),
            invalid: AtomicBool::new(false),
        }
    }
}
