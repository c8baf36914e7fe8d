//! The state of one function's expansion, shared by the files that emit code: `expand.rs`
//! (the walk, which owns it), `emit.rs` (which numbers each fragment with it) and
//! `speculate.rs` (the whole-function fragment). It sits below all three and imports only the
//! options, so none of them needs another to name it.

use super::options::Options;
use std::collections::HashMap;

/// What the expansion of one function needs to know.
pub(crate) struct Ctx {
    pub(crate) opts: Options,
    pub(crate) function: String,
    /// The next block's number.
    pub(crate) next: u32,
    /// While a block's split version is emitted: its block number, and the next part's.
    pub(crate) part: Option<(u32, u32)>,
    /// The last hoisted helper call's number (`__janus_cN`).
    pub(crate) hoisted: u32,
    /// Each hoisted local's call text, for the probes' labels.
    pub(crate) labels: HashMap<String, String>,
}

impl Ctx {
    /// The context before the first block of `function` is expanded.
    pub(crate) fn new(opts: Options, function: String) -> Ctx {
        Ctx { opts, function, next: 0, part: None, hoisted: 0, labels: HashMap::new() }
    }
}
