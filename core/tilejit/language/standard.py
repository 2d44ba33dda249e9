"""The part of `tl` written in `tl` itself (Triton 3.x's `triton.language.standard`).

Every public function here is a `@jit` function: the frontend compiles its body at each call site,
so the library goes through exactly the same path as user code (and the inliner removes the calls).
Pure compile-time bookkeeping (choosing a dtype, computing a shape, checking an axis) lives in the
small `@builtin` helpers at the top, written in plain Python, so that the `@jit` bodies only describe
tensor computation. `x.sum()`-style member calls reach these functions through
`core.TENSOR_MEMBER_FUNCTIONS`, which maps a member name to the `tl` function of that name.
"""
from __future__ import annotations

import functools

from ..runtime.jit import jit
from . import core

__all__ = [
    "cdiv", "sigmoid", "softmax", "ravel", "swizzle2d", "zeros", "zeros_like", "max", "argmax", "min",
    "argmin", "sum", "xor_sum", "reduce_or", "cumsum", "cumprod", "sort", "topk", "bitonic_merge", "flip",
    "interleave",
]

_unwrap = core._unwrap_if_constexpr


# ------------------------------------------------------------------------------------------------
# compile-time helpers (plain Python, called from the @jit bodies below)
# ------------------------------------------------------------------------------------------------

def _deep_unwrap(value):
    """A constexpr, or a list/tuple of them (a tensor's `.shape`), as plain Python values."""
    value = _unwrap(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_deep_unwrap(v) for v in value)
    return value


def _compile_time(fn):
    """A builtin computed entirely in Python from constexpr arguments; the result is a constexpr.
    Errors are `ValueError`s that the frontend reports at the caller's line."""

    @core.builtin
    @functools.wraps(fn)
    def helper(*args, _semantic=None, **kwargs):
        args = [_deep_unwrap(a) for a in args]
        kwargs = {k: _deep_unwrap(v) for k, v in kwargs.items()}
        return core.constexpr(fn(*args, **kwargs))

    return helper


def _shape_of(x):
    return list(x.type.shape) if x.type.is_block() else []


def _exact_log2(n: int, what: str) -> int:
    if not core.is_power_of_two(n):
        raise ValueError(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


@_compile_time
def _log2(n):
    return _exact_log2(n, "the size")


@_compile_time
def _softmax_dim(dim):
    return 0 if dim is None else dim


@_compile_time
def _signed_int_like(ty):
    """The signed integer dtype as wide as `ty`: sort and flip move bit patterns, not values."""
    widths = {8: core.int8, 16: core.int16, 32: core.int32, 64: core.int64}
    if ty.primitive_bitwidth not in widths:
        raise ValueError(f"{ty} is not supported here (needs an 8, 16, 32 or 64-bit type)")
    return widths[ty.primitive_bitwidth]


@core.builtin
def _minor_dim_log2(x, dim, _semantic=None):
    """log2 of the size of the dimension `sort`/`topk` work on, which must be the last one."""
    shape = _shape_of(x)
    dim = _unwrap(dim)
    if not shape:
        raise ValueError("sort/topk need a tensor, got a scalar")
    last = len(shape) - 1
    if dim is not None and dim not in (last, -1):
        raise ValueError(f"only the last dimension ({last}) can be sorted, got dim={dim}")
    return core.constexpr(_exact_log2(shape[-1], f"the sorted dimension's size ({shape[-1]})"))


@core.builtin
def _hypercube_shape(x, _semantic=None):
    """[2, 2, ..., 2]: `x` seen as a hypercube, one axis per bit of the flat index."""
    numel = x.type.numel if x.type.is_block() else 1
    return core.constexpr([2] * _exact_log2(numel, f"the number of elements ({numel})"))


@_compile_time
def _merge_order(stage, last_stage, descending):
    # Every stage but the last sorts its runs alternately up and down (order 2) so that each pair of
    # runs forms a bitonic sequence; the last stage sorts in the requested direction.
    return 2 if stage < last_stage else int(bool(descending))


@core.builtin
def _innermost_axis(h, bit, _semantic=None):
    """The hypercube axis that holds bit `bit` of the flat index (bit 0 is the last axis)."""
    return core.constexpr(len(_shape_of(h)) - 1 - _unwrap(bit))


@_compile_time
def _top_k_log2(k, log_n):
    if not core.is_power_of_two(k) or k > (1 << log_n):
        raise ValueError(f"topk: k must be a power of two no larger than the dimension ({1 << log_n}), got {k}")
    return k.bit_length() - 1


@core.builtin
def _last_axis(x, _semantic=None):
    return core.constexpr(len(_shape_of(x)) - 1)


@core.builtin
def _top_k_shape(x, log_k, _semantic=None):
    return core.constexpr(_shape_of(x)[:-1] + [1 << _unwrap(log_k)])


@core.builtin
def _indicator(n_dims, bit, _semantic=None):
    """0 on the hypercube's half where bit `bit` of the flat index is 0, else 1 (shape [1,..,2,..,1])."""
    n_dims, bit = _unwrap(n_dims), _unwrap(bit)
    ar = core.arange(0, 2, _semantic=_semantic)
    return core.reshape(ar, [1] * (n_dims - bit - 1) + [2] + [1] * bit, _semantic=_semantic)


@core.builtin
def _flip_dim(x, dim, _semantic=None):
    shape = _shape_of(x)
    dim = _unwrap(dim)
    if not shape:
        raise ValueError("flip needs a tensor, got a scalar")
    if dim is None:
        dim = len(shape) - 1
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"flip: dim must be a constexpr integer or None, got {type(dim).__name__} {dim!r}")
    if not -len(shape) <= dim < len(shape):
        raise ValueError(f"flip: dim {dim} is out of range for a tensor of rank {len(shape)}")
    dim %= len(shape)
    _exact_log2(shape[dim], f"flip: the size of dimension {dim} ({shape[dim]})")
    return core.constexpr(dim)


@core.builtin
def _dim_log2(x, dim, _semantic=None):
    return core.constexpr(_exact_log2(_shape_of(x)[_unwrap(dim)], "size"))


@core.builtin
def _split_dim_in_bits(x, dim, _semantic=None):
    """`x`'s shape with dimension `dim` replaced by one axis of size 2 per bit of its index."""
    shape, dim = _shape_of(x), _unwrap(dim)
    return core.constexpr(shape[:dim] + [2] * _exact_log2(shape[dim], "size") + shape[dim + 1:])


@core.builtin
def _interleaved_shape(c, _semantic=None):
    shape = _shape_of(c)
    if len(shape) == 1:  # two scalars were joined: [2] is already the interleaving
        return core.constexpr(shape)
    return core.constexpr(shape[:-2] + [2 * shape[-2]])


@core.builtin
def _promote_bfloat16_to_float32(t, _semantic=None):
    t = _semantic.to_tensor(t)
    if t.type.scalar.is_bf16():
        return t.to(core.float32, _semantic=_semantic)
    return t


@core.builtin
def _minmax_input(t, _semantic=None):
    """Triton reduces max/min of narrow types in 32 bits: floats in fp32, integers in int32."""
    t = _promote_bfloat16_to_float32(t, _semantic=_semantic)
    ty = t.type.scalar
    if ty.primitive_bitwidth < 32:
        if ty.is_floating():
            return t.to(core.float32, _semantic=_semantic)
        if not ty.is_int():
            raise TypeError(f"max/min need numbers, got {ty}")
        return t.to(core.int32, _semantic=_semantic)
    return t


def _pick_sum_dtype(in_dtype, dtype):
    """Small integers are summed in 32 bits of the same signedness, so sums do not overflow early."""
    if dtype is not None:
        return dtype
    if in_dtype.is_int_signed() and in_dtype.int_bitwidth < 32:
        return core.int32
    if in_dtype.is_int_unsigned() and in_dtype.int_bitwidth < 32:
        return core.uint32
    return None


@core.builtin
def _sum_input(t, dtype, _semantic=None):
    t = _semantic.to_tensor(t)
    out = _pick_sum_dtype(t.type.scalar, _unwrap(dtype))
    return t if out is None else t.to(out, _semantic=_semantic)


@core.builtin
def _require_int(t, what, _semantic=None):
    t = _semantic.to_tensor(t)
    if not t.type.scalar.is_int():
        raise TypeError(f"{_unwrap(what)} only supported for integers, got {t.type.scalar}")
    return t


@core.builtin
def _reduce_with_indices(input, axis, combine_fn, keep_dims=False, _semantic=None):
    """Reduce `(input, index along axis)` pairs with `combine_fn`; `axis=None` reduces everything."""
    input = _semantic.to_tensor(input)
    axis, keep_dims = _unwrap(axis), bool(_unwrap(keep_dims))
    original_rank = len(_shape_of(input))
    if axis is None:
        flat = core.reshape(input, [input.type.numel], can_reorder=True, _semantic=_semantic)
        value, index = _reduce_with_indices(flat, 0, combine_fn, False, _semantic=_semantic)
        if keep_dims:
            ones = [1] * original_rank
            value = core.reshape(value, ones, _semantic=_semantic)
            index = core.reshape(index, ones, _semantic=_semantic)
        return value, index
    shape = _shape_of(input)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"axis must be a constexpr integer or None, got {type(axis).__name__} {axis!r}")
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {len(shape)}")
    axis %= len(shape)
    index = core.arange(0, shape[axis], _semantic=_semantic)
    if len(shape) > 1:
        index = core.reshape(index, [shape[axis] if d == axis else 1 for d in range(len(shape))],
                             _semantic=_semantic)
        index = core.broadcast_to(index, shape, _semantic=_semantic)
    return core.reduce((input, index), axis, combine_fn, keep_dims=keep_dims, _semantic=_semantic)


# ------------------------------------------------------------------------------------------------
# elementwise helpers
# ------------------------------------------------------------------------------------------------

@jit
def cdiv(x, div):
    """Ceiling division of `x` by `div` (integers)."""
    return (x + div - 1) // div


@jit
def sigmoid(x):
    """Element-wise logistic sigmoid `1 / (1 + exp(-x))`."""
    return 1 / (1 + core.exp(-x))


@jit
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    """Softmax of `x` along `dim` (0 when None), stabilised by subtracting the maximum."""
    d: core.constexpr = _softmax_dim(dim)
    z = x - max(x, d, keep_dims=keep_dims)
    num = core.exp(z)
    den = sum(num, d, keep_dims=keep_dims)
    return core.fdiv(num, den, ieee_rounding)


@jit
def ravel(x, can_reorder=False):
    """`x` flattened to one dimension."""
    return core.reshape(x, [x.numel], can_reorder=can_reorder)


@jit
def swizzle2d(i, j, size_i, size_j, size_g):
    """Map row-major indices (i, j) of a size_i x size_j grid to indices that walk column-major
    inside each group of `size_g` rows (the L2-friendly tile order of grouped matmuls)."""
    ij = i * size_j + j
    size_gj = size_g * size_j  # elements in one group of size_g rows
    group_id = ij // size_gj
    off_i = group_id * size_g  # first row of this group
    size_g = core.minimum(size_i - off_i, size_g)  # the last group may have fewer rows
    ij = ij % size_gj
    new_i = off_i + ij % size_g
    new_j = ij // size_g
    return new_i, new_j


@jit
def zeros(shape, dtype):
    """A tensor of the given shape and dtype filled with 0."""
    return core.full(shape, 0, dtype)


@jit
def zeros_like(input):
    """Zeros with the shape and dtype of `input`."""
    return zeros(input.shape, input.dtype)


# ------------------------------------------------------------------------------------------------
# reductions
# ------------------------------------------------------------------------------------------------

@jit
def _argmax_combine(value1, index1, value2, index2, tie_break_left):
    if tie_break_left:
        tie = value1 == value2 and index1 < index2
    else:
        tie = False
    gt = value1 > value2 or tie
    return core.where(gt, value1, value2), core.where(gt, index1, index2)


@jit
def _argmax_combine_tie_break_left(value1, index1, value2, index2):
    return _argmax_combine(value1, index1, value2, index2, True)


@jit
def _argmax_combine_tie_break_fast(value1, index1, value2, index2):
    return _argmax_combine(value1, index1, value2, index2, False)


@jit
def _argmin_combine(value1, index1, value2, index2, tie_break_left):
    if tie_break_left:
        tie = value1 == value2 and index1 < index2
    else:
        tie = False
    lt = value1 < value2 or tie
    return core.where(lt, value1, value2), core.where(lt, index1, index2)


@jit
def _argmin_combine_tie_break_left(value1, index1, value2, index2):
    return _argmin_combine(value1, index1, value2, index2, True)


@jit
def _argmin_combine_tie_break_fast(value1, index1, value2, index2):
    return _argmin_combine(value1, index1, value2, index2, False)


@jit
def _elementwise_max(a, b):
    return core.maximum(a, b)


@jit
def _elementwise_min(a, b):
    return core.minimum(a, b)


@jit
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Maximum of `input` along `axis` (all axes when None); with `return_indices`, also the index
    of the maximum (the first one on ties when `return_indices_tie_break_left`)."""
    input = _minmax_input(input)
    if return_indices:
        if return_indices_tie_break_left:
            return _reduce_with_indices(input, axis, _argmax_combine_tie_break_left, keep_dims=keep_dims)
        else:
            return _reduce_with_indices(input, axis, _argmax_combine_tie_break_fast, keep_dims=keep_dims)
    else:
        return core.reduce(input, axis, _elementwise_max, keep_dims=keep_dims)


@jit
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the maximum of `input` along `axis`."""
    (_, ret) = max(input, axis, return_indices=True, return_indices_tie_break_left=tie_break_left,
                   keep_dims=keep_dims)
    return ret


@jit
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Minimum of `input` along `axis` (all axes when None); see `max` for `return_indices`."""
    input = _minmax_input(input)
    if return_indices:
        if return_indices_tie_break_left:
            return _reduce_with_indices(input, axis, _argmin_combine_tie_break_left, keep_dims=keep_dims)
        else:
            return _reduce_with_indices(input, axis, _argmin_combine_tie_break_fast, keep_dims=keep_dims)
    else:
        return core.reduce(input, axis, _elementwise_min, keep_dims=keep_dims)


@jit
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the minimum of `input` along `axis`."""
    (_, ret) = min(input, axis, return_indices=True, return_indices_tie_break_left=tie_break_left,
                   keep_dims=keep_dims)
    return ret


@jit
def _sum_combine(a, b):
    return a + b


@jit
def sum(input, axis=None, keep_dims=False, dtype: core.constexpr = None):
    """Sum of `input` along `axis` (all axes when None). Integers narrower than 32 bits are summed
    as (u)int32 unless `dtype` says otherwise."""
    input = _sum_input(input, dtype)
    return core.reduce(input, axis, _sum_combine, keep_dims=keep_dims)


@jit
def _xor_combine(a, b):
    return a ^ b


@jit
def xor_sum(input, axis=None, keep_dims=False):
    """Bitwise xor of the integers of `input` along `axis`."""
    input = _require_int(input, "xor_sum")
    return core.reduce(input, axis, _xor_combine, keep_dims=keep_dims)


@jit
def _or_combine(a, b):
    return a | b


@jit
def reduce_or(input, axis, keep_dims=False):
    """Bitwise or of the integers of `input` along `axis`."""
    input = _require_int(input, "reduce_or")
    return core.reduce(input, axis, _or_combine, keep_dims=keep_dims)


# ------------------------------------------------------------------------------------------------
# scans
# ------------------------------------------------------------------------------------------------

@jit
def cumsum(input, axis=0, reverse=False, dtype: core.constexpr = None):
    """Inclusive prefix sum along `axis` (from the end when `reverse`). Integers narrower than 32 bits
    are summed in 32 bits; fp16 and bf16 stay in their type (each step rounded), as in Triton 3.9."""
    input = _sum_input(input, dtype)
    return core.associative_scan(input, axis, _sum_combine, reverse)


@jit
def _prod_combine(a, b):
    return a * b


@jit
def cumprod(input, axis=0, reverse=False, dtype: core.constexpr = None):
    """Inclusive prefix product along `axis` (from the end when `reverse`); integers narrower than
    32 bits are multiplied in 32 bits of the same signedness, as Triton 3.9 does (and as `cumsum`); fp16 and bf16 stay in their type."""
    input = _sum_input(input, dtype)
    return core.associative_scan(input, axis, _prod_combine, reverse)


# ------------------------------------------------------------------------------------------------
# sort, topk, flip: bitonic networks on `x` reshaped to a hypercube [2, 2, ..., 2]
# ------------------------------------------------------------------------------------------------

@jit
def _compare_and_swap(h, flip, bit: core.constexpr):
    """One layer of the network: every element meets its partner across hypercube bit `bit`; the
    element on the low side keeps the minimum unless `flip` says this block sorts downwards."""
    idtype = _signed_int_like(h.dtype)
    ih = h.to(idtype, bitcast=True)
    # a ^ (a ^ b) == b: xor-reducing the size-2 axis and xoring it back gives each element its partner.
    partner = (ih ^ xor_sum(ih, _innermost_axis(h, bit), True)).to(h.dtype, bitcast=True)
    is_high_side = _indicator(_log2(h.numel), bit)
    return core.where((h > partner) != (flip ^ is_high_side), partner, h)


@jit
def _bitonic_merge_hypercube(h, stage: core.constexpr, order: core.constexpr):
    """Merge runs of 2**(stage-1) into sorted runs of 2**stage. `order`: 0 ascending, 1 descending,
    2 alternating (run r sorts downwards when bit `stage` of its index is set)."""
    if order == 2:
        flip = _indicator(_log2(h.numel), stage)
    else:
        flip: core.constexpr = order
    for i in core.static_range(stage):
        h = _compare_and_swap(h, flip, stage - 1 - i)
    return h


@jit
def sort_impl(x, k: core.constexpr = None, dim: core.constexpr = None, descending: core.constexpr = False):
    """Bitonic sort of the last dimension of `x`; with `k`, keep only the first `k` of the sorted
    order (bitonic top-k: after sorting runs of k, the max/min of each pair of runs halves the data)."""
    log_n: core.constexpr = _minor_dim_log2(x, dim)
    if k is None:
        log_k: core.constexpr = log_n
    else:
        log_k: core.constexpr = _top_k_log2(k, log_n)
    if log_k == 0:
        # One element per row (k == 1, or a dimension of size 1): a reduction, since the network
        # below would shrink the hypercube to a 0-d block.
        if descending:
            out = max(x, axis=_last_axis(x), keep_dims=True)
        else:
            out = min(x, axis=_last_axis(x), keep_dims=True)
    else:
        h = core.reshape(x, _hypercube_shape(x))
        for i in core.static_range(1, log_k + 1):
            h = _bitonic_merge_hypercube(h, i, _merge_order(i, log_n, descending))
        for i in core.static_range(log_k + 1, log_n + 1):
            if descending:
                h = core.reduce(h, _innermost_axis(h, log_k), _elementwise_max)
            else:
                h = core.reduce(h, _innermost_axis(h, log_k), _elementwise_min)
            h = _bitonic_merge_hypercube(h, log_k, _merge_order(i, log_n, descending))
        out = core.reshape(h, _top_k_shape(x, log_k))
    return out


@jit
def sort(x, dim: core.constexpr = None, descending: core.constexpr = False):
    """`x` sorted along its last dimension (whose size must be a power of two)."""
    return sort_impl(x, dim=dim, descending=descending)


@jit
def topk(x, k: core.constexpr, dim: core.constexpr = None, descending: core.constexpr = True):
    """The `k` largest values of the last dimension of `x`, largest first (with
    `descending=False`: the `k` smallest, smallest first)."""
    return sort_impl(x, k=k, dim=dim, descending=descending)


@jit
def bitonic_merge(x, dim: core.constexpr = None, descending: core.constexpr = False):
    """Sort a last dimension that holds a bitonic sequence (one merge stage of the network)."""
    log_n: core.constexpr = _minor_dim_log2(x, dim)
    h = core.reshape(x, _hypercube_shape(x))
    h = _bitonic_merge_hypercube(h, log_n, _merge_order(log_n, log_n, descending))
    return core.reshape(h, x.shape)


@jit
def flip(x, dim=None):
    """`x` reversed along `dim` (the last dimension when None); that size must be a power of two."""
    d: core.constexpr = _flip_dim(x, dim)
    idtype = _signed_int_like(x.dtype)
    # Reversing an index of n bits is flipping every bit: swap across each size-2 axis in turn.
    y = core.reshape(x.to(idtype, bitcast=True), _split_dim_in_bits(x, d))
    for i in core.static_range(_dim_log2(x, d)):
        y = y ^ xor_sum(y, d + i, True)
    return core.reshape(y, x.shape).to(x.dtype, bitcast=True)


@jit
def interleave(a, b):
    """Interleave `a` and `b` along their last dimension: [a0, b0, a1, b1, ...]."""
    c = core.join(a, b)
    return core.reshape(c, _interleaved_shape(c))
