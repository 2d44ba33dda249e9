"""libdevice's arithmetic and conversions with an explicit rounding mode (`_rn`, `_rz`, `_rd`, `_ru`).

Each is computed as the round-to-nearest result `r` plus the exact sign of (exact - r), found with
error-free transformations that only need round-to-nearest ops (TwoSum, Dekker's product, exact
residuals in fp64 for fp32 operands); `round_directed` then moves `r` by one ulp where the mode asks.
"""
from __future__ import annotations

from ...runtime.jit import jit
from .. import core
from ._common import bits, expect, m_trunc, round_directed, sign_of, two_prod, two_sum, wide
from ._float_math import rint

# ------------------------------------------------------------------------------------------------
# arithmetic
# ------------------------------------------------------------------------------------------------


@jit
def _narrow(s, e, like):
    """Round the fp64 value s (+ tiny residual e) to `like`'s type: the nearest value, and the sign of
    the part it dropped."""
    if like.dtype == core.float32:
        r = s.to(core.float32)
        d = s - r.to(core.float64)  # exact (Sterbenz)
        sign = core.where(d != 0, sign_of(d), sign_of(e))
    else:
        r = s
        sign = sign_of(e)
    return r, sign


@jit
def _add(a, b, MODE: core.constexpr):
    expect("add_" + MODE, "fp32 fp64", a, b)
    if MODE == "rn":
        out = a + b
    else:
        s, e = two_sum(wide(a), wide(b))
        r, sign = _narrow(s, e, a)
        # A finite sum that overflowed: the exact value lies below +inf (above -inf).
        overflow = (core.abs(r) == float("inf")) & (core.abs(a) < float("inf")) & (core.abs(b) < float("inf"))
        sign = core.where(overflow, core.where(r > 0, -1, 1), sign)
        out = round_directed(r, sign, MODE)
    return out


@jit
def _mul(a, b, MODE: core.constexpr):
    expect("mul_" + MODE, "fp32 fp64", a, b)
    if MODE == "rn":
        out = a * b
    else:
        if a.dtype == core.float32:
            s = wide(a) * wide(b)  # exact: 24 + 24 bits
            r, sign = _narrow(s, 0.0, a)
        else:
            r, e = two_prod(a, b)
            sign = sign_of(e)
        overflow = (core.abs(r) == float("inf")) & (core.abs(a) < float("inf")) & (core.abs(b) < float("inf"))
        sign = core.where(overflow, core.where(r > 0, -1, 1), sign)
        out = round_directed(r, sign, MODE)
    return out


@jit
def _div(a, b, MODE: core.constexpr):
    expect("div_" + MODE, "fp32 fp64", a, b)
    r = core.div_rn(a, b)
    if MODE != "rn":
        if a.dtype == core.float32:
            rem = wide(a) - wide(r) * wide(b)  # r*b is exact in fp64, the difference too
        else:
            p, e = two_prod(r, b)
            rem = (a - p) - e
        sign = sign_of(rem) * sign_of(b)
        finite = (core.abs(a) < float("inf")) & (b != 0)
        sign = core.where(finite & (core.abs(r) == float("inf")), core.where(r > 0, -1, 1), sign)
        r = round_directed(r, sign, MODE)
    return r


@jit
def _sqrt(x, MODE: core.constexpr):
    expect("sqrt_" + MODE, "fp32 fp64", x)
    r = core.sqrt_rn(x)
    if MODE != "rn":
        if x.dtype == core.float32:
            rem = wide(x) - wide(r) * wide(r)
        else:
            p, e = two_prod(r, r)
            rem = (x - p) - e
        r = round_directed(r, sign_of(rem), MODE)
    return r


@jit
def _fma(a, b, c, MODE: core.constexpr):
    expect("fma_" + MODE, "fp32 fp64", a, b, c)
    if MODE == "rn":
        out = core.fma(a, b, c)
    else:
        core.static_assert(a.dtype == core.float32,
                           "libdevice.fma_rz/rd/ru: only fp32 is supported by tilejit (see docs/language.md)")
        s, e = two_sum(wide(a) * wide(b), wide(c))  # the product is exact in fp64
        r, sign = _narrow(s, e, a)
        out = round_directed(r, sign, MODE)
    return out


@jit
def add_rn(arg0, arg1): return _add(arg0, arg1, "rn")
@jit
def add_rz(arg0, arg1): return _add(arg0, arg1, "rz")
@jit
def add_rd(arg0, arg1): return _add(arg0, arg1, "rd")
@jit
def add_ru(arg0, arg1): return _add(arg0, arg1, "ru")
@jit
def sub_rn(arg0, arg1): return _add(arg0, -arg1, "rn")
@jit
def sub_rz(arg0, arg1): return _add(arg0, -arg1, "rz")
@jit
def sub_rd(arg0, arg1): return _add(arg0, -arg1, "rd")
@jit
def sub_ru(arg0, arg1): return _add(arg0, -arg1, "ru")
@jit
def mul_rn(arg0, arg1): return _mul(arg0, arg1, "rn")
@jit
def mul_rz(arg0, arg1): return _mul(arg0, arg1, "rz")
@jit
def mul_rd(arg0, arg1): return _mul(arg0, arg1, "rd")
@jit
def mul_ru(arg0, arg1): return _mul(arg0, arg1, "ru")
@jit
def div_rn(arg0, arg1): return _div(arg0, arg1, "rn")
@jit
def div_rz(arg0, arg1): return _div(arg0, arg1, "rz")
@jit
def div_rd(arg0, arg1): return _div(arg0, arg1, "rd")
@jit
def div_ru(arg0, arg1): return _div(arg0, arg1, "ru")
@jit
def rcp_rn(arg0): return _div(core.full(arg0.shape, 1.0, arg0.dtype), arg0, "rn")
@jit
def rcp_rz(arg0): return _div(core.full(arg0.shape, 1.0, arg0.dtype), arg0, "rz")
@jit
def rcp_rd(arg0): return _div(core.full(arg0.shape, 1.0, arg0.dtype), arg0, "rd")
@jit
def rcp_ru(arg0): return _div(core.full(arg0.shape, 1.0, arg0.dtype), arg0, "ru")
@jit
def sqrt_rn(arg0): return _sqrt(arg0, "rn")
@jit
def sqrt_rz(arg0): return _sqrt(arg0, "rz")
@jit
def sqrt_rd(arg0): return _sqrt(arg0, "rd")
@jit
def sqrt_ru(arg0): return _sqrt(arg0, "ru")
@jit
def fma_rn(arg0, arg1, arg2): return _fma(arg0, arg1, arg2, "rn")
@jit
def fma_rz(arg0, arg1, arg2): return _fma(arg0, arg1, arg2, "rz")
@jit
def fma_rd(arg0, arg1, arg2): return _fma(arg0, arg1, arg2, "rd")
@jit
def fma_ru(arg0, arg1, arg2): return _fma(arg0, arg1, arg2, "ru")


@jit
def rsqrt_rn(arg0):
    """1 / sqrt(x) rounded once (computed in fp64)."""
    expect("rsqrt_rn", "fp32", arg0)
    return (1.0 / core.sqrt_rn(wide(arg0))).to(core.float32)


# ------------------------------------------------------------------------------------------------
# float -> float and float -> int
# ------------------------------------------------------------------------------------------------

@jit
def _double2float(x, MODE: core.constexpr):
    expect("double2float_" + MODE, "fp64", x)
    r, sign = _narrow(x, 0.0, core.full(x.shape, 0.0, core.float32))
    return round_directed(r, sign, MODE)


@jit
def _to_integer(x, MODE: core.constexpr):
    """x rounded to an integral float by the mode (to nearest even, towards zero, down, up)."""
    if MODE == "rn":
        out = rint(x)
    elif MODE == "rz":
        out = m_trunc(x)
    elif MODE == "rd":
        out = core.floor(x)
    else:
        out = core.ceil(x)
    return out


@jit
def _float2int(x, SRC: core.constexpr, DST: core.constexpr, MODE: core.constexpr):
    expect("conversion", SRC, x)
    return _to_integer(x, MODE).to(DST)


@jit
def double2float_rn(arg0): return _double2float(arg0, "rn")
@jit
def double2float_rz(arg0): return _double2float(arg0, "rz")
@jit
def double2float_rd(arg0): return _double2float(arg0, "rd")
@jit
def double2float_ru(arg0): return _double2float(arg0, "ru")
@jit
def double2int_rn(arg0): return _float2int(arg0, "fp64", core.int32, "rn")
@jit
def double2int_rz(arg0): return _float2int(arg0, "fp64", core.int32, "rz")
@jit
def double2int_rd(arg0): return _float2int(arg0, "fp64", core.int32, "rd")
@jit
def double2int_ru(arg0): return _float2int(arg0, "fp64", core.int32, "ru")
@jit
def double2uint_rn(arg0): return _float2int(arg0, "fp64", core.uint32, "rn")
@jit
def double2uint_rz(arg0): return _float2int(arg0, "fp64", core.uint32, "rz")
@jit
def double2uint_rd(arg0): return _float2int(arg0, "fp64", core.uint32, "rd")
@jit
def double2uint_ru(arg0): return _float2int(arg0, "fp64", core.uint32, "ru")
@jit
def double2ll_rn(arg0): return _float2int(arg0, "fp64", core.int64, "rn")
@jit
def double2ll_rz(arg0): return _float2int(arg0, "fp64", core.int64, "rz")
@jit
def double2ll_rd(arg0): return _float2int(arg0, "fp64", core.int64, "rd")
@jit
def double2ll_ru(arg0): return _float2int(arg0, "fp64", core.int64, "ru")
@jit
def double2ull_rn(arg0): return _float2int(arg0, "fp64", core.uint64, "rn")
@jit
def double2ull_rz(arg0): return _float2int(arg0, "fp64", core.uint64, "rz")
@jit
def double2ull_rd(arg0): return _float2int(arg0, "fp64", core.uint64, "rd")
@jit
def double2ull_ru(arg0): return _float2int(arg0, "fp64", core.uint64, "ru")
@jit
def float2int_rn(arg0): return _float2int(arg0, "fp32", core.int32, "rn")
@jit
def float2int_rz(arg0): return _float2int(arg0, "fp32", core.int32, "rz")
@jit
def float2int_rd(arg0): return _float2int(arg0, "fp32", core.int32, "rd")
@jit
def float2int_ru(arg0): return _float2int(arg0, "fp32", core.int32, "ru")
@jit
def float2uint_rn(arg0): return _float2int(arg0, "fp32", core.uint32, "rn")
@jit
def float2uint_rz(arg0): return _float2int(arg0, "fp32", core.uint32, "rz")
@jit
def float2uint_rd(arg0): return _float2int(arg0, "fp32", core.uint32, "rd")
@jit
def float2uint_ru(arg0): return _float2int(arg0, "fp32", core.uint32, "ru")
@jit
def float2ll_rn(arg0): return _float2int(arg0, "fp32", core.int64, "rn")
@jit
def float2ll_rz(arg0): return _float2int(arg0, "fp32", core.int64, "rz")
@jit
def float2ll_rd(arg0): return _float2int(arg0, "fp32", core.int64, "rd")
@jit
def float2ll_ru(arg0): return _float2int(arg0, "fp32", core.int64, "ru")
@jit
def float2ull_rn(arg0): return _float2int(arg0, "fp32", core.uint64, "rn")
@jit
def float2ull_rz(arg0): return _float2int(arg0, "fp32", core.uint64, "rz")
@jit
def float2ull_rd(arg0): return _float2int(arg0, "fp32", core.uint64, "rd")
@jit
def float2ull_ru(arg0): return _float2int(arg0, "fp32", core.uint64, "ru")


# ------------------------------------------------------------------------------------------------
# int -> float
# ------------------------------------------------------------------------------------------------

@jit
def _int2float(x, SRC: core.constexpr, DST: core.constexpr, MODE: core.constexpr):
    """Convert, then compare the result with x as integers (the float is integral when it is large)."""
    expect("conversion", SRC, x)
    r = x.to(DST)
    if MODE != "rn":
        if SRC == "int32" or SRC == "uint32":
            back = r.to(core.int64)
            wide_x = x.to(core.int64)
            sign = core.where(wide_x > back, 1, core.where(wide_x < back, -1, 0))
        elif SRC == "int64":
            too_big = r >= 9223372036854775808.0  # 2**63 is not an int64
            back = core.where(too_big, 0.0, r).to(core.int64)
            sign = core.where(too_big, -1, core.where(x > back, 1, core.where(x < back, -1, 0)))
        else:
            too_big = r >= 18446744073709551616.0  # 2**64
            back = core.where(too_big, 0.0, r).to(core.uint64)
            sign = core.where(too_big, -1, core.where(x > back, 1, core.where(x < back, -1, 0)))
        r = round_directed(r, sign, MODE)
    return r


@jit
def int2float_rn(arg0): return _int2float(arg0, "int32", core.float32, "rn")
@jit
def int2float_rz(arg0): return _int2float(arg0, "int32", core.float32, "rz")
@jit
def int2float_rd(arg0): return _int2float(arg0, "int32", core.float32, "rd")
@jit
def int2float_ru(arg0): return _int2float(arg0, "int32", core.float32, "ru")
@jit
def uint2float_rn(arg0): return _int2float(arg0, "uint32", core.float32, "rn")
@jit
def uint2float_rz(arg0): return _int2float(arg0, "uint32", core.float32, "rz")
@jit
def uint2float_rd(arg0): return _int2float(arg0, "uint32", core.float32, "rd")
@jit
def uint2float_ru(arg0): return _int2float(arg0, "uint32", core.float32, "ru")
@jit
def ll2float_rn(arg0): return _int2float(arg0, "int64", core.float32, "rn")
@jit
def ll2float_rz(arg0): return _int2float(arg0, "int64", core.float32, "rz")
@jit
def ll2float_rd(arg0): return _int2float(arg0, "int64", core.float32, "rd")
@jit
def ll2float_ru(arg0): return _int2float(arg0, "int64", core.float32, "ru")
@jit
def ull2float_rn(arg0): return _int2float(arg0, "uint64", core.float32, "rn")
@jit
def ull2float_rz(arg0): return _int2float(arg0, "uint64", core.float32, "rz")
@jit
def ull2float_rd(arg0): return _int2float(arg0, "uint64", core.float32, "rd")
@jit
def ull2float_ru(arg0): return _int2float(arg0, "uint64", core.float32, "ru")
@jit
def ll2double_rn(arg0): return _int2float(arg0, "int64", core.float64, "rn")
@jit
def ll2double_rz(arg0): return _int2float(arg0, "int64", core.float64, "rz")
@jit
def ll2double_rd(arg0): return _int2float(arg0, "int64", core.float64, "rd")
@jit
def ll2double_ru(arg0): return _int2float(arg0, "int64", core.float64, "ru")
@jit
def ull2double_rn(arg0): return _int2float(arg0, "uint64", core.float64, "rn")
@jit
def ull2double_rz(arg0): return _int2float(arg0, "uint64", core.float64, "rz")
@jit
def ull2double_rd(arg0): return _int2float(arg0, "uint64", core.float64, "rd")
@jit
def ull2double_ru(arg0): return _int2float(arg0, "uint64", core.float64, "ru")
@jit
def int2double_rn(arg0): return _int2float(arg0, "int32", core.float64, "rn")
@jit
def uint2double_rn(arg0): return _int2float(arg0, "uint32", core.float64, "rn")


# ------------------------------------------------------------------------------------------------
# bit reinterpretation
# ------------------------------------------------------------------------------------------------

@jit
def int_as_float(arg0):
    expect("int_as_float", "int32", arg0)
    return arg0.to(core.float32, bitcast=True)


@jit
def uint_as_float(arg0):
    expect("uint_as_float", "uint32", arg0)
    return arg0.to(core.float32, bitcast=True)


@jit
def float_as_int(arg0):
    expect("float_as_int", "fp32", arg0)
    return arg0.to(core.int32, bitcast=True)


@jit
def float_as_uint(arg0):
    expect("float_as_uint", "fp32", arg0)
    return arg0.to(core.uint32, bitcast=True)


@jit
def longlong_as_double(arg0):
    expect("longlong_as_double", "int64", arg0)
    return arg0.to(core.float64, bitcast=True)


@jit
def double_as_longlong(arg0):
    expect("double_as_longlong", "fp64", arg0)
    return bits(arg0)


@jit
def hiloint2double(arg0, arg1):
    """The double whose high word is arg0 and low word arg1 (both int32)."""
    expect("hiloint2double", "int32", arg0, arg1)
    low = arg1.to(core.uint32, bitcast=True).to(core.int64)
    return ((arg0.to(core.int64) << 32) | low).to(core.float64, bitcast=True)


@jit
def double2loint(arg0):
    expect("double2loint", "fp64", arg0)
    return bits(arg0).to(core.int32)


@jit
def double2hiint(arg0):
    expect("double2hiint", "fp64", arg0)
    return (bits(arg0) >> 32).to(core.int32)
