//! Checked calls (see [`super::super::check`]): a replay compared with the block's statements.

use super::*;

/// A checked call: the replay's results, to compare with the statements' at exit.
pub(super) struct CheckRun {
    key: u64,
    variant: Arc<Variant>,
    staged: Arc<Staged>,
    replayed: Vec<Tensor>,
    /// The call's distinct input leaves and their names (for the gradient comparison; a
    /// stacked sequence's elements, not the stack).
    inputs: Vec<(String, Tensor)>,
    policy: Policy,
    started: Instant,
    _running: Checking,
}

thread_local! {
    /// How many checked blocks are running their statements on this thread.
    static CHECKING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Marks a checked block's statements as running (until dropped, panics included): blocks
/// inside them, such as a staged loop's body, then run plainly, so the check compares the
/// replay with purely eager results (and check mode does not check the same work twice).
pub(super) struct Checking;

impl Checking {
    pub(super) fn start() -> Checking {
        CHECKING.with(|c| c.set(c.get() + 1));
        Checking
    }

    pub(super) fn active() -> bool {
        CHECKING.with(|c| c.get() > 0)
    }
}

impl Drop for Checking {
    fn drop(&mut self) {
        CHECKING.with(|c| c.set(c.get() - 1));
    }
}

impl Fragment {
    /// A checked call: replays (then rewinds the random stream, so the statements draw the
    /// same numbers), and runs the statements; [`Scope::exit`] compares.
    #[cold]
    pub(super) fn start_check(
        &'static self,
        st: &State,
        key: u64,
        variant: &Arc<Variant>,
        staged: &Arc<Staged>,
        (distinct, targets): (&[Tensor], Vec<(String, Tensor)>),
        policy: Policy,
    ) -> Enter {
        let started = Instant::now();
        let pos = crate::random::stream_position();
        let replayed = crate::panics::catch_quietly(|| staged.compiled.replay(distinct));
        crate::random::move_to(pos.0, pos.1);
        let Ok(mut replayed) = replayed else {
            staged.counts.panicked.fetch_add(1, Ordering::Relaxed);
            st.counters.eager(EagerKind::ReplayPanicked, "the replay panicked: ran the statements");
            return Enter::Body(self.scope(ScopeKind::Plain, EagerKind::ReplayPanicked));
        };
        if !staged.asserts.is_empty() && !super::super::speculate::commit(&mut replayed, &staged.asserts) {
            self.speculation_failed(st, key, variant, "an assert did not hold");
            st.counters.eager(EagerKind::SpeculationFailed, "speculation failed: ran the statements");
            return Enter::Body(self.scope(ScopeKind::Plain, EagerKind::SpeculationFailed));
        }
        staged.counts.checks.fetch_add(1, Ordering::Relaxed);
        let run = CheckRun {
            key,
            variant: variant.clone(),
            staged: staged.clone(),
            replayed,
            inputs: targets,
            policy,
            started,
            _running: Checking::start(),
        };
        Enter::Body(self.scope(ScopeKind::Check(run), EagerKind::Checked))
    }
}

impl Fragment {
    /// Compares a checked call's replay with its statements' results; a disagreement panics in
    /// check mode, and otherwise invalidates the variant with a warning (the statements'
    /// results, already the block's, are what the call returns).
    pub(super) fn finish_check(&'static self, run: CheckRun, outputs: &[Probed]) {
        let st = self.state();
        let eager: Vec<(&'static str, &Tensor)> =
            outputs.iter().flat_map(|p| p.leaves.iter().map(move |t| (p.name, t))).collect();
        let eager_consts: Vec<ConstLeaf> = outputs.iter().flat_map(|p| p.consts.iter().copied()).collect();
        let diff = check::compare(&run.replayed, &run.staged.consts, &eager, &eager_consts)
            .or_else(|| compare_gradients(&run, &eager));
        st.counters.check_us.fetch_add(run.started.elapsed().as_micros() as u64, Ordering::Relaxed);
        let Some(diff) = diff else { return };
        Counters::bump(&st.counters.divergences);
        let what = format!(
            "fragment `{}` at {} disagrees with eager execution: {diff} (key {:016x})",
            self.name(),
            self.span(),
            run.key
        );
        match run.policy {
            Policy::Panic => panic!("janus check: {what}"),
            Policy::Invalidate => {
                log::warn!(target: "janus", "{what}; this key runs its statements from now on (a helper reading a global or thread-local that changed?)");
                let _ =
                    run.variant.unstageable.set(format!("diverged from eager execution at a check: {diff}"));
                run.staged.invalid.store(true, Ordering::Relaxed);
                if run.staged.shared_replays.is_some() {
                    self.instance_diverged(self.state(), &run.variant);
                }
            }
        }
    }
}

/// Once the values agree: the compiled backward against eager's, as vector-Jacobian products
/// with the same cotangents on every differentiable output, with respect to every input that
/// needs a gradient. Only the block's own backward runs (twice): the walk stops at its inputs.
fn compare_gradients(run: &CheckRun, eager: &[(&'static str, &Tensor)]) -> Option<String> {
    if !crate::autograd::is_grad_enabled() {
        return None;
    }
    let outs: Vec<(&Tensor, &Tensor)> = (eager.iter().map(|(_, t)| *t).zip(&run.replayed))
        .filter(|(e, r)| e.dtype().is_float() && e.needs_grad() && r.needs_grad())
        .collect();
    let targets: Vec<&(String, Tensor)> = run.inputs.iter().filter(|(_, t)| t.needs_grad()).collect();
    if outs.is_empty() || targets.is_empty() {
        return None;
    }
    let seeds: Vec<Tensor> = outs.iter().enumerate().map(|(k, (e, _))| check::cotangent(e, k)).collect();
    let at: Vec<Tensor> = targets.iter().map(|(_, t)| t.clone()).collect();
    let (want, got) = crate::autograd::no_grad(|| {
        let roots = |replayed: bool| -> Vec<(&Tensor, Tensor)> {
            let side = outs.iter().map(|&(e, r)| if replayed { r } else { e });
            side.zip(&seeds).map(|(t, s)| (t, s.clone())).collect()
        };
        let want = crate::autograd::vjp_at(&roots(false), &at);
        let got = crate::autograd::vjp_at(&roots(true), &at);
        (want, got)
    });
    for ((name, t), (w, g)) in targets.iter().zip(want.into_iter().zip(got)) {
        let zero = || crate::autograd::no_grad(|| Tensor::zeros_like(t));
        let (w, g) = match (w, g) {
            (None, None) => continue,
            (w, g) => (w.unwrap_or_else(zero), g.unwrap_or_else(zero)),
        };
        if let Some(err) = check::grad_mismatch(&g, &w) {
            return Some(format!(
                "the gradient of input `{name}` ({:?} {}) from the compiled backward has max relative \
                 error {err:e} against eager's (same cotangents on every output)",
                t.shape_ref(),
                t.dtype()
            ));
        }
    }
    None
}
