//! TEMPORARY scalar stand-in until the vectorised implementation lands.
#![allow(missing_docs)]
#[inline(always)]
pub fn exp_lane(x: f32) -> f32 { x.exp() }
#[inline(always)]
pub fn log_lane(x: f32) -> f32 { x.ln() }
#[inline(always)]
pub fn tanh_lane(x: f32) -> f32 { x.tanh() }
#[inline(always)]
pub fn sigmoid_lane(x: f32) -> f32 { 1.0 / (1.0 + (-x).exp()) }
#[inline(always)]
pub fn with_best_simd<R>(f: impl FnOnce() -> R) -> R { f() }
