"""Conversions of the float formats LLVM does not compute with (bf16, the fp8 family) to and from f32,
by integer manipulation of the bits: the same code on every GPU target, exact to the rules the
interpreter (`tilejit_interpreter.numerics`) defines:

- decoding is exact (every bf16/fp8 value is an f32);
- encoding rounds to nearest even (or toward zero with rounding="rtz"); fp8 saturates values beyond
  the largest finite one to it (PTX `cvt.rn.satfinite`), NaN becomes the format's NaN code, and the
  FNUZ formats have no negative zero.
"""
from __future__ import annotations

import math

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from ...runtime.launch_abi import bf16_bits
from ..isa import F32, call_intrinsic

I32 = llir.IntType(32)
I16 = llir.IntType(16)
I8 = llir.IntType(8)

# Largest finite code (sign bit clear) and the NaN code of each fp8 format.
_FP8_MAX_CODE = {"f8E4M3FN": 0x7E, "f8E5M2": 0x7B, "f8E4M3FNUZ": 0x7F, "f8E5M2FNUZ": 0x7F}
_FP8_NAN_CODE = {"f8E4M3FN": 0x7F, "f8E5M2": 0x7F, "f8E4M3FNUZ": 0x80, "f8E5M2FNUZ": 0x80}


def _c(value, ty=I32):
    return llir.Constant(ty, value)


def _fp8_params(name: str):
    _, ebits, mbits = ir.FLOAT_FORMATS[name]
    bias = (1 << (ebits - 1)) - 1 + (1 if name.endswith("FNUZ") else 0)
    return ebits, mbits, bias


def is_fp8(name: str) -> bool:
    return name in _FP8_MAX_CODE


# --------------------------------------------------------------------------------------------- bf16
def bf16_to_f32(b: llir.IRBuilder, v):
    return b.bitcast(b.shl(b.zext(v, I32), _c(16)), F32)


def f32_to_bf16(b: llir.IRBuilder, v, rounding: str = "rtne"):
    """Round to nearest even (or toward zero); NaN stays NaN (quiet bit forced)."""
    bits = b.bitcast(v, I32)
    if rounding == "rtz":
        rounded = bits
    else:
        lsb = b.and_(b.lshr(bits, _c(16)), _c(1))
        rounded = b.add(bits, b.add(_c(0x7FFF), lsb))
    is_nan = b.fcmp_unordered("uno", v, v)
    chosen = b.select(is_nan, b.or_(bits, _c(0x400000)), rounded)
    return b.trunc(b.lshr(chosen, _c(16)), I16)


def f32_to_f16_toward_zero(b: llir.IRBuilder, v):
    """fptrunc rounds to nearest; where that moved away from zero, step one code back toward it
    (codes of one sign order like magnitudes, so this is the truncated value, inf -> max finite)."""
    h = b.fptrunc(v, llir.HalfType())
    grew = b.fcmp_ordered(">", call_intrinsic(b, "llvm.fabs.f32", F32, [b.fpext(h, F32)]),
                          call_intrinsic(b, "llvm.fabs.f32", F32, [v]))
    bits = b.bitcast(h, I16)
    return b.bitcast(b.select(grew, b.sub(bits, _c(1, I16)), bits), llir.HalfType())


# ---------------------------------------------------------------------------------------------- fp8
def fp8_to_f32(b: llir.IRBuilder, code, name: str):
    ebits, mbits, bias = _fp8_params(name)
    c = b.zext(code, I32)
    sign = b.and_(c, _c(0x80))
    e = b.and_(b.lshr(c, _c(mbits)), _c((1 << ebits) - 1))
    m = b.and_(c, _c((1 << mbits) - 1))
    normal_bits = b.or_(b.shl(sign, _c(24)),
                        b.or_(b.shl(b.add(e, _c(127 - bias)), _c(23)), b.shl(m, _c(23 - mbits))))
    normal = b.bitcast(normal_bits, F32)
    sub = b.fmul(b.uitofp(m, F32), llir.Constant(F32, 2.0 ** (1 - bias - mbits)))
    sub = b.select(b.icmp_unsigned("!=", sign, _c(0)), b.fneg(sub), sub)
    out = b.select(b.icmp_unsigned("==", e, _c(0)), sub, normal)
    nan = llir.Constant(F32, float("nan"))
    if name == "f8E4M3FN":
        out = b.select(b.icmp_unsigned("==", b.and_(c, _c(0x7F)), _c(0x7F)), nan, out)
    elif name == "f8E5M2":
        special = b.bitcast(b.or_(b.or_(b.shl(sign, _c(24)), _c(0x7F800000)), b.shl(m, _c(21))), F32)
        out = b.select(b.icmp_unsigned("==", e, _c(31)), special, out)
    else:   # FNUZ: the one NaN is the negative zero code
        out = b.select(b.icmp_unsigned("==", c, _c(0x80)), nan, out)
    return out


def f32_to_fp8(b: llir.IRBuilder, v, name: str, rounding: str = "rtne"):
    ebits, mbits, bias = _fp8_params(name)
    bits = b.bitcast(v, I32)
    negative = b.icmp_signed("<", bits, _c(0))
    mag_bits = b.and_(bits, _c(0x7FFFFFFF))
    mag = b.bitcast(mag_bits, F32)
    shift = 23 - mbits
    # Normal range: round the f32 mantissa to mbits bits; a carry moves into the exponent as it should.
    if rounding == "rtz":
        rounded = b.lshr(mag_bits, _c(shift))
    else:
        odd = b.and_(b.lshr(mag_bits, _c(shift)), _c(1))
        rounded = b.lshr(b.add(mag_bits, b.add(_c((1 << (shift - 1)) - 1), odd)), _c(shift))
    normal = b.sub(rounded, _c((127 - bias) << mbits))
    # Subnormal range: the value in units of the smallest subnormal, rounded to an integer.
    scaled = b.fmul(mag, llir.Constant(F32, 2.0 ** (bias - 1 + mbits)))
    rint = call_intrinsic(b, "llvm.trunc.f32" if rounding == "rtz" else "llvm.roundeven.f32", F32, [scaled])
    subnormal = b.fptoui(rint, I32)
    is_sub = b.fcmp_ordered("<", mag, llir.Constant(F32, 2.0 ** (1 - bias)))
    code = b.select(is_sub, subnormal, normal)
    max_code = _c(_FP8_MAX_CODE[name])
    code = b.select(b.icmp_signed(">", code, max_code), max_code, code)   # satfinite
    if name.endswith("FNUZ"):
        negative = b.and_(negative, b.icmp_unsigned("!=", code, _c(0)))
    code = b.select(negative, b.or_(code, _c(0x80)), code)
    code = b.select(b.fcmp_unordered("uno", v, v), _c(_FP8_NAN_CODE[name]), code)
    return b.trunc(code, I8)


# ------------------------------------------------------------------------------------ dispatching
def decode_to_f32(b: llir.IRBuilder, v, name: str):
    return bf16_to_f32(b, v) if name == "bf16" else fp8_to_f32(b, v, name)


def encode_from_f32(b: llir.IRBuilder, v, name: str, rounding: str = "rtne"):
    return f32_to_bf16(b, v, rounding) if name == "bf16" else f32_to_fp8(b, v, name, rounding)


# ------------------------------------------------------------------------ compile-time constants
def _fp8_positive_values(name: str):
    """(code, value) of every positive finite code of an fp8 format, ascending."""
    ebits, mbits, bias = _fp8_params(name)
    out = []
    for code in range(_FP8_MAX_CODE[name] + 1):
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        value = m * 2.0 ** (1 - bias - mbits) if e == 0 else (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias)
        out.append((code, value))
    return out


def constant_bits(value, name: str) -> int:
    """The storage bits of Python number `value` in format `name` (bf16 or fp8). bf16: the launch ABI's
    `bf16_bits` (float32 first, then bfloat16, both to nearest even, as torch and Triton), so a
    constant equals the same value passed as an argument; fp8: to nearest even from the exact value. The lowering must emit
    these bits: an integer constant of the storage width would be read as the code, not the number
    (`tl.full([4], 1, tl.bfloat16)` was the code 0x0001, a denormal, instead of 0x3F80)."""
    value = float(value)
    if name == "bf16":
        return bf16_bits(value)  # the launch ABI's rounding: a bf16 constant equals a bf16 argument
    if not is_fp8(name):
        raise CompilationError(f"no storage encoding for float format {name}")
    if math.isnan(value):
        return _FP8_NAN_CODE[name]
    magnitude = abs(value)
    codes = _fp8_positive_values(name)
    code = codes[-1][0]                       # saturate beyond the largest finite value (satfinite)
    for (lo_code, lo), (hi_code, hi) in zip(codes, codes[1:]):
        if magnitude <= hi:
            nearer_hi = hi - magnitude < magnitude - lo or (hi - magnitude == magnitude - lo and hi_code % 2 == 0)
            code = hi_code if nearer_hi else lo_code
            break
    negative = math.copysign(1.0, value) < 0
    if name.endswith("FNUZ") and code == 0:
        negative = False                      # FNUZ formats have no negative zero
    return code | 0x80 if negative else code
