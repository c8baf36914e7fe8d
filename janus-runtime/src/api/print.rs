//! How tensors print with `{}`: PyTorch's layout (`torch/_tensor_str.py`), so output reads the
//! same as in a notebook. Nested rows, 4 digits after the point (`{:.2}` asks for another
//! precision), scientific notation when magnitudes span more than 1000x or leave `[1e-4, 1e8]`,
//! integral floats as `3.`, and tensors over 1000 elements summarised to their first and last
//! 3 rows and columns with `...`. The dtype is shown unless it is a default (`f32`, `i64`,
//! `bool`), the device unless it is the CPU, and `requires_grad=True` for a leaf, or the op that
//! made a tensor as `grad_fn=<TanhBackward>`.
//!
//! Printing reads the values, so it counts as a host read.

use crate::autograd::{GradMeta, NodeBackward};
use crate::tensor::Tensor;
use crate::{DType, Device};
use std::fmt;

/// PyTorch's defaults (`torch.set_printoptions`).
const THRESHOLD: usize = 1000;
const EDGE_ITEMS: usize = 3;
const LINE_WIDTH: usize = 80;
const PRECISION: usize = 4;

/// One element, as read from the host copy.
#[derive(Clone, Copy)]
enum Value {
    Float(f64),
    Int(i64),
    Bool(bool),
}

/// Formats every element to a common width (PyTorch's `_Formatter`).
struct Formatter {
    precision: usize,
    int_mode: bool,
    sci_mode: bool,
    width: usize,
}

impl Formatter {
    /// Chooses the notation and width from the values that will be shown.
    fn new(values: &[Value], precision: usize) -> Formatter {
        let mut f = Formatter { precision, int_mode: true, sci_mode: false, width: 1 };
        let finite: Vec<f64> = values
            .iter()
            .filter_map(|v| match *v {
                Value::Float(x) if x.is_finite() && x != 0.0 => Some(x),
                Value::Float(_) => None,
                other => {
                    f.width = f.width.max(f.plain(other).len());
                    None
                }
            })
            .collect();
        if finite.is_empty() {
            return f;
        }
        let max = finite.iter().fold(0f64, |m, x| m.max(x.abs()));
        let min = finite.iter().fold(f64::INFINITY, |m, x| m.min(x.abs()));
        f.int_mode = finite.iter().all(|x| x.ceil() == *x);
        f.sci_mode = max / min > 1000.0 || max > 1e8 || (!f.int_mode && min < 1e-4);
        for &x in &finite {
            let len = if f.sci_mode {
                sci(x, precision).len()
            } else if f.int_mode {
                format!("{x:.0}").len() + 1
            } else {
                format!("{x:.precision$}").len()
            };
            f.width = f.width.max(len);
        }
        f
    }

    /// The element without padding.
    fn plain(&self, v: Value) -> String {
        match v {
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => if b { "True" } else { "False" }.to_string(),
            Value::Float(x) if x.is_nan() => "nan".to_string(),
            Value::Float(x) if x.is_infinite() => if x > 0.0 { "inf" } else { "-inf" }.to_string(),
            Value::Float(x) if self.sci_mode => sci(x, self.precision),
            Value::Float(x) if self.int_mode => format!("{x:.0}."),
            Value::Float(x) => format!("{x:.*}", self.precision),
        }
    }

    /// The element right-aligned to the common width.
    fn format(&self, v: Value) -> String {
        format!("{:>1$}", self.plain(v), self.width)
    }
}

/// Python's `{:.Ne}`: a signed exponent of at least two digits (`1.2346e+05`).
fn sci(x: f64, precision: usize) -> String {
    let s = format!("{x:.precision$e}");
    let (mantissa, exp) = s.split_once('e').expect("`e` formatting has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
}

/// The indices shown along a dimension of length `n`, and whether `...` follows the first half.
fn shown(n: usize, summarize: bool) -> (Vec<usize>, bool) {
    if summarize && n > 2 * EDGE_ITEMS {
        ((0..EDGE_ITEMS).chain(n - EDGE_ITEMS..n).collect(), true)
    } else {
        ((0..n).collect(), false)
    }
}

/// The row-major values and shape of a tensor for printing.
struct Grid<'a> {
    dims: &'a [usize],
    values: &'a [Value],
    summarize: bool,
}

impl Grid<'_> {
    /// Every shown element (for choosing the formatter), in order.
    fn shown_values(&self, dim: usize, base: usize, out: &mut Vec<Value>) {
        if dim == self.dims.len() {
            out.push(self.values[base]);
            return;
        }
        let stride: usize = self.dims[dim + 1..].iter().product();
        for i in shown(self.dims[dim], self.summarize).0 {
            self.shown_values(dim + 1, base + i * stride, out);
        }
    }

    /// The nested rows of dimension `dim` onward (`_tensor_str_with_formatter`).
    fn render(&self, f: &Formatter, dim: usize, base: usize, indent: usize) -> String {
        let rank = self.dims.len();
        if dim == rank {
            return f.format(self.values[base]);
        }
        let stride: usize = self.dims[dim + 1..].iter().product();
        let (idx, gap) = shown(self.dims[dim], self.summarize);
        let mut parts: Vec<String> = Vec::with_capacity(idx.len() + 1);
        for (k, &i) in idx.iter().enumerate() {
            if gap && k == EDGE_ITEMS {
                parts.push(if dim + 1 == rank { " ...".to_string() } else { "...".to_string() });
            }
            parts.push(self.render(f, dim + 1, base + i * stride, indent + 1));
        }
        if dim + 1 < rank {
            let sep = format!(",{}{}", "\n".repeat(rank - dim - 1), " ".repeat(indent + 1));
            return format!("[{}]", parts.join(&sep));
        }
        // The innermost rows wrap at the line width.
        let per_line = ((LINE_WIDTH.saturating_sub(indent)) / (f.width + 2)).max(1);
        let lines: Vec<String> = parts.chunks(per_line).map(|c| c.join(", ")).collect();
        format!("[{}]", lines.join(&format!(",\n{}", " ".repeat(indent + 1))))
    }
}

/// `TanhBackward` for an op named `tanh`, `LogSoftmaxBackward` for `log_softmax`.
fn grad_fn_name(t: &Tensor) -> Option<String> {
    let GradMeta::Node(node, _) = &t.0.grad else { return None };
    let name = match &node.backward {
        NodeBackward::Op { op, .. } => op.name(),
        NodeBackward::Custom(_) => "compiled",
    };
    let camel: String = name.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect();
    Some(format!("{camel}Backward"))
}

/// A shape as Python writes a tuple: `(2, 0)`, `(0,)`.
fn tuple(dims: &[usize]) -> String {
    let items: Vec<String> = dims.iter().map(usize::to_string).collect();
    if items.len() == 1 { format!("({},)", items[0]) } else { format!("({})", items.join(", ")) }
}

/// The host values of `t`, in row-major order.
fn read_values(t: &Tensor) -> Vec<Value> {
    match t.dtype() {
        DType::F32 | DType::F64 => t.host_values::<f64>().into_iter().map(Value::Float).collect(),
        DType::I64 => t.host_values::<i64>().into_iter().map(Value::Int).collect(),
        DType::Bool => t.host_values::<bool>().into_iter().map(Value::Bool).collect(),
    }
}

/// Writes `t` as PyTorch prints it (see the module docs).
pub(crate) fn display(t: &Tensor, out: &mut fmt::Formatter<'_>) -> fmt::Result {
    const PREFIX: &str = "tensor(";
    let mut suffixes: Vec<String> = Vec::new();
    if t.device() != Device::Cpu {
        suffixes.push(format!("device='{}'", t.device()));
    }
    let body = if !t.is_concrete() {
        suffixes.push(format!("size={}", tuple(t.sizes())));
        "<symbolic>".to_string()
    } else if t.elems() == 0 {
        if t.rank() != 1 {
            suffixes.push(format!("size={}", tuple(t.sizes())));
        }
        "[]".to_string()
    } else {
        crate::recorder::host_read("format"); // values reach the host, like `to_vec`
        let values = read_values(t);
        let grid = Grid { dims: t.sizes(), values: &values, summarize: t.elems() > THRESHOLD };
        let mut sample = Vec::new();
        grid.shown_values(0, 0, &mut sample);
        let f = Formatter::new(&sample, out.precision().unwrap_or(PRECISION));
        grid.render(&f, 0, 0, PREFIX.len())
    };
    // Empty tensors show any dtype but the default float one, as PyTorch does.
    let default_dtype = match t.dtype() {
        DType::F32 => true,
        DType::I64 | DType::Bool => t.elems() > 0,
        DType::F64 => false,
    };
    if !default_dtype {
        suffixes.push(format!("dtype={}", t.dtype()));
    }
    if let Some(name) = grad_fn_name(t) {
        suffixes.push(format!("grad_fn=<{name}>"));
    } else if t.needs_grad() {
        suffixes.push("requires_grad=True".to_string());
    }
    // Suffixes follow on the last line while it stays within the line width (`_add_suffixes`).
    let mut s = format!("{PREFIX}{body}");
    // PyTorch's `len(s) - s.rfind("\n") + 1`, with `rfind` giving -1 when there is no newline.
    let mut last_line = s.len() + 1 - s.rfind('\n').map_or(0, |i| i + 1) + 1;
    for suffix in suffixes {
        if last_line + suffix.len() + 2 > LINE_WIDTH {
            s.push_str(&format!(",\n{}{suffix}", " ".repeat(PREFIX.len())));
            last_line = PREFIX.len() + suffix.len();
        } else {
            s.push_str(&format!(", {suffix}"));
            last_line += suffix.len() + 2;
        }
    }
    s.push(')');
    out.write_str(&s)
}
