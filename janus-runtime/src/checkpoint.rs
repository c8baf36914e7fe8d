//! Checkpoints in the safetensors format. Writes go to a temporary file in the same directory,
//! are synced and then renamed over the target, so a crash or error never leaves a half-written
//! checkpoint. Loading checks every tensor's presence, dtype and shape and names the first bad one;
//! [`load`] is strict about tensors the module does not take, [`load_partial`] reports them.

use crate::error::CheckpointError;
use crate::module::{Module, SavedTensors};
use crate::{DType, Tensor};
use janus_kernels::CpuBuffer;
use safetensors::tensor::{Dtype as StDtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, BTreeSet};
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
#[doc(alias = "torch.save", alias = "state_dict")]
pub fn save<M: Module + ?Sized>(path: impl AsRef<Path>, module: &M) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let named = module.named_tensors();
    let bytes: Vec<Vec<u8>> = named.iter().map(|(_, t)| to_bytes(t)).collect();
    let views: Vec<(String, TensorView<'_>)> = named
        .iter()
        .zip(&bytes)
        .map(|((name, t), b)| {
            let view = TensorView::new(st_dtype(t.dtype()), t.sizes().to_vec(), b)
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

/// Loads every tensor leaf of `module` from `path`, by dotted path, strictly: every tensor of
/// the module must be in the file with its dtype and shape, and every tensor of the file must be
/// taken by the module. On an error, which names the file and the first bad tensor, the module
/// is unchanged. Leaves that required gradients still do after loading.
///
/// State that a module creates lazily is created from the file first
/// ([`Module::prepare_load`]): a fresh optimiser loads the moment buffers, step count and
/// hyper-parameters an optimiser saved after training, as `load_state_dict` does in PyTorch, so
/// training resumes exactly where it stopped.
///
/// # Examples
///
/// ```
/// use janus_runtime::{Tensor, nn, load, save};
///
/// let path = std::env::temp_dir().join(format!("janus-doc-load-{}.safetensors", std::process::id()));
/// let trained = nn::Linear::new(4, 2);
/// save(&path, &trained)?;
/// let mut fresh = nn::Linear::new(4, 2);
/// load(&path, &mut fresh)?;
/// assert_eq!(fresh.weight.to_vec::<f32>(), trained.weight.to_vec::<f32>());
///
/// // A file with tensors the module does not take is an error naming them.
/// save(&path, &(Tensor::zeros([3]), Tensor::zeros([3])))?;
/// let err = load(&path, &mut (Tensor::zeros([3]),)).unwrap_err();
/// assert!(err.to_string().contains("tensor `1` in the file is not taken by the module"));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "load_state_dict")]
pub fn load<M: Module>(path: impl AsRef<Path>, module: &mut M) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let report = read_into(path, module, false)?;
    debug_assert!(report.missing.is_empty() && report.unexpected.is_empty());
    Ok(())
}

/// What [`load_partial`] left aside, like the `missing_keys` and `unexpected_keys` PyTorch's
/// `load_state_dict(strict=False)` returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Tensors of the module that the file lacks: they keep their values.
    pub missing: Vec<String>,
    /// Tensors of the file that the module does not take: they were skipped.
    pub unexpected: Vec<String>,
}

/// Loads the tensors that `module` and the file at `path` share, and reports the rest: the
/// file's tensors that the module does not take, and the module's tensors that the file lacks
/// (they keep their values). A shared tensor whose dtype or shape differs is still an error,
/// and then the module is unchanged. Use it to load a backbone into a larger model, or a
/// checkpoint with extra entries.
///
/// # Examples
///
/// ```
/// use janus_runtime::{Tensor, load_partial, save};
///
/// let path = std::env::temp_dir().join(format!("janus-doc-partial-{}.safetensors", std::process::id()));
/// save(&path, &(Tensor::ones([2]), Tensor::ones([3])))?;
/// let mut first_only = (Tensor::zeros([2]),);
/// let report = load_partial(&path, &mut first_only)?;
/// assert_eq!(report.unexpected, ["1"]);
/// assert_eq!(first_only.0.to_vec::<f32>(), [1.0, 1.0]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn load_partial<M: Module>(
    path: impl AsRef<Path>,
    module: &mut M,
) -> Result<LoadReport, CheckpointError> {
    read_into(path.as_ref(), module, true)
}

fn janus_dtype(d: StDtype) -> Option<DType> {
    [DType::F32, DType::F64, DType::I64, DType::Bool].into_iter().find(|&j| st_dtype(j) == d)
}

/// Loads `path` into a copy of `module` (so that an error leaves it unchanged), then moves the
/// copy in. `partial` tolerates tensors that only one side has.
fn read_into<M: Module>(path: &Path, module: &mut M, partial: bool) -> Result<LoadReport, CheckpointError> {
    let p = || path.display().to_string();
    let data = std::fs::read(path).map_err(|source| CheckpointError::Io { path: p(), source })?;
    let file = SafeTensors::deserialize(&data)
        .map_err(|e| CheckpointError::Corrupt { path: p(), detail: e.to_string() })?;
    // Lazily created state (an optimiser's moments) is made from what the file holds; a file
    // dtype janus does not have is reported below, when a tensor of the module meets it.
    let saved: BTreeMap<String, (DType, Vec<usize>)> = file
        .tensors()
        .into_iter()
        .filter_map(|(name, view)| Some((name, (janus_dtype(view.dtype())?, view.shape().to_vec()))))
        .collect();
    let mut target = module.map_tensors(&mut |t| t.clone());
    target.prepare_load(&mut SavedTensors::new(&saved));
    let mut report = LoadReport::default();
    let mut taken = BTreeSet::new();
    let mut loaded = Vec::new();
    for (name, t) in target.named_tensors() {
        let Ok(view) = file.tensor(&name) else {
            if !partial {
                return Err(CheckpointError::Missing { path: p(), name });
            }
            loaded.push(t);
            report.missing.push(name);
            continue;
        };
        if view.dtype() != st_dtype(t.dtype()) {
            return Err(CheckpointError::DtypeMismatch {
                path: p(),
                name,
                expected: t.dtype(),
                found: format!("{:?}", view.dtype()),
            });
        }
        if view.shape() != t.sizes() {
            return Err(CheckpointError::ShapeMismatch {
                path: p(),
                name,
                expected: t.shape_ref().clone(),
                found: view.shape().to_vec(),
            });
        }
        let fresh = Tensor::from_buffer(from_bytes(t.dtype(), view.data()), t.shape_ref().clone());
        let fresh = if t.device() == fresh.device() { fresh } else { fresh.to_device(t.device()) };
        loaded.push(if t.is_leaf() { fresh.requires_grad() } else { fresh });
        taken.insert(name);
    }
    let mut names = file.names();
    names.sort();
    report.unexpected = names.into_iter().filter(|n| !taken.contains(*n)).map(str::to_string).collect();
    if let (false, Some(first)) = (partial, report.unexpected.first()) {
        let more = report.unexpected.len() - 1;
        return Err(CheckpointError::Unexpected { path: p(), name: first.clone(), more });
    }
    let mut it = loaded.into_iter();
    target.visit_mut(&mut |t: &mut Tensor| *t = it.next().expect("same leaves as named_tensors"));
    *module = target;
    Ok(report)
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
