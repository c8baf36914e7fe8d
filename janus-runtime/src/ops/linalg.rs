//! Matrix multiplication: 2-D, and batched 3-D with a broadcast batch. Operand transposes and
//! slices reach the GEMM as strides, never as copies.

use super::TensorType;
use crate::error::bail;
use crate::shape::Shape;
use crate::tensor::{Data, Tensor};
use janus_kernels::matmul::{MatLayout, MatmulDims, matmul as gemm};
use janus_kernels::with_float_type;

#[track_caller]
pub(crate) fn infer_matmul(a: &Tensor, b: &Tensor) -> TensorType {
    if a.dtype() != b.dtype() || !a.dtype().is_float() {
        bail!(
            "matmul",
            "operands must be floats of one dtype, got {} {:?} and {} {:?}",
            a.dtype(),
            a.shape_ref(),
            b.dtype(),
            b.shape_ref()
        );
    }
    let (ra, rb) = (a.rank(), b.rank());
    if !(2..=3).contains(&ra) || !(2..=3).contains(&rb) {
        bail!(
            "matmul",
            "expected 2-D or 3-D operands, got shapes {:?} and {:?}",
            a.shape_ref(),
            b.shape_ref()
        );
    }
    let (m, ka) = (a.sizes()[ra - 2], a.sizes()[ra - 1]);
    let (kb, n) = (b.sizes()[rb - 2], b.sizes()[rb - 1]);
    if ka != kb {
        bail!("matmul", "inner dimensions differ: {:?} @ {:?} ({ka} vs {kb})", a.shape_ref(), b.shape_ref());
    }
    let shape: Shape = if ra == 2 && rb == 2 {
        [m, n].into()
    } else {
        let ba = if ra == 3 { a.sizes()[0] } else { 1 };
        let bb = if rb == 3 { b.sizes()[0] } else { 1 };
        if ba != bb && ba != 1 && bb != 1 {
            bail!("matmul", "batch dimensions differ: {:?} @ {:?}", a.shape_ref(), b.shape_ref());
        }
        [if ba == 1 { bb } else { ba }, m, n].into()
    };
    TensorType { shape, dtype: a.dtype() }
}

/// The GEMM layout of a 2-D or 3-D operand (a size-1 or missing batch broadcasts).
fn layout(t: &Tensor) -> MatLayout {
    t.layout().matrix()
}

pub(crate) fn matmul(a: &Tensor, b: &Tensor, ty: &TensorType) -> Data {
    let r = ty.shape.rank();
    let dims = MatmulDims {
        batch: if r == 3 { ty.shape[0] } else { 1 },
        m: ty.shape[r - 2],
        n: ty.shape[r - 1],
        k: a.sizes()[a.rank() - 1],
    };
    with_float_type!(a.dtype(), T => {
        let mut out = vec![0 as T; ty.shape.elems()];
        let (la, lb) = (a.data().cpu().as_slice::<T>().unwrap(), b.data().cpu().as_slice::<T>().unwrap());
        gemm(dims, la, layout(a), lb, layout(b), &mut out, false);
        Data::contiguous(janus_kernels::buffer::Stored::wrap(out), &ty.shape)
    }, _ => unreachable!("rejected by the shape rule"))
}

/// `dA = g @ B^T`, `dB = A^T @ g`, each summed back over a broadcast batch.
pub(crate) fn matmul_vjp(a: &Tensor, b: &Tensor, g: &Tensor) -> Vec<Option<Tensor>> {
    let mt = |t: &Tensor| t.transpose(-2, -1);
    let da = a
        .needs_grad()
        .then(|| super::elementwise::sum_to(&g.matmul(&mt(b)), &batch_shape(a, g)).reshape(a.shape_ref()));
    let db = b.needs_grad().then(|| {
        if b.rank() == 2 && a.rank() == 3 {
            // Fold the batch into the rows: one [k, b*m] @ [b*m, n] GEMM instead of a batched
            // product and a sum.
            let (rows, k, n) = (a.sizes()[0] * a.sizes()[1], a.sizes()[2], g.sizes()[2]);
            a.reshape([rows, k]).t().matmul(&g.reshape([rows, n]))
        } else {
            super::elementwise::sum_to(&mt(a).matmul(g), &batch_shape(b, g)).reshape(b.shape_ref())
        }
    });
    vec![da, db]
}

/// The operand's shape as it appears inside the (possibly batched) product.
fn batch_shape(t: &Tensor, g: &Tensor) -> Shape {
    if g.rank() == 3 && t.rank() == 2 {
        [1, t.sizes()[0], t.sizes()[1]].into()
    } else {
        t.shape_ref().clone()
    }
}
