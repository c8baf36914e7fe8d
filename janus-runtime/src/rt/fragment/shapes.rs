//! Shape-polymorphic variants (`#[janus(dynamic_dims = true)]`, the default).
//!
//! A block compiles one graph per key at first, specialised to its sizes, as torch.compile
//! does. When a second key that differs only in leaf sizes has compiled, the two variants are
//! fitted into one [`Generic`]: the dims that changed become symbols (dims that changed
//! together become one symbol), and every size and size-derived constant of the graphs an
//! expression of them. A later key whose sizes match the pattern gets an *instance*: its
//! templates filled in and lowered, without recording, derivation or optimisation.
//!
//! Guards: fixed dims must keep their size, and the dims of one symbol must stay equal. A key
//! that fails them records and compiles as before. Some instances are *validated*: the call
//! runs its statements once, recorded, and gets the instance only if the recording is the
//! instance's recorded graph exactly. That holds for the first instance of each generic
//! variant (a third size confirms the expressions), for a symbol of 1 (which broadcasts, and
//! library code may record less there), and for every new size of a block whose user code
//! reads sizes on the host (`dims()`, `shape()`, `numel()`: the value read could have become
//! anything, which the fit cannot see).

use super::*;
use crate::compile::Generic;
use std::fmt::Write;

/// Instances kept per fragment; the oldest is dropped beyond (it is rebuilt if its sizes come
/// back).
const MAX_INSTANCES: usize = 64;

/// Samples fitted at most (the newest).
const MAX_SAMPLES: usize = 4;

/// One input leaf dimension of a generic variant.
#[derive(Clone, Copy, Debug, PartialEq)]
enum DimPat {
    Fixed(usize),
    Sym(usize),
}

/// A block's generic variant for one erased key.
pub(super) struct Shapes {
    /// Per leaf, per dimension.
    pattern: Vec<Vec<DimPat>>,
    symbols: usize,
    generic: Arc<Generic>,
    /// The samples' (equal) host constants, asserts and path.
    consts: Vec<ConstLeaf>,
    asserts: Vec<bool>,
    path: Vec<crate::trace::Decision>,
    /// For `explain()`: which dims became symbols.
    pub(super) describe: String,
    /// Replays of all instances (they are sampled for checks as one variant).
    replays: Arc<AtomicU64>,
    /// Where a sample's statements read a size on the host: each instance must then match a
    /// recording at its sizes first.
    validate: Option<&'static std::panic::Location<'static>>,
    /// The samples' output kinds (a validating recording must have the same).
    kinds: Vec<OutKind>,
    /// Whether the samples' recordings called `backward()`.
    ran_backward: bool,
    /// Whether one recording at a size other than the samples' matched its instance. Until
    /// then instances are validated like those of a block that reads sizes: two samples fix
    /// the expressions, a third point confirms them (a constant that moved between the
    /// samples' calls for another reason, such as a host counter, rarely follows them too).
    confirmed: AtomicBool,
}

impl Shapes {
    /// The symbol values for leaves of these dims, if they match the pattern.
    /// (A symbol may be 1 here; such an instance must be validated by a recording, see
    /// [`Fragment::validated_instance`].)
    fn matches<'a>(&self, leaves: impl Iterator<Item = &'a [usize]>) -> Option<Vec<usize>> {
        let mut values = vec![0; self.symbols];
        for (dims, pat) in leaves.zip(&self.pattern) {
            for (&d, p) in dims.iter().zip(pat) {
                match *p {
                    DimPat::Fixed(n) if n != d => return None,
                    DimPat::Sym(s) if d == 0 || (values[s] != 0 && values[s] != d) => return None,
                    DimPat::Sym(s) => values[s] = d,
                    DimPat::Fixed(_) => {}
                }
            }
        }
        Some(values)
    }
}

/// Per leaf, per dim: fixed or a symbol; the number of symbols; their values per sample.
type Fitted = (Vec<Vec<DimPat>>, usize, Vec<Vec<usize>>);

/// The pattern of samples' leaf dims, the number of symbols and their values per sample; `None`
/// when no dim changed or a changing dim is below 2 in some sample.
fn pattern(samples: &[&[Vec<usize>]]) -> Option<Fitted> {
    let mut by_values: Vec<Vec<usize>> = Vec::new();
    let mut pattern = Vec::with_capacity(samples[0].len());
    for (l, dims) in samples[0].iter().enumerate() {
        let mut pat = Vec::with_capacity(dims.len());
        for a in 0..dims.len() {
            let vals: Vec<usize> = samples.iter().map(|s| s[l][a]).collect();
            if vals.iter().all(|&v| v == vals[0]) {
                pat.push(DimPat::Fixed(vals[0]));
                continue;
            }
            if vals.iter().any(|&v| v < 2) {
                return None;
            }
            let s = by_values.iter().position(|v| *v == vals).unwrap_or_else(|| {
                by_values.push(vals);
                by_values.len() - 1
            });
            pat.push(DimPat::Sym(s));
        }
        pattern.push(pat);
    }
    if by_values.is_empty() {
        return None;
    }
    let per_sample = (0..samples.len()).map(|i| by_values.iter().map(|v| v[i]).collect()).collect();
    Some((pattern, by_values.len(), per_sample))
}

impl Fragment {
    /// After `v` compiled: fits it with the block's other compiled variants that differ from it
    /// only in sizes, and keeps the generic variant when they fit.
    #[inline(never)]
    pub(super) fn generalise(&'static self, st: &State, v: &Arc<Variant>) {
        if !self.site.dynamic_dims || v.instance {
            return;
        }
        let mut candidates: Vec<(u64, Arc<Variant>, Arc<Staged>)> = (st.variants.read().unwrap().values())
            .flatten()
            .filter(|u| !u.instance && u.erased == v.erased)
            .filter_map(|u| {
                let s = u.staged.get().filter(|s| !s.invalid.load(Ordering::Relaxed))?;
                Some((u.seq, u.clone(), s.clone()))
            })
            .collect();
        if candidates.len() < 2 {
            return;
        }
        candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
        candidates.truncate(MAX_SAMPLES);
        let mut why = String::new();
        for n in [candidates.len(), 2] {
            match self.fit(&candidates[..n]) {
                Ok(shapes) => {
                    log::info!(target: "janus", "{} ({}) {}", self.name(), self.span(), shapes.describe);
                    st.generic.write().unwrap().insert(v.erased.clone(), Arc::new(shapes));
                    *st.dims_note.lock().unwrap() = None;
                    return;
                }
                Err(e) => why = e,
            }
            if n == 2 {
                break;
            }
        }
        log::info!(target: "janus", "{} ({}) not generalised over sizes: {why}", self.name(), self.span());
        *st.dims_note.lock().unwrap() = Some(format!("not generalised over sizes: {why}"));
    }

    /// Whether `rec`, the first recording of `v`, fits as one template with a recording of a
    /// variant that differs from `v` only in sizes: a compiled one's, or a pending one of a
    /// key still profiling. Two recordings at different sizes that agree up to their sizes are
    /// as good a profile as two at one size, and a constant that moved between the calls for
    /// another reason (a host counter) makes them disagree, as two recordings at one size
    /// would.
    pub(super) fn agrees_with_sibling(&self, st: &State, v: &Variant, rec: &Recorded) -> bool {
        if !self.site.dynamic_dims || v.instance {
            return false;
        }
        let siblings: Vec<Arc<Variant>> = (st.variants.read().unwrap().values().flatten())
            .filter(|u| !std::ptr::eq(&***u, v) && !u.instance && u.erased == v.erased)
            .cloned()
            .collect();
        let fits = |u: &Variant,
                    graph: &crate::graph::Graph,
                    host: (&[ConstLeaf], &[OutKind], &[bool], &[crate::trace::Decision])| {
            let same_host = host == (&rec.consts[..], &rec.kinds[..], &rec.asserts[..], &rec.path[..]);
            let Some((_, _, values)) = pattern(&[&u.leaf_dims, &v.leaf_dims]) else { return false };
            same_host && crate::graph::generic::Template::fit(&[graph, &rec.graph], &values).is_ok()
        };
        siblings.iter().any(|u| {
            if let Some(s) = u.staged.get() {
                let host = (&s.consts[..], &s.kinds[..], &s.asserts[..], &s.path[..]);
                return !s.invalid.load(Ordering::Relaxed) && fits(u, s.compiled.recorded_graph(), host);
            }
            let Ok(prof) = u.profile.try_lock() else { return false };
            let Some(r) = &prof.last else { return false };
            fits(u, &r.graph, (&r.consts[..], &r.kinds[..], &r.asserts[..], &r.path[..]))
        })
    }

    fn fit(&self, samples: &[(u64, Arc<Variant>, Arc<Staged>)]) -> Result<Shapes, String> {
        let first = &samples[0].2;
        if samples.iter().any(|s| {
            s.2.consts != first.consts
                || s.2.kinds != first.kinds
                || s.2.asserts != first.asserts
                || s.2.path != first.path
        }) {
            return Err("host outputs, asserts or path differ between sizes".into());
        }
        let dims: Vec<&[Vec<usize>]> = samples.iter().map(|s| s.1.leaf_dims.as_slice()).collect();
        let (pattern, symbols, values) = pattern(&dims).ok_or("a changing dim was 1")?;
        let compiled = samples.iter().map(|s| s.2.compiled.clone()).collect();
        let generic = Generic::fit(compiled, values)?;
        let mut describe = format!("generalised over {symbols} symbolic size(s) (");
        let names = leaf_names(&samples[0].1.inputs);
        for (l, pat) in pattern.iter().enumerate() {
            for (a, p) in pat.iter().enumerate() {
                if let DimPat::Sym(s) = *p {
                    let sep = if describe.ends_with('(') { "" } else { ", " };
                    let name = names.get(l).copied().unwrap_or("grads");
                    let _ = write!(describe, "{sep}{name}.dims()[{a}] = s{s}");
                }
            }
        }
        let _ = write!(describe, "); {} symbolic sizes and constants in the graph", generic.symbolic_slots());
        let validate = samples.iter().find_map(|s| s.2.shape_read);
        if let Some(at) = validate {
            // A stacked sequence's length counts as read where the runtime registers it.
            let _ = if at.file().contains("rt/fragment") {
                write!(
                    describe,
                    "; each new size is validated by one recording (a sequence's length is read on the host)"
                )
            } else {
                write!(
                    describe,
                    "; each new size is validated by one recording (sizes read at {}:{})",
                    at.file(),
                    at.line()
                )
            };
        }
        Ok(Shapes {
            pattern,
            symbols,
            generic: Arc::new(generic),
            consts: first.consts.clone(),
            asserts: first.asserts.clone(),
            path: first.path.clone(),
            describe,
            replays: Arc::new(AtomicU64::new(0)),
            validate,
            kinds: first.kinds.clone(),
            ran_backward: samples.iter().any(|s| s.2.ran_backward),
            confirmed: AtomicBool::new(false),
        })
    }

    /// A new key's instance of the block's generic variant, if it has one these sizes match.
    #[inline(never)]
    pub(super) fn instance_for(
        &'static self,
        st: &State,
        fp: u64,
        key: &Key,
        leaves: &[Tensor],
        inputs: &[Probed],
    ) -> Option<Arc<Variant>> {
        if !self.site.dynamic_dims || st.generic.read().unwrap().is_empty() {
            return None;
        }
        self.instance_of(st, (fp, key), key::erase_dims(key, leaves), leaves, inputs)
    }

    /// An instance for `key` of the generic variant of erased key `erased` (the key's own, or
    /// one that subsumes it, see [`key::subsumes`]), if these sizes match it.
    pub(super) fn instance_of(
        &'static self,
        st: &State,
        (fp, key): (u64, &Key),
        erased: Key,
        leaves: &[Tensor],
        inputs: &[Probed],
    ) -> Option<Arc<Variant>> {
        let shapes = st.generic.read().unwrap().get(&erased)?.clone();
        if shapes.validate.is_some() || !shapes.confirmed.load(Ordering::Relaxed) {
            return None; // the call records, and `validated_instance` compares
        }
        let values = shapes.matches(leaves.iter().map(Tensor::sizes))?;
        if values.contains(&1) {
            return None; // a size of 1: validated by a recording
        }
        let staged = self.make_instance(st, &shapes, &values)?;
        let v = Arc::new(Variant {
            staged: OnceLock::from(Arc::new(staged)),
            instance: true,
            ..Variant::new(key.clone(), erased, signature(inputs), leaves)
        });
        Some(self.install_instance(st, fp, v))
    }

    /// Puts instance `v` in the variant table (replacing its key's variant if that is still
    /// profiling) and in the instances' list; returns the key's variant.
    pub(super) fn install_instance(&self, st: &State, fp: u64, v: Arc<Variant>) -> Arc<Variant> {
        let mut map = st.variants_mut();
        let vs = map.entry(fp).or_default();
        match vs.iter().position(|u| u.key == v.key) {
            // A key still profiling gives way to the instance (it no longer counts as a key).
            Some(k) if vs[k].staged.get().is_none() && vs[k].unstageable.get().is_none() => {
                vs[k] = v.clone();
                st.keys.fetch_sub(1, Ordering::Relaxed);
            }
            Some(k) => return vs[k].clone(),
            None => vs.push(v.clone()),
        }
        self.keep_instance(st, &mut map, fp, &v);
        v
    }

    /// The staged instance of `shapes` for symbol values `values` (its time counted, the
    /// instance itself once kept); `None` (logged) if the templates do not instantiate there.
    fn make_instance(&self, st: &State, shapes: &Shapes, values: &[usize]) -> Option<Staged> {
        let t0 = Instant::now();
        let compiled = match crate::panics::catch_quietly(|| shapes.generic.instantiate(values)) {
            Ok(Ok(c)) => c,
            failed => {
                let why = match failed {
                    Ok(Err(why)) => why,
                    _ => "panicked".into(),
                };
                log::info!(target: "janus", "{} ({}): no instance for sizes {values:?}: {why}; compiling them", self.name(), self.span());
                return None;
            }
        };
        st.counters.instance_us.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
        Some(Staged {
            compiled: Arc::new(compiled),
            consts: shapes.consts.clone(),
            kinds: shapes.kinds.clone(),
            ran_backward: shapes.ran_backward,
            asserts: shapes.asserts.clone(),
            path: shapes.path.clone(),
            shape_read: None,
            replays: AtomicU64::new(0),
            shared_replays: Some(shapes.replays.clone()),
            counts: ReplayCounts::default(),
            invalid: AtomicBool::new(false),
        })
    }

    /// For a block whose statements read sizes: the instance for `v`'s sizes, if `rec` (its
    /// first recording) is exactly the instance's recorded graph, with the same host outputs.
    pub(super) fn validated_instance(
        &'static self,
        st: &State,
        v: &Arc<Variant>,
        rec: &Recorded,
    ) -> Option<Staged> {
        if !self.site.dynamic_dims || v.instance {
            return None;
        }
        let shapes = st.generic.read().unwrap().get(&v.erased)?.clone();
        let values = shapes.matches(v.leaf_dims.iter().map(Vec::as_slice))?;
        if shapes.validate.is_none() && shapes.confirmed.load(Ordering::Relaxed) && !values.contains(&1) {
            return None;
        }
        let host_same = rec.consts == shapes.consts
            && rec.kinds == shapes.kinds
            && rec.asserts == shapes.asserts
            && rec.path == shapes.path;
        if !host_same {
            return None;
        }
        // The recorded graph first: lowering the instance is wasted if it differs.
        let recorded = shapes.generic.recorded(&values).ok()?;
        if let Some(d) = recorded.diff(&rec.graph) {
            let at = d.span.map(|s| format!("{}:{}", s.file(), s.line())).unwrap_or_else(|| self.span());
            log::info!(target: "janus", "{} ({}): the recording at sizes {values:?} differs from the instance at {at}; compiling it", self.name(), self.span());
            return None;
        }
        let mut staged = self.make_instance(st, &shapes, &values)?;
        // It stays a block that reads sizes, should it become a sample of a later fit.
        staged.shape_read = rec.shape_read;
        if !values.contains(&1) {
            shapes.confirmed.store(true, Ordering::Relaxed);
        }
        Some(staged)
    }

    /// Keeps `v` (an instance, or a variant staged by validation) among the newest
    /// [`MAX_INSTANCES`], dropping the oldest beyond.
    fn keep_instance(
        &self,
        st: &State,
        map: &mut HashMap<u64, Vec<Arc<Variant>>, key::BuildFx>,
        fp: u64,
        v: &Arc<Variant>,
    ) {
        Counters::bump(&st.counters.instances);
        let mut instances = st.instances.lock().unwrap();
        instances.push_back((fp, v.clone()));
        if instances.len() > MAX_INSTANCES {
            let (old_fp, old) = instances.pop_front().expect("over the limit");
            if let Some(vs) = map.get_mut(&old_fp) {
                vs.retain(|u| !Arc::ptr_eq(u, &old));
            }
            if let Some(s) = old.staged.get() {
                s.retire(&st.counters); // its statistics live on in the fragment's
            }
        }
    }

    /// A check found instance `v` disagreeing with eager execution: its generic variant is
    /// dropped, so later sizes record and compile again.
    pub(super) fn instance_diverged(&self, st: &State, v: &Variant) {
        if st.generic.write().unwrap().remove(&v.erased).is_some() {
            *st.dims_note.lock().unwrap() = Some(
                "not generalised over sizes: an instance diverged from eager execution at a check".into(),
            );
        }
    }

    /// Stages `v` with an instance validated by its recording: it leaves the keys (it no
    /// longer counts against `max_variants`) for the instances' list.
    pub(super) fn stage_validated(&'static self, st: &State, v: &Arc<Variant>, staged: Staged) {
        if v.staged.set(Arc::new(staged)).is_err() {
            return;
        }
        st.keys.fetch_sub(1, Ordering::Relaxed);
        let mut map = st.variants_mut();
        let fp = v.key.fingerprint();
        self.keep_instance(st, &mut map, fp, v);
    }
}

/// A key's input signature: per input its name, host constants and leaf dims.
pub(super) fn signature(inputs: &[Probed]) -> Vec<InputSignature> {
    inputs
        .iter()
        .map(|p| (p.name, p.consts.clone(), p.leaves.iter().map(|t| t.sizes().to_vec()).collect()))
        .collect()
}

/// The name of each leaf's input, in leaf order.
fn leaf_names(inputs: &[InputSignature]) -> Vec<&'static str> {
    inputs.iter().flat_map(|(name, _, dims)| std::iter::repeat_n(*name, dims.len())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_that_change_together_are_one_symbol() {
        let a = vec![vec![8, 16], vec![8, 4], vec![16]];
        let b = vec![vec![5, 16], vec![5, 4], vec![16]];
        let (pat, n, values) = pattern(&[&a, &b]).unwrap();
        assert_eq!(n, 1);
        assert_eq!(pat[0], [DimPat::Sym(0), DimPat::Fixed(16)]);
        assert_eq!(pat[1][0], DimPat::Sym(0));
        assert_eq!(values, [vec![8], vec![5]]);
    }

    #[test]
    fn a_dim_that_was_one_in_a_sample_is_not_generalised() {
        let a = vec![vec![1, 4]];
        let b = vec![vec![5, 4]];
        assert!(pattern(&[&a, &b]).is_none());
        assert!(pattern(&[&a, &a]).is_none(), "nothing changed");
    }
}
