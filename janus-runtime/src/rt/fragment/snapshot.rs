//! Statistics snapshots and resets of a fragment.

use super::*;
use crate::rt::stats::KeyStats;

impl Fragment {
    pub(crate) fn snapshot(&'static self) -> FragmentStats {
        let st = self.state();
        let c = &st.counters;
        let (mut variants, mut hits, mut checks, mut staged_ops) = (0, 0, 0, 0);
        // The fragment's own count, and each variant's replays (see `Fragment::dispatch`).
        let mut calls = c.calls.load(Ordering::Relaxed);
        let (mut ops_per_replay, mut most, mut arena_bytes, mut packed_bytes) = (0, 0, 0, 0);
        for s in st.variants.read().unwrap().values().flatten().filter_map(|v| v.staged.get()) {
            variants += !s.invalid.load(Ordering::Relaxed) as usize;
            arena_bytes += s.compiled.arena_bytes();
            packed_bytes += s.compiled.packed_bytes();
            let (h, c, own) = s.counted();
            calls += s.calls();
            if h >= most {
                (ops_per_replay, most) = (s.compiled.recorded_ops(), h);
            }
            (hits, checks, staged_ops) = (hits + h, checks + c, staged_ops + own * s.compiled.recorded_ops());
        }
        hits += c.retired_hits.load(Ordering::Relaxed);
        checks += c.retired_checks.load(Ordering::Relaxed);
        staged_ops += c.retired_staged_ops.load(Ordering::Relaxed);
        FragmentStats {
            name: self.name(),
            span: self.span(),
            last_line: self.site.line + self.site.more_lines,
            ops_per_replay,
            calls,
            hits,
            traces: c.traces.load(Ordering::Relaxed),
            compiles: c.compiles.load(Ordering::Relaxed),
            compile_ms: c.compile_us.load(Ordering::Relaxed) as f64 / 1e3,
            instances: c.instances.load(Ordering::Relaxed),
            instance_ms: c.instance_us.load(Ordering::Relaxed) as f64 / 1e3,
            dynamic_dims: self.dims_summary(st),
            cost: st.cost.note(),
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
            arena_bytes,
            packed_bytes,
            eager_ops: (EagerKind::ALL.iter())
                .map(|&k| (k, c.eager_ops(k).load(Ordering::Relaxed)))
                .filter(|&(_, n)| n > 0)
                .collect(),
            keys: if self.site.speculative { self.key_stats(st) } else { Vec::new() },
        }
    }

    /// What `FragmentStats::dynamic_dims` says: the generic variants, or why there is none.
    fn dims_summary(&self, st: &State) -> Option<String> {
        let generic = st.generic.read().unwrap();
        if generic.is_empty() {
            return st.dims_note.lock().unwrap().clone();
        }
        Some(generic.values().map(|g| g.describe.clone()).collect::<Vec<_>>().join("; "))
    }

    /// Per key of a whole-function fragment: its path, its graph's counts, or why it has none.
    fn key_stats(&self, st: &State) -> Vec<KeyStats> {
        let variants = st.variants.read().unwrap();
        let mut keys: Vec<KeyStats> = (variants.values().flatten())
            .map(|v| {
                let inputs = (v.inputs.iter())
                    .map(|(name, consts, dims)| match (dims.as_slice(), consts.len()) {
                        ([], 0) => name.to_string(),
                        ([], _) => format!("{name}: {}", super::describe_consts(consts)),
                        ([d], _) => format!("{name}: {d:?}"),
                        (ds, _) => format!("{name}: {} tensors", ds.len()),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let staged = v.staged.get().filter(|s| !s.invalid.load(Ordering::Relaxed));
                let profiled = v.profile.lock().unwrap().last.as_ref().map(|r| r.path.clone());
                let path = staged.map(|s| s.path.clone()).or(profiled).unwrap_or_default();
                KeyStats {
                    inputs,
                    path: path.iter().map(|d| (d.line, d.taken)).collect(),
                    speculated: staged.is_some(),
                    asserts: staged.map_or(0, |s| s.asserts.len()),
                    hits: staged.map_or(0, |s| s.counted().0),
                    failures: v.failures.load(Ordering::Relaxed),
                    not_speculated: match (staged, v.unstageable.get()) {
                        (Some(_), _) => None,
                        (None, Some(why)) => Some(why.clone()),
                        (None, None) => Some("profiling".into()),
                    },
                }
            })
            .collect();
        keys.sort_by(|a, b| b.hits.cmp(&a.hits).then_with(|| a.inputs.cmp(&b.inputs)));
        keys
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
        let mut variants = st.variants_mut();
        variants.clear();
        st.keys.store(0, Ordering::Relaxed); // under the lock, so no insert sees a stale count
        drop(variants);
        st.counters.clear();
        st.cost.reset();
    }
}
