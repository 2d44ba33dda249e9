"""A NumPy model of Triton's value semantics, for the differential fuzzer.

Each function computes what a Triton kernel computes, lane by lane, independently of tilejit: C-like
integer division and modulo (truncating toward zero), wrapping integer arithmetic, arithmetic right
shifts of signed and logical of unsigned integers, one rounding per operation in the operation's
dtype, bf16/fp8/tf32 rounding to nearest even. Values are NumPy arrays in a "model dtype": the dtype
itself when NumPy has it, float32 holding exactly representable values for bf16 and fp8.
"""
from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class DType:
    name: str        # tilejit/Triton spelling after `tl.`: "int8", "bfloat16", "float8e5", ...
    model: type      # the NumPy dtype of model values
    kind: str        # "int", "uint" or "float"
    bits: int
    mantissa: int = 0  # explicit mantissa bits of a float type
    storable: bool = True  # an argument array can hold it (else it is made from fp32 in the kernel)

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def signed(self) -> bool:
        return self.kind == "int"

    @property
    def eps(self) -> float:
        return 2.0 ** -self.mantissa if self.kind == "float" else 0.0

    @property
    def tl(self) -> str:
        return f"tl.{self.name}"

    def info(self):
        return np.iinfo(self.model) if self.is_int else np.finfo(self.model)


INT_TYPES = [DType(f"{k}{b}", np.dtype(f"{k}{b}").type, k, b) for k in ("int", "uint") for b in (8, 16, 32, 64)]
FLOAT16 = DType("float16", np.float16, "float", 16, 10)
BFLOAT16 = DType("bfloat16", np.float32, "float", 16, 7, storable=False)
FLOAT32 = DType("float32", np.float32, "float", 32, 23)
FLOAT64 = DType("float64", np.float64, "float", 64, 52)
FP8E5 = DType("float8e5", np.float32, "float", 8, 2, storable=False)
FP8E4NV = DType("float8e4nv", np.float32, "float", 8, 3, storable=False)
FLOAT_TYPES = [FLOAT16, BFLOAT16, FLOAT32, FLOAT64]
ALL_TYPES = INT_TYPES + FLOAT_TYPES
BY_NAME = {t.name: t for t in ALL_TYPES + [FP8E5, FP8E4NV]}
INT32, UINT32, INT64 = BY_NAME["int32"], BY_NAME["uint32"], BY_NAME["int64"]


def round_mantissa(x, mantissa: int) -> np.ndarray:
    """Round to `mantissa` explicit bits, to nearest even (exact for normal numbers of small range)."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1
    return np.ldexp(np.rint(np.ldexp(m, mantissa + 1)), e - mantissa - 1)


def to_model(x, dt: DType) -> np.ndarray:
    """The values `x` rounded or wrapped as Triton's conversion to `dt` does (x finite, in range)."""
    x = np.asarray(x)
    if dt.kind == "float":
        if dt.storable:
            return x.astype(dt.model)  # NumPy rounds to nearest even, in one step from any float
        return round_mantissa(x, dt.mantissa).astype(np.float32)
    if x.dtype.kind == "f":  # float -> int truncates toward zero (callers keep values in range)
        x = np.trunc(x.astype(np.float64)).astype(np.int64)
    return x.astype(dt.model)  # integers wrap (two's complement)


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    with np.errstate(all="ignore"):
        if src.is_int and dst.is_int:
            return x.astype(dst.model)
        return to_model(x.astype(np.float64) if src.kind == "float" else x, dst)


def trunc_div(a, b):
    """C division of integers: the quotient rounds toward zero (b != 0; no MIN // -1)."""
    q = np.floor_divide(a, b)
    if np.issubdtype(a.dtype, np.signedinteger):
        r = a - q * b
        q = q + ((r != 0) & ((a < 0) != (b < 0))).astype(a.dtype)
    return q


def trunc_mod(a, b):
    """C remainder: takes the sign of the dividend."""
    return a - trunc_div(a, b) * b


def binary(op: str, a, b, dt: DType):
    """`a op b` with both operands of type `dt` (comparisons give bool)."""
    with np.errstate(all="ignore"):
        if op in ("<", "<=", ">", ">=", "==", "!="):
            return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                    "==": np.equal, "!=": np.not_equal}[op](a, b)
        if dt.is_int:
            r = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
                 "^": np.bitwise_xor, "max": np.maximum, "min": np.minimum, "//": trunc_div, "%": trunc_mod,
                 "<<": np.left_shift, ">>": np.right_shift}[op](a, b)
            return r.astype(dt.model)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if dt is FLOAT64:  # fp64 rounds in fp64 itself
            r = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "max": np.maximum,
                 "min": np.minimum, "%": np.fmod}[op](a, b)
            return r
        # An operation on narrower floats is exact in fp64 and then rounded once to the dtype.
        r = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "max": np.maximum,
             "min": np.minimum, "%": np.fmod}[op](a64, b64)
        return to_model(r, dt)


def unary(op: str, a, dt: DType):
    with np.errstate(all="ignore"):
        if op == "neg":
            return np.negative(a).astype(dt.model)
        if op == "not":
            return np.invert(a)
        if op == "abs":
            return np.abs(a).astype(dt.model) if dt.kind != "uint" else a
        fn = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
              "floor": np.floor, "ceil": np.ceil, "exp2": np.exp2}[op]
        return to_model(fn(a.astype(np.float64)), dt)


def sum_dtype(dt: DType) -> DType:
    """Triton's `tl.sum`/`tl.cumsum`/`tl.cumprod` result type: integers narrower than 32 bits widen."""
    if dt.is_int and dt.bits < 32:
        return INT32 if dt.signed else UINT32
    return dt


def minmax_dtype(dt: DType) -> DType:
    """`tl.max`/`tl.min` widen integers narrower than 32 bits to int32 and fp16/bf16 to fp32."""
    if dt.is_int and dt.bits < 32:
        return INT32
    if dt.kind == "float" and dt.bits < 32:
        return FLOAT32
    return dt


def reduce(op: str, x, axis: int, dt: DType):
    """A reduction along `axis` (the result type per Triton; see sum_dtype/minmax_dtype)."""
    with np.errstate(all="ignore"):
        if op == "sum":
            out = sum_dtype(dt)
            if out.is_int:
                return np.sum(x.astype(out.model), axis=axis, dtype=out.model), out
            return to_model(np.sum(x.astype(np.float64), axis=axis), out), out
        if op in ("max", "min"):
            out = minmax_dtype(dt)
            r = np.max(x, axis=axis) if op == "max" else np.min(x, axis=axis)
            return r.astype(out.model), out
        if op in ("argmax", "argmin"):
            r = np.argmax(x, axis=axis) if op == "argmax" else np.argmin(x, axis=axis)  # first on ties
            return r.astype(np.int32), INT32
        if op == "xor_sum":
            return np.bitwise_xor.reduce(x, axis=axis).astype(dt.model), dt
        raise ValueError(op)


def scan(op: str, x, axis: int, dt: DType):
    out = sum_dtype(dt)
    with np.errstate(all="ignore"):
        if out.is_int:
            fn = np.cumsum if op == "cumsum" else np.cumprod
            return fn(x.astype(out.model), axis=axis, dtype=out.model), out
        fn = np.cumsum if op == "cumsum" else np.cumprod
        return to_model(fn(x.astype(np.float64), axis=axis), out), out


def round_tf32(x) -> np.ndarray:
    """fp32 -> tf32 (10 explicit mantissa bits), to nearest."""
    return round_mantissa(np.asarray(x, dtype=np.float32), 10)


def integer_promotion(a: DType, b: DType) -> DType:
    """C's usual arithmetic conversions, as Triton's integer_promote_impl: the wider type; at equal
    width (or a wider unsigned one) the unsigned type wins."""
    if a.signed == b.signed:
        return a if a.bits > b.bits else b
    unsigned, signed = (a, b) if not a.signed else (b, a)
    return unsigned if unsigned.bits >= signed.bits else signed


def computation_type(a: DType, b: DType, div_or_mod: bool = False) -> DType:
    """The type two tensors of types `a` and `b` meet in (Triton's computation_type_impl)."""
    if FLOAT64 in (a, b):
        return FLOAT64
    if FLOAT32 in (a, b):
        return FLOAT32
    if FLOAT16 in (a, b):
        return FLOAT32 if div_or_mod else FLOAT16
    if BFLOAT16 in (a, b):
        return BFLOAT16 if a == b and not div_or_mod else FLOAT32
    return integer_promotion(a, b)


def shift_right(a, amount, left: DType, out: DType):
    """`a >> amount` in type `out`: arithmetic when the LEFT operand's own type is signed (Triton
    decides by the left operand, before promotion), else logical."""
    if left.signed and not out.signed:  # the sign bit of the unsigned result type is shifted in
        signed = np.dtype(f"int{out.bits}")
        return np.right_shift(a.view(signed), amount.astype(signed)).view(out.model)
    # Otherwise the result type decides, and agrees: a narrower unsigned value widened to a signed
    # type is not negative, so arithmetic and logical shifts give the same bits.
    return np.right_shift(a, amount)
