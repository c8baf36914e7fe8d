//! The free ranges of one arena while `memory::place` lays values out, each with the steps that
//! touched its last occupant. Neighbouring ranges are not merged: a value laid over some of
//! them then orders only after their own users (steps running in parallel are ordered around a
//! reuse by the element ranges they touch, `memory::dependencies`). Merged, the row halves of
//! one value freed side by side became one range touched by both workers, and any value put
//! there waited for both.

use super::lower::Step;
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// Free ranges of occupants touched by more steps than this stop tracking them (a reuse then
/// counts as ordering something new).
const MAX_USERS: usize = 64;

/// A free range: its length, the steps that touched its last occupant (`None`: too many) and
/// the last of them.
#[derive(Clone)]
struct Free {
    len: usize,
    users: Option<SmallVec<[u32; 8]>>,
    last: usize,
}

/// Which steps each step depends on, directly or not, through the values it reads: a bitset
/// per step. Reusing a range whose occupants only such steps touched adds no ordering between
/// steps that could otherwise run side by side on the two workers; the LSTM step's
/// cross-entropy backward once reused a range the loss's sum read, which held the whole
/// backward pass until the 32 per-step losses were summed (`JANUS_TIMELINE`).
pub(crate) struct Ancestry {
    words: usize,
    bits: Vec<u64>,
}

impl Ancestry {
    /// Programs with more steps plan without it (the bitsets grow with the square of the
    /// count: 2 MiB at this bound).
    const MAX_STEPS: usize = 4096;

    /// Over `units`, value `v` lying in unit `at(v).0` at elements `at(v).1..at(v).2` of it:
    /// a step depends on the writers of the elements it reads.
    pub(crate) fn new(
        steps: &[Step],
        units: usize,
        at: impl Fn(usize) -> (usize, usize, usize),
    ) -> Option<Ancestry> {
        let n = steps.len();
        if n > Self::MAX_STEPS {
            return None;
        }
        let words = n.div_ceil(64);
        let mut bits = vec![0u64; n * words];
        let mut writers: Vec<SmallVec<[(u32, usize, usize); 2]>> = vec![SmallVec::new(); units];
        for (s, st) in steps.iter().enumerate() {
            let (done, row) = bits.split_at_mut(s * words);
            let row = &mut row[..words];
            for r in st.kind.reads() {
                let (u, lo, hi) = at(r);
                for &(p, a, b) in &writers[u] {
                    if a < hi && lo < b {
                        let p = p as usize;
                        row[p / 64] |= 1 << (p % 64);
                        row.iter_mut().zip(&done[p * words..(p + 1) * words]).for_each(|(x, y)| *x |= y);
                    }
                }
            }
            for w in st.kind.writes() {
                let (u, lo, hi) = at(w);
                writers[u].push((s as u32, lo, hi));
            }
        }
        Some(Ancestry { words, bits })
    }

    /// Whether step `a` runs before step `s` in every schedule (`s` reads what `a` produced,
    /// directly or not).
    pub(crate) fn precedes(&self, a: usize, s: usize) -> bool {
        self.bits[s * self.words + a / 64] >> (a % 64) & 1 == 1
    }
}

/// How much writing over `f` at step `s` orders: 0 nothing new (every step that touched its
/// occupant is one `s` already depends on); 1 only steps pinned to the worker `s` is pinned
/// to (it runs them in order anyway); 2 more.
fn coupling(f: &Free, s: usize, anc: Option<&Ancestry>, steps: &[Step]) -> u8 {
    let Some(anc) = anc else { return 0 };
    let Some(users) = &f.users else { return 2 };
    let mut class = 0;
    for &u in users {
        let u = u as usize;
        if anc.precedes(u, s) {
            continue;
        }
        if steps[s].worker == 0 || steps[u].worker != steps[s].worker {
            return 2;
        }
        class = 1;
    }
    class
}

/// Whether the steps between `last` and `first` in step order that `first` depends on (all of
/// them without `anc`) do at least `min` of the work `work` counts (per step, the work of the
/// steps before it). Steps that `first` does not depend on may run beside `last` on the other
/// worker: counted, they let the LSTM step's second half of `W_h`'s gradient (0.9 ms) take the
/// range of the `W_x` gradient's half the first half had just been summed from, because the
/// first half of `W_h`'s (33M) came between them in step order, so it waited for the `W_x`
/// gradient, and the step's end for it (`JANUS_TIMELINE`).
fn settled(work: &[u64], min: u64, anc: Option<&Ancestry>, first: usize, last: usize) -> bool {
    if work[first] < work[last + 1] + min {
        return false;
    }
    let Some(anc) = anc else { return true };
    let mut done = 0;
    for t in (last + 1..first).rev() {
        if anc.precedes(t, first) {
            done += work[t + 1] - work[t];
            if done >= min {
                return true;
            }
        }
    }
    false
}

/// What [`FreeList::find`] may lay a value over when no free range fits without ordering a
/// writer of it after a step on the other worker.
#[derive(Clone, Copy)]
pub(crate) enum Fallback<'a> {
    /// The ranges freed first (the whole program's plan, before steps are pinned to workers).
    FreedFirst,
    /// Ranges whose occupants' last users come at least `min` of estimated work before the
    /// value's first writer in step order (`work`: per step, the work of the steps before it),
    /// so the new ordering is almost surely met already; else fresh space.
    Settled { work: &'a [u64], min: u64 },
}

/// One dtype's free ranges, by start.
#[derive(Default)]
pub(crate) struct FreeList(BTreeMap<usize, Free>);

impl FreeList {
    /// Frees `start..start + len`, last touched by `users` (`last` the latest of them).
    pub(crate) fn release(&mut self, start: usize, len: usize, users: SmallVec<[u32; 8]>, last: usize) {
        if len > 0 {
            let users = Some(users).filter(|u| u.len() <= MAX_USERS);
            self.0.insert(start, Free { len, users, last });
        }
    }

    /// Where to put `need` elements written by `writers` (each a step and the range of the
    /// new value it writes): over free ranges whose users each writer of them already follows
    /// (or, class 1, that the writer's own worker ran), the tightest run of adjacent free
    /// ranges first, flush with one of its ends where possible; else as `fallback` says; else
    /// at the end of the arena (`arena_end` elements long), over a free range that ends it.
    /// `None`: in fresh space past the end.
    pub(crate) fn find(
        &self,
        need: usize,
        arena_end: usize,
        writers: &[(usize, usize, usize)],
        anc: Option<&Ancestry>,
        steps: &[Step],
        fallback: Fallback,
    ) -> Option<usize> {
        let first = writers.iter().map(|w| w.0).min().unwrap_or(0);
        let frees: Vec<(usize, usize, &Free)> = self.0.iter().map(|(&a, f)| (a, a + f.len, f)).collect();
        // The coupling of laying the value at `p` over free range `k`; with one writer of the
        // whole value it does not depend on `p`, and is computed once.
        let whole = matches!(writers, [(_, 0, hi)] if *hi >= need);
        let memo: Vec<std::cell::Cell<u8>> = frees.iter().map(|_| std::cell::Cell::new(u8::MAX)).collect();
        let class = |p: usize, k: usize| {
            let (a, b, f) = frees[k];
            if whole && memo[k].get() != u8::MAX {
                return memo[k].get();
            }
            let over = writers.iter().filter(|&&(_, lo, hi)| p + lo < b && a < p + hi);
            let c = over.map(|&(t, _, _)| coupling(f, t, anc, steps)).max().unwrap_or(0);
            if whole {
                memo[k].set(c);
            }
            c
        };
        // Runs of adjacent free ranges: (first, end) indices into `frees`.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for k in 0..frees.len() {
            match runs.last_mut() {
                Some(r) if frees[r.1 - 1].1 == frees[k].0 => r.1 = k + 1,
                _ => runs.push((k, k + 1)),
            }
        }
        let span = |&(i, j): &(usize, usize)| (frees[i].0, frees[j - 1].1);
        type Key = (u8, usize, bool, usize);
        let mut best: Option<(Key, usize)> = None;
        let consider = |best: &mut Option<(Key, usize)>, key: Key, p: usize| {
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                *best = Some((key, p));
            }
        };
        // A run that ends the arena, too short: the value grows the arena by less than itself.
        if let Some(&(i, j)) = runs.last().filter(|r| span(r).1 == arena_end && span(r).1 - span(r).0 < need)
        {
            let c = (i..j).map(|k| class(frees[i].0, k)).max().unwrap_or(0);
            if c < 2 {
                consider(&mut best, (c, usize::MAX, true, frees[i].0), frees[i].0);
            }
        }
        // The tightest runs first: once one holds a position ordering nothing new, longer runs
        // cannot do better.
        runs.retain(|r| span(r).1 - span(r).0 >= need);
        runs.sort_by_key(|r| span(r).1 - span(r).0);
        for &(i0, i1) in &runs {
            let (lo, hi) = span(&(i0, i1));
            if best.as_ref().is_some_and(|((c, len, _, _), _)| *c == 0 && *len < hi - lo) {
                break;
            }
            // Positions flush with a free range's start or end; `covered` its free ranges.
            let mut key = |p: usize, covered: std::ops::RangeInclusive<usize>| {
                let (c, last) =
                    covered.fold((0, 0), |(c, l), k| (c.max(class(p, k)), l.max(frees[k].2.last)));
                let tight = (hi - lo, p != lo && p + need != hi, p);
                let key = match (c, fallback) {
                    (2, Fallback::FreedFirst) => (2, last, false, p),
                    (2, Fallback::Settled { work, min }) if settled(work, min, anc, first, last) => {
                        (1, tight.0, tight.1, tight.2)
                    }
                    (2, Fallback::Settled { .. }) => return,
                    (c, _) => (c, tight.0, tight.1, tight.2),
                };
                consider(&mut best, key, p);
            };
            let mut j = i0;
            for i in i0..i1 {
                let p = frees[i].0;
                if p + need > hi {
                    break;
                }
                j = j.max(i);
                while frees[j].1 < p + need {
                    j += 1;
                }
                key(p, i..=j);
            }
            let mut i = i0;
            for j in i0..i1 {
                let Some(p) = frees[j].1.checked_sub(need).filter(|&p| p >= lo) else { continue };
                while frees[i].1 <= p {
                    i += 1;
                }
                key(p, i..=j);
            }
        }
        best.map(|(_, p)| p)
    }

    /// Takes `p..p + need` (free, from [`find`](Self::find)), leaving what it cuts of partly
    /// covered ranges free with their users.
    pub(crate) fn take(&mut self, p: usize, need: usize) {
        let covered: Vec<usize> =
            self.0.range(..p + need).filter(|(a, f)| *a + f.len > p).map(|(&a, _)| a).collect();
        for a in covered {
            let f = self.0.remove(&a).expect("listed");
            if a < p {
                self.0.insert(a, Free { len: p - a, ..f.clone() });
            }
            if a + f.len > p + need {
                self.0.insert(p + need, Free { len: a + f.len - (p + need), ..f });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Fallback, FreeList};
    use crate::exec::lower::{Step, StepKind};
    use smallvec::smallvec;

    /// Steps that read nothing, pinned to `workers` in turn: none precedes another.
    fn steps(workers: &[u8]) -> Vec<Step> {
        let copy = |w: usize| StepKind::Copy { x: 1000 + w, out: w };
        workers.iter().enumerate().map(|(k, &worker)| Step { kind: copy(k), worker }).collect()
    }

    /// A range the other worker's step freed is reused only past enough work the new writer
    /// depends on: work of steps it does not depend on may run beside it, and does not count.
    #[test]
    fn settled_work_counts_only_what_the_writer_follows() {
        for reads_the_long_step in [false, true] {
            // Step 0 (worker 1) used the range; step 1 (worker 2) is long; step 2 (worker 2)
            // places a value, reading step 1's output or not.
            let x = if reads_the_long_step { 1 } else { 1002 };
            let kinds = [
                StepKind::Copy { x: 1000, out: 0 },
                StepKind::Copy { x: 1001, out: 1 },
                StepKind::Copy { x, out: 2 },
            ];
            let s: Vec<Step> =
                kinds.into_iter().zip([1, 2, 2]).map(|(kind, worker)| Step { kind, worker }).collect();
            let anc = super::Ancestry::new(&s, 1004, |v| (v, 0, 1));
            let mut free = FreeList::default();
            free.release(0, 8, smallvec![0], 0);
            let settled = Fallback::Settled { work: &[0, 1, 1 << 30, (1 << 30) + 1], min: 1 << 20 };
            let p = free.find(8, 8, &[(2, 0, 8)], anc.as_ref(), &s, settled);
            assert_eq!(p.is_some(), reads_the_long_step, "reads the long step: {reads_the_long_step}");
        }
    }

    /// Free ranges keep their own users: a value laid over the range its own worker freed is
    /// preferred to a tighter one the other worker freed, adjacent ranges are not merged into
    /// one whose users are both, and taking part of a range leaves the rest with its users.
    #[test]
    fn free_ranges_keep_their_users_apart() {
        // Steps 0 and 1 ran on workers 1 and 2; step 2 (worker 1) and 3 (worker 2) place.
        let s = steps(&[1, 2, 1, 2]);
        let anc = super::Ancestry::new(&s, 1004, |v| (v, 0, 1));
        let mut free = FreeList::default();
        free.release(0, 8, smallvec![0], 0); // worker 1's
        free.release(8, 4, smallvec![1], 1); // worker 2's, adjacent and tighter
        let strict = Fallback::Settled { work: &[0; 5], min: u64::MAX };
        // Worker 1's value of 4 goes where worker 1 freed, flush with its start or end.
        let p = free.find(4, 12, &[(2, 0, 4)], anc.as_ref(), &s, strict).expect("a range fits");
        assert!(p == 0 || p == 4, "at {p}: over the other worker's range");
        // Worker 2's value of 12 would cover both: nothing fits without coupling.
        assert_eq!(free.find(12, 12, &[(3, 0, 12)], anc.as_ref(), &s, strict), None);
        // The whole program's rule couples rather than grow the arena.
        assert_eq!(free.find(12, 12, &[(3, 0, 12)], anc.as_ref(), &s, Fallback::FreedFirst), Some(0));
        // Worker 2's value of 4 takes worker 2's range; the rest of worker 1's stays its own.
        assert_eq!(free.find(4, 12, &[(3, 0, 4)], anc.as_ref(), &s, strict), Some(8));
        free.take(0, 4);
        assert_eq!(free.find(4, 12, &[(2, 0, 4)], anc.as_ref(), &s, strict), Some(4));
        assert_eq!(free.find(4, 12, &[(3, 0, 4)], anc.as_ref(), &s, strict), Some(8));
        // A free range ending the arena, too short, takes the value's start: the arena grows
        // by less than the value.
        let mut end = FreeList::default();
        end.release(8, 4, smallvec![1], 1);
        assert_eq!(end.find(6, 12, &[(3, 0, 6)], anc.as_ref(), &s, strict), Some(8));
        assert_eq!(end.find(6, 12, &[(2, 0, 6)], anc.as_ref(), &s, strict), None, "the other worker's");
    }
}
