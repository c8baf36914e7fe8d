//! A compiled variant generalised over some input dimensions: [`Template`]s of the recorded,
//! optimised forward and derived backward graphs of two or more [`Compiled`] samples of one
//! block at different sizes. An instance for new sizes fills in the templates and lowers them:
//! no recording, derivation or optimisation runs again. The optimised backward graph of a
//! set of cotangents is fitted on first use, from the samples' own; when those do not fit, the
//! instance optimises its derived backward graph itself (a backward compile).

use super::{Compiled, GradParts, op_calls, without_cotangents};
use crate::exec::Executor;
use crate::graph::generic::Template;
use crate::passes::optimize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Templates of one program's compiled samples at different sizes, and instances of them.
/// `#[janus]` blocks make these themselves; [`Generic::fit`] is public for tests and tools
/// that compile with [`crate::trace`].
pub struct Generic {
    samples: Vec<Arc<Compiled>>,
    /// The symbols' values in each sample.
    symbols: Vec<Vec<usize>>,
    recorded: Template,
    forward: Template,
    /// The derived (unoptimised) backward graph, if the samples are differentiable.
    backward: Option<Template>,
    /// Per set of cotangents: the samples' optimised backward graphs fitted, or `None` when they
    /// do not fit.
    optimised: Mutex<HashMap<Vec<bool>, Option<Arc<Template>>>>,
}

impl Generic {
    /// Fits `samples`, whose symbols take `symbols[i]` in sample `i`. Fails, saying why, when
    /// the samples differ in more than their sizes or a size has no unique expression.
    pub fn fit(samples: Vec<Arc<Compiled>>, symbols: Vec<Vec<usize>>) -> Result<Generic, String> {
        let first = &samples[0];
        for s in &samples[1..] {
            let same = s.num_outputs == first.num_outputs
                && s.num_residuals == first.num_residuals
                && s.num_leaves == first.num_leaves
                && s.out_grad == first.out_grad
                && match (&s.grad, &first.grad) {
                    (None, None) => true,
                    (Some(a), Some(b)) => {
                        let (a, b) = (&a.derivative, &b.derivative);
                        a.num_outputs == b.num_outputs
                            && a.num_residuals == b.num_residuals
                            && a.diff_outputs == b.diff_outputs
                            && a.grad_inputs == b.grad_inputs
                            && a.fresh_leaves == b.fresh_leaves
                            && a.grad_leaves == b.grad_leaves
                            && a.outer == b.outer
                            && a.depends == b.depends
                    }
                    _ => false,
                };
            if !same {
                return Err("the samples' outputs or gradients differ in kind".into());
            }
        }
        let fit = |graph: &dyn Fn(&Compiled) -> &crate::graph::Graph| {
            let graphs: Vec<_> = samples.iter().map(|s| graph(s)).collect();
            Template::fit(&graphs, &symbols)
        };
        let recorded = fit(&|c| &c.recorded).map_err(|e| format!("recorded graph: {e}"))?;
        let forward = fit(&|c| c.exec.graph()).map_err(|e| format!("optimised graph: {e}"))?;
        let backward = match first.grad {
            None => None,
            Some(_) => Some(
                fit(&|c| &c.grad.as_ref().expect("checked above").derivative.backward)
                    .map_err(|e| format!("backward graph: {e}"))?,
            ),
        };
        Ok(Generic { samples, symbols, recorded, forward, backward, optimised: Mutex::new(HashMap::new()) })
    }

    /// The variant for symbol values `values`: the templates filled in, verified and lowered.
    pub fn instantiate(self: &Arc<Self>, values: &[usize]) -> Result<Compiled, String> {
        let t0 = Instant::now();
        let first = &self.samples[0];
        let recorded = self.recorded.instantiate(values)?;
        // (A loop's op count depends on its trip count, a size.)
        let recorded_ops = op_calls(&recorded);
        let exec = Executor::compile(self.forward.instantiate(values)?);
        let grad = match (&first.grad, &self.backward) {
            (Some(g), Some(t)) => {
                let mut derivative = (*g.derivative).clone();
                derivative.backward = t.instantiate(values)?;
                Some(GradParts {
                    derivative: Arc::new(derivative),
                    backward: Mutex::new(HashMap::new()),
                    generic: Some((self.clone(), values.to_vec())),
                })
            }
            _ => None,
        };
        Ok(Compiled {
            name: first.name.clone(),
            recorded,
            exec,
            stats: first.stats.clone(),
            num_outputs: first.num_outputs,
            num_residuals: first.num_residuals,
            num_leaves: first.num_leaves,
            out_grad: first.out_grad.clone(),
            recorded_ops,
            grad,
            compile_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The recorded graph at symbol values `values` (what a recording at those sizes must be
    /// for a validated instance).
    pub(crate) fn recorded(&self, values: &[usize]) -> Result<crate::graph::Graph, String> {
        self.recorded.instantiate(values)
    }

    /// The backward executor of an instance (symbol values `values`, its derivative `d`) for
    /// this set of cotangents, and the ops of its derived graph.
    pub(crate) fn backward(
        &self,
        values: &[usize],
        d: &crate::grad_graph::Derivative,
        mask: &[bool],
    ) -> (Executor, u64) {
        let specialised = without_cotangents(d, mask);
        let ops = op_calls(&specialised);
        if let Some(t) = self.optimised_backward(mask)
            && let Ok(g) = t.instantiate(values)
        {
            return (Executor::compile(g), ops);
        }
        let (optimised, _) = crate::eager::uncounted(|| optimize(specialised));
        (Executor::compile(optimised), ops)
    }

    fn optimised_backward(&self, mask: &[bool]) -> Option<Arc<Template>> {
        let mut cache = self.optimised.lock().unwrap();
        if let Some(t) = cache.get(mask) {
            return t.clone();
        }
        let execs: Vec<Arc<Executor>> = self.samples.iter().map(|s| s.backward_for(mask).0).collect();
        let graphs: Vec<_> = execs.iter().map(|e| e.graph()).collect();
        let t = match Template::fit(&graphs, &self.symbols) {
            Ok(t) => Some(Arc::new(t)),
            Err(why) => {
                log::info!(target: "janus", "{}: optimised backward graphs do not generalise ({why}); instances optimise their own", self.samples[0].name);
                None
            }
        };
        cache.insert(mask.to_vec(), t.clone());
        t
    }

    /// How many sizes and constants of the optimised forward graph are symbolic.
    pub fn symbolic_slots(&self) -> usize {
        self.forward.symbolic_slots()
    }
}
