"""`tl.dot_scaled`: the matrix product of two blocks in OCP microscaling formats (Triton 3.x).

Written in `tl` from existing ops, so every backend runs it, as Triton's GPU emulation does it: each
operand is decoded (e2m1 codes unpacked from their bytes, fp8 through the fp8 conversion), multiplied
by its e8m0 block scales (2**(s - 127) per group of K elements; 255 is NaN), and carried in the
compute type, fp16 when an operand is fp16 and bf16 otherwise; the two then meet in a bf16/fp16
`tl.dot` with an fp32 accumulator. For in-range data every decoded, scaled value is exact in that
type (at most 4 significant bits for the fp8/fp4 formats; the scales only move the exponent) and
the products are exact in fp32, so the result is Triton interpreter's fp32 one; the GPU runs it on
its bf16/fp16 matrix units (mma.sync / wgmma m*n*k16.f32.bf16.bf16), the instructions Triton's own
`test_scaled_dot` looks for in the PTX.
"""
from __future__ import annotations

from ..runtime.jit import jit
from . import core
from .standard import _compile_time

_FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")


@_compile_time
def _check_format(name, fmt):
    if fmt not in _FORMATS:
        raise ValueError(f"dot_scaled: {name} must be one of {', '.join(_FORMATS)}, got {fmt!r}")
    return fmt


@_compile_time
def _is_none(value):
    return value is None


@_compile_time
def _group_size(values_k, scales_k):
    if scales_k == 0 or values_k % scales_k:
        raise ValueError(f"dot_scaled: K = {values_k} is not a multiple of the {scales_k} scale columns")
    return values_k // scales_k


@_compile_time
def _compute_type(lhs_fmt, rhs_fmt):
    """Triton's compute type for the upcast operands: fp16 next to an fp16 operand, else bf16."""
    return core.float16 if "fp16" in (lhs_fmt, rhs_fmt) else core.bfloat16


@jit
def _e2m1_to_f32(code):
    """A 4-bit E2M1 code (uint8 holding 0..15) as fp32: sign, 2 exponent bits, 1 mantissa bit."""
    c = code.to(core.int32)
    e = (c >> 1) & 3
    m = c & 1
    normal = (((e + 126) << 23) | (m << 22)).to(core.float32, bitcast=True)  # (1 + m/2) * 2**(e-1)
    magnitude = core.where(e == 0, m.to(core.float32) * 0.5, normal)
    return core.where((c & 8) != 0, -magnitude, magnitude)


@jit
def _unpack_e2m1(x, AXIS: core.constexpr):
    """Two codes per byte (the first in the low nibble) along AXIS of a 2-D block -> fp32, twice as long."""
    low = _e2m1_to_f32(x & 0xF)
    high = _e2m1_to_f32((x >> 4) & 0xF)
    pairs = core.join(low, high)  # [R, C, 2]
    if AXIS == 1:
        out = core.reshape(pairs, [x.shape[0], 2 * x.shape[1]])
    else:
        out = core.reshape(core.permute(pairs, (0, 2, 1)), [2 * x.shape[0], x.shape[1]])
    return out


@jit
def _decode(x, FORMAT: core.constexpr, PACK_AXIS: core.constexpr):
    if FORMAT == "e2m1":
        out = _unpack_e2m1(x.to(core.uint8, bitcast=True), PACK_AXIS)
    elif FORMAT == "e4m3":
        out = x.to(core.float8e4nv, bitcast=True).to(core.float32) if x.dtype == core.uint8 else x.to(core.float32)
    elif FORMAT == "e5m2":
        out = x.to(core.float8e5, bitcast=True).to(core.float32) if x.dtype == core.uint8 else x.to(core.float32)
    else:
        out = x.to(core.float32)
    return out


@jit
def _e8m0_to_f32(scale, SUBNORMAL_ZERO: core.constexpr):
    """2**(s - 127) for a uint8 s; 255 is NaN; s = 0 is 2**-127 when the compute type is bf16 (it has
    the range), 0 when it is fp16 (as Triton's interpreter)."""
    bits = scale.to(core.uint8, bitcast=True).to(core.int32) << 23
    if SUBNORMAL_ZERO:
        bits = core.maximum(bits, 0x00400000)
    value = bits.to(core.float32, bitcast=True)
    return core.where(scale.to(core.uint8, bitcast=True) == 255, float("nan"), value)


@jit
def _scaled_lhs(a, scale, SUBNORMAL_ZERO: core.constexpr):
    """a: [M, K] fp32, scale: [M, K // G] e8m0 -> a * 2**(scale - 127), group by group along K."""
    g: core.constexpr = _group_size(a.shape[1], scale.shape[1])
    s = _e8m0_to_f32(scale, SUBNORMAL_ZERO)
    grouped = core.reshape(a, [a.shape[0], scale.shape[1], g]) * s[:, :, None]
    return core.reshape(grouped, [a.shape[0], a.shape[1]])


@jit
def _scaled_rhs(b, scale, SUBNORMAL_ZERO: core.constexpr):
    """b: [K, N] fp32, scale: [N, K // G] (not transposed, as Triton's API) -> b scaled along K."""
    g: core.constexpr = _group_size(b.shape[0], scale.shape[1])
    s = core.trans(_e8m0_to_f32(scale, SUBNORMAL_ZERO))  # [K // G, N]
    grouped = core.reshape(b, [scale.shape[1], g, b.shape[1]]) * s[:, None, :]
    return core.reshape(grouped, [b.shape[0], b.shape[1]])


@jit
def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None, fast_math=False,
               lhs_k_pack=True, rhs_k_pack=True, out_dtype=core.float32):
    """`lhs` [M, K] (e2m1: [M, K // 2] bytes when `lhs_k_pack`, [M // 2, K] otherwise) times `rhs`
    [K, N] (e2m1: [K // 2, N] / [K, N // 2]), each with optional e8m0 scales ([M, K // 32] and
    [N, K // 32]); fp32 result (plus `acc`)."""
    lhs_fmt: core.constexpr = _check_format("lhs_format", lhs_format)
    rhs_fmt: core.constexpr = _check_format("rhs_format", rhs_format)
    subnormal_zero: core.constexpr = not (lhs_fmt == "fp16" or rhs_fmt == "fp16")
    a = _decode(lhs, lhs_fmt, 1 if lhs_k_pack else 0)
    b = _decode(rhs, rhs_fmt, 0 if rhs_k_pack else 1)
    if not _is_none(lhs_scale):
        a = _scaled_lhs(a, lhs_scale, subnormal_zero)
    if not _is_none(rhs_scale):
        b = _scaled_rhs(b, rhs_scale, subnormal_zero)
    compute: core.constexpr = _compute_type(lhs_fmt, rhs_fmt)
    a = a.to(compute)
    b = b.to(compute)
    if _is_none(acc):
        out = core.dot(a, b, out_dtype=core.float32)
    else:
        out = core.dot(a, b, acc.to(core.float32), out_dtype=core.float32)
    return out.to(out_dtype)
