//! `Fragment`: one static block of a `#[janus]` function, and its dispatch (see docs/design.md,
//! "Dispatch: profile, record, agree").
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
//! Some replays are checked against the statements (see [`super::check`]). A replay that
//! panics (an index out of range, say) runs the statements instead, so that eager mode's
//! effects and panic happen exactly as without the attribute.
//!
//! A hit that repeats one of the thread's recent keys compares the call with that key as it
//! probes, without building a key or locking the variant table (see `hits`); any other call
//! looks its key up in the table under a read lock.

use super::check::{self, Policy};
use super::coverage::{EagerKind, OpScope};
use super::instance::Instance;
use super::key::{self, Key};
use super::probe::{Probed, Replayed};
use super::stats::{Counters, FragmentStats};
use super::{Mode, mode};
use crate::compile::{Compiled, OutKind, op_calls};
use crate::module::ConstLeaf;
use crate::tensor::Tensor;
use crate::trace::{self, RecordingGuard};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

mod checked;
mod cost;
mod hits;
mod record;
mod rolling;
mod shapes;
mod snapshot;

use rolling::{ROLL_NODES, RollingGuard, SEEN_ONCE};
mod upgrade;

use checked::{CheckRun, Checking};
pub use cost::{cost_guard, set_cost_guard};

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
    /// How many lines after `line` the block's last statement ends.
    pub more_lines: u32,
    /// The block's number within the function.
    pub index: u32,
    /// 0, or for the blocks of a block's split version (see `rt::host_values`), their number
    /// within it: the block is then `function#index.part`.
    pub part: u32,
    /// Recordings of a key before it is compiled (at least two agreeing ones are needed).
    pub profile: u32,
    /// Keys compiled at most; unseen keys beyond run eagerly.
    pub max_variants: u32,
    /// A block whose recording has fewer ops than this, all on small tensors, runs eagerly
    /// from then on: replaying it would cost more than it saves.
    pub min_ops: u32,
    /// The whole function's body (see docs/design.md, "Speculation"): recorded speculatively
    /// (decisions on tensor values become asserts) and replayed all-or-nothing.
    pub speculative: bool,
    /// Failed speculations (an assert that did not hold, or a path that changed while
    /// profiling) after which a key stays on the fragment path.
    pub max_failures: u32,
    /// Whether keys that differ only in leaf sizes share one shape-polymorphic variant once
    /// two of them have compiled (see `shapes`).
    pub dynamic_dims: bool,
    /// Whether the block holds a `for` loop: one whose trip count changes between calls, or
    /// whose recording is too long to compile unrolled, then runs on the host (see `rolled`).
    pub has_loop: bool,
}

/// A static block's dispatch state; one `static` per block in the generated code.
pub struct Fragment {
    site: Site,
    state: OnceLock<State>,
}

struct State {
    /// Read through [`State::variants_mut`] for writing.
    variants: RwLock<VariantTable>,
    /// Bumped on every write to `variants` (see `hits`).
    generation: AtomicU64,
    keys: AtomicU64,
    /// Why every call runs the statements (an opaque output, too few ops), once known.
    opaque: OnceLock<(String, EagerKind)>,
    /// The first instantiation found to take an opaque input, and the reason. Opacity follows
    /// from the input types, which the instantiation fixes, so later calls of it skip probing.
    opaque_input: OnceLock<(Instance, String)>,
    counters: Counters,
    /// Generic variants, by erased key (see `shapes`).
    generic: RwLock<HashMap<Key, Arc<shapes::Shapes>>>,
    /// Instances of generic variants, oldest first (they are not counted as keys).
    instances: Mutex<VecDeque<(u64, Arc<Variant>)>>,
    /// Why the block's variants did not generalise over sizes, if they tried and failed.
    dims_note: Mutex<Option<String>>,
    /// Per trip class (see [`key::trip_class`]): the sequence lengths that compile unrolled,
    /// and whether other lengths' loops run on the host now.
    trips: Mutex<HashMap<u64, TripLengths>>,
    /// Compiles deferred because a compiled key subsumes the key (see `upgrade`).
    deferred: AtomicU64,
    /// Why a recording of a call with stacked sequences did not roll, once one did not: such
    /// calls then run on the host (see [`Fragment::rolled_call`]).
    roll_failed: OnceLock<String>,
    /// Fingerprints of stacked keys seen once, newest last (see [`Fragment::first_sighting`]).
    sighted: Mutex<VecDeque<u64>>,
    /// What the compiled path and the statements cost per call (see `cost`).
    cost: cost::Cost,
}

/// Host values of an input as a key holds them (`n = 3`, `len 4`), for messages.
fn describe_consts(c: &[ConstLeaf]) -> String {
    let all: Vec<String> = c.iter().map(|c| c.to_string()).collect();
    if all.len() > 4 { format!("{}, ...", all[..4].join(", ")) } else { all.join(", ") }
}

/// A block's variants, by key fingerprint.
type VariantTable = HashMap<u64, Vec<Arc<Variant>>, key::BuildFx>;

/// A trip class's sequence lengths that compiled unrolled, and whether its loops run on the
/// host now.
type TripLengths = (Vec<Vec<usize>>, bool);

/// An input's name, constants and leaf shapes (to name the input that changes between keys).
type InputSignature = (&'static str, Vec<ConstLeaf>, Vec<Vec<usize>>);

/// One key's state.
struct Variant {
    key: Key,
    inputs: Vec<InputSignature>,
    staged: OnceLock<Arc<Staged>>,
    unstageable: OnceLock<String>,
    profile: Mutex<Profile>,
    /// Failed speculations of this key so far (a restarted variant carries them over).
    failures: AtomicU64,
    /// The key with its leaf sizes zeroed (what variants of one generic variant share).
    erased: Key,
    /// Each leaf's dims.
    leaf_dims: Vec<Vec<usize>>,
    /// An instance of a generic variant (not counted against `max_variants`).
    instance: bool,
    /// When it was made, among the fragment's variants.
    seq: u64,
}

impl Variant {
    fn new(key: Key, erased: Key, inputs: Vec<InputSignature>, leaves: &[Tensor]) -> Variant {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        Variant {
            key,
            inputs,
            staged: OnceLock::new(),
            unstageable: OnceLock::new(),
            profile: Mutex::new(Profile::default()),
            failures: AtomicU64::new(0),
            erased,
            leaf_dims: leaves.iter().map(|t| t.sizes().to_vec()).collect(),
            instance: false,
            seq: SEQ.fetch_add(1, Ordering::Relaxed),
        }
    }
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
    kinds: Vec<OutKind>,
    /// What each asserted predicate (the graph's last outputs) must be, and the host path.
    asserts: Vec<bool>,
    path: Vec<crate::trace::Decision>,
    /// Where the statements read a tensor's dims, if they did.
    shape_read: Option<&'static std::panic::Location<'static>>,
    /// Whether the statements called `backward()`.
    backward: bool,
}

/// A compiled variant.
struct Staged {
    compiled: Arc<Compiled>,
    consts: Vec<ConstLeaf>,
    /// What each asserted predicate must be (speculative variants; the graph's last outputs).
    asserts: Vec<bool>,
    /// The host decisions its recordings took (speculative variants).
    path: Vec<crate::trace::Decision>,
    /// Where its recording's statements read a tensor's dims, if they did.
    shape_read: Option<&'static std::panic::Location<'static>>,
    /// What the eager call gave each output (instances must give the same).
    kinds: Vec<OutKind>,
    /// Whether its recording called `backward()` (it then serves no subsumed key, see
    /// `upgrade`).
    ran_backward: bool,
    /// Replays so far, checked and panicked ones included (numbers the sampled checks).
    replays: AtomicU64,
    /// For an instance of a generic variant: the replays of all its instances, which number
    /// the sampled checks instead (instances are checked as one variant, not each afresh).
    shared_replays: Option<Arc<AtomicU64>>,
    counts: ReplayCounts,
    /// Set when a check found the replay disagreeing with eager execution: the key runs its
    /// statements from then on.
    invalid: AtomicBool,
}

/// A variant's replays that did not hand back their own results, and where statistics start.
#[derive(Default)]
struct ReplayCounts {
    checks: AtomicU64,
    /// Replays that did not hand back their results: they panicked, or an assert failed.
    panicked: AtomicU64,
    /// `(replays, checks, panicked)` at the last `reset_stats()`.
    since: Mutex<(u64, u64, u64)>,
}

impl Staged {
    /// `(hits, checks, replays that ran the compiled graph for the caller)` since the last
    /// `reset_stats()`.
    fn counted(&self) -> (u64, u64, u64) {
        let since = *self.counts.since.lock().unwrap();
        let replays = self.replays.load(Ordering::Relaxed) - since.0;
        let checks = self.counts.checks.load(Ordering::Relaxed) - since.1;
        let panicked = self.counts.panicked.load(Ordering::Relaxed) - since.2;
        (replays - panicked, checks, replays - panicked - checks)
    }

    /// Replays since the last `reset_stats()`, checked and panicked ones included: the calls
    /// this variant served (the fragment counts the others, see `Fragment::dispatch`).
    fn calls(&self) -> u64 {
        self.replays.load(Ordering::Relaxed) - self.counts.since.lock().unwrap().0
    }

    /// Moves this variant's statistics into the fragment's (it is being replaced, dropped, or
    /// kept but invalid), and restarts its own, so none is counted twice.
    fn retire(&self, c: &Counters) {
        let (h, checks, own) = self.counted();
        c.calls.fetch_add(self.calls(), Ordering::Relaxed);
        c.retired_hits.fetch_add(h, Ordering::Relaxed);
        c.retired_checks.fetch_add(checks, Ordering::Relaxed);
        c.retired_staged_ops.fetch_add(own * self.compiled.recorded_ops(), Ordering::Relaxed);
        self.restart_counts();
    }

    fn restart_counts(&self) {
        *self.counts.since.lock().unwrap() = (
            self.replays.load(Ordering::Relaxed),
            self.counts.checks.load(Ordering::Relaxed),
            self.counts.panicked.load(Ordering::Relaxed),
        );
    }
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
    /// Claims the eager ops the statements run (for coverage), also when they panic.
    _ops: OpScope,
    /// For a janus-mode call: when the call and the statements started, and why they run
    /// (see `cost`).
    timing: Option<(Instant, Instant, EagerKind)>,
}

thread_local! {
    /// The start of the janus-mode call being dispatched on this thread off the memo of hits
    /// (see `cost`): taken by the call's scope, or cleared by its replay.
    static CALL_START: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

enum ScopeKind {
    Plain,
    /// Statements recording into an enclosing recording: a trip (see `trace::trip_begin`).
    Inline,
    /// The statements of a call whose loop rolled: blocks inside roll at their second length.
    Rolled(RollingGuard),
    Recording {
        variant: Arc<Variant>,
        guard: RecordingGuard,
        leaves: Vec<Tensor>,
    },
    Check(CheckRun),
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
            crate::panics::install_hook();
            State {
                variants: RwLock::new(HashMap::default()),
                generation: AtomicU64::new(0),
                keys: AtomicU64::new(0),
                opaque: OnceLock::new(),
                opaque_input: OnceLock::new(),
                counters: Counters::default(),
                generic: RwLock::new(HashMap::new()),
                instances: Mutex::new(VecDeque::new()),
                dims_note: Mutex::new(None),
                trips: Mutex::new(HashMap::new()),
                deferred: AtomicU64::new(0),
                roll_failed: OnceLock::new(),
                sighted: Mutex::new(VecDeque::new()),
                cost: cost::Cost::default(),
            }
        })
    }

    /// `function#block`, or `function#fn` for a whole function.
    pub fn name(&self) -> String {
        if self.site.speculative {
            format!("{}#fn", self.site.function)
        } else if self.site.part > 0 {
            format!("{}#{}.{}", self.site.function, self.site.index, self.site.part)
        } else {
            format!("{}#{}", self.site.function, self.site.index)
        }
    }

    fn span(&self) -> String {
        format!("{}:{}", self.site.file, self.site.line)
    }

    /// Decides how this call runs. `instance` identifies the instantiation of the function
    /// (its generic parameters, an enclosing `impl`'s and `Self`), which keys the cache like
    /// inputs do.
    pub fn enter<const N: usize>(
        &'static self,
        probes: impl FnOnce() -> [Probed; N],
        instance: Instance,
    ) -> Enter {
        let st = self.state();
        // Calls that reach `dispatch` are counted there (see it).
        let plain = |reason: &str, kind: EagerKind| {
            Counters::bump(&st.counters.calls);
            st.counters.eager(kind, reason);
            Enter::Body(self.scope(ScopeKind::Plain, kind))
        };
        let mode = mode();
        if mode == Mode::Eager {
            return plain("mode eager", EagerKind::ModeEager);
        }
        if trace::is_recording() {
            // Its statements record into the enclosing recording: one trip, should the block
            // be a staged loop's body (`trace::roll`).
            let inputs = probes();
            let leaves: Vec<Tensor> = inputs.iter().flat_map(|p| p.leaves.iter().cloned()).collect();
            let names = inputs.iter().flat_map(|p| std::iter::repeat_n(p.name, p.leaves.len())).collect();
            trace::trip_begin(self as *const Fragment as usize, &leaves, names);
            Counters::bump(&st.counters.calls);
            st.counters.eager(EagerKind::Recorded, super::stats::INLINE);
            return Enter::Body(self.scope(ScopeKind::Inline, EagerKind::Recorded));
        }
        if Checking::active() {
            return plain("checked as part of an enclosing block", EagerKind::Checked);
        }
        if let Some((why, kind)) = st.opaque.get() {
            return plain(why, *kind);
        }
        if let Some((known, why)) = st.opaque_input.get()
            && *known == instance
        {
            return plain(why, EagerKind::Opaque);
        }
        if mode == Mode::Janus
            && let Some(bypass) = st.cost.plain_now()
        {
            let why = if bypass { cost::BYPASS } else { cost::PROBE };
            CALL_START.set(Some(Instant::now()));
            return plain(why, EagerKind::Cost);
        }
        let mut inputs = probes();
        if let Some(p) = inputs.iter().find(|p| p.opaque.is_some()) {
            let why = format!("opaque input `{}`: {}", p.name, p.opaque.unwrap());
            let _ = st.opaque_input.set((instance, why.clone()));
            return plain(&why, EagerKind::Opaque);
        }
        self.dispatch(st, &mut inputs, instance, mode, &[])
    }

    /// [`Fragment::enter`] once the inputs are probed; `rows` are the elements of the
    /// sequences stacked in `inputs` (see `stacked`), if any. A replay moves the tensors out of
    /// `inputs` ([`key::take_distinct`]).
    ///
    /// Every call is counted once: a replay by its variant's `replays`, any other call by the
    /// fragment's `calls` (a snapshot adds them up), so a replay touches one shared counter.
    #[inline(always)] // the hit path
    fn dispatch(
        &'static self,
        st: &'static State,
        inputs: &mut [Probed],
        instance: Instance,
        mode: Mode,
        rows: &[(usize, Vec<Tensor>)],
    ) -> Enter {
        let plain = |reason: &str, kind: EagerKind| {
            Counters::bump(&st.counters.calls);
            st.counters.eager(kind, reason);
            Enter::Body(self.scope(ScopeKind::Plain, kind))
        };
        let generation = st.generation();
        // A call that repeats a memoised key replays it without building a key, or runs its
        // statements when the key cannot stage (CartPole's `act#fn`, whose host read ends its
        // graph, built and looked up its key on every call); the memo lends the variant.
        let memoised = hits::with_memoised(self, generation, |memo| {
            let (firsts, found) = {
                let refs = key::gather_leaves(inputs);
                let firsts = key::first_occurrences(&refs);
                let found = (memo.into_iter().flatten())
                    .find(|v| key::matches(inputs, (&refs, &firsts), instance, mode, &v.key));
                (firsts, found)
            };
            let Some(v) = found else { return Err(firsts) };
            if let Some(replayed) = self.replay(st, v, inputs, &firsts, mode, rows) {
                return Ok(replayed);
            }
            match v.unstageable.get() {
                Some(why) => Ok(plain(why, EagerKind::Unstageable)),
                None => Err(firsts),
            }
        });
        let firsts = match memoised {
            Some(Ok(replayed)) => return replayed,
            Some(Err(firsts)) => firsts,
            None => key::first_occurrences(&key::gather_leaves(inputs)),
        };
        if mode == Mode::Janus {
            // Off the memo: this call is timed whatever it turns out to be (a replay clears it).
            CALL_START.set(Some(Instant::now()));
        }
        let refs = key::gather_leaves(inputs);
        let leaves: key::LeafList = refs.iter().map(|&t| t.clone()).collect();
        let key = key::build(inputs, (&refs, &firsts), instance, mode);
        drop(refs); // `replay` below moves the tensors out of `inputs`
        let fp = key.fingerprint();
        let variant = match self.lookup(st, fp, &key) {
            Some(v) if v.staged.get().is_none() && v.unstageable.get().is_none() => {
                // Still profiling: an instance of a generic variant made meanwhile serves it.
                (self.instance_for(st, fp, &key, &leaves, inputs))
                    .or_else(|| self.upgraded(st, fp, &key, &leaves, inputs))
                    .unwrap_or(v)
            }
            Some(v) => {
                key::recycle(key);
                if v.staged.get().is_some() || v.unstageable.get().is_some() {
                    hits::remember(self, generation, &v);
                }
                v
            }
            None if rows.is_empty()
                && self.site.has_loop
                && self.site.dynamic_dims
                && self.rolled(st, inputs, instance, mode) =>
            {
                key::recycle(key);
                // Counted there: by the stacked call's dispatch, or as a host loop.
                return self.rolled_call(st, inputs, instance, mode);
            }
            None => match (self.instance_for(st, fp, &key, &leaves, inputs))
                .or_else(|| self.upgraded(st, fp, &key, &leaves, inputs))
            {
                Some(v) => v,
                None if !rows.is_empty() && self.first_sighting(st, fp, &key, &leaves) => {
                    key::recycle(key);
                    Counters::bump(&st.counters.calls);
                    st.counters.eager(EagerKind::Rolled, SEEN_ONCE);
                    return Enter::Body(
                        self.scope(ScopeKind::Rolled(RollingGuard::enter()), EagerKind::Rolled),
                    );
                }
                None => match self.insert(st, fp, key, inputs, &leaves) {
                    Ok(v) => v,
                    Err(why) => return plain(&why, EagerKind::VariantLimit),
                },
            },
        };
        if let Some(replayed) = self.replay(st, &variant, inputs, &firsts, mode, rows) {
            if let Enter::Replay(_) = replayed {
                CALL_START.set(None);
            }
            return replayed;
        }
        if let Some(why) = variant.unstageable.get() {
            return plain(why, EagerKind::Unstageable);
        }
        let Ok(mut prof) = variant.profile.try_lock() else {
            return plain("being compiled on another thread", EagerKind::Busy);
        };
        prof.calls += 1;
        drop(prof);
        Counters::bump(&st.counters.calls);
        Counters::bump(&st.counters.traces);
        let guard = if self.site.speculative { trace::start_speculative() } else { trace::start() };
        let names: Vec<&'static str> =
            inputs.iter().flat_map(|p| std::iter::repeat_n(p.name, p.leaves.len())).collect();
        for (k, t) in leaves.iter().enumerate() {
            guard.register_input(t, names.get(k).copied().unwrap_or("grads"));
        }
        for (k, elements) in rows {
            guard.register_rows(&leaves[*k], elements);
        }
        Enter::Body(
            self.scope(
                ScopeKind::Recording { variant, guard, leaves: leaves.into_vec() },
                EagerKind::Recorded,
            ),
        )
    }

    /// Replays `variant`'s compiled graph on `inputs` (moving their tensors out), or checks it
    /// when a check is due; `None` if it has no valid graph. The one place a call counts as a
    /// replay.
    #[inline(always)] // the hit path
    fn replay(
        &'static self,
        st: &'static State,
        variant: &Arc<Variant>,
        inputs: &mut [Probed],
        firsts: &[u32],
        mode: Mode,
        rows: &[(usize, Vec<Tensor>)],
    ) -> Option<Enter> {
        let staged = variant.staged.get().filter(|s| !s.invalid.load(Ordering::Relaxed))?;
        // Counted by `replays` already: not a second time in `calls`.
        let plain = |reason: &str, kind: EagerKind| {
            st.counters.eager(kind, reason);
            Some(Enter::Body(self.scope(ScopeKind::Plain, kind)))
        };
        let mut n = staged.replays.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(shared) = &staged.shared_replays {
            n = shared.fetch_add(1, Ordering::Relaxed) + 1;
        }
        if let Some(policy) = check::due(mode, n) {
            let distinct = key::distinct_cloned(inputs, firsts);
            let targets = if rows.is_empty() {
                check::leaf_names(inputs, firsts).into_iter().zip(distinct.iter().cloned()).collect()
            } else {
                rolling::row_targets(inputs, rows)
            };
            let fp = variant.key.fingerprint();
            return Some(self.start_check(st, fp, variant, staged, (&distinct, targets), policy));
        }
        let mut distinct = key::take_distinct(inputs, firsts);
        let sink: &'static Counters = &st.counters;
        // One replay in `cost::SAMPLE` is timed, for the cost guard.
        let sampled = (n.is_multiple_of(cost::SAMPLE) && mode == Mode::Janus).then(Instant::now);
        let pos = (!staged.asserts.is_empty()).then(crate::random::stream_position);
        let replayed =
            crate::panics::catch_quietly(|| staged.compiled.replay_counted(&mut distinct, Some(sink)));
        if replayed.is_err() {
            staged.counts.panicked.fetch_add(1, Ordering::Relaxed);
        }
        let Ok(mut tensors) = replayed else {
            return plain("the replay panicked: ran the statements", EagerKind::ReplayPanicked);
        };
        if let Some(pos) = pos
            && !super::speculate::commit(&mut tensors, &staged.asserts)
        {
            // Nothing of the replay is kept: the call runs the statements, the random
            // stream where it was.
            crate::random::move_to(pos.0, pos.1);
            self.speculation_failed(st, variant.key.fingerprint(), variant, "an assert did not hold");
            return plain("speculation failed: ran the statements", EagerKind::SpeculationFailed);
        }
        if let Some(start) = sampled {
            st.cost.call(start.elapsed().as_nanos() as u64 + cost::DISPATCH_NS, cost::SAMPLE, false);
        }
        Some(Enter::Replay(Replayed::new(tensors, &staged.consts)))
    }

    #[inline(never)] // off the hit path
    fn scope(&'static self, kind: ScopeKind, counted_as: EagerKind) -> Scope {
        let counter = self.state().counters.eager_ops(counted_as);
        let timing = CALL_START.take().map(|start| (start, Instant::now(), counted_as));
        Scope { frag: self, kind, _ops: OpScope::open(counter), timing }
    }

    fn lookup(&self, st: &State, fp: u64, key: &Key) -> Option<Arc<Variant>> {
        st.variants.read().unwrap().get(&fp)?.iter().find(|v| v.key == *key).cloned()
    }

    /// A new key's variant, or the reason it runs eagerly (the variant limit).
    fn insert(
        &self,
        st: &State,
        fp: u64,
        key: Key,
        inputs: &[Probed],
        leaves: &[Tensor],
    ) -> Result<Arc<Variant>, String> {
        let mut map = st.variants_mut();
        if let Some(v) = map.get(&fp).and_then(|vs| vs.iter().find(|v| v.key == key)) {
            return Ok(v.clone());
        }
        let sig = shapes::signature(inputs);
        if st.keys.load(Ordering::Relaxed) >= self.site.max_variants as u64 {
            // Name the input that changes, to point at the remedy.
            let churn =
                map.values().flatten().next().and_then(|v| sig.iter().zip(&v.inputs).find(|(a, b)| a != b));
            return Err(match churn {
                // What to change depends on what changes: a host value, or a tensor's shape.
                // (A stable message: `explain()` counts the calls by it.)
                Some((a, b)) if a.2 != b.2 => format!(
                    "variant limit ({}) reached: the shape of `{}` differs between calls (sizes generalise unless the block reads them on the host, draws random numbers or takes a path that depends on them: see the sizes line; or pad sizes to a few buckets)",
                    self.site.max_variants, a.0
                ),
                Some((a, _)) => format!(
                    "variant limit ({}) reached: the value of `{}` differs between calls (a float that changes on every call can be a graph input: dynamic(..))",
                    self.site.max_variants, a.0
                ),
                None => format!(
                    "variant limit ({}) reached: inputs as before, but grad flags, aliasing, the mode or generic types differ",
                    self.site.max_variants
                ),
            });
        }
        st.keys.fetch_add(1, Ordering::Relaxed);
        let erased = key::erase_dims(&key, leaves);
        let v = Arc::new(Variant::new(key, erased, sig, leaves));
        map.entry(fp).or_default().push(v.clone());
        Ok(v)
    }

    pub(crate) fn site(&self) -> &Site {
        &self.site
    }
}

impl Scope {
    /// Finishes the block: compares, records or compiles, as [`Fragment::enter`] decided.
    pub fn exit(self, outputs: Vec<Probed>) {
        let Scope { frag, kind, _ops, timing } = self;
        let st = frag.state();
        // Timed to the end of this function (a recording compiles here).
        let _timed = timing.map(|(call, statements, why)| {
            let plain = matches!(kind, ScopeKind::Plain | ScopeKind::Rolled(_));
            let recorded = matches!(kind, ScopeKind::Recording { .. });
            cost::Exit::new(&st.cost, call, statements.elapsed(), (plain, recorded), why == EagerKind::Cost)
        });
        match kind {
            ScopeKind::Plain | ScopeKind::Rolled(_) => {}
            ScopeKind::Inline => {
                let outs: Vec<&Tensor> = outputs.iter().flat_map(|p| p.leaves.iter()).collect();
                trace::trip_end(&outs);
            }
            ScopeKind::Recording { variant, guard, leaves } => {
                if let Some(p) = outputs.iter().find(|p| p.opaque.is_some()) {
                    let why = format!("output `{}` cannot be rebuilt: {}", p.name, p.opaque.unwrap());
                    log::info!(target: "janus", "{} ({}) always runs eagerly: {why}", frag.name(), frag.span());
                    let _ = st.opaque.set((why, EagerKind::Opaque));
                    return; // dropping the guard abandons the recording
                }
                let outs: Vec<&Tensor> = outputs.iter().flat_map(|p| p.leaves.iter()).collect();
                let mut kinds = OutKind::of(&outs);
                // As with PyTorch's `retain_graph=False`, a graph that `backward()` walked is
                // consumed: a replayed output that was a root of `backward()` inside the
                // recording (a training step's loss) comes back without history, so no residuals
                // are kept for a second backward. Other outputs keep theirs: a meta-learning
                // loss built after an inner `backward()` is differentiated outside.
                for (k, t) in kinds.iter_mut().zip(&outs) {
                    k.history &= !guard.was_backward_root(t);
                }
                let consts = outputs.iter().flat_map(|p| p.consts.iter().copied()).collect();
                match guard.finish_speculative(&outs) {
                    Ok(mut f) => {
                        if let Err(why) = frag.roll(st, &mut f) {
                            return frag.unstageable(&variant, why);
                        }
                        let first = kinds.len();
                        kinds.extend((0..f.asserts.len()).map(|k| OutKind {
                            leaf: false,
                            history: false,
                            same_as: first + k,
                        }));
                        let rec = Recorded {
                            graph: f.graph,
                            consts,
                            kinds,
                            asserts: f.asserts,
                            path: f.path,
                            shape_read: f.shape_read,
                            backward: f.backward,
                        };
                        frag.record_finished(&variant, &leaves, rec)
                    }
                    Err(why) => frag.unstageable(&variant, why.to_string()),
                }
            }
            ScopeKind::Check(run) => frag.finish_check(run, &outputs),
        }
    }
}
