"""Kernel parameter packing, checked byte for byte without a GPU."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from tilejit_nvidia.arg_packing import ArgPacker, bf16_bits, pointer_of


class FakeTensor:
    """A torch-like object: only data_ptr()."""

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


class FakeCudaArray:
    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (4,), "typestr": "<f4", "version": 3}


def param_bytes(packer: ArgPacker, index: int, size: int) -> bytes:
    """The bytes kernelParams[index] points at: read through the pointer array, as the driver does."""
    import ctypes
    return ctypes.string_at(packer.pointers[index], size)


def test_every_parameter_is_reachable_through_its_pointer():
    packer = ArgPacker(["*fp32", "i1", "i8", "fp16", "i64", "bf16", "fp32", "fp64", "u32", "*i8"])
    packer.pack(FakeTensor(0x7000_0000_1000), True, -3, 1.5, -(2 ** 40), 1.0, 2.5, -3.25, 2 ** 32 - 1, None)
    assert param_bytes(packer, 0, 8) == struct.pack("<Q", 0x7000_0000_1000)
    assert param_bytes(packer, 1, 1) == b"\x01"
    assert param_bytes(packer, 2, 1) == struct.pack("<b", -3)
    assert param_bytes(packer, 3, 2) == np.float16(1.5).tobytes()
    assert param_bytes(packer, 4, 8) == struct.pack("<q", -(2 ** 40))
    assert param_bytes(packer, 5, 2) == struct.pack("<H", 0x3F80)  # bf16(1.0)
    assert param_bytes(packer, 6, 4) == struct.pack("<f", 2.5)
    assert param_bytes(packer, 7, 8) == struct.pack("<d", -3.25)
    assert param_bytes(packer, 8, 4) == struct.pack("<I", 2 ** 32 - 1)
    assert param_bytes(packer, 9, 8) == bytes(8)
    # Natural C alignment of each field inside the one buffer.
    assert packer.offsets == (0, 8, 9, 10, 16, 24, 28, 32, 40, 48)


def test_pointer_sources():
    assert pointer_of(None) == 0
    assert pointer_of(0xDEAD0000) == 0xDEAD0000
    assert pointer_of(FakeCudaArray(0xBEEF00)) == 0xBEEF00
    with pytest.raises(ValueError, match="host"):
        pointer_of(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="got str"):
        pointer_of("not a pointer")


def test_dlpack_pointer_of_a_host_array_is_refused():
    # NumPy exports DLPack with a CPU device; the packer must not pass a host address to a kernel.
    class DLPackOnly:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

    with pytest.raises(ValueError, match="not a CUDA device"):
        pointer_of(DLPackOnly(np.arange(4, dtype=np.float32)))


@pytest.mark.parametrize("value", [0.0, 1.0, -2.5, 3.14159, 65504.0, 1e-30, 3e38, float("inf"), -float("inf")])
def test_bf16_bits_match_round_to_nearest_even(value):
    as_f32 = np.array([value], dtype=np.float32).view(np.uint32)[0]
    expected = (int(as_f32) + 0x7FFF + ((int(as_f32) >> 16) & 1)) >> 16
    assert bf16_bits(value) == expected
    # and the result is the nearest bf16: truncating the f32 is off by at most one ulp
    assert abs(bf16_bits(value) - (int(as_f32) >> 16)) <= 1


def test_bf16_nan_stays_nan():
    assert bf16_bits(float("nan")) & 0x7F80 == 0x7F80 and bf16_bits(float("nan")) & 0x7F


def test_wrong_arguments_name_the_parameter():
    packer = ArgPacker(["*fp32", "i8", "fp32"], ["x_ptr", "n", "alpha"])
    error = packer.explain_failure((FakeTensor(16), 300, 1.0), "my_kernel")
    assert isinstance(error, ValueError) and "'n' (i8)" in str(error) and "my_kernel" in str(error)
    error = packer.explain_failure((FakeTensor(16), 1, "fast"), "my_kernel")
    assert isinstance(error, TypeError) and "'alpha' (fp32)" in str(error)
    error = packer.explain_failure((FakeTensor(16),), "my_kernel")
    assert isinstance(error, TypeError) and "takes 3 runtime arguments (x_ptr, n, alpha), got 1" in str(error)
    with pytest.raises(struct.error):
        packer.pack(FakeTensor(16), 300, 1.0)


def test_unsupported_type_is_rejected_up_front():
    with pytest.raises(TypeError, match="cannot pass a parameter of type 'fp8e4nv'"):
        ArgPacker(["*fp32", "fp8e4nv"])


def test_empty_signature_packs_nothing():
    packer = ArgPacker([])
    packer.pack()
    assert packer.params_address != 0


@pytest.mark.parametrize("value,expected", [(65520.0, np.inf), (-1e6, -np.inf)])
def test_fp16_past_the_range_becomes_infinity_as_in_c(value, expected):
    """struct's 'e' refuses a float that rounds past fp16's range; the launcher's slow path converts it
    as C and Triton's launcher do (Triton's test_float_annotation[float16-65520.0-inf])."""
    packer = ArgPacker(["*fp32", "fp16"], ["x_ptr", "val"])
    with pytest.raises(OverflowError):
        packer.pack(FakeTensor(16), value)
    packer.pack_checked((FakeTensor(16), value), "my_kernel")
    offset = packer.offsets[1]
    assert np.frombuffer(bytes(packer.buffer)[offset:offset + 2], np.float16)[0] == expected
    packer.pack(FakeTensor(16), 65519.0)   # rounds down to the largest fp16: the fast path packs it
    assert np.frombuffer(bytes(packer.buffer)[offset:offset + 2], np.float16)[0] == 65504.0
    with pytest.raises(TypeError, match="'val'"):
        packer.pack_checked((FakeTensor(16), "big"), "my_kernel")


def test_packers_of_one_signature_share_code_not_buffers():
    # The generated `pack` is compiled once per signature (a launcher makes a packer per launching
    # thread); each packer still writes only its own buffer.
    first, second = ArgPacker(["*fp32", "i32"]), ArgPacker(["*fp32", "i32"])
    assert first.pack.__code__ is second.pack.__code__
    first.pack(FakeTensor(0x1000), 7)
    second.pack(FakeTensor(0x2000), -9)
    assert param_bytes(first, 0, 8) == struct.pack("<Q", 0x1000) and param_bytes(first, 1, 4) == struct.pack("<i", 7)
    assert param_bytes(second, 0, 8) == struct.pack("<Q", 0x2000) and param_bytes(second, 1, 4) == struct.pack("<i", -9)
