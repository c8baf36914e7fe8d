//! Checkpoints in the safetensors format. Writes go to a temporary file in the same directory,
//! are synced and then renamed over the target, so a crash or error never leaves a half-written
//! checkpoint. Loading checks every tensor's presence, dtype and shape and names the first bad one.

use crate::error::CheckpointError;
use crate::module::Module;
use crate::{DType, Tensor};
use janus_kernels::CpuBuffer;
use safetensors::tensor::{Dtype as StDtype, SafeTensors, TensorView};
use std::io::Write;
use std::path::Path;

fn st_dtype(d: DType) -> StDtype {
    match d {
        DType::F32 => StDtype::F32,
        DType::F64 => StDtype::F64,
        DType::I64 => StDtype::I64,
        DType::Bool => StDtype::BOOL,
    }
}

fn to_bytes(t: &Tensor) -> Vec<u8> {
    crate::recorder::host_read("save");
    match t.dtype() {
        DType::F32 => t.contiguous_slice::<f32>().iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F64 => t.contiguous_slice::<f64>().iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::I64 => t.contiguous_slice::<i64>().iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::Bool => t.contiguous_slice::<bool>().iter().map(|&v| v as u8).collect(),
    }
}

fn from_bytes(dtype: DType, b: &[u8]) -> CpuBuffer {
    fn chunks<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N).map(|c| c.try_into().expect("exact chunk"))
    }
    match dtype {
        DType::F32 => CpuBuffer::F32(chunks::<4>(b).map(f32::from_le_bytes).collect()),
        DType::F64 => CpuBuffer::F64(chunks::<8>(b).map(f64::from_le_bytes).collect()),
        DType::I64 => CpuBuffer::I64(chunks::<8>(b).map(i64::from_le_bytes).collect()),
        DType::Bool => CpuBuffer::Bool(b.iter().map(|&v| v != 0).collect()),
    }
}

/// Saves every tensor leaf of `module` under its dotted path (`l1.weight`), atomically.
pub fn save<M: Module + ?Sized>(path: impl AsRef<Path>, module: &M) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let named = module.named_tensors();
    let bytes: Vec<Vec<u8>> = named.iter().map(|(_, t)| to_bytes(t)).collect();
    let views: Vec<(String, TensorView<'_>)> = named
        .iter()
        .zip(&bytes)
        .map(|((name, t), b)| {
            let view = TensorView::new(st_dtype(t.dtype()), t.dims().to_vec(), b)
                .expect("byte length matches shape");
            (name.clone(), view)
        })
        .collect();
    let data = safetensors::serialize(views, None)
        .map_err(|e| CheckpointError::Corrupt { path: path.display().to_string(), detail: e.to_string() })?;
    write_atomically(path, &data)
        .map_err(|source| CheckpointError::Io { path: path.display().to_string(), source })
}

fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nonce =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let tmp = dir.join(format!(".{name}.tmp-{}-{nonce}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        let mut w = testing::FaultyWriter::new(&mut file);
        w.write_all(data)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Loads every tensor leaf of `module` from `path`, by dotted path. Fails without changing the
/// module if any tensor is missing or differs in dtype or shape; extra tensors in the file are
/// ignored. Leaves that required gradients still do after loading.
pub fn load<M: Module + ?Sized>(path: impl AsRef<Path>, module: &mut M) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let p = || path.display().to_string();
    let data = std::fs::read(path).map_err(|source| CheckpointError::Io { path: p(), source })?;
    let file = SafeTensors::deserialize(&data)
        .map_err(|e| CheckpointError::Corrupt { path: p(), detail: e.to_string() })?;
    let mut loaded = Vec::new();
    for (name, t) in module.named_tensors() {
        let view =
            file.tensor(&name).map_err(|_| CheckpointError::Missing { path: p(), name: name.clone() })?;
        if view.dtype() != st_dtype(t.dtype()) {
            return Err(CheckpointError::DtypeMismatch {
                path: p(),
                name,
                expected: t.dtype(),
                found: format!("{:?}", view.dtype()),
            });
        }
        if view.shape() != t.dims() {
            return Err(CheckpointError::ShapeMismatch {
                path: p(),
                name,
                expected: t.shape().clone(),
                found: view.shape().to_vec(),
            });
        }
        let fresh = Tensor::from_buffer(from_bytes(t.dtype(), view.data()), t.shape().clone());
        loaded.push(if t.is_leaf() { fresh.requires_grad() } else { fresh });
    }
    let mut it = loaded.into_iter();
    module.visit_mut(&mut |t: &mut Tensor| *t = it.next().expect("same leaves as named_tensors"));
    Ok(())
}

/// Fault injection for tests of the atomic write (hidden from the docs).
#[doc(hidden)]
pub mod testing {
    use std::cell::Cell;
    use std::io::Write;

    thread_local! {
        static FAIL_AFTER: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// Makes the next checkpoint write on this thread fail after `bytes` bytes, as a crash
    /// mid-write would.
    pub fn fail_next_write_after(bytes: usize) {
        FAIL_AFTER.with(|f| f.set(Some(bytes)));
    }

    pub(super) struct FaultyWriter<'a, W: Write> {
        inner: &'a mut W,
        budget: Option<usize>,
    }

    impl<'a, W: Write> FaultyWriter<'a, W> {
        pub(super) fn new(inner: &'a mut W) -> Self {
            FaultyWriter { inner, budget: FAIL_AFTER.with(|f| f.take()) }
        }
    }

    impl<W: Write> Write for FaultyWriter<'_, W> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            match self.budget {
                Some(0) => Err(std::io::Error::other("injected failure mid-write")),
                Some(b) => {
                    let n = self.inner.write(&buf[..buf.len().min(b)])?;
                    self.budget = Some(b - n);
                    Ok(n)
                }
                None => self.inner.write(buf),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.inner.flush()
        }
    }
}
