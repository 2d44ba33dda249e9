"""Numeric semantics of the GPU, in NumPy: the helpers the generated programs call.

Every TTIR value is a NumPy array (or NumPy scalar) whose dtype is fixed by its IR type
(`numpy_dtype`). Integers are stored at their declared width so that arithmetic wraps as on the GPU;
i1 is `bool`. Formats NumPy lacks are kept as their bits: bfloat16 in `uint16`, the fp8 formats in
`uint8`; arithmetic on them decodes to float32, computes, and rounds back to nearest-even.

Where the GPU result is defined by PTX (division by zero, shifts by >= width, float->int overflow),
these helpers follow PTX; nothing here raises on a bad operand value.
"""
from __future__ import annotations

import math

import numpy as np

from tilejit import ir
from tilejit.errors import CompilationError

# ------------------------------------------------------------------------------------------------
# dtypes

_INT_DTYPES = {1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UINT_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_FLOAT_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": np.uint16,
                 "f8E4M3FN": np.uint8, "f8E5M2": np.uint8, "f8E4M3FNUZ": np.uint8, "f8E5M2FNUZ": np.uint8}
# Float formats without a NumPy type: stored as bits, computed in float32.
EMULATED_FLOATS = ("bf16", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ")
POINTER_DTYPE = np.int64


def numpy_dtype(t: ir.Type):
    """The NumPy dtype that holds a scalar of IR type `t` (element type for tensors)."""
    t = ir.element_type(t)
    if isinstance(t, ir.IntType):
        if t.width not in _INT_DTYPES:
            raise CompilationError(f"the interpreter does not support integer type {t}")
        return _INT_DTYPES[t.width]
    if isinstance(t, ir.FloatType):
        return _FLOAT_DTYPES[t.name]
    if isinstance(t, ir.PointerType):
        return POINTER_DTYPE
    raise CompilationError(f"the interpreter has no array representation for type {t}")


def unsigned_dtype(width: int):
    return _UINT_DTYPES[width]


def is_emulated(t: ir.Type) -> bool:
    t = ir.element_type(t)
    return isinstance(t, ir.FloatType) and t.name in EMULATED_FLOATS


def wrap_int(value: int, width: int) -> int:
    """A Python int wrapped to the signed range of `width` bits (constants may be written unsigned)."""
    if width == 1:
        return value & 1
    value &= (1 << width) - 1
    return value - (1 << width) if value >= 1 << (width - 1) else value


# ------------------------------------------------------------------------------------------------
# bfloat16 (bits in uint16)

def bf16_to_f32(bits):
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x, rounding: str = "rtne"):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays a quiet NaN of the same sign)."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    if rounding == "rtz":
        out = bits >> np.uint32(16)
    else:
        lsb = (bits >> np.uint32(16)) & np.uint32(1)
        out = (bits + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
    nan = np.isnan(x)
    out = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), out)
    return out.astype(np.uint16)


# ------------------------------------------------------------------------------------------------
# fp8 formats (bits in uint8). One table of the 256 values per format decodes; encoding rounds to
# the nearest entry of the sorted table of positive values, ties to the even code. Out-of-range
# values saturate to the largest finite value, as PTX `cvt.rn.satfinite` does.

def _fp8_table(name: str) -> np.ndarray:
    _, ebits, mbits = ir.FLOAT_FORMATS[name]
    fnuz = name.endswith("FNUZ")
    bias = (1 << (ebits - 1)) - 1 + (1 if fnuz else 0)
    values = np.zeros(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> mbits) & ((1 << ebits) - 1)
        m = code & ((1 << mbits) - 1)
        if e == 0:
            v = m * 2.0 ** (1 - bias - mbits)
        else:
            v = (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias)
        values[code] = sign * v
        if fnuz and code == 0x80:
            values[code] = np.nan
        elif name == "f8E4M3FN" and (code & 0x7F) == 0x7F:
            values[code] = np.nan
        elif name == "f8E5M2" and e == (1 << ebits) - 1:
            values[code] = sign * np.inf if m == 0 else np.nan
    return values


class _Fp8Format:
    def __init__(self, name: str):
        self.name = name
        self.decode_table = _fp8_table(name).astype(np.float32)
        table = _fp8_table(name)
        finite = [c for c in range(128) if np.isfinite(table[c])]
        self.positive_codes = np.array(finite, dtype=np.uint8)  # ascending value == ascending code
        self.positive_values = table[finite]
        self.nan_code = 0x80 if name.endswith("FNUZ") else 0x7F
        self.signed_zero = not name.endswith("FNUZ")

    def decode(self, bits):
        return self.decode_table[np.asarray(bits, dtype=np.uint8)]

    def encode(self, x, rounding: str = "rtne"):
        x = np.asarray(x, dtype=np.float64)
        a = np.abs(x)
        vals = self.positive_values
        hi = np.clip(np.searchsorted(vals, a, side="left"), 1, len(vals) - 1)
        lo = hi - 1
        dlo = a - vals[lo]
        dhi = vals[hi] - a
        if rounding == "rtz":
            pick_hi = dhi == 0
        else:
            hi_even = (self.positive_codes[hi] & 1) == 0
            pick_hi = (dhi < dlo) | ((dhi == dlo) & hi_even)
        idx = np.where(pick_hi, hi, lo)
        idx = np.where(a >= vals[-1], len(vals) - 1, idx)  # saturate (satfinite)
        code = self.positive_codes[idx]
        negative = np.signbit(x)
        if not self.signed_zero:
            negative &= code != 0
        code = np.where(negative, code | np.uint8(0x80), code)
        return np.where(np.isnan(x), np.uint8(self.nan_code), code).astype(np.uint8)


FP8_FORMATS = {name: _Fp8Format(name) for name in ("f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ")}


def decode_float(x, name: str):
    """Bits of an emulated float format -> float32 values (native formats pass through)."""
    if name == "bf16":
        return bf16_to_f32(x)
    if name in FP8_FORMATS:
        return FP8_FORMATS[name].decode(x)
    return x


def encode_float(x, name: str, rounding: str = "rtne"):
    """Float values -> the storage of format `name`, rounded as `rounding` (rtne or rtz)."""
    if name == "bf16":
        return f32_to_bf16(np.asarray(x, dtype=np.float32) if np.asarray(x).dtype != np.float64
                           else _f64_to_f32_round_to_odd(x), rounding)
    if name in FP8_FORMATS:
        return FP8_FORMATS[name].encode(x, rounding)
    dtype = _FLOAT_DTYPES[name]
    out = np.asarray(x).astype(dtype)
    if rounding == "rtz":
        # Step back toward zero where rounding to nearest went past the exact value.
        wide = np.asarray(x, dtype=np.float64)
        overshoot = np.abs(out.astype(np.float64)) > np.abs(wide)
        out = np.where(overshoot, np.nextafter(out, dtype(0)), out).astype(dtype)
    return out


def _f64_to_f32_round_to_odd(x):
    # Rounding to odd first makes the later round-to-nearest to bf16 correct (no double rounding).
    x = np.asarray(x, dtype=np.float64)
    y = x.astype(np.float32)
    inexact = (y.astype(np.float64) != x) & np.isfinite(x)
    bits = y.view(np.uint32)
    odd = np.where(inexact & ((bits & 1) == 0),
                   np.where(np.abs(y.astype(np.float64)) > np.abs(x), bits - np.uint32(1), bits + np.uint32(1)),
                   bits)
    return odd.astype(np.uint32).view(np.float32)


def convert_float(x, src: str, dst: str, rounding: str = "rtne"):
    """`arith.extf` / `arith.truncf` / `tt.fp_to_fp` between any two float formats."""
    if src == dst:
        return x
    value = decode_float(x, src)
    if dst in ("f32", "f64") and rounding == "rtne":
        return np.asarray(value).astype(_FLOAT_DTYPES[dst])
    return encode_float(value, dst, rounding)


def round_to_tf32(x):
    """float32 -> float32 with 10 mantissa bits, round to nearest, ties away (PTX cvt.rna.tf32.f32)."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(np.isfinite(x), rounded.view(np.float32), x)


def truncate_to_tf32(x):
    """The tf32 value an NVIDIA tensor core reads from an fp32 register (mma.sync / wgmma `.tf32`):
    the low 13 mantissa bits are ignored, i.e. the value is truncated toward zero. Triton feeds fp32
    registers to a "tf32" dot as they are (its `tl.dot` documentation warns of the truncation)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def _tf32_dot(a, b, acc):
    """One "tf32" dot: truncated inputs, exact products, fp32 accumulation (BLAS order, not the MMA's)."""
    with np.errstate(all="ignore"):
        return np.matmul(truncate_to_tf32(a), truncate_to_tf32(b)) + acc


def _ieee_dot(a, b, acc):
    with np.errstate(all="ignore"):
        return np.matmul(a, b) + acc


def _nan_to_zero(x):
    return np.where(np.isnan(x), np.float32(0), x)


def _split_bf16(x, parts: int):
    """x = hi + mid (+ lo) as Triton's BF16xN split: each part is the remainder rounded (RNE) to bf16."""
    out = []
    for i in range(parts):
        head = bf16_to_f32(f32_to_bf16(x))
        out.append(head)
        if i != parts - 1:
            with np.errstate(all="ignore"):
                x = (x - head).astype(np.float32)
    return out


def dot_f32(a, b, c, precision: str):
    """`tl.dot` of float32 inputs (`a`, `b`) and float32 accumulator `c` with Triton's input precisions,
    as the GPU computes them (Triton's F32DotTC rewrite): the operand rounding and the order of the
    partial dots are reproduced exactly; the summation order inside one MMA is not (see docs/language.md).

    "ieee": fp32 throughout. "tf32": inputs truncated to tf32. "tf32x3": big = cvt.rna.tf32(x),
    small = x - big; ((small_a @ big_b) + big_a @ small_b) with NaNs zeroed, + big_a @ big_b, + c.
    "bf16x3" / "bf16x6": bf16 splits hi/mid(/lo), partial products from the smallest up, NaNs of the
    correction zeroed, + hi_a @ hi_b, + c."""
    a, b, c = np.asarray(a, np.float32), np.asarray(b, np.float32), np.asarray(c, np.float32)
    if precision == "ieee":
        return _ieee_dot(a, b, c)
    if precision == "tf32":
        return _tf32_dot(a, b, c)
    zero = np.float32(0)
    with np.errstate(all="ignore"):
        if precision == "tf32x3":
            a_big, b_big = round_to_tf32(a), round_to_tf32(b)
            a_small, b_small = a - a_big, b - b_big
            small = _tf32_dot(a_big, b_small, _tf32_dot(a_small, b_big, zero))
            return _tf32_dot(a_big, b_big, _nan_to_zero(small)) + c
        if precision in ("bf16x3", "bf16x6"):
            parts = 2 if precision == "bf16x3" else 3
            pa, pb = _split_bf16(a, parts), _split_bf16(b, parts)
            hi, mid = 0, 1
            acc = zero
            if parts == 3:
                lo = 2
                acc = _ieee_dot(pa[mid], pb[mid], acc)
                acc = _ieee_dot(pa[lo], pb[hi], acc)
                acc = _ieee_dot(pa[hi], pb[lo], acc)
            acc = _ieee_dot(pa[mid], pb[hi], acc)
            acc = _ieee_dot(pa[hi], pb[mid], acc)
            return _ieee_dot(pa[hi], pb[hi], _nan_to_zero(acc)) + c
    raise ValueError(f"unknown dot input precision {precision!r}")


# ------------------------------------------------------------------------------------------------
# integer arithmetic with C / PTX semantics

def divsi(a, b):
    """Signed division truncating toward zero; x / 0 == -1 (PTX gives all ones), INT_MIN / -1 wraps."""
    zero = b == 0
    safe = np.where(zero, 1, b).astype(np.result_type(b))
    q = np.floor_divide(a, safe)
    r = a - q * safe
    # floor_divide rounds down; C truncates toward zero: step back up when the signs differ.
    q = np.where((r != 0) & ((a < 0) != (safe < 0)), q + 1, q)
    return np.where(zero, -1, q).astype(np.result_type(a))


def remsi(a, b):
    """Signed remainder with the sign of the dividend (C); x % 0 == x."""
    zero = b == 0
    safe = np.where(zero, 1, b).astype(np.result_type(b))
    r = np.fmod(a, safe)
    return np.where(zero, a, r).astype(np.result_type(a))


def divui(a, b, width):
    ut = _UINT_DTYPES[width]
    ua, ub = np.asarray(a).view(ut), np.asarray(b).view(ut)
    zero = ub == 0
    q = np.floor_divide(ua, np.where(zero, 1, ub).astype(ut))
    return np.where(zero, ut(~ut(0)), q).astype(ut).view(np.result_type(a))


def remui(a, b, width):
    ut = _UINT_DTYPES[width]
    ua, ub = np.asarray(a).view(ut), np.asarray(b).view(ut)
    zero = ub == 0
    r = np.remainder(ua, np.where(zero, 1, ub).astype(ut))
    return np.where(zero, ua, r).astype(ut).view(np.result_type(a))


def shli(a, b, width):
    """Shift left; amounts >= width (as unsigned) give 0, as PTX's clamped shl."""
    ut = _UINT_DTYPES[width]
    amount = np.asarray(b).view(ut)
    big = amount >= width
    shifted = np.left_shift(a, np.where(big, 0, amount).astype(np.result_type(a)))
    return np.where(big, 0, shifted).astype(np.result_type(a))


def shrsi(a, b, width):
    """Arithmetic shift right; amounts >= width fill with the sign bit."""
    ut = _UINT_DTYPES[width]
    amount = np.asarray(b).view(ut)
    clamped = np.minimum(amount, width - 1).astype(np.result_type(a))
    return np.right_shift(a, clamped).astype(np.result_type(a))


def shrui(a, b, width):
    """Logical shift right; amounts >= width give 0."""
    ut = _UINT_DTYPES[width]
    ua, amount = np.asarray(a).view(ut), np.asarray(b).view(ut)
    big = amount >= width
    shifted = np.right_shift(ua, np.where(big, 0, amount).astype(ut))
    return np.where(big, 0, shifted).astype(ut).view(np.result_type(a))


def unsigned(a, width):
    return np.asarray(a).view(_UINT_DTYPES[width]) if width > 1 else a


def from_unsigned(u, dtype):
    return np.asarray(u).astype(np.result_type(u)).view(dtype)


def mulhiui(a, b, width):
    """High half of the unsigned product."""
    ut = _UINT_DTYPES[width]
    ua, ub = np.asarray(a).view(ut), np.asarray(b).view(ut)
    if width <= 32:
        wide = ua.astype(np.uint64) * ub.astype(np.uint64)
        return (wide >> np.uint64(width)).astype(ut).view(np.result_type(a))
    mask = np.uint64(0xFFFFFFFF)
    a_lo, a_hi = ua & mask, ua >> np.uint64(32)
    b_lo, b_hi = ub & mask, ub >> np.uint64(32)
    lo_lo = a_lo * b_lo
    mid1 = a_hi * b_lo + (lo_lo >> np.uint64(32))
    mid2 = a_lo * b_hi + (mid1 & mask)
    hi = a_hi * b_hi + (mid1 >> np.uint64(32)) + (mid2 >> np.uint64(32))
    return hi.view(np.result_type(a))


def i1_as_signed(a):
    """i1 read as a signed integer: true is -1."""
    return -np.asarray(a).astype(np.int8)


def i1_from_int(a):
    return (np.asarray(a) & 1).astype(np.bool_)


# ------------------------------------------------------------------------------------------------
# casts

def trunci(a, dtype):
    if dtype is np.bool_:
        return (a & 1).astype(np.bool_)
    return np.asarray(a).astype(dtype)


def extsi(a, dtype):
    if np.asarray(a).dtype == np.bool_:
        return i1_as_signed(a).astype(dtype)
    return np.asarray(a).astype(dtype)


def extui(a, src_width, dtype):
    if src_width == 1:
        return np.asarray(a).astype(dtype)
    return unsigned(a, src_width).astype(unsigned_dtype(np.dtype(dtype).itemsize * 8)).view(dtype)


def sitofp(a, dst: str):
    values = i1_as_signed(a) if np.asarray(a).dtype == np.bool_ else a
    if dst in EMULATED_FLOATS:
        return encode_float(np.asarray(values).astype(np.float64), dst)
    return np.asarray(values).astype(_FLOAT_DTYPES[dst])


def uitofp(a, src_width: int, dst: str):
    return sitofp(unsigned(a, src_width) if src_width > 1 else np.asarray(a).astype(np.uint8), dst)


def fptoi(x, src: str, width: int, signed: bool, dtype):
    """Float -> int, truncating toward zero; NaN gives 0 and out-of-range saturates (PTX cvt.rzi)."""
    v = np.asarray(decode_float(x, src), dtype=np.float64)
    t = np.trunc(np.where(np.isnan(v), 0.0, v))
    if width == 1:
        return (t <= -1) if signed else (t >= 1)
    lo = -2.0 ** (width - 1) if signed else 0.0
    hi_exclusive = 2.0 ** (width - 1) if signed else 2.0 ** width
    wide_type = np.int64 if signed else np.uint64
    # Clip below the bound first: casting a float >= 2**63 to int64 is undefined in C.
    safe = np.clip(t, lo, np.nextafter(hi_exclusive, 0.0)).astype(wide_type)
    top = (1 << (width - 1)) - 1 if signed else (1 << width) - 1
    out = np.where(t >= hi_exclusive, wide_type(top), safe)
    narrow = dtype if signed else _UINT_DTYPES[width]
    return out.astype(narrow).view(dtype)


def bitcast(a, dtype):
    arr = np.asarray(a)
    if arr.dtype == np.bool_ or np.dtype(dtype) == np.bool_:
        return arr.astype(dtype)
    return arr.view(dtype)


# ------------------------------------------------------------------------------------------------
# float math NumPy lacks or spells differently

def round_half_away(x):
    """llvm.round: to nearest, halfway cases away from zero."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(np.result_type(x))


def rsqrt(x):
    with np.errstate(divide="ignore"):
        return (1 / np.sqrt(x)).astype(np.result_type(x))


def fma(a, b, c):
    dtype = np.result_type(a)
    if dtype == np.float64:
        return a * b + c
    return (np.asarray(a, np.float64) * b + c).astype(dtype)


_ERF64 = np.frompyfunc(math.erf, 1, 1)
_ERFC_COEFFS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
                -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erf(x):
    """erf: float64 through the C library; narrower floats to float32 accuracy, vectorised (a
    Taylor series near 0, a Chebyshev-fitted erfc elsewhere)."""
    dtype = np.result_type(x)
    if dtype == np.float64:
        return np.asarray(_ERF64(x), dtype=np.float64)
    v = np.asarray(x, dtype=np.float64)
    z = np.abs(v)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = 0.0
    for c in reversed(_ERFC_COEFFS[1:]):
        poly = c + t * poly
    erfc = t * np.exp(-z * z + _ERFC_COEFFS[0] + t * poly)
    far = np.sign(v) * (1.0 - erfc)
    # Taylor: erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
    x2, term, series = v * v, v.copy() if isinstance(v, np.ndarray) else v, 0.0
    for n in range(12):
        series = series + term / (2 * n + 1)
        term = -term * x2 / (n + 1)
    near = 1.1283791670955126 * series
    return np.where(z < 0.5, near, far).astype(dtype)


def clampf(x, lo, hi, propagate_nan: bool):
    if propagate_nan:
        return np.minimum(np.maximum(x, lo), hi)
    return np.fmin(np.fmax(x, lo), hi)


def cmpf(pred: str, a, b):
    if pred == "oeq":
        return a == b
    if pred == "one":
        return (a != b) & ~np.isnan(a) & ~np.isnan(b)
    if pred == "olt":
        return a < b
    if pred == "ole":
        return a <= b
    if pred == "ogt":
        return a > b
    if pred == "oge":
        return a >= b
    if pred == "ord":
        return ~(np.isnan(a) | np.isnan(b))
    if pred == "uno":
        return np.isnan(a) | np.isnan(b)
    if pred == "ueq":
        return (a == b) | np.isnan(a) | np.isnan(b)
    if pred == "une":
        return a != b
    if pred == "ult":
        return ~(a >= b)
    if pred == "ule":
        return ~(a > b)
    if pred == "ugt":
        return ~(a <= b)
    if pred == "uge":
        return ~(a < b)
    if pred == "true":
        return np.ones(np.broadcast(a, b).shape, np.bool_)
    if pred == "false":
        return np.zeros(np.broadcast(a, b).shape, np.bool_)
    raise CompilationError(f"unknown arith.cmpf predicate {pred!r}")


def umax(a, b, width):
    return np.maximum(unsigned(a, width), unsigned(b, width)).view(np.result_type(a))


def umin(a, b, width):
    return np.minimum(unsigned(a, width), unsigned(b, width)).view(np.result_type(a))


def dtype_name(dtype) -> str:
    """How generated code spells a NumPy dtype (`np.int32`)."""
    return "np." + np.dtype(dtype).name if np.dtype(dtype) != np.bool_ else "np.bool_"


def memory_dtype(t: ir.Type):
    """How an element of type `t` is stored in memory: i1 as a byte, as Triton stores bools."""
    t = ir.element_type(t)
    if isinstance(t, ir.IntType) and t.width == 1:
        return np.uint8
    return numpy_dtype(t)
