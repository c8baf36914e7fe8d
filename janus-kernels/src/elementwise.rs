//! The elementwise op vocabulary: the functions of one operand, the broadcasting arithmetic and
//! the comparisons. The runtime's op table and the fused programs ([`crate::fused`]) both use
//! these enums, so an op is named once; a fused program adds only its own instruction forms
//! (constant exponents, clamps, casts).

/// Elementwise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// `ln x`
    Log,
    /// `sqrt x`
    Sqrt,
    /// `|x|`
    Abs,
    /// `tanh x`
    Tanh,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `max(x, 0)`
    Relu,
    /// `x^2`
    Square,
    /// `1 / x`
    Recip,
    /// `-1`, `0` or `1`
    Sign,
    /// Logical not of a `bool` tensor.
    Not,
    /// `sin x`
    Sin,
    /// `cos x`
    Cos,
    /// `tan x`
    Tan,
    /// `2^x`
    Exp2,
    /// `log2 x`
    Log2,
    /// `ln(1 + x)`, accurate near zero.
    Log1p,
    /// `e^x - 1`, accurate near zero.
    Expm1,
    /// The error function.
    Erf,
    /// `x * Phi(x)` (exact, erf-based; PyTorch's default `gelu`).
    Gelu,
    /// `x * sigmoid(x)`
    Silu,
    /// `ln(1 + e^x)`, or `x` above 20.
    Softplus,
    /// Round toward -inf (zero gradient).
    Floor,
    /// Round toward +inf (zero gradient).
    Ceil,
    /// Round to nearest, ties to even (zero gradient).
    Round,
    /// `1 / sqrt x`
    Rsqrt,
}

impl UnaryOp {
    /// The op's name in error messages, dumps and `explain`.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Square => "square",
            UnaryOp::Recip => "recip",
            UnaryOp::Sign => "sign",
            UnaryOp::Not => "logical_not",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log2 => "log2",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Erf => "erf",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Silu => "silu",
            UnaryOp::Softplus => "softplus",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Rsqrt => "rsqrt",
        }
    }
}

/// Broadcasting binary arithmetic and logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (floats only)
    Div,
    /// Elementwise maximum (NaN propagates).
    Maximum,
    /// Elementwise minimum (NaN propagates).
    Minimum,
    /// Logical and of `bool` tensors.
    And,
    /// Logical or of `bool` tensors.
    Or,
    /// `atan2(a, b)`: the angle of the point `(b, a)` (floats only).
    Atan2,
}

impl BinaryOp {
    /// The op's name in error messages, dumps and `explain`.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::And => "logical_and",
            BinaryOp::Or => "logical_or",
            BinaryOp::Atan2 => "atan2",
        }
    }
}

/// Broadcasting comparisons producing `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
}

impl CmpOp {
    /// The op's name in error messages, dumps and `explain`.
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
        }
    }
}
