//! `janus::trace(f)`: a function of tensors run as a compiled graph. The first call for each
//! input signature (shapes, dtypes, devices, grad flags, grad mode) runs `f` eagerly while
//! recording; if the recording is usable it is optimised and compiled, and later calls replay
//! it. When inputs need gradients, the replay adds one autograd node whose backward is derived
//! by symbolic autodiff and compiled lazily.

use super::{Compiled, OutKind};
use crate::autograd::is_grad_enabled;
use crate::graph::Graph;
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::{DType, Device};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What a `Traced` function does for one input signature.
enum Variant {
    Compiled(Arc<Compiled>),
    Eager(String),
}

/// Input signature: shape, dtype, device and grad flag per input, plus the grad mode.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Signature {
    inputs: Vec<(Shape, DType, Device, bool)>,
    grad_enabled: bool,
}

impl Signature {
    fn of(inputs: &[Tensor]) -> Signature {
        Signature {
            inputs: inputs
                .iter()
                .map(|t| (t.shape_ref().clone(), t.dtype(), t.device(), t.needs_grad()))
                .collect(),
            grad_enabled: is_grad_enabled(),
        }
    }
}

/// A function of tensors that runs as a compiled graph; see [`trace`].
pub struct Traced<F> {
    f: F,
    name: String,
    variants: Mutex<HashMap<Signature, Arc<VariantCell>>>,
    last: Mutex<Option<Arc<Compiled>>>,
}

struct VariantCell(Variant);

/// Wraps `f` (inputs in, outputs out) so that it runs as a compiled graph, recorded on the first
/// call with each input signature. `f` must be a function of its inputs: tensors it reaches
/// otherwise, and host reads, make the recording unusable (it then runs eagerly, correctly).
///
/// # Examples
///
/// ```
/// use janus_runtime::{Tensor, trace};
/// let f = trace(|x: &[Tensor]| vec![(x[0].matmul(&x[1]) + 1.0).relu().sum_all()]);
/// let (a, b) = (Tensor::randn([4, 3]).requires_grad(), Tensor::randn([3, 2]));
/// let y = f.run(&[a.clone(), b.clone()]); // recorded and compiled on this first call
/// let y = f.run(&[a.clone(), b]).into_iter().chain(y).next().unwrap(); // replayed
/// let grads = y.backward(); // through the compiled backward graph
/// assert_eq!(grads.get(&a).unwrap().dims(), [4, 3]);
/// ```
pub fn trace<F: Fn(&[Tensor]) -> Vec<Tensor>>(f: F) -> Traced<F> {
    Traced { f, name: "trace".into(), variants: Mutex::new(HashMap::new()), last: Mutex::new(None) }
}

impl<F: Fn(&[Tensor]) -> Vec<Tensor>> Traced<F> {
    /// Names the function in graph dumps.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Calls the function: replays a compiled variant, or records one.
    pub fn run(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        let sig = Signature::of(inputs);
        let found = self.variants.lock().unwrap().get(&sig).cloned();
        match found.as_deref() {
            Some(VariantCell(Variant::Compiled(c))) => c.replay(inputs),
            Some(VariantCell(Variant::Eager(_))) => (self.f)(inputs),
            None => {
                let (outs, variant) = self.record(inputs, &sig);
                if let Variant::Compiled(c) = &variant {
                    *self.last.lock().unwrap() = Some(c.clone());
                }
                self.variants.lock().unwrap().insert(sig, Arc::new(VariantCell(variant)));
                outs
            }
        }
    }

    fn record(&self, inputs: &[Tensor], sig: &Signature) -> (Vec<Tensor>, Variant) {
        let rec = crate::trace::start();
        for (k, t) in inputs.iter().enumerate() {
            rec.register_input(t, format!("input {k}"));
        }
        let outs = (self.f)(inputs);
        let refs: Vec<&Tensor> = outs.iter().collect();
        // As with PyTorch's `retain_graph=False`, a graph that `backward()` walked is consumed:
        // an output that was a root of `backward()` comes back from a replay without history.
        let consumed: Vec<bool> = refs.iter().map(|t| rec.was_backward_root(t)).collect();
        let variant = match rec.finish(&refs) {
            Ok(g) => {
                let needs: Vec<bool> = sig.inputs.iter().map(|x| x.3 && sig.grad_enabled).collect();
                let mut needs_all = needs.clone();
                needs_all.resize(g.inputs.len(), false); // the random-stream input
                let mut kinds = OutKind::of(&refs);
                for (k, consumed) in kinds.iter_mut().zip(consumed) {
                    k.history &= !consumed;
                }
                match Compiled::new(&self.name, g, &needs_all, &kinds) {
                    Ok(c) => Variant::Compiled(Arc::new(c)),
                    Err(why) => {
                        log::info!("janus: {} runs eagerly for this signature: {why}", self.name);
                        Variant::Eager(why)
                    }
                }
            }
            Err(why) => {
                log::info!("janus: {} runs eagerly for this signature: {why}", self.name);
                Variant::Eager(why.to_string())
            }
        };
        (outs, variant)
    }

    /// The most recently compiled variant.
    pub fn compiled(&self) -> Option<Arc<Compiled>> {
        self.last.lock().unwrap().clone()
    }

    /// The optimised graph of the most recently compiled variant.
    pub fn graph(&self) -> Option<Graph> {
        self.compiled().map(|c| c.graph().clone())
    }

    /// Graphviz DOT of the most recently compiled variant's optimised graph.
    pub fn dot(&self) -> Option<String> {
        self.compiled().map(|c| c.graph().to_dot())
    }

    /// Why the recording for these inputs' signature is unusable, if it is.
    pub fn eager_reason(&self, inputs: &[Tensor]) -> Option<String> {
        let sig = Signature::of(inputs);
        match self.variants.lock().unwrap().get(&sig).map(|v| &v.0) {
            Some(Variant::Eager(why)) => Some(why.clone()),
            _ => None,
        }
    }
}
