"""`tl.inline_asm_elementwise` and the special registers built on it (`tl.extra.cuda.globaltimer`,
`smid`): values against NumPy on a CUDA GPU; on the interpreter, a compile error at the user's line
(PTX has no meaning there, as under Triton's interpreter). The kernels are Triton's own test_core
cases (test_inline_asm*, test_globaltimer), written out in inline_asm_kernels.py."""
import numpy as np
import pytest

import tilejit
from inline_asm_kernels import (float_in_int_register_kernel, funnel_shift_kernel, half_pairs_kernel,
                                packed_bytes_kernel, packed_two_outputs_kernel, special_registers_kernel,
                                through_pointers_kernel, two_outputs_kernel)

RNG = np.random.default_rng(3)


def _ptx_only(device):
    if device.name == "hip":
        pytest.skip("the assembly in these kernels is PTX")


def test_funnel_shift(device):
    _ptx_only(device)
    x = RNG.integers(0, 2**32, 128, dtype=np.uint32)
    y = RNG.integers(0, 2**32, 128, dtype=np.uint32)
    z = device.zeros(128, np.int32)
    if not device.is_gpu:
        with pytest.raises(tilejit.CompilationError) as info:
            funnel_shift_kernel[(1,)](device.tensor(x), device.tensor(y), z, n=17, BLOCK=128)
        assert "interpreter" in str(info.value) and info.value.line is not None
        assert "inline_asm_elementwise" in (info.value.source_line or str(info.value))
        return
    funnel_shift_kernel[(1,)](device.tensor(x.view(np.int32)), device.tensor(y.view(np.int32)), z, n=17, BLOCK=128)
    expected = ((y.astype(np.uint64) << 17) | (x.astype(np.uint64) >> 15)).astype(np.uint32)
    np.testing.assert_array_equal(device.numpy(z).view(np.uint32), expected)


def _gpu_only(device):
    _ptx_only(device)
    if not device.is_gpu:
        pytest.skip("inline assembly runs on a GPU backend (the interpreter's refusal: test_funnel_shift)")


@pytest.mark.parametrize("block", [512, 64])   # 64 elements at 4 warps: fewer than 4 a thread, padded
def test_four_bytes_to_a_register(device, block):
    _gpu_only(device)
    x = RNG.integers(0, 256, block, dtype=np.uint8)
    y = device.zeros(block, np.int8)
    packed_bytes_kernel[(1,)](device.tensor(x.view(np.int8)), y, BLOCK=block)
    np.testing.assert_array_equal(device.numpy(y).view(np.uint8), ((x & 0x1F) << 3).astype(np.uint8))


def test_assembly_with_memory_effects(device):
    _gpu_only(device)
    x = RNG.integers(0, 32, 128, dtype=np.uint8)
    y = device.zeros(128, np.int8)
    through_pointers_kernel[(1,)](device.tensor(x.view(np.int8)), y, BLOCK=128)
    np.testing.assert_array_equal(device.numpy(y).view(np.uint8), (x << 3).astype(np.uint8))


def test_two_outputs(device):
    _gpu_only(device)
    a = RNG.integers(0, 2**32, 128, dtype=np.uint32)
    b = RNG.integers(0, 2**32, 128, dtype=np.uint32)
    c, d = device.zeros(128, np.int32), device.zeros(128, np.int32)
    two_outputs_kernel[(1,)](device.tensor(a.view(np.int32)), device.tensor(b.view(np.int32)), c, d, BLOCK=128)
    np.testing.assert_array_equal(device.numpy(c).view(np.uint32), a - b)
    np.testing.assert_array_equal(device.numpy(d).view(np.uint32), b - a)


def test_packed_two_outputs_of_two_types(device):
    _gpu_only(device)
    a = RNG.integers(0, 256, 512, dtype=np.uint8)
    b = (RNG.standard_normal(512) * 200).astype(np.float32)
    c, d = device.zeros(512, np.int32), device.zeros(512, np.float32)
    packed_two_outputs_kernel[(1,)](device.tensor(a.view(np.int8)), device.tensor(b), c, d, BLOCK=512)
    np.testing.assert_array_equal(device.numpy(c), a.astype(np.int32))
    np.testing.assert_array_equal(device.numpy(d), np.maximum(a.astype(np.float32), b))


def test_half_pairs_and_floats_in_integer_registers(device):
    _gpu_only(device)
    x = RNG.standard_normal(256).astype(np.float16)
    y = device.zeros(256, np.float16)
    half_pairs_kernel[(1,)](device.tensor(x), y, BLOCK=256)
    np.testing.assert_array_equal(device.numpy(y), x + x)
    xf = RNG.standard_normal(256).astype(np.float32)
    yf = device.zeros(256, np.float32)
    float_in_int_register_kernel[(1,)](device.tensor(xf), yf, BLOCK=256)
    np.testing.assert_array_equal(device.numpy(yf), xf * 2)


def test_globaltimer_and_smid(device):
    _gpu_only(device)
    out = device.zeros(128, np.float32)
    elapsed, sm = device.zeros(1, np.int64), device.full((1,), -1, np.int32)
    kernel = special_registers_kernel[(1,)](out, elapsed, sm, N=1000)
    np.testing.assert_array_equal(device.numpy(out), np.full(128, 1000, np.float32))
    assert device.numpy(elapsed)[0] > 0
    assert 0 <= device.numpy(sm)[0] < 1024
    assert kernel.asm["ptx"].count("%globaltimer") == 2   # one read before the loop, one after
