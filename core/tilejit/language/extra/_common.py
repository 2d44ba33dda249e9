"""Shared pieces of the libdevice implementation: dtype checks, the builtins that emit one `math`
op, bit views of floats, one-ulp steps and rounding in a chosen direction.

Every libdevice function is written from ops every backend already implements (DESIGN.md: each backend
implements every TTIR op), so the same kernel gives the same answer on the interpreter and on a GPU.
"""
from __future__ import annotations

from ...runtime.jit import jit
from .. import core

_unwrap = core._unwrap_if_constexpr

FLOATS = ("fp32", "fp64")


def _names(kinds) -> tuple:
    kinds = _unwrap(kinds)
    return tuple(kinds.split()) if isinstance(kinds, str) else tuple(kinds)


@core.builtin
def expect(name, kinds, *values, _semantic=None):
    """Compile-time check that every value's element type is one of `kinds` (e.g. "fp32 fp64"), as
    Triton's libdevice dispatch does ("input arg type does not match")."""
    allowed = _names(kinds)
    for value in values:
        value = _semantic.to_tensor(value)
        ty = value.type.scalar
        if ty.name not in allowed:
            raise TypeError(f"libdevice.{_unwrap(name)}: expected element type {' or '.join(allowed)}, "
                            f"got {ty.name}")
    return None


def math_unary(op: str, name: str, allowed=FLOATS):
    """A builtin `fn(arg0)` that emits `op` on a float tensor of one of the `allowed` types."""

    def fn(arg0, _semantic=None):
        return _semantic.float_unary(op, arg0, allowed, f"libdevice.{name}")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} (one `{op}` op)."
    return core.builtin(fn)


def math_binary(op: str, name: str, allowed=FLOATS):
    """A builtin `fn(arg0, arg1)`: both operands promoted and broadcast as for `+`, then `op`."""

    def fn(arg0, arg1, _semantic=None):
        a, b = _semantic.binary_operands(arg0, arg1)
        ty = a.type.scalar
        if ty.name not in allowed:
            raise TypeError(f"libdevice.{name}: expected element type {' or '.join(allowed)}, got {ty.name}")
        return _semantic.create(op, [a, b], a.type)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} (one `{op}` op)."
    return core.builtin(fn)


# Ops without a `tl` spelling, used by the compositions below.
m_trunc = math_unary("math.trunc", "trunc")
m_round = math_unary("math.round", "round")
m_tanh = math_unary("math.tanh", "tanh")
m_sinh = math_unary("math.sinh", "sinh")
m_cosh = math_unary("math.cosh", "cosh")
m_tan = math_unary("math.tan", "tan")
m_asin = math_unary("math.asin", "asin")
m_acos = math_unary("math.acos", "acos")
m_atan = math_unary("math.atan", "atan")
m_log10 = math_unary("math.log10", "log10")
m_log1p = math_unary("math.log1p", "log1p")
m_expm1 = math_unary("math.expm1", "expm1")
m_cbrt = math_unary("math.cbrt", "cbrt")
m_pow = math_binary("math.powf", "pow")
m_atan2 = math_binary("math.atan2", "atan2")
m_copysign = math_binary("math.copysign", "copysign")
m_fmod = math_binary("arith.remf", "fmod")


# ------------------------------------------------------------------------------------------------
# bit views and one-ulp steps
# ------------------------------------------------------------------------------------------------

@jit
def bits(x):
    """The signed integer of the same width holding x's bits."""
    return x.to(core.int64, bitcast=True) if x.dtype == core.float64 else x.to(core.int32, bitcast=True)


@jit
def from_bits(i, like):
    """The float of `like`'s type whose bits are `i`."""
    return i.to(core.float64, bitcast=True) if like.dtype == core.float64 else i.to(core.float32, bitcast=True)


@jit
def wide(x):
    """fp32 math done in fp64 (then rounded once) is correctly rounded or nearly so."""
    return x.to(core.float64)


@jit
def sign_of(d):
    """-1, 0 or 1 (int32) by the sign of d; 0 for NaN."""
    return core.where(d > 0, 1, core.where(d < 0, -1, 0))


@jit
def step(x, up):
    """The float next to x towards +inf where `up`, towards -inf elsewhere (NaN stays NaN)."""
    i = bits(x)
    negative = i < 0
    i = core.where(up != negative, i + 1, i - 1)
    if x.dtype == core.float64:
        tiny = core.where(up, 1, -9223372036854775807)  # +/- the smallest subnormal
    else:
        tiny = core.where(up, 1, -2147483647)
    i = core.where(x == 0, tiny.to(i.dtype), i)
    return core.where(x != x, x, from_bits(i, x))


@jit
def round_directed(r, sign, MODE: core.constexpr):
    """`r` is the value rounded to nearest and `sign` the sign of (exact - r): the result rounded
    towards zero ("rz"), down ("rd"), up ("ru"), or `r` itself ("rn")."""
    if MODE == "ru":
        out = core.where(sign > 0, step(r, sign > 0), r)
    elif MODE == "rd":
        out = core.where(sign < 0, step(r, sign > 0), r)
    elif MODE == "rz":
        out = core.where(((r > 0) & (sign < 0)) | ((r < 0) & (sign > 0)), step(r, sign > 0), r)
    else:
        core.static_assert(MODE == "rn", "rounding mode must be rn, rz, rd or ru")
        out = r
    return out


@jit
def two_sum(a, b):
    """s = a + b rounded, and the exact error e (a + b == s + e), with round-to-nearest ops only."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@jit
def two_prod(a, b):
    """p = a * b rounded, and the exact error e (Dekker's product; no fused multiply-add needed)."""
    p = a * b
    c = 134217729.0 * a  # 2**27 + 1 splits a double into two 26-bit halves
    a_hi = c - (c - a)
    a_lo = a - a_hi
    d = 134217729.0 * b
    b_hi = d - (d - b)
    b_lo = b - b_hi
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e
