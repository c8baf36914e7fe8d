//! MNIST-sized digits (28x28, white on black, 10 classes), generated offline: the digits 0-9 of
//! the DejaVu fonts (the `dejavu` crate embeds them) rasterised once with `ab_glyph`, then drawn
//! through random affine distortions (rotation, shear, scale, translation), with random stroke
//! thickness and pixel noise. The held-out set uses fonts that training never sees.
#![allow(dead_code)]

use ab_glyph::{Font, FontRef, PxScale};
use janus::prelude::*;

/// Side of an image.
pub const SIDE: usize = 28;
/// Side of the rasterised master glyphs.
const MASTER: usize = 64;

/// The training fonts.
fn train_fonts() -> Vec<&'static [u8]> {
    vec![
        dejavu::sans::regular(),
        dejavu::sans::bold(),
        dejavu::sans::oblique(),
        dejavu::sans::extra_light(),
        dejavu::sans_condensed::regular(),
        dejavu::sans_condensed::bold(),
        dejavu::sans_mono::regular(),
        dejavu::sans_mono::oblique(),
        dejavu::serif::regular(),
        dejavu::serif::bold(),
        dejavu::serif::italic(),
    ]
}

/// The held-out fonts: none of them is in [`train_fonts`].
fn heldout_fonts() -> Vec<&'static [u8]> {
    vec![
        dejavu::sans::bold_oblique(),
        dejavu::sans_mono::bold(),
        dejavu::serif_condensed::regular(),
        dejavu::serif_condensed::bold_italic(),
    ]
}

/// A digit rasterised at `MASTER x MASTER`, centred, its height `0.75 * MASTER`.
fn master(font: &[u8], digit: u8) -> Vec<f32> {
    let font = FontRef::try_from_slice(font).expect("a DejaVu font parses");
    let glyph = font.glyph_id((b'0' + digit) as char).with_scale(PxScale::from(MASTER as f32));
    let outlined = font.outline_glyph(glyph).expect("digits have outlines");
    let b = outlined.px_bounds();
    let (w, h) = (b.width(), b.height());
    // Rasterise at the font's own scale, then place it scaled to the target height.
    let mut raw = vec![0f32; (w.ceil() as usize + 1) * (h.ceil() as usize + 1)];
    let rw = w.ceil() as usize + 1;
    outlined.draw(|x, y, c| {
        let i = y as usize * rw + x as usize;
        if i < raw.len() {
            raw[i] = c;
        }
    });
    let rh = raw.len() / rw;
    let target = 0.75 * MASTER as f32;
    let s = target / h.max(1.0);
    let mut out = vec![0f32; MASTER * MASTER];
    for y in 0..MASTER {
        for x in 0..MASTER {
            let sx = (x as f32 - MASTER as f32 / 2.0) / s + w / 2.0;
            let sy = (y as f32 - MASTER as f32 / 2.0) / s + h / 2.0;
            out[y * MASTER + x] = bilinear(&raw, rw, rh, sx, sy);
        }
    }
    out
}

fn bilinear(img: &[f32], w: usize, h: usize, x: f32, y: f32) -> f32 {
    if x < 0.0 || y < 0.0 || x >= (w - 1) as f32 || y >= (h - 1) as f32 {
        return 0.0;
    }
    let (x0, y0) = (x.floor() as usize, y.floor() as usize);
    let (fx, fy) = (x - x0 as f32, y - y0 as f32);
    let p = |xx: usize, yy: usize| img[yy * w + xx];
    (p(x0, y0) * (1.0 - fx) + p(x0 + 1, y0) * fx) * (1.0 - fy)
        + (p(x0, y0 + 1) * (1.0 - fx) + p(x0 + 1, y0 + 1) * fx) * fy
}

/// SplitMix64, for reproducible distortions.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u = self.uniform(1e-7, 1.0);
        let v = self.uniform(0.0, 1.0);
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f32::consts::PI * v).cos()
    }
}

/// One 28x28 image of a master glyph under a random distortion.
fn render(m: &[f32], rng: &mut Rng, out: &mut [f32]) {
    let rot = rng.uniform(-15.0, 15.0).to_radians();
    let shear = rng.uniform(-0.3, 0.3);
    let scale = rng.uniform(0.75, 1.05) * SIDE as f32 / MASTER as f32;
    let (sx, sy) = (scale * rng.uniform(0.85, 1.15), scale);
    let (tx, ty) = (rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0));
    let gain = rng.uniform(0.8, 2.5); // stroke thickness: a higher gain widens the edges
    let noise = rng.uniform(0.0, 0.15);
    // Output pixel -> master pixel: the inverse of rotate(shear(scale(m))).
    let (c, s) = (rot.cos(), rot.sin());
    for y in 0..SIDE {
        for x in 0..SIDE {
            let mut acc = 0.0;
            for (dy, dx) in [(0.25, 0.25), (0.25, 0.75), (0.75, 0.25), (0.75, 0.75)] {
                let u = x as f32 + dx - SIDE as f32 / 2.0 - tx;
                let v = y as f32 + dy - SIDE as f32 / 2.0 - ty;
                let (u, v) = (c * u + s * v, -s * u + c * v);
                let u = u - shear * v;
                let (mx, my) = (u / sx + MASTER as f32 / 2.0, v / sy + MASTER as f32 / 2.0);
                acc += bilinear(m, MASTER, MASTER, mx, my);
            }
            let p = (acc / 4.0 * gain).min(1.0) + noise * rng.normal();
            out[y * SIDE + x] = p.clamp(0.0, 1.0);
        }
    }
}

/// A labelled set of images: `images` `[n, 1, 28, 28]` f32 in `[0, 1]`, `labels` `[n]` i64.
pub struct Digits {
    pub images: Vec<f32>,
    pub labels: Vec<i64>,
}

impl Digits {
    fn generate(fonts: &[&[u8]], n: usize, seed: u64) -> Digits {
        let masters: Vec<Vec<Vec<f32>>> =
            fonts.iter().map(|f| (0..10).map(|d| master(f, d)).collect()).collect();
        let mut rng = Rng(seed);
        let mut images = vec![0f32; n * SIDE * SIDE];
        let mut labels = Vec::with_capacity(n);
        for (i, img) in images.chunks_mut(SIDE * SIDE).enumerate() {
            let digit = i % 10;
            let font = rng.below(fonts.len());
            render(&masters[font][digit], &mut rng, img);
            labels.push(digit as i64);
        }
        Digits { images, labels }
    }

    /// `n` training images, from the training fonts.
    pub fn train(n: usize, seed: u64) -> Digits {
        Self::generate(&train_fonts(), n, seed)
    }

    /// `n` held-out images, from fonts training never sees.
    pub fn heldout(n: usize, seed: u64) -> Digits {
        Self::generate(&heldout_fonts(), n, seed ^ 0xD1CE)
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Images `idx` as a batch: `([k, 1, 28, 28] f32, [k] i64)`, normalised to mean 0 and
    /// about unit variance.
    pub fn batch(&self, idx: &[usize]) -> (Tensor, Tensor) {
        let px = SIDE * SIDE;
        let mut x = Vec::with_capacity(idx.len() * px);
        for &i in idx {
            x.extend(self.images[i * px..(i + 1) * px].iter().map(|&p| (p - 0.2) / 0.35));
        }
        let y = idx.iter().map(|&i| self.labels[i]).collect();
        (Tensor::from_vec(x, [idx.len(), 1, SIDE, SIDE]), Tensor::from_vec(y, [idx.len()]))
    }

    /// Image `i` as rows of pixels (for pictures and tests).
    pub fn image(&self, i: usize) -> &[f32] {
        &self.images[i * SIDE * SIDE..(i + 1) * SIDE * SIDE]
    }
}
