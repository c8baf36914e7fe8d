//! Statistics snapshots and resets of a fragment.

use super::*;

impl Fragment {
    pub(crate) fn snapshot(&'static self) -> FragmentStats {
        let st = self.state();
        let c = &st.counters;
        let (mut variants, mut hits, mut checks, mut staged_ops) = (0, 0, 0, 0);
        for s in st.variants.read().unwrap().values().flatten().filter_map(|v| v.staged.get()) {
            variants += !s.invalid.load(Ordering::Relaxed) as usize;
            let (h, c, own) = s.counted();
            (hits, checks, staged_ops) = (hits + h, checks + c, staged_ops + own * s.compiled.recorded_ops());
        }
        hits += c.retired_hits.load(Ordering::Relaxed);
        checks += c.retired_checks.load(Ordering::Relaxed);
        staged_ops += c.retired_staged_ops.load(Ordering::Relaxed);
        FragmentStats {
            name: self.name(),
            span: self.span(),
            calls: c.calls.load(Ordering::Relaxed),
            hits,
            traces: c.traces.load(Ordering::Relaxed),
            compiles: c.compiles.load(Ordering::Relaxed),
            compile_ms: c.compile_us.load(Ordering::Relaxed) as f64 / 1e3,
            checks,
            check_ms: c.check_us.load(Ordering::Relaxed) as f64 / 1e3,
            divergences: c.divergences.load(Ordering::Relaxed),
            assert_failures: c.assert_failures.load(Ordering::Relaxed),
            variants,
            eager: c.eager.lock().unwrap().clone(),
            eager_runs: (EagerKind::ALL.iter())
                .map(|&k| (k, c.eager_runs[k as usize].load(Ordering::Relaxed)))
                .filter(|&(_, n)| n > 0)
                .collect(),
            staged_ops,
            staged_backward_ops: c.staged_backward_ops.load(Ordering::Relaxed),
            eager_ops: (EagerKind::ALL.iter())
                .map(|&k| (k, c.eager_ops(k).load(Ordering::Relaxed)))
                .filter(|&(_, n)| n > 0)
                .collect(),
        }
    }

    pub(crate) fn reset_stats(&'static self) {
        let st = self.state();
        st.counters.clear();
        for s in st.variants.read().unwrap().values().flatten().filter_map(|v| v.staged.get()) {
            s.restart_counts();
        }
    }

    pub(crate) fn reset(&'static self) {
        let st = self.state();
        let mut variants = st.variants.write().unwrap();
        variants.clear();
        st.keys.store(0, Ordering::Relaxed); // under the lock, so no insert sees a stale count
        drop(variants);
        st.counters.clear();
    }
}
