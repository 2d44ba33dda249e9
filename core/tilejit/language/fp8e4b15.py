"""`tl.float8e4b15` conversions, written as integer bit manipulation so that every backend runs them.

float8e4b15 is Triton's 8-bit float with 1 sign, 4 exponent and 3 mantissa bits and an exponent bias
of 15, without infinities or NaNs: its largest magnitude is 1.875 (0x7F) and its smallest subnormal
2**-17. As in Triton, its IR type is a plain `i8` (no backend has a native type for it), so a value of
this dtype is its bit pattern and the conversions below are the whole story:

- to float16 (exact): the exponent field and bias are float16's, so the bits move over unchanged:
  `fp16 = sign << 15 | (bits & 0x7F) << 7`; wider types convert from that float16.
- from float32: round to nearest even (or toward zero with `fp_downcast_rounding="rtz"`), computed
  on the float32 bit pattern, with saturation: anything beyond +-1.875 (infinities too) becomes
  +-1.875, and NaN (which float8e4b15 cannot hold) becomes +-1.875 as well. Other source types
  convert to float32 first (exact for every type narrower than float32).
"""
from __future__ import annotations

from . import core as tl

_FP32_EXPONENT_SHIFT = 23
_FP32_TO_E4_MANTISSA_SHIFT = 23 - 3
_REBIAS = 127 - 15            # float32 biased exponent of float8e4b15's exponent field 0
_LARGEST_CODE = 0x7F          # 1.875


def to_float16(sem, x: tl.tensor) -> tl.tensor:
    """float8e4b15 -> float16, exactly."""
    bits = sem.cast(_retype(x, tl.uint8), tl.uint16)
    sign = sem.shl(sem.and_(bits, 0x80), 8)
    magnitude = sem.shl(sem.and_(bits, 0x7F), 7)
    return sem.bitcast(sem.or_(sign, magnitude), tl.float16)


def from_float32(sem, x: tl.tensor, rounding: str = "rtne") -> tl.tensor:
    """float32 -> float8e4b15 with round-to-nearest-even (or toward zero) and saturation."""
    bits = sem.bitcast(x, tl.uint32)
    sign = sem.and_(sem.shr(bits, 24), 0x80)
    magnitude = sem.and_(bits, 0x7FFFFFFF)
    exponent = sem.shr(magnitude, _FP32_EXPONENT_SHIFT)
    normal = _round_normal(sem, magnitude, rounding)
    subnormal = _round_subnormal(sem, magnitude, exponent, rounding)
    code = sem.where(sem.greater_equal(exponent, _REBIAS + 1), normal, subnormal)
    code = sem.minmax(code, _LARGEST_CODE, is_max=False)  # saturate: no inf/NaN encodings
    code = sem.cast(sem.or_(code, sign), tl.uint8)
    return _retype(code, tl.float8e4b15)


def _round_normal(sem, magnitude, rounding):
    """Results with a non-zero exponent field: rebias the float32 pattern and drop 20 mantissa bits.
    A carry out of the mantissa moves into the exponent, which is the right rounding there too."""
    rebased = sem.sub(magnitude, _REBIAS << _FP32_EXPONENT_SHIFT)
    return _shift_right_rounded(sem, rebased, _FP32_TO_E4_MANTISSA_SHIFT, rounding)


def _round_subnormal(sem, magnitude, exponent, rounding):
    """Results below 2**-14: the code is |x| / 2**-17 rounded to an integer. With the implicit bit,
    |x| = significand * 2**(E - 150), so the code is significand >> (133 - E), capped at 31 (anything
    that small rounds to 0 either way)."""
    significand = sem.or_(sem.and_(magnitude, 0x7FFFFF), 0x800000)
    shift = sem.minmax(sem.sub(133, sem.minmax(exponent, 133, is_max=False)), 31, is_max=False)
    return _shift_right_rounded(sem, significand, shift, rounding)


def _shift_right_rounded(sem, value, shift, rounding):
    """`value >> shift` rounded to nearest even (or truncated for "rtz"); `shift` >= 1."""
    if rounding == "rtz":
        return sem.shr(value, shift)
    half_minus_one = sem.sub(sem.shl(sem.cast(sem.to_tensor(1), tl.uint32), sem.sub(shift, 1)), 1)
    lowest_kept_bit = sem.and_(sem.shr(value, shift), 1)
    return sem.shr(sem.add(sem.add(value, half_minus_one), lowest_kept_bit), shift)


def _retype(x: tl.tensor, scalar: tl.dtype) -> tl.tensor:
    """The same 8-bit pattern seen as another 8-bit dtype (the IR type, `i8`, does not change)."""
    ty = tl.block_type(scalar, x.type.shape) if x.type.is_block() else scalar
    return tl.tensor(x.handle, ty)
