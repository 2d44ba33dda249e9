"""Scans whose combine function is not commutative, so the order of its operands shows, and
reductions/scans over operands of different widths.

Triton's contract: `combine(earlier, later)` in scan order (for `reverse=True`, earlier means a higher
index). The (value, index) running maximum below keeps the later index on ties; its index result is
int64 and so lives in another layout than the fp32 value unless the compiler keeps them together (on
the H100, Triton's test_scan2d cummax cases read indices from the wrong threads).
"""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from scan_kernels import cummax_index_kernel, np_cummax_index

RNG = np.random.default_rng(5)


@tilejit.jit
def _keep_later(a, b):
    return b


@tilejit.jit
def _keep_earlier(a, b):
    return a


@pytest.mark.parametrize("shape, axis, num_warps", [((32, 16), 1, 4), ((2, 1024), 1, 4), ((2, 1024), 1, 16),
                                                    ((2, 1024), 0, 16), ((32, 16), 0, 4), ((1, 1024), 1, 4)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_running_max_with_index(device, shape, axis, num_warps, reverse, dtype):
    if dtype == np.int32:
        x = RNG.integers(-6, 7, shape).astype(dtype)   # many ties: the later index must win
    else:
        x = RNG.standard_normal(shape).astype(dtype)
    z = device.zeros(shape, np.int64)
    cummax_index_kernel[(1,)](device.tensor(x), z, M=shape[0], N=shape[1], AXIS=axis, REVERSE=reverse,
                               num_warps=num_warps)
    np.testing.assert_array_equal(device.numpy(z), np_cummax_index(x, axis, reverse))


@tilejit.jit
def _first_last_kernel(x_ptr, later_ptr, earlier_ptr, N: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(later_ptr + offs, tl.associative_scan(x, 0, _keep_later, reverse=REVERSE))
    tl.store(earlier_ptr + offs, tl.associative_scan(x, 0, _keep_earlier, reverse=REVERSE))


@pytest.mark.parametrize("n", [8, 256, 2048])
@pytest.mark.parametrize("reverse", [False, True])
def test_operand_order_of_the_combine(device, n, reverse):
    x = RNG.standard_normal(n).astype(np.float32)
    later, earlier = device.zeros(n, np.float32), device.zeros(n, np.float32)
    _first_last_kernel[(1,)](device.tensor(x), later, earlier, N=n, REVERSE=reverse)
    np.testing.assert_array_equal(device.numpy(later), x)   # combine(acc, x_i) = x_i: each element itself
    np.testing.assert_array_equal(device.numpy(earlier), np.full(n, x[-1] if reverse else x[0]))


@tilejit.jit
def _argmax_kernel(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.argmax(x, axis=0))
    tl.store(out_ptr + 1, tl.argmin(x, axis=0))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.float16, np.int8])
@pytest.mark.parametrize("num_warps", [4, 16])
def test_argmax_over_wide_and_narrow_values(device, dtype, num_warps):
    """The value and its int32 index cross warps through shared memory in their own widths: with
    fp64 values, the indices once overwrote half of them (Triton's test_reduce argmax float64)."""
    n = 2048
    if np.issubdtype(dtype, np.integer):
        x = RNG.integers(-50, 50, n).astype(dtype)   # ties: the first index wins
    else:
        x = RNG.standard_normal(n).astype(dtype)
    out = device.zeros(2, np.int32)
    _argmax_kernel[(1,)](device.tensor(x), out, N=n, num_warps=num_warps)
    np.testing.assert_array_equal(device.numpy(out), [np.argmax(x), np.argmin(x)])


@tilejit.jit
def _half_scans_kernel(x_ptr, s_ptr, p_ptr, DT: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs).to(DT)
    s = tl.cumsum(x, 0)
    p = tl.cumprod(x, 0, reverse=True)
    tl.static_assert(s.dtype == DT, "Triton 3.9: a scan of fp16/bf16 keeps the type")
    tl.static_assert(p.dtype == DT, "Triton 3.9: a scan of fp16/bf16 keeps the type")
    tl.store(s_ptr + offs, s.to(tl.float32))
    tl.store(p_ptr + offs, p.to(tl.float32))


@pytest.mark.parametrize("dt", [tl.bfloat16, tl.float16])
def test_scans_of_half_types_keep_their_type(device, dt):
    n = 64
    x = RNG.integers(-2, 3, n).astype(np.float32)         # small integers: every partial sum is exact
    px = RNG.choice([1.0, -1.0, 2.0, 0.5], n).astype(np.float32)
    px[:-8] = 1.0                                          # products stay exact in 8 mantissa bits
    s, p, unused = device.zeros(n, np.float32), device.zeros(n, np.float32), device.zeros(n, np.float32)
    _half_scans_kernel[(1,)](device.tensor(x), s, unused, DT=dt, N=n)
    np.testing.assert_array_equal(device.numpy(s), np.cumsum(x))
    _half_scans_kernel[(1,)](device.tensor(px), unused, p, DT=dt, N=n)
    np.testing.assert_array_equal(device.numpy(p), np.cumprod(px[::-1])[::-1])
