//! `CpuBuffer`: a typed, contiguous host allocation, plus the dtype-dispatch macros that let a
//! kernel be written once, generic over the element type.

use crate::dtype::{DType, Element};

/// A contiguous host buffer of one element type.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuBuffer {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// 64-bit floats.
    F64(Vec<f64>),
    /// 64-bit integers.
    I64(Vec<i64>),
    /// Booleans.
    Bool(Vec<bool>),
}

impl CpuBuffer {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            CpuBuffer::F32(_) => DType::F32,
            CpuBuffer::F64(_) => DType::F64,
            CpuBuffer::I64(_) => DType::I64,
            CpuBuffer::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            CpuBuffer::F32(v) => v.len(),
            CpuBuffer::F64(v) => v.len(),
            CpuBuffer::I64(v) => v.len(),
            CpuBuffer::Bool(v) => v.len(),
        }
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` elements, all equal to `value` converted to `dtype`.
    pub fn filled(dtype: DType, n: usize, value: f64) -> Self {
        match dtype {
            DType::F32 => CpuBuffer::F32(vec![value as f32; n]),
            DType::F64 => CpuBuffer::F64(vec![value; n]),
            DType::I64 => CpuBuffer::I64(vec![value as i64; n]),
            DType::Bool => CpuBuffer::Bool(vec![value != 0.0; n]),
        }
    }

    /// `n` zeros of `dtype`. Short buffers are allocated and then filled: `calloc`, which
    /// `vec![0; n]` calls, costs about twice `malloc` for the few elements of a hit path's
    /// outputs; long ones keep it (fresh pages come zeroed).
    pub fn zeroed(dtype: DType, n: usize) -> Self {
        fn short<T: Copy + Default>(n: usize) -> Vec<T> {
            let mut v = Vec::with_capacity(n);
            v.resize(n, T::default());
            v
        }
        if n > 64 {
            return CpuBuffer::filled(dtype, n, 0.0);
        }
        match dtype {
            DType::F32 => CpuBuffer::F32(short(n)),
            DType::F64 => CpuBuffer::F64(short(n)),
            DType::I64 => CpuBuffer::I64(short(n)),
            DType::Bool => CpuBuffer::Bool(short(n)),
        }
    }

    /// The elements as `&[T]`, or `None` if `T` is not this buffer's type.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::view(self)
    }

    /// The elements as `&mut [T]`, or `None` if `T` is not this buffer's type.
    pub fn as_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        T::view_mut(self)
    }

    /// Element `i` converted to `f64`.
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            CpuBuffer::F32(v) => v[i] as f64,
            CpuBuffer::F64(v) => v[i],
            CpuBuffer::I64(v) => v[i] as f64,
            CpuBuffer::Bool(v) => v[i] as u8 as f64,
        }
    }
}

/// Typed access to the [`CpuBuffer`] variant holding `Self`.
pub trait Stored: Sized {
    /// The slice, if the buffer holds `Self`.
    fn view(buf: &CpuBuffer) -> Option<&[Self]>;
    /// The mutable slice, if the buffer holds `Self`.
    fn view_mut(buf: &mut CpuBuffer) -> Option<&mut [Self]>;
    /// Wraps a vector.
    fn wrap(v: Vec<Self>) -> CpuBuffer;
}

macro_rules! impl_stored {
    ($t:ty, $variant:ident) => {
        impl Stored for $t {
            fn view(buf: &CpuBuffer) -> Option<&[Self]> {
                match buf {
                    CpuBuffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn view_mut(buf: &mut CpuBuffer) -> Option<&mut [Self]> {
                match buf {
                    CpuBuffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> CpuBuffer {
                CpuBuffer::$variant(v)
            }
        }
    };
}
impl_stored!(f32, F32);
impl_stored!(f64, F64);
impl_stored!(i64, I64);
impl_stored!(bool, Bool);

/// Runs `$body` with `$T` bound to the Rust type of a float `DType`; other dtypes reach
/// `$otherwise`.
#[macro_export]
macro_rules! with_float_type {
    ($dtype:expr, $T:ident => $body:expr, _ => $otherwise:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            _ => $otherwise,
        }
    };
}

/// Runs `$body` with `$T` bound to the Rust type of any `DType`.
#[macro_export]
macro_rules! with_any_type {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            $crate::DType::I64 => {
                #[allow(dead_code)]
                type $T = i64;
                $body
            }
            $crate::DType::Bool => {
                #[allow(dead_code)]
                type $T = bool;
                $body
            }
        }
    };
}
