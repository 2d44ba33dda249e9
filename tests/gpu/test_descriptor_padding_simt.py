"""A tensor descriptor made with `padding_option="nan"`, through the NVIDIA lowering: the kernel's
cuda:90 LLVM IR run on the host (simt_runner), Triton's test_tensor_descriptor_padding case (a 48x48
tensor read in 32x32 blocks into a 64x64 one). The zero case is the same kernel with the default."""
import os
import sys

import numpy as np
import pytest

from simt_runner import run

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "language")))
from descriptor_kernels import _abs_through_returned_descriptors, _copy_through_device_descriptors, _padded  # noqa: E402


@pytest.mark.parametrize("padding", ["zero", "nan"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_out_of_bounds_elements_read_as_the_padding_on_the_gpu_lowering(dtype, padding):
    x = np.arange(48 * 48, dtype=dtype).reshape(48, 48)
    out = np.full((64, 64), 7, dtype)
    kernel = _copy_through_device_descriptors.warmup(x, out, 48, 48, 64, 64, BM=32, BN=32, PADDING=padding,
                                                     grid=(2, 2), target="cuda:90", num_warps=4)
    run(kernel.asm["llir"], [x, out, 48, 48, 64, 64], 4, grid=(2, 2), shared=kernel.metadata["shared"])
    np.testing.assert_array_equal(out, _padded(x, (64, 64), padding))


def test_descriptors_returned_by_a_noinline_function_on_the_gpu_lowering():
    """Triton's test_tensor_descriptor_return_value through the NVIDIA lowering: the helper's `tt.call`
    returns the descriptors' base, shape and strides, and the caller makes them again."""
    x = np.random.default_rng(2).standard_normal((32, 128)).astype(np.float32)
    out = np.zeros((32, 128), np.float32)
    kernel = _abs_through_returned_descriptors.warmup(out, x, 32, 128, M_BLOCK=8, N_BLOCK=32, grid=(4, 4),
                                                      target="cuda:90", num_warps=4)
    assert "tt.call" in kernel.asm["ttir"]
    run(kernel.asm["llir"], [out, x, 32, 128], 4, grid=(4, 4), shared=kernel.metadata["shared"])
    np.testing.assert_array_equal(out, np.abs(x))
