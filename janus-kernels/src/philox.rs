//! Counter-based random numbers (Philox 4x32-10, Salmon et al. 2011): a draw depends only on
//! (key, counter), so eager and compiled code that pass the same counter see the same stream,
//! and large fills split across threads without changing a single value.

use crate::dtype::Float;
use rayon::prelude::*;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// One Philox 4x32-10 block: four independent 32-bit words for `counter` under `key`.
#[inline]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The block at position `counter` of the stream `key`.
#[inline]
pub fn block(key: u64, counter: u64) -> [u32; 4] {
    philox4x32_10([counter as u32, (counter >> 32) as u32, 0, 0], [key as u32, (key >> 32) as u32])
}

/// Element types the random fills produce.
pub trait RandomFloat: Float {
    /// Values one Philox block yields.
    const PER_BLOCK: usize;
    /// Uniform `[0, 1)` values from one block.
    fn uniform(b: [u32; 4], out: &mut [Self]);
    /// Standard normal values from one block (Box-Muller).
    fn normal(b: [u32; 4], out: &mut [Self]);
}

const TWO_PI: f64 = std::f64::consts::TAU;

impl RandomFloat for f32 {
    const PER_BLOCK: usize = 4;
    fn uniform(b: [u32; 4], out: &mut [f32]) {
        for (o, w) in out.iter_mut().zip(b) {
            *o = (w >> 8) as f32 * (1.0 / 16_777_216.0);
        }
    }
    fn normal(b: [u32; 4], out: &mut [f32]) {
        let mut z = [0.0f32; 4];
        for p in 0..2 {
            // u1 in (0, 1] keeps the logarithm finite.
            let u1 = ((b[2 * p] >> 8) + 1) as f64 * (1.0 / 16_777_216.0);
            let u2 = (b[2 * p + 1] >> 8) as f64 * (1.0 / 16_777_216.0);
            let r = (-2.0 * u1.ln()).sqrt();
            z[2 * p] = (r * (TWO_PI * u2).cos()) as f32;
            z[2 * p + 1] = (r * (TWO_PI * u2).sin()) as f32;
        }
        out.copy_from_slice(&z[..out.len()]);
    }
}

fn u53(hi: u32, lo: u32) -> f64 {
    ((((hi as u64) << 32) | lo as u64) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

impl RandomFloat for f64 {
    const PER_BLOCK: usize = 2;
    fn uniform(b: [u32; 4], out: &mut [f64]) {
        let z = [u53(b[0], b[1]), u53(b[2], b[3])];
        out.copy_from_slice(&z[..out.len()]);
    }
    fn normal(b: [u32; 4], out: &mut [f64]) {
        let u1 = 1.0 - u53(b[0], b[1]);
        let u2 = u53(b[2], b[3]);
        let r = (-2.0 * u1.ln()).sqrt();
        let z = [r * (TWO_PI * u2).cos(), r * (TWO_PI * u2).sin()];
        out.copy_from_slice(&z[..out.len()]);
    }
}

/// Number of counter values a fill of `n` elements of `T` consumes.
pub fn blocks_for<T: RandomFloat>(n: usize) -> u64 {
    n.div_ceil(T::PER_BLOCK) as u64
}

fn fill<T: RandomFloat>(key: u64, counter: u64, out: &mut [T], draw: fn([u32; 4], &mut [T])) -> u64 {
    const CHUNK_BLOCKS: usize = 4096;
    let per_chunk = CHUNK_BLOCKS * T::PER_BLOCK;
    let work = |ci: usize, c: &mut [T]| {
        let first = counter.wrapping_add((ci * CHUNK_BLOCKS) as u64);
        for (bi, piece) in c.chunks_mut(T::PER_BLOCK).enumerate() {
            draw(block(key, first.wrapping_add(bi as u64)), piece);
        }
    };
    if out.len() > 4 * per_chunk && crate::parallel::allowed() {
        out.par_chunks_mut(per_chunk).enumerate().for_each(|(i, c)| work(i, c));
    } else {
        out.chunks_mut(per_chunk).enumerate().for_each(|(i, c)| work(i, c));
    }
    blocks_for::<T>(out.len())
}

/// Fills `out` with uniform `[0, 1)` values from stream `key` starting at `counter`; returns
/// the number of counter values consumed.
pub fn fill_uniform<T: RandomFloat>(key: u64, counter: u64, out: &mut [T]) -> u64 {
    fill(key, counter, out, T::uniform)
}

/// Fills `out` with standard normal values; returns the number of counter values consumed.
pub fn fill_normal<T: RandomFloat>(key: u64, counter: u64, out: &mut [T]) -> u64 {
    fill(key, counter, out, T::normal)
}

/// Draws one category per row of `probs` (`rows x cols`, non-negative weights, not necessarily
/// normalised) into `out`. Returns the counter values consumed, or the first row whose weights
/// are negative, non-finite or all zero.
pub fn multinomial<T: RandomFloat>(
    probs: &[T],
    cols: usize,
    key: u64,
    counter: u64,
    out: &mut [i64],
) -> Result<u64, usize> {
    let rows = out.len();
    // One uniform per row; on the stack for the few rows of a policy's action sampling.
    let (mut stack, mut heap) = ([T::ZERO; 16], Vec::new());
    let u: &mut [T] = if rows <= 16 {
        &mut stack[..rows]
    } else {
        heap.resize(rows, T::ZERO);
        &mut heap
    };
    let used = fill_uniform(key, counter, u);
    for r in 0..rows {
        let row = &probs[r * cols..(r + 1) * cols];
        let mut total = 0.0f64;
        for &p in row {
            let p = p.to_f64();
            if !(p >= 0.0 && p.is_finite()) {
                return Err(r);
            }
            total += p;
        }
        if total <= 0.0 {
            return Err(r);
        }
        let target = u[r].to_f64() * total;
        let mut acc = 0.0f64;
        let mut pick = None;
        for (j, &p) in row.iter().enumerate() {
            acc += p.to_f64();
            if p.to_f64() > 0.0 {
                pick = Some(j);
                if acc > target {
                    break;
                }
            }
        }
        out[r] = pick.expect("a row with positive total has a positive weight") as i64;
    }
    Ok(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer_vectors() {
        // Random123 kat_vectors for philox4x32_10.
        assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
    }

    #[test]
    fn fills_are_split_invariant_and_well_distributed() {
        let mut a = vec![0.0f32; 100_001];
        let used = fill_normal(7, 11, &mut a);
        assert_eq!(used, 25_001);
        // The same values come out when drawn as two pieces at the right counters.
        let mut b = vec![0.0f32; 100_001];
        let (x, y) = b.split_at_mut(40_000);
        let c = fill_normal(7, 11, x);
        fill_normal(7, 11 + c, y);
        assert_eq!(a, b);
        let mean = a.iter().map(|&v| v as f64).sum::<f64>() / a.len() as f64;
        let var = a.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / a.len() as f64;
        assert!(mean.abs() < 0.02 && (var - 1.0).abs() < 0.02, "mean {mean} var {var}");
        let mut u = vec![0.0f64; 50_000];
        fill_uniform(1, 0, &mut u);
        assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        assert!((mean - 0.5).abs() < 0.01);
    }

    #[test]
    fn multinomial_follows_weights_and_rejects_bad_rows() {
        let rows = 20_000;
        let probs: Vec<f32> = (0..rows).flat_map(|_| [0.0, 1.0, 3.0]).collect();
        let mut out = vec![0i64; rows];
        multinomial(&probs, 3, 3, 0, &mut out).unwrap();
        let twos = out.iter().filter(|&&c| c == 2).count() as f64 / rows as f64;
        assert!(out.iter().all(|&c| c == 1 || c == 2));
        assert!((twos - 0.75).abs() < 0.02, "{twos}");
        assert_eq!(multinomial(&[1.0f32, -1.0], 2, 0, 0, &mut [0]), Err(0));
        assert_eq!(multinomial(&[0.0f32, 0.0], 2, 0, 0, &mut [0]), Err(0));
    }
}
