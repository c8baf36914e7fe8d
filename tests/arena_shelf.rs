//! Large CPU arenas are shared by every compiled graph through one cache (`exec/cpu/arena_cache.rs`),
//! so a run often gets an arena another instance's run left full of its own values. That never
//! shows in a result: each batch size gives the same bits whichever arena it ran in, and
//! agrees with eager mode. A smaller batch after a larger one reuses the larger one's arena
//! instead of allocating its own, and `janus::release_cached_arenas` empties the cache.

use janus::prelude::*;

/// Intermediates of `rows * 64` f32 each: 1 MiB and more from 4096 rows, so on the shelf.
#[janus]
fn features(w: &Tensor, x: &Tensor) -> Tensor {
    let h = x.matmul(w).relu();
    let g = (&h * &h + 1.0).sqrt().tanh();
    (&g * &h).sum(1)
}

fn replays() -> u64 {
    janus::stats().function("features").map(|f| f.hits).sum()
}

// The cache is the process's: the two tests take turns (the first one counts its bytes).
static TURNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn runs_in_shared_arenas_give_the_same_bits_and_small_batches_reuse_large_arenas() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    janus::manual_seed(11);
    let w = Tensor::randn([64, 64]) * 0.2;
    let input = |rows: usize| (Tensor::randn([rows, 64]) * 0.7).tanh();
    let sizes = [6000, 20000, 9000, 33000, 7000, 20000, 6000];
    let xs: Vec<Tensor> = sizes.iter().map(|&r| input(r)).collect();
    let mut first: Vec<Option<Vec<f32>>> = vec![None; sizes.len()];
    for round in 0..2 {
        for (k, x) in xs.iter().enumerate() {
            let before = replays();
            // Enough calls for the size to compile and replay, in whatever way it generalises.
            let mut got = None;
            for _ in 0..4 {
                got = Some(features(&w, x).to_vec::<f32>());
            }
            assert!(replays() > before, "{} rows never replayed\n{}", sizes[k], janus::explain());
            let got = got.unwrap();
            let want = janus::with_mode(Mode::Eager, || features(&w, x)).to_vec::<f32>();
            let worst =
                got.iter().zip(&want).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0, f32::max);
            assert!(worst < 1e-4, "{} rows: compiled and eager differ by {worst}", sizes[k]);
            // The same size in a later call (after other sizes used the arenas): the same bits.
            match &first[k] {
                None => first[k] = Some(got),
                Some(f) => {
                    assert!(f == &got, "{} rows, round {round}: bits changed with the arena", sizes[k])
                }
            }
            if sizes[k] == 33000 {
                // A smaller batch now finds the large arena and allocates none of its own.
                let cached = janus::cached_arena_bytes();
                assert!(cached > 0, "the 33000-row run left no arena in the cache");
                let small = input(5000);
                for _ in 0..4 {
                    features(&w, &small);
                }
                assert_eq!(janus::cached_arena_bytes(), cached, "a 5000-row run after a 33000-row one");
            }
        }
    }
    janus::release_cached_arenas();
    assert_eq!(janus::cached_arena_bytes(), 0);
    // And runs go on, in fresh arenas.
    let x = &xs[1];
    let again = features(&w, x).to_vec::<f32>();
    assert!(first[1].as_ref() == Some(&again), "20000 rows after the cache was released");
}

/// Threads running several sizes at once share the cache: every call still gives the bits the
/// same size gave alone (each run holds its arena until it ends, so no two runs share one).
#[test]
fn threads_that_share_the_cache_give_the_bits_each_size_gives_alone() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    janus::manual_seed(12);
    let w = Tensor::randn([64, 64]) * 0.2;
    let xs: Vec<Tensor> =
        [5000, 12000, 7000, 26000].iter().map(|&r| (Tensor::randn([r, 64]) * 0.7).tanh()).collect();
    let alone: Vec<Vec<f32>> = xs
        .iter()
        .map(|x| {
            (0..3).for_each(|_| _ = features(&w, x));
            features(&w, x).to_vec::<f32>()
        })
        .collect();
    let before = replays();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (w, xs, alone) = (&w, &xs, &alone);
            s.spawn(move || {
                for round in 0..12 {
                    let k = (t + round) % xs.len();
                    let got = features(w, &xs[k]).to_vec::<f32>();
                    assert!(got == alone[k], "thread {t}, round {round}: {} rows", xs[k].dims()[0]);
                }
            });
        }
    });
    assert!(replays() >= before + 40, "the threads replayed {} of 48 calls", replays() - before);
}
