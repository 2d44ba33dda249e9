"""`acc += tl.dot(a, b)` and `tl.dot(a, b) + acc` over a K loop, in fp16 (fp32 sums) and int8 (int32
sums). On the GPU the add is folded into the dot's accumulator, as Triton does
(`tests/gpu/test_combine_dot_add.py` checks the IR); the values are checked here on every backend."""
import numpy as np
import pytest

from dot_kernels import add_accumulated_matmul

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("dtype", ["float16", "int8"])
@pytest.mark.parametrize("dot_first, also_read", [(False, False), (True, False), (False, True)])
def test_dot_accumulated_by_an_add(device, dtype, dot_first, also_read):
    M, K, N = 45, 128, 64
    if dtype == "int8":
        a = RNG.integers(-8, 8, (M, K)).astype(np.int8)
        b = RNG.integers(-8, 8, (K, N)).astype(np.int8)
        d = RNG.integers(-1000, 1000, (64, N)).astype(np.int32)
    else:
        a = RNG.uniform(-1, 1, (M, K)).astype(np.float16)
        b = RNG.uniform(-1, 1, (K, N)).astype(np.float16)
        d = RNG.uniform(-1, 1, (64, N)).astype(np.float32)
    out = device.zeros((64, N), d.dtype)
    add_accumulated_matmul[(1,)](device.tensor(a), device.tensor(b), device.tensor(d), out, M, K=K, N=N, BM=64,
                                 BN=N, BK=32, DOT_FIRST=dot_first, ALSO_READ=also_read)
    product = a.astype(np.int64 if dtype == "int8" else np.float64) @ b.astype(np.int64 if dtype == "int8" else np.float64)
    want = d[:M] + product * (2 if also_read else 1)
    got = device.numpy(out)
    if dtype == "int8":
        np.testing.assert_array_equal(got[:M], want)
    else:
        np.testing.assert_allclose(got[:M], want, rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(got[M:], 0)
