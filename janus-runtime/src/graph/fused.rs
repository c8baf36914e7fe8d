//! `FusedProgram`: a group of elementwise graph nodes compiled to one register program of
//! `janus_kernels::fused`, with the dtypes of its inputs and outputs. Made by the fusion pass,
//! run by the executor.

use crate::DType;
use crate::graph::{Graph, Node};
use crate::ops::TensorType;
use crate::shape::Shape;
use janus_kernels::fused::Program;

/// A fused elementwise group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FusedProgram {
    /// The register program.
    pub program: Program,
    /// The float type of the registers.
    pub dtype: DType,
    /// The common shape of every output.
    pub shape: Shape,
    /// Per operand: the register dtype or `Bool` (read as 0/1).
    pub inputs: Vec<DType>,
    /// Per output: its type (the register dtype, `Bool`, or `I64` for truncating casts).
    pub outputs: Vec<TensorType>,
    /// Names of the primitive ops fused, in order (for dumps).
    pub ops: Vec<&'static str>,
}

impl FusedProgram {
    /// A one-line summary, e.g. `{mul, add, sigmoid; 2 in, 1 out}`.
    pub fn describe(&self) -> String {
        format!("{{{}; {} in, {} out}}", self.ops.join(", "), self.inputs.len(), self.outputs.len())
    }

    /// Consistency with the node that holds it.
    pub(crate) fn check(&self, n: &Node, g: &Graph) -> Result<(), String> {
        if n.inputs.len() != self.inputs.len() {
            return Err(format!(
                "fused group expects {} operands, has {}",
                self.inputs.len(),
                n.inputs.len()
            ));
        }
        for (k, (a, want)) in n.inputs.iter().zip(&self.inputs).enumerate() {
            let t = &g.node(*a).ty;
            if t.dtype != *want
                || crate::shape::broadcast_shapes(&t.shape, &self.shape).as_ref() != Some(&self.shape)
            {
                return Err(format!(
                    "fused operand {k} is {:?} {}, expected {want} broadcastable to {:?}",
                    t.shape, t.dtype, self.shape
                ));
            }
        }
        if self.outputs.first() != Some(&n.ty) {
            return Err("fused node type differs from its output 0".into());
        }
        Ok(())
    }
}
