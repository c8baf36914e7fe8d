//! Error types, and the panic helper that reports user mistakes with the op and the caller.

use crate::{DType, Device, Shape};
use std::cell::Cell;
use std::panic::Location;

thread_local! {
    static COMPOSITE: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Panics with `janus::<op>: <detail> (called at <file>:<line>:<col>)`, pointing at the user's
/// call site: every function between the user and here is `#[track_caller]`. Inside a
/// composite op the message starts with the op the user called (`janus::cross_entropy: gather:
/// ...`).
#[track_caller]
#[cold]
pub(crate) fn op_panic(op: &str, detail: std::fmt::Arguments<'_>) -> ! {
    let at = Location::caller();
    crate::panics::note_panic(); // a recording that catches this is unusable (see `panics`)
    let outer = COMPOSITE.with(Cell::get).filter(|&c| c != op).map(|c| format!("{c}: ")).unwrap_or_default();
    panic!("janus::{outer}{op}: {detail} (called at {}:{}:{})", at.file(), at.line(), at.column())
}

/// While alive, errors of the primitive ops run on this thread are reported as part of the
/// composite op `name` (the outermost composite wins). A guard rather than a closure, because
/// `#[track_caller]` does not pass through closures.
pub(crate) struct Composite(Option<&'static str>);

impl Composite {
    pub(crate) fn enter(name: &'static str) -> Composite {
        Composite(COMPOSITE.with(|c| c.replace(Some(c.get().unwrap_or(name)))))
    }
}

impl Drop for Composite {
    fn drop(&mut self) {
        COMPOSITE.with(|c| c.set(self.0));
    }
}

/// Shorthand for [`op_panic`] with `format!`-style arguments.
macro_rules! bail {
    ($op:expr, $($arg:tt)*) => {
        $crate::error::op_panic($op, format_args!($($arg)*))
    };
}
pub(crate) use bail;

/// Errors from device selection and transfers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The device exists in the API but this build or machine cannot use it.
    #[error("device {device} is not available: {reason}")]
    Unavailable {
        /// The requested device.
        device: Device,
        /// Why it cannot be used.
        reason: String,
    },
}

/// Errors from [`crate::save`] and [`crate::load`].
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Reading or writing the file failed.
    #[error("checkpoint {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not a valid safetensors file (truncated, corrupt header, ...).
    #[error("checkpoint {path}: not a valid safetensors file: {detail}")]
    Corrupt {
        /// The file.
        path: String,
        /// What the parser reported.
        detail: String,
    },
    /// The module has a tensor the file lacks.
    #[error("checkpoint {path}: missing tensor `{name}`")]
    Missing {
        /// The file.
        path: String,
        /// The tensor's path in the module.
        name: String,
    },
    /// A tensor's shape differs between the module and the file.
    #[error(
        "checkpoint {path}: tensor `{name}` has shape {found:?} in the file, the module expects {expected:?}"
    )]
    ShapeMismatch {
        /// The file.
        path: String,
        /// The tensor's path in the module.
        name: String,
        /// The module's shape.
        expected: Shape,
        /// The file's shape.
        found: Vec<usize>,
    },
    /// A tensor's dtype differs between the module and the file.
    #[error(
        "checkpoint {path}: tensor `{name}` has dtype {found} in the file, the module expects {expected}"
    )]
    DtypeMismatch {
        /// The file.
        path: String,
        /// The tensor's path in the module.
        name: String,
        /// The module's dtype.
        expected: DType,
        /// The file's dtype, as safetensors names it.
        found: String,
    },
    /// The file holds a tensor the module does not take ([`crate::load`] is strict;
    /// [`crate::load_partial`] skips such tensors and reports them).
    #[error(
        "checkpoint {path}: tensor `{name}` in the file is not taken by the module{}",
        if *more == 0 { String::new() } else { format!(" (nor are {more} more)") }
    )]
    Unexpected {
        /// The file.
        path: String,
        /// The first such tensor, in name order.
        name: String,
        /// How many others there are.
        more: usize,
    },
}
