"""`desc.gather(x_offsets, y_offset)` and `desc.scatter(value, x_offsets, y_offset)` (Triton 3.x).

A descriptor whose block is one row, [1, N], reads or writes the rows `x_offsets[i]` (a 1-D block of
row indices), columns `y_offset .. y_offset + N`. Written in `tl` from the descriptor's own row load
and store, one row per loop iteration, so every backend runs it with the descriptor's bounds rules:
rows and columns outside the tensor read as zero and are not written. Scattered rows are written
in index order (the last of duplicate indices wins).
"""
from __future__ import annotations

from ..runtime.jit import jit
from . import core
from .standard import sum


@core.builtin
def _check_row_descriptor(desc, x_offsets, what, _semantic=None):
    what = core._unwrap_if_constexpr(what)
    shape = list(desc.block_type.shape)
    if len(shape) != 2 or shape[0] != 1:
        raise ValueError(f"descriptor {what} needs a block of one row ([1, N]), got {shape}")
    x_offsets = core._unwrap_if_constexpr(x_offsets)
    if not isinstance(x_offsets, core.tensor) or not x_offsets.type.is_block() or \
            len(x_offsets.type.shape) != 1 or not x_offsets.type.scalar.is_int():
        raise ValueError(f"descriptor {what}: x_offsets must be a 1-D block of integers, got "
                         f"{getattr(x_offsets, 'type', x_offsets)}")
    return core.constexpr(None)


_BITS = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}


@core.builtin
def _as_bits(x, _semantic=None):
    """`x` bitcast to the signed integer type of its width (so that a masked sum moves it exactly)."""
    target = core.dtype(_BITS[x.type.scalar.primitive_bitwidth])
    return _semantic.bitcast(x, target) if x.type.scalar != target else x


@core.builtin
def _from_bits(x, dtype, _semantic=None):
    """Truncate a (promoted) sum back to the width of `dtype`, then bitcast to it."""
    dtype = core._unwrap_if_constexpr(dtype)
    bits_type = core.dtype(_BITS[dtype.primitive_bitwidth])
    x = _semantic.cast(x, bits_type)
    return _semantic.bitcast(x, dtype) if dtype != bits_type else x


@jit
def gather(desc, x_offsets, y_offset):
    """Rows `x_offsets` of the descriptor's tensor, columns from `y_offset`: [len(x_offsets), N]."""
    _check_row_descriptor(desc, x_offsets, "gather")
    R: core.constexpr = x_offsets.shape[0]
    N: core.constexpr = desc.block_shape[1]
    rows = core.arange(0, R)
    out = core.full([R, N], 0, desc.dtype)
    for i in core.range(0, R):
        x = sum(core.where(rows == i, x_offsets, 0))
        out = core.where(rows[:, None] == i, desc.load([x, y_offset]), out)
    return out


@jit
def scatter(desc, value, x_offsets, y_offset):
    """Write row i of `value` ([len(x_offsets), N]) to row `x_offsets[i]`, columns from `y_offset`."""
    _check_row_descriptor(desc, x_offsets, "scatter")
    R: core.constexpr = x_offsets.shape[0]
    rows = core.arange(0, R)
    bits = _as_bits(value.to(desc.dtype))
    for i in core.range(0, R):
        x = sum(core.where(rows == i, x_offsets, 0))
        row = sum(core.where(rows[:, None] == i, bits, 0), axis=0, keep_dims=True)
        desc.store([x, y_offset], _from_bits(row, desc.dtype))
