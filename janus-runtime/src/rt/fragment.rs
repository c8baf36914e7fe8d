//! `Fragment`: one static block of a `#[janus]` function, and its dispatch (DESIGN §6).
//!
//! For each call the generated code probes the block's inputs and calls [`Fragment::enter`]:
//!
//! 1. a key with a compiled graph replays it ([`Enter::Replay`]);
//! 2. otherwise the block's statements run ([`Enter::Body`]), recorded while the key is being
//!    profiled; when two consecutive recordings agree (and the key was seen `profile` times) the
//!    graph is compiled and later calls replay it;
//! 3. opaque inputs or outputs, unusable or disagreeing recordings, the variant limit, eager
//!    mode and compile failures run the statements eagerly, each counted with its reason.
//!
//! A hit reads the variant table under a read lock and touches only atomics.

use super::key::{self, Key};
use super::probe::{Probed, Replayed};
use super::stats::{Counters, FragmentStats};
use super::{Mode, mode};
use crate::autograd::is_grad_enabled;
use crate::graph::NodeOp;
use crate::module::ConstLeaf;
use crate::tensor::Tensor;
use crate::trace::{self, RecordingGuard};
use crate::traced::Compiled;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

/// A recording larger than this (a staged loop with a huge trip count) is not compiled.
const MAX_RECORDED_NODES: usize = 200_000;

/// Below this many elements per op, a block of fewer than `min_ops` ops runs eagerly.
const SMALL_ELEMS: usize = 4096;

/// Where a block is and the options of its function (written by the macro).
#[derive(Debug)]
pub struct Site {
    /// The function's name.
    pub function: &'static str,
    /// Source file.
    pub file: &'static str,
    /// Line of the block's first statement.
    pub line: u32,
    /// The block's number within the function.
    pub index: u32,
    /// Recordings of a key before it is compiled (at least two agreeing ones are needed).
    pub profile: u32,
    /// Keys compiled at most; unseen keys beyond run eagerly.
    pub max_variants: u32,
    /// A block whose recording has fewer ops than this, all on small tensors, runs eagerly
    /// from then on: replaying it would cost more than it saves.
    pub min_ops: u32,
}

/// A static block's dispatch state; one `static` per block in the generated code.
pub struct Fragment {
    site: Site,
    state: OnceLock<State>,
}

struct State {
    variants: RwLock<HashMap<u64, Vec<Arc<Variant>>, key::BuildFx>>,
    keys: AtomicU64,
    opaque: OnceLock<String>,
    counters: Counters,
}

/// An input's name, constants and leaf shapes (to name the input that changes between keys).
type InputSignature = (&'static str, Vec<ConstLeaf>, Vec<Vec<usize>>);

/// One key's state.
struct Variant {
    key: Key,
    inputs: Vec<InputSignature>,
    staged: OnceLock<Arc<Staged>>,
    unstageable: OnceLock<String>,
    profile: Mutex<Profile>,
}

#[derive(Default)]
struct Profile {
    calls: u32,
    last: Option<Recorded>,
}

/// A usable recording and what the outputs looked like.
struct Recorded {
    graph: crate::graph::Graph,
    consts: Vec<ConstLeaf>,
    kinds: Vec<(bool, bool)>,
}

/// A compiled variant.
struct Staged {
    compiled: Arc<Compiled>,
    consts: Vec<ConstLeaf>,
}

/// What the generated code does next.
pub enum Enter {
    /// Run the block's statements, then call [`Scope::exit`] with the outputs.
    Body(Scope),
    /// Rebuild the outputs from these values.
    Replay(Replayed),
}

/// An active run of a block's statements.
pub struct Scope {
    frag: &'static Fragment,
    kind: ScopeKind,
}

enum ScopeKind {
    Plain,
    Recording { variant: Arc<Variant>, guard: RecordingGuard, leaves: Vec<Tensor> },
    Check { key: u64, replayed: Vec<Tensor>, _running: Checking },
}

thread_local! {
    /// How many checked blocks are running their statements on this thread.
    static CHECKING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Marks a checked block's statements as running (until dropped, panics included): blocks
/// inside them, such as a staged loop's body, then run plainly, so the check compares the
/// replay with purely eager results (and check mode does not check the same work twice).
struct Checking;

impl Checking {
    fn start() -> Checking {
        CHECKING.with(|c| c.set(c.get() + 1));
        Checking
    }

    fn active() -> bool {
        CHECKING.with(|c| c.get() > 0)
    }
}

impl Drop for Checking {
    fn drop(&mut self) {
        CHECKING.with(|c| c.set(c.get() - 1));
    }
}

impl Fragment {
    /// A fragment for the block at `site`.
    pub const fn new(site: Site) -> Fragment {
        Fragment { site, state: OnceLock::new() }
    }

    fn state(&'static self) -> &'static State {
        self.state.get_or_init(|| {
            super::stats::register(self);
            crate::config::init_logging();
            State {
                variants: RwLock::new(HashMap::default()),
                keys: AtomicU64::new(0),
                opaque: OnceLock::new(),
                counters: Counters::default(),
            }
        })
    }

    /// `function#block`.
    pub fn name(&self) -> String {
        format!("{}#{}", self.site.function, self.site.index)
    }

    fn span(&self) -> String {
        format!("{}:{}", self.site.file, self.site.line)
    }

    /// Decides how this call runs. `generics` are the `type_name`s of the function's generic
    /// parameters (and `Self`), which key the cache like inputs do.
    pub fn enter(&'static self, probes: impl FnOnce() -> Vec<Probed>, generics: &[&'static str]) -> Enter {
        let st = self.state();
        Counters::bump(&st.counters.calls);
        let plain = |reason: &str| {
            st.counters.eager(reason);
            Enter::Body(Scope { frag: self, kind: ScopeKind::Plain })
        };
        let mode = mode();
        if mode == Mode::Eager {
            return plain("mode eager");
        }
        if trace::is_recording() {
            return plain("recorded inline by an enclosing graph");
        }
        if Checking::active() {
            return plain("checked as part of an enclosing block");
        }
        if let Some(why) = st.opaque.get() {
            return plain(why);
        }
        let inputs = probes();
        if let Some(p) = inputs.iter().find(|p| p.opaque.is_some()) {
            return plain(&format!("opaque input `{}`: {}", p.name, p.opaque.unwrap()));
        }
        let leaves = key::gather_leaves(&inputs);
        let firsts = key::first_occurrences(&leaves);
        let key = key::build(&inputs, (&leaves, &firsts), generics, mode);
        let fp = key.fingerprint();
        let variant = match self.lookup(st, fp, &key) {
            Some(v) => v,
            None => match self.insert(st, fp, key, &inputs) {
                Ok(v) => v,
                Err(why) => return plain(&why),
            },
        };
        if let Some(staged) = variant.staged.get() {
            let n = st.counters.hits.fetch_add(1, Ordering::Relaxed) + 1;
            let every = crate::config::config().check_every;
            let distinct = key::distinct(leaves, &firsts);
            if mode == Mode::Check || (every > 0 && n.is_multiple_of(every)) {
                // Replay, then rewind the random stream so the statements draw the same numbers.
                let pos = crate::random::stream_position();
                let replayed = staged.compiled.replay(&distinct);
                crate::random::set_stream_position(pos.0, pos.1);
                Counters::bump(&st.counters.checks);
                let kind = ScopeKind::Check { key: fp, replayed, _running: Checking::start() };
                return Enter::Body(Scope { frag: self, kind });
            }
            let tensors = staged.compiled.replay(&distinct).into();
            return Enter::Replay(Replayed {
                tensors,
                consts: staged.consts.iter().copied().collect::<VecDeque<_>>(),
            });
        }
        if let Some(why) = variant.unstageable.get() {
            return plain(why);
        }
        let Ok(mut prof) = variant.profile.try_lock() else {
            return plain("being compiled on another thread");
        };
        prof.calls += 1;
        drop(prof);
        Counters::bump(&st.counters.traces);
        let guard = trace::start();
        let names: Vec<&'static str> =
            inputs.iter().flat_map(|p| std::iter::repeat_n(p.name, p.leaves.len())).collect();
        for (k, t) in leaves.iter().enumerate() {
            guard.register_input(t, names.get(k).copied().unwrap_or("grads"));
        }
        Enter::Body(Scope { frag: self, kind: ScopeKind::Recording { variant, guard, leaves } })
    }

    fn lookup(&self, st: &State, fp: u64, key: &Key) -> Option<Arc<Variant>> {
        st.variants.read().unwrap().get(&fp)?.iter().find(|v| v.key == *key).cloned()
    }

    /// A new key's variant, or the reason it runs eagerly (the variant limit).
    fn insert(&self, st: &State, fp: u64, key: Key, inputs: &[Probed]) -> Result<Arc<Variant>, String> {
        let mut map = st.variants.write().unwrap();
        if let Some(v) = map.get(&fp).and_then(|vs| vs.iter().find(|v| v.key == key)) {
            return Ok(v.clone());
        }
        let sig: Vec<_> = inputs
            .iter()
            .map(|p| (p.name, p.consts.clone(), p.leaves.iter().map(|t| t.dims().to_vec()).collect()))
            .collect();
        if st.keys.load(Ordering::Relaxed) >= self.site.max_variants as u64 {
            // Name the input that changes, to point at the remedy.
            let churn = map
                .values()
                .flatten()
                .next()
                .and_then(|v| sig.iter().zip(&v.inputs).find(|(a, b)| a != b))
                .map(|(a, _)| a.0);
            return Err(match churn {
                Some(name) => format!(
                    "variant limit ({}) reached: `{name}` differs between calls (mark a scalar dynamic(..), or bucket/pad shapes)",
                    self.site.max_variants
                ),
                None => format!(
                    "variant limit ({}) reached: inputs as before, but grad flags, aliasing, the mode or generic types differ",
                    self.site.max_variants
                ),
            });
        }
        st.keys.fetch_add(1, Ordering::Relaxed);
        let v = Arc::new(Variant {
            key,
            inputs: sig,
            staged: OnceLock::new(),
            unstageable: OnceLock::new(),
            profile: Mutex::new(Profile::default()),
        });
        map.entry(fp).or_default().push(v.clone());
        Ok(v)
    }

    fn unstageable(&self, v: &Variant, why: String) {
        log::info!(target: "janus", "{} ({}) runs eagerly for this key: {why}", self.name(), self.span());
        let _ = v.unstageable.set(why);
    }

    fn record_finished(&'static self, v: &Arc<Variant>, leaves: &[Tensor], rec: Recorded) {
        let st = self.state();
        if rec.graph.nodes.len() > MAX_RECORDED_NODES {
            let n = rec.graph.nodes.len();
            return self.unstageable(
                v,
                format!("recording too large to compile ({n} nodes; a loop unrolled too far?)"),
            );
        }
        let mut prof = v.profile.lock().unwrap();
        let Some(prev) = prof.last.take() else {
            prof.last = Some(rec);
            return;
        };
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
        let ops = (rec.graph.nodes.iter())
            .filter(|n| matches!(&n.op, NodeOp::Op(op) if !matches!(op, crate::ops::Op::Full(_))))
            .count();
        let largest = rec.graph.nodes.iter().map(|n| n.ty.shape.numel()).max().unwrap_or(0);
        if ops < self.site.min_ops as usize && largest < SMALL_ELEMS {
            let why = format!(
                "too small to gain from compiling: {ops} op(s) on at most {largest} elements (min_ops = {})",
                self.site.min_ops
            );
            log::info!(target: "janus", "{} ({}) always runs eagerly: {why}", self.name(), self.span());
            let _ = st.opaque.set(why);
            return;
        }
        let t0 = Instant::now();
        let distinct = key::distinct(leaves.to_vec(), &key::first_occurrences(leaves));
        let mut needs: Vec<bool> = distinct.iter().map(|t| t.needs_grad() && is_grad_enabled()).collect();
        needs.resize(rec.graph.inputs.len(), false);
        let name = self.name();
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Compiled::new(&name, rec.graph, &needs, &rec.kinds)
        }));
        match built {
            Ok(c) => {
                st.counters.compile_us.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                Counters::bump(&st.counters.compiles);
                log::info!(target: "janus", "{name} ({}) compiled: {} ops in {:.2} ms", self.span(), c.graph().op_count(), c.compile_ms);
                let _ = v.staged.set(Arc::new(Staged { compiled: Arc::new(c), consts: rec.consts }));
            }
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                self.unstageable(v, format!("compile error: {}", msg.unwrap_or_default()));
            }
        }
    }

    pub(crate) fn snapshot(&'static self) -> FragmentStats {
        let st = self.state();
        let c = &st.counters;
        let variants =
            st.variants.read().unwrap().values().flatten().filter(|v| v.staged.get().is_some()).count();
        FragmentStats {
            name: self.name(),
            span: self.span(),
            calls: c.calls.load(Ordering::Relaxed),
            hits: c.hits.load(Ordering::Relaxed),
            traces: c.traces.load(Ordering::Relaxed),
            compiles: c.compiles.load(Ordering::Relaxed),
            compile_ms: c.compile_us.load(Ordering::Relaxed) as f64 / 1e3,
            checks: c.checks.load(Ordering::Relaxed),
            variants,
            eager: c.eager.lock().unwrap().clone(),
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

/// Max error of `got` against `want`, relative to `want`'s largest finite magnitude (at least
/// 1e-3); NaN must match NaN and infinities exactly.
fn mismatch(got: &Tensor, want: &Tensor) -> Option<f64> {
    if got.dims() != want.dims() || got.dtype() != want.dtype() {
        return Some(f64::INFINITY);
    }
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    let scale = w.iter().filter(|v| v.is_finite()).fold(1e-3f64, |m, v| m.max(v.abs()));
    let tol = if want.dtype() == crate::DType::F64 { 1e-10 } else { 1e-5 };
    let mut worst: f64 = 0.0;
    for (a, b) in g.iter().zip(&w) {
        if a.is_nan() != b.is_nan() || ((a.is_infinite() || b.is_infinite()) && a != b) {
            return Some(f64::INFINITY);
        }
        if a.is_finite() {
            worst = worst.max((a - b).abs() / scale);
        }
    }
    (worst > tol).then_some(worst)
}

impl Scope {
    /// Finishes the block: compares, records or compiles, as [`Fragment::enter`] decided.
    pub fn exit(self, outputs: Vec<Probed>) {
        let frag = self.frag;
        let st = frag.state();
        match self.kind {
            ScopeKind::Plain => {}
            ScopeKind::Recording { variant, guard, leaves } => {
                if let Some(p) = outputs.iter().find(|p| p.opaque.is_some()) {
                    let why = format!("output `{}` cannot be rebuilt: {}", p.name, p.opaque.unwrap());
                    log::info!(target: "janus", "{} ({}) always runs eagerly: {why}", frag.name(), frag.span());
                    let _ = st.opaque.set(why);
                    return; // dropping the guard abandons the recording
                }
                let outs: Vec<&Tensor> = outputs.iter().flat_map(|p| p.leaves.iter()).collect();
                let kinds = outs.iter().map(|t| (t.is_leaf(), t.needs_grad() && !t.is_leaf())).collect();
                let consts = outputs.iter().flat_map(|p| p.consts.iter().copied()).collect();
                match guard.finish(&outs) {
                    Ok(graph) => frag.record_finished(&variant, &leaves, Recorded { graph, consts, kinds }),
                    Err(why) => frag.unstageable(&variant, why.to_string()),
                }
            }
            ScopeKind::Check { key, replayed, .. } => {
                let outs: Vec<(&'static str, &Tensor)> =
                    outputs.iter().flat_map(|p| p.leaves.iter().map(move |t| (p.name, t))).collect();
                for (k, ((name, want), got)) in outs.iter().zip(&replayed).enumerate() {
                    if let Some(err) = mismatch(got, want) {
                        panic!(
                            "janus check: fragment `{}` at {} disagrees with eager execution: output `{name}` (leaf {k}, {:?} {}) has max relative error {err:e} (key {key:016x})",
                            frag.name(),
                            frag.span(),
                            want.shape(),
                            want.dtype()
                        );
                    }
                }
            }
        }
        let _ = st;
    }
}
