"""Kernels of `test_semantics.py`: Triton behaviours the frontend once got wrong (negative range
steps, tuple parameters, float `other` for integer loads, full reductions with keep_dims)."""
import tilejit.language as tl
from tilejit.runtime.jit import jit


@jit
def negative_step(out_ptr, start, STEP: tl.constexpr):
    total = 0
    count = 0
    for j in range(start, 0, STEP):
        total += j
        count += 1
    tl.store(out_ptr, total)
    tl.store(out_ptr + 1, count)


@jit
def zero_step(out_ptr, n):
    for j in range(0, n, 0):
        tl.store(out_ptr, j)


@jit
def float_other_for_int_load(src_ptr, dst_ptr, OTHER: tl.constexpr):
    offs = tl.arange(0, 8)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < 4, other=OTHER))


@jit
def reduce_all_keep_dims(x_ptr, out_ptr):
    offs = tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :]
    r = tl.sum(tl.load(x_ptr + offs), axis=None, keep_dims=True)
    tl.static_assert(len(r.shape) == 2, "keep_dims keeps the rank")
    tl.store(out_ptr + tl.zeros([1, 1], tl.int32), r)


@jit
def _scaled_pair_sum(pair, scale_and_size):
    # scale_and_size[1] is a constexpr element: usable as an arange bound in the callee.
    return (pair[0] + pair[1]) * scale_and_size[0] + tl.arange(0, scale_and_size[1])


@jit
def tuple_params(ptrs, n, meta, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(ptrs[0] + offs, mask=mask)
    y = tl.load(ptrs[1] + offs, mask=mask)
    tl.store(ptrs[2] + offs, _scaled_pair_sum((x, y), meta), mask=mask)


@jit
def nested_tuple_param(out_ptr, pairs):
    (a, b), c = pairs
    tl.store(out_ptr, a + b * c)


@jit
def cast_through_fp8e4b15(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr).to(tl.float8e4b15).to(tl.float32))


@jit
def copy_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr))


@jit
def copy_kernel_plus_one(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr) + tl.load(x_ptr))


@jit
def unsigned_offset(x_ptr, out_ptr, off):
    tl.store(out_ptr, tl.load(x_ptr + off))


@jit
def fp8_plus_int_tensor(x_ptr, i_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr) + tl.load(i_ptr))
