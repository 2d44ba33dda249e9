"""Dots with several batch axes (Triton 3.x's rank >= 4 `tl.dot`, and `tl.trans` without dims on them),
compiled for cuda:75 and run on the host by `simt_runner`: the batch axes are reshaped into one for a
3-D dot, which sm_75 computes with FMAs (it has no mma.sync form here, and the host runs no matrix
instruction), so the whole kernel, reshapes and transposes included, runs here. On sm_80 and later
the 3-D dot is mma.sync's (tests/gpu/test_batched_mma.py). Triton's test_dot_multidim failed to
compile on the H100 (trans() without dims needed a 2-D tensor; dots took rank 2 or 3 only)."""
import os
import sys

import numpy as np
import pytest

from simt_runner import run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from dot_kernels import multi_batch_dot  # noqa: E402

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _bf16_bits(x):
    """float32 values that are bf16 values, as the bf16 bit patterns (uint16)."""
    return (x.view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("batch, size, trans_a, trans_b, use_acc", [
    ((2, 2), 32, True, False, False),     # test_dot_multidim[True-False-4]'s shapes
    ((2, 2), 16, False, True, True),
    ((2, 1, 2), 16, True, True, False)])
def test_dot_with_several_batch_axes_on_cuda_code(batch, size, trans_a, trans_b, use_acc):
    """bf16 operands (the host runs the bf16 conversions; fp16 ones would need compiler-rt's)."""
    M = N = K = size
    a = RNG.integers(-4, 5, batch + (M, K)).astype(np.float32)
    b = RNG.integers(-4, 5, batch + (K, N)).astype(np.float32)
    c = RNG.integers(-8, 9, batch + (M, N)).astype(np.float32)
    a_in = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans_a else a
    b_in = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
    kernel = multi_batch_dot.warmup("*bf16", "*bf16", "*fp32", "*fp32", BATCH=batch, M=M, N=N, K=K,
                                    TRANS_A=trans_a, TRANS_B=trans_b, USE_ACC=use_acc, num_warps=4, grid=(1,),
                                    target="cuda:75")
    assert "tt.dot" in kernel.asm["ttir"] and kernel.asm["ttir"].count("tt.reshape") >= 3
    out = np.zeros(c.size, np.float32)
    run(kernel.asm["llir"], [_bf16_bits(a_in), _bf16_bits(b_in), c, out], 4)
    expected = a @ b + (c if use_acc else 0)
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)
