//! The CPU backend: the lowered steps run over per-dtype arenas of host memory (see
//! `frame.rs`, which holds all of the executor's `unsafe`), on the calling thread or on two
//! workers (`schedule.rs`). Each run takes its state from a pool (one per concurrent caller),
//! so threads share compiled code but never buffers, and after the first run no intermediate
//! buffer is allocated. Arenas of a MiB or more are lent for the run from a process-wide shelf
//! instead (`arena_cache.rs`), so that the instances of a graph over many batch sizes share them.

mod arena_buf;
pub(crate) mod arena_cache;
mod frame;
mod packed_factors;
mod profile;
pub(crate) mod schedule;
mod split;
mod split_memory;
pub(crate) mod steps;

use super::lower::{BufRef, Lowered};
use crate::tensor::{Data, Tensor};
use frame::{Arenas, Frame, output_buffer};
use smallvec::SmallVec;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The least cost of a step that the CPU backend splits between its workers.
pub(crate) fn split_min_cost() -> u64 {
    split::min_cost()
}

/// One run's arenas and two-worker scratch, boxed so that taking it from the pool and returning
/// it moves a pointer, not the few hundred bytes of the state (callgrind: 250 instructions per
/// replay).
type RunState = Box<(Arenas, schedule::Scratch, packed_factors::Packs)>;

/// The per-run states not in use, one per concurrent caller at most.
#[derive(Default)]
struct RunPool {
    /// The last state returned. Taking and returning it costs one atomic operation each: the
    /// mutex alone cost about 20 ns of a 210 ns hit (perf, `bench --only hit`).
    spare: AtomicPtr<(Arenas, schedule::Scratch, packed_factors::Packs)>,
    /// States returned while `spare` was taken.
    #[allow(clippy::vec_box)]
    rest: Mutex<Vec<RunState>>,
}

impl RunPool {
    fn take(&self) -> Option<RunState> {
        let p = self.spare.swap(std::ptr::null_mut(), Ordering::Acquire);
        if p.is_null() {
            return self.rest.lock().unwrap().pop();
        }
        // SAFETY: a non-null `spare` came from `Box::into_raw` in `put`, and the swap made this
        // thread its only owner.
        Some(unsafe { Box::from_raw(p) })
    }

    fn put(&self, run: RunState) {
        let p = Box::into_raw(run);
        // (The error carries the pointer already in `spare`, another caller's: not ours to
        // take back.)
        if self.spare.compare_exchange(std::ptr::null_mut(), p, Ordering::Release, Ordering::Relaxed).is_err()
        {
            // SAFETY: `p` is the pointer `Box::into_raw` just gave; the failed exchange left it
            // with this thread.
            self.rest.lock().unwrap().push(unsafe { Box::from_raw(p) });
        }
    }
}

impl Drop for RunPool {
    fn drop(&mut self) {
        let p = *self.spare.get_mut();
        if !p.is_null() {
            // SAFETY: `spare` owns the state it points to (from `Box::into_raw` in `put`).
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// The CPU side of an executor.
pub(crate) struct CpuPlan {
    /// The program with its large steps split in halves (`split.rs`), when it may use two
    /// workers; runs use it instead of the executor's.
    split: Option<Lowered>,
    schedule: schedule::Schedule,
    /// Whether the two-worker schedule beats running on the calling thread (with each kernel
    /// free to use rayon), measured on this plan's own replays.
    tuner: schedule::Tuner,
    /// Per-run state of runs that need arenas or the two-worker scratch.
    pool: RunPool,
    /// Per memo: the storage of the input it was made from (held, so its address stays
    /// unique), and the copy.
    memo_cache: Vec<Mutex<Option<(Tensor, Tensor)>>>,
    /// The right factors that runs pack once for several products (`packed_factors.rs`).
    packs: packed_factors::PackPlan,
}

impl CpuPlan {
    pub(crate) fn new(l: &Lowered) -> CpuPlan {
        Self::with_split(l, schedule::may_use_two_workers(l).then(split::min_cost))
    }

    /// A plan whose steps costing at least `split_min` are split in halves (none when `None`).
    fn with_split(l: &Lowered, split_min: Option<u64>) -> CpuPlan {
        Self::with_options(l, split_min, crate::config::pack())
    }

    /// [`with_split`](CpuPlan::with_split), packing shared right factors if `pack` (and the CPU
    /// runs the packed kernel).
    fn with_options(l: &Lowered, split_min: Option<u64>, pack: bool) -> CpuPlan {
        let split =
            split_min.and_then(|min| split::split_rows(l, min, |k| schedule::cost(l, k))).map(|mut s| {
                if crate::config::replan() {
                    split_memory::replan(&mut s);
                }
                s
            });
        if let Some(s) = &split {
            super::memory::validate(s);
            if crate::passes::verifying() {
                assert_eq!(super::memory::check(s), Ok(()), "executor: memory plan of the split steps");
            }
        }
        CpuPlan {
            schedule: schedule::build(split.as_ref().unwrap_or(l)),
            packs: if pack {
                packed_factors::PackPlan::new(l, split.as_ref().unwrap_or(l))
            } else {
                Default::default()
            },
            split,
            tuner: Default::default(),
            pool: RunPool::default(),
            memo_cache: l.memos.iter().map(|_| Mutex::new(None)).collect(),
        }
    }

    /// The memory plan runs use (`l` is the executor's program).
    pub(crate) fn run_memory_plan<'a>(&'a self, l: &'a Lowered) -> &'a super::MemoryPlan {
        &self.split.as_ref().unwrap_or(l).plan
    }

    /// Bytes of the packed right factors a run holds besides its arenas.
    pub(crate) fn packed_bytes(&self) -> usize {
        self.packs.bytes()
    }

    /// Whether runs use two workers: the schedule allows it and the tuner has not found the
    /// calling thread faster (while it measures, half the runs use two workers).
    pub(crate) fn is_parallel(&self) -> bool {
        self.schedule.parallel && self.tuner.chosen() != Some(false)
    }

    /// The memoised dense copies of input views for this run: reused while the same values come
    /// back (the same storage, whatever the handle), made afresh otherwise.
    fn memos(&self, l: &Lowered, inputs: &[Tensor]) -> Vec<Tensor> {
        l.memos
            .iter()
            .zip(&self.memo_cache)
            .map(|(&(k, src), cache)| {
                let key = inputs[k].storage_key();
                let mut slot = cache.lock().unwrap();
                if let Some((source, t)) = &*slot
                    && source.storage_key() == key
                {
                    return t.clone();
                }
                let v = l.vals[src].as_ref().expect("memo sources have values");
                let d = inputs[k].data();
                let view = Tensor::from_parts(
                    v.shape.clone(),
                    v.dtype,
                    Some(d.view(crate::shape::copy_small(&v.strides), d.offset + v.offset)),
                    Default::default(),
                );
                let t = dense_input(&view);
                *slot = Some((inputs[k].clone(), t.clone()));
                t
            })
            .collect()
    }

    /// Whether this run may use the two-worker schedule: not from inside a rayon task, where
    /// both workers would compete with the caller's own parallel work.
    fn parallel_allowed(&self) -> bool {
        rayon::current_thread_index().is_none()
            && !crate::config::serial()
            && !crate::config::config().profile
    }

    /// Runs the steps on `inputs` (host tensors).
    pub(crate) fn run(&self, l: &Lowered, inputs: &[Tensor]) -> Vec<Tensor> {
        self.run_as(l, inputs, None)
    }

    /// Runs the steps, on two workers or on the calling thread as `force` says, else as the
    /// schedule and the tuner choose.
    fn run_as(&self, l: &Lowered, inputs: &[Tensor], force: Option<bool>) -> Vec<Tensor> {
        let l = self.split.as_ref().unwrap_or(l);
        let copied: Vec<Tensor>;
        let dense = if inputs.iter().all(Tensor::is_contiguous) {
            inputs
        } else {
            copied =
                inputs.iter().map(|t| if t.is_contiguous() { t.clone() } else { dense_input(t) }).collect();
            &copied
        };
        // Timed for the tuner only when it chooses; `force` (tests) and `JANUS_PARALLEL=force`
        // bypass it. (The tuner never chooses under the latter, since it never sees a serial
        // run: it timed every run into an ever longer list, an allocation every so often.)
        let may = self.schedule.parallel && self.parallel_allowed();
        let forced = may && crate::config::config().force_parallel;
        let tuning = force.is_none() && may && !forced;
        let two_workers = force.unwrap_or(may && (forced || self.tuner.wants_parallel()));
        // A run without intermediates on this thread needs no pooled state: empty arenas, no
        // two-worker scratch, no packed copies (the hit path of small blocks, where building
        // and dropping that scratch cost ~50 instructions per replay, callgrind).
        let stateless = l.plan.arena_len == [0; 4] && !two_workers && self.packs.is_empty();
        let mut pooled = None;
        let (arenas, scratch, packed) = if stateless {
            (None, None, &packed_factors::Packs::EMPTY)
        } else {
            let run = self
                .pool
                .take()
                .unwrap_or_else(|| Box::new((Arenas::empty(), Default::default(), Default::default())));
            let (arenas, scratch, packed) = &mut **pooled.insert(run);
            arenas.fill(l.plan.arena_len);
            if !self.packs.is_empty() {
                packed.reset(&self.packs);
            }
            (Some(arenas), Some(scratch), &*packed)
        };
        let mut outs: SmallVec<[crate::storage::SharedBuffer; 4]> = SmallVec::new();
        for &(d, n) in &l.output_bufs {
            outs.push(crate::storage::SharedBuffer::new(output_buffer(d, n)));
        }
        let memos = if l.memos.is_empty() { Vec::new() } else { self.memos(l, dense) };
        {
            let frame = Frame::new(dense, &l.consts, &memos, arenas, &mut outs, (&self.packs, packed));
            let (steps, vals) = (&l.steps, &l.vals);
            let t0 = tuning.then(std::time::Instant::now);
            let timeline = two_workers.then(profile::Timeline::sample).flatten();
            if two_workers {
                let scratch = scratch.expect("two-worker runs take pooled state");
                let run = |s: usize| steps::run_step(&steps[s], vals, &frame);
                schedule::run_parallel(&self.schedule, scratch, &|s| match &timeline {
                    Some(tl) => tl.time(s, || run(s)),
                    None => run(s),
                });
            } else if crate::profile::on() {
                for step in steps {
                    crate::profile::step(|| profile::label(l, step), || steps::run_step(step, vals, &frame));
                }
            } else {
                for step in steps {
                    steps::run_step(step, vals, &frame);
                }
            }
            if let Some(t0) = t0 {
                self.tuner.record(two_workers, t0.elapsed());
            }
            // Written after the tuner's timing, which it would slow.
            if let Some(tl) = timeline {
                tl.write(l);
            }
        }
        if let Some(mut run) = pooled {
            run.0.shelve();
            self.pool.put(run);
        }
        let mut list = output_list(l.outputs.len());
        list.extend(l.outputs.iter().map(|&o| {
            let v = l.vals[o].as_ref().expect("outputs have values");
            let data = match v.buf {
                BufRef::Output(k) => Data {
                    storage: crate::storage::Storage::Cpu(outs[k].clone()),
                    strides: crate::shape::copy_small(&v.strides),
                    offset: v.offset,
                },
                BufRef::Input(k) => {
                    let d = dense[k].data();
                    d.view(crate::shape::copy_small(&v.strides), d.offset + v.offset)
                }
                BufRef::Const(k) => {
                    let d = l.consts[k].data();
                    d.view(crate::shape::copy_small(&v.strides), d.offset + v.offset)
                }
                BufRef::Memo(k) => {
                    let d = memos[k].data();
                    d.view(crate::shape::copy_small(&v.strides), d.offset + v.offset)
                }
                BufRef::Arena(_) => unreachable!("values reaching an output live in output buffers"),
            };
            Tensor::from_parts(v.shape.clone(), v.dtype, Some(data), Default::default())
        }));
        list
    }
}

thread_local! {
    /// An emptied output list, kept for the next run on this thread.
    static LIST: std::cell::Cell<Vec<Tensor>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An empty list for `n` outputs: the one a replay handed back ([`recycle_output_list`]) when
/// there is one, so a replay's hit path allocates only its output tensors (issue 13).
fn output_list(n: usize) -> Vec<Tensor> {
    let mut list = LIST.take();
    list.reserve(n);
    list
}

/// Keeps `list`'s allocation for a later run on this thread (its tensors, if any, drop now).
pub(crate) fn recycle_output_list(mut list: Vec<Tensor>) {
    list.clear();
    if list.capacity() > 0 && list.capacity() <= 64 {
        // A list kept before (a replay's outputs held while another block replayed) drops.
        drop(LIST.replace(list));
    }
}

/// A contiguous copy of `t`.
fn dense_input(t: &Tensor) -> Tensor {
    let buf = janus_kernels::with_any_type!(t.dtype(), T => {
        janus_kernels::buffer::Stored::wrap(t.contiguous_slice::<T>().into_owned())
    });
    Tensor::from_buffer(buf, t.shape_ref().clone())
}
