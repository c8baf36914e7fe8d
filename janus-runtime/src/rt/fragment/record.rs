//! Finishing a recording: profiling agreement, compiling, and what happens when speculation
//! fails or a key cannot stage.

use super::*;

impl Fragment {
    /// A speculative replay's assert did not hold: count it, and profile the key afresh (a new
    /// variant with the same key replaces this one), or after `max_failures` keep it on the
    /// fragment path.
    #[cold]
    pub(super) fn speculation_failed(&'static self, st: &State, fp: u64, v: &Arc<Variant>, what: &str) {
        Counters::bump(&st.counters.assert_failures);
        if let Some(s) = v.staged.get() {
            s.counts.panicked.fetch_add(1, Ordering::Relaxed);
            // The statistics of the variant being replaced live on in the fragment's.
            s.retire(&st.counters);
        }
        let failures = v.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= self.max_failures() {
            let why =
                format!("speculation failed {failures} time(s) ({what}): the key stays on the fragment path");
            if let Some(s) = v.staged.get() {
                s.invalid.store(true, Ordering::Relaxed);
            }
            let _ = v.unstageable.set(why);
            return;
        }
        let fresh = Arc::new(Variant {
            key: v.key.clone(),
            inputs: v.inputs.clone(),
            staged: OnceLock::new(),
            unstageable: OnceLock::new(),
            profile: Mutex::new(Profile::default()),
            failures: AtomicU64::new(failures),
            erased: v.erased.clone(),
            leaf_dims: v.leaf_dims.clone(),
            instance: v.instance,
            seq: v.seq,
        });
        let mut map = st.variants_mut();
        if let Some(slot) = map.get_mut(&fp).and_then(|vs| vs.iter_mut().find(|x| Arc::ptr_eq(x, v))) {
            *slot = fresh;
        }
    }

    /// Two profiled recordings took different paths (a decision went another way): a failed
    /// speculation, counted like one.
    pub(super) fn path_changed(&'static self, v: &Arc<Variant>) {
        let st = self.state();
        Counters::bump(&st.counters.assert_failures);
        let failures = v.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= self.max_failures() {
            let why = format!(
                "the path changed between profiled calls {failures} time(s): the key stays on the fragment path"
            );
            let _ = v.unstageable.set(why);
        }
    }

    pub(super) fn unstageable(&self, v: &Variant, why: String) {
        if v.staged.get().is_some_and(|s| !s.invalid.load(Ordering::Relaxed)) {
            return; // compiled meanwhile (a recording that ran while another compiled)
        }
        log::info!(target: "janus", "{} ({}) runs eagerly for this key: {why}", self.name(), self.span());
        let _ = v.unstageable.set(why);
    }

    pub(super) fn record_finished(&'static self, v: &Arc<Variant>, leaves: &[Tensor], rec: Recorded) {
        let st = self.state();
        if self.site.has_loop && rec.graph.nodes.len() > ROLL_NODES {
            let n = rec.graph.nodes.len();
            return self.unstageable(
                v,
                format!("loop too long to unroll ({n} nodes recorded): it runs on the host, its body staged"),
            );
        }
        if rec.graph.nodes.len() > MAX_RECORDED_NODES {
            let n = rec.graph.nodes.len();
            return self.unstageable(
                v,
                format!("recording too large to compile ({n} nodes; a loop unrolled too far?)"),
            );
        }
        if let Some(staged) = self.validated_instance(st, v, &rec) {
            return self.stage_validated(st, v, staged);
        }
        let mut prof = v.profile.lock().unwrap();
        // A new size of a key that compiled at another size compiles from its first recording
        // (torch.compile's "generalise on the first size change"): the fit with the sibling's
        // graphs is the agreement check, and a steady stream of new sizes would otherwise never
        // see a size twice.
        let first_size_change = prof.last.is_none() && self.agrees_with_sibling(st, v, &rec);
        if !first_size_change {
            let Some(prev) = prof.last.take() else {
                prof.last = Some(rec);
                return;
            };
            if rec.asserts != prev.asserts || rec.path != prev.path {
                // A decision went another way: profile again from this recording.
                prof.last = Some(rec);
                drop(prof);
                return self.path_changed(v);
            }
            if let Some(d) = rec.graph.diff(&prev.graph) {
                let at = d.span.map(|s| format!("{}:{}", s.file(), s.line())).unwrap_or_else(|| self.span());
                let what = if d.constant_only {
                    "constant changed between calls"
                } else {
                    "recorded graph changed between calls"
                };
                return self.unstageable(v, format!("{what} at {at}"));
            }
            if rec.consts != prev.consts || rec.kinds != prev.kinds {
                return self
                    .unstageable(v, format!("outputs changed structure between calls at {}", self.span()));
            }
            if prof.calls < self.site.profile.max(2) {
                prof.last = Some(rec);
                return;
            }
        }
        if self.defers(st, v, leaves) {
            prof.last = Some(rec);
            return;
        }
        let fills = (rec.graph.nodes.iter())
            .filter(|n| matches!(&n.op, crate::graph::NodeOp::Op(crate::ops::Op::Full(_))))
            .count();
        let ops = op_calls(&rec.graph) as usize - fills;
        let largest = largest_used(&rec.graph);
        if ops < self.site.min_ops as usize && largest < SMALL_ELEMS {
            let why = format!(
                "too small to gain from compiling: {ops} op(s) on at most {largest} elements (min_ops = {})",
                self.site.min_ops
            );
            log::info!(target: "janus", "{} ({}) always runs eagerly: {why}", self.name(), self.span());
            let _ = st.opaque.set((why, EagerKind::TooSmall));
            return;
        }
        let t0 = Instant::now();
        // As the recording saw them (see `trace`): the key holds every leaf's grad flags.
        let mut needs = upgrade::needs_of(leaves);
        needs.resize(rec.graph.inputs.len(), false);
        let name = self.name();
        if self.site.speculative {
            let path = super::super::stats::path_summary(&rec.path);
            let must: Vec<bool> = rec.asserts.clone();
            crate::graph::dump::note(&format!(
                "{name}: whole-function graph; its last {} output(s) are asserts that must be {must:?}; path: {path}",
                must.len()
            ));
        }
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Compiled::new(&name, rec.graph, &needs, &rec.kinds)
        }));
        match built {
            Ok(Err(why)) => self.unstageable(v, format!("cannot replay: {why}")),
            Ok(Ok(c)) => {
                st.counters.compile_us.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                Counters::bump(&st.counters.compiles);
                log::info!(target: "janus", "{name} ({}) compiled: {} ops in {:.2} ms", self.span(), c.graph().op_count(), c.compile_ms);
                let _ = v.staged.set(Arc::new(Staged {
                    compiled: Arc::new(c),
                    consts: rec.consts,
                    asserts: rec.asserts,
                    path: rec.path,
                    shape_read: rec.shape_read,
                    kinds: rec.kinds,
                    ran_backward: rec.backward,
                    replays: AtomicU64::new(0),
                    shared_replays: None,
                    counts: ReplayCounts::default(),
                    invalid: AtomicBool::new(false),
                }));
                self.generalise(st, v);
            }
            Err(e) => {
                self.unstageable(v, format!("compile error: {}", crate::panics::message(&*e)));
            }
        }
    }
}

/// The most elements of any value the recording computes or reads. Inputs nothing reads do not
/// count: a speculated function's key holds every leaf of a module argument, and a large
/// embedding table the function never touches must not make two tiny ops look worth a replay.
fn largest_used(g: &crate::graph::Graph) -> usize {
    let mut used = vec![false; g.nodes.len()];
    for n in &g.nodes {
        for &i in &n.inputs {
            used[i.0 as usize] = true;
        }
    }
    for &o in &g.outputs {
        used[o.0 as usize] = true;
    }
    let is_input = |n: &crate::graph::Node| matches!(n.op, crate::graph::NodeOp::Input(_));
    (g.nodes.iter().zip(&used))
        .filter(|(n, u)| **u || !is_input(n))
        .map(|(n, _)| n.ty.shape.elems())
        .max()
        .unwrap_or(0)
}
