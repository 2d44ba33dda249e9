"""`tl.dot_scaled`: the matrix product of two blocks in OCP microscaling formats (Triton 3.x).

Written in `tl` from existing ops, so every backend runs it: each operand is decoded to fp32 (e2m1
codes unpacked from their bytes, fp8 through the fp8 conversion, fp16/bf16 widened), multiplied by
its e8m0 block scales (2**(s - 127) per group of K elements; 255 is NaN), and the two are multiplied
with an fp32 `tl.dot` with exact products (as Triton's interpreter does; Triton's GPU emulation
upcasts to bf16 or fp16 instead, which gives the same products for in-range data).

That dot runs at input precision tf32 where the target offers it: every decoded, scaled value has at
most 11 significant bits (fp16) and an fp32 exponent, so it is a tf32 value and tf32 products are
exact; the GPU then takes its matrix units (mma.sync tf32) instead of an fp32 FMA dot, whose code
for a 128x128x128 tile (16384 FMAs a thread) LLVM needed minutes to compile.
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


@core.builtin
def _exact_products_precision(_semantic=None):
    """"tf32" where the target allows it (exact for dot_scaled's operands, see above), else "ieee"."""
    from .semantic_memory import DOT_INPUT_PRECISIONS
    allowed = getattr(_semantic.options, "allowed_dot_input_precisions", None) or DOT_INPUT_PRECISIONS
    return core.constexpr("tf32" if "tf32" in allowed else "ieee")


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
    precision: core.constexpr = _exact_products_precision()
    if _is_none(acc):
        out = core.dot(a, b, input_precision=precision, out_dtype=core.float32)
    else:
        out = core.dot(a, b, acc.to(core.float32), input_precision=precision, out_dtype=core.float32)
    return out.to(out_dtype)
