//! Host values that helper calls return inside `#[janus]` functions.
//!
//! A key holds what the macro can see: the inputs a block reads. A helper such as
//! `temperature()` or `depth()` may read a global, a thread-local or a `static`, so its value
//! can change between calls while every input stays the same. A graph recorded while the
//! helper returned `1.0` would bake `1.0` in. The macro therefore wraps every helper call it
//! sees in a block (free and associated functions, methods of `self`) in [`host_value`], which
//! returns the value unchanged and, when the value is a host scalar:
//!
//! (or `()` from a call that passes nothing by `&mut`: one made for a host effect, such as
//! logging)
//!
//! - tells an active recording that it read a value its key cannot see, which makes the
//!   recording unusable (`Unusable::HostValue`): no graph ever bakes such a value in;
//! - sets the block's [`Split`] flag. From the next call on, the block runs its *split*
//!   version, in which each such call is a host statement of its own ([`host_call`]),
//!   evaluated in source order on every call; the statements after it form a new block that
//!   takes the value as a keyed input (a guard: a new value is a new key).
//!
//! The call still runs exactly once per call and in source order, so host effects are neither
//! repeated nor reordered. Calls the macro cannot hoist (inside closures, after another call
//! in the same statement) stay wrapped in place: a recording that meets one stays unusable,
//! so the block runs its statements.

use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a block has seen one of its helper calls return a host scalar (one `static` per
/// block with such calls in the generated code).
pub struct Split(AtomicBool);

impl Split {
    /// Not yet seen.
    #[allow(clippy::new_without_default)] // a `static` initialiser
    pub const fn new() -> Split {
        Split(AtomicBool::new(false))
    }

    /// Whether the block runs its split version.
    #[inline]
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self) {
        if !self.get() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// A helper call's value, handed back unchanged; see the module docs. `call` is its source
/// text (for `explain()`), the caller's location its line. `effect`: the call passes nothing
/// by `&mut` (a free function), so a `()` result means it was called for a host effect
/// (logging, a counter), which a replay would skip: it is treated like a host scalar.
#[track_caller]
#[inline]
pub fn host_value<T>(split: Option<&Split>, call: &'static str, effect: bool, value: T) -> T {
    let unit = effect && super::instance::erased_type_id::<T>() == std::any::TypeId::of::<()>();
    if unit || is_host_scalar::<T>() {
        if let Some(s) = split {
            s.set();
        }
        crate::recorder::host_value(call, unit, Location::caller());
    }
    value
}

/// A helper call hoisted into a host statement of a block's split version (the macro makes
/// this a statement of its own, never part of a block).
#[track_caller]
#[inline]
pub fn host_call<T>(split: &Split, call: &'static str, effect: bool, value: T) -> T {
    host_value(Some(split), call, effect, value)
}

/// Whether values of `T` are host scalars (numbers, `bool`, `char`, and pairs and options of
/// them): what a helper returns when it feeds a constant, a size or a decision.
fn is_host_scalar<T>() -> bool {
    use std::any::TypeId;
    let id = super::instance::erased_type_id::<T>();
    macro_rules! any_of {
        ($($t:ty),*) => { false $(|| id == TypeId::of::<$t>())* };
    }
    any_of!(
        f32,
        f64,
        bool,
        char,
        i8,
        i16,
        i32,
        i64,
        i128,
        isize,
        u8,
        u16,
        u32,
        u64,
        u128,
        usize,
        (f32, f32),
        (f64, f64),
        (usize, usize),
        (i64, i64),
        Option<f32>,
        Option<f64>,
        Option<usize>,
        Option<bool>
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_set_the_flag_and_other_values_do_not() {
        let split = Split::new();
        assert_eq!(host_value(Some(&split), "t()", true, crate::Tensor::scalar(1.0)).item(), 1.0);
        assert_eq!(host_value(Some(&split), "v()", true, vec![1.0f64]), vec![1.0]);
        host_value(Some(&split), "update(&mut w)", false, ());
        assert!(!split.get());
        assert_eq!(host_value(None, "t()", true, 2.5f64), 2.5);
        assert!(!split.get());
        assert_eq!(host_value(Some(&split), "t()", true, 3usize), 3);
        assert!(split.get());
        let split = Split::new();
        assert_eq!(host_call(&split, "p()", true, (1.0f32, 2.0f32)), (1.0, 2.0));
        assert!(split.get());
        let split = Split::new();
        host_call(&split, "log(3)", true, ());
        assert!(split.get());
    }
}
