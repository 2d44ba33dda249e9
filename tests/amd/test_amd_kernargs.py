"""Kernarg layout and packing, checked byte for byte against bytes built here with `struct`.

Expected offsets come from the AMDGPU ABI (each explicit argument at its natural alignment; code
object v5 implicit arguments at fixed places after them), not from tilejit's code, so a wrong offset
in either the metadata reading or the packing fails these tests.
"""
from __future__ import annotations

import struct

import pytest

import amd_kernels
from tilejit_amd import toolchain
from tilejit_amd.elf import inspect_hsaco
from tilejit.errors import ArgumentTypeError, ArgumentValueError
from tilejit_amd.kernargs import KernargLayout, KernelArgumentError, encode_scalar

# Natural alignment of (ptr, i32, i64, f32, f16, ptr, i8, f64, i16) from offset 0.
ABI_OFFSETS = [0, 8, 16, 24, 28, 32, 40, 48, 56]
ABI_FORMATS = ["<Q", "<i", "<q", "<f", "<e", "<Q", "<b", "<d", "<h"]
IMPLICIT_BASE = 64  # explicit arguments end at 58; implicit ones start 8-aligned


class FakeTensor:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


class CudaArrayInterface:
    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (4,), "typestr": "<f4",
                                         "version": 3}


def mixed_kernel(use_implicit_args: bool):
    obj = toolchain.llir_to_object(amd_kernels.build_mixed_args(use_implicit_args), "gfx942")
    return inspect_hsaco(obj).kernel("mixed_kernel")


VALUES = [0x7F00_0000_1000, -5, 2 ** 40 + 3, 1.5, 0.333, FakeTensor(0x7F00_0000_2000), -2, 2.25, -300]
RAW_VALUES = [0x7F00_0000_1000, -5, 2 ** 40 + 3, 1.5, 0.333, 0x7F00_0000_2000, -2, 2.25, -300]


def expected_explicit(size: int) -> bytearray:
    expected = bytearray(size)
    for offset, fmt, value in zip(ABI_OFFSETS, ABI_FORMATS, RAW_VALUES):
        struct.pack_into(fmt, expected, offset, value)
    return expected


def test_layout_offsets_follow_the_abi():
    layout = KernargLayout.from_metadata(mixed_kernel(False), amd_kernels.MIXED_SIGNATURE)
    assert [slot.offset for slot in layout.explicit] == ABI_OFFSETS
    assert [slot.size for slot in layout.explicit] == [8, 4, 8, 4, 2, 8, 1, 8, 2]
    assert [slot.name for slot in layout.explicit] == list(amd_kernels.MIXED_SIGNATURE)
    assert layout.size == 60 and layout.explicit_size == 58 and layout.hidden == ()


def test_pack_explicit_arguments_byte_for_byte():
    layout = KernargLayout.from_metadata(mixed_kernel(False), amd_kernels.MIXED_SIGNATURE)
    assert layout.pack(VALUES, grid=(4, 1, 1), block=(64, 1, 1)) == bytes(expected_explicit(60))


def test_pack_fills_hidden_arguments_as_the_hip_runtime_does():
    layout = KernargLayout.from_metadata(mixed_kernel(True), amd_kernels.MIXED_SIGNATURE)
    packed = layout.pack(VALUES, grid=(7, 3, 2), block=(256, 1, 1), dynamic_lds=0)
    expected = expected_explicit(IMPLICIT_BASE + 256)
    struct.pack_into("<III", expected, IMPLICIT_BASE + 0, 7, 3, 2)       # hidden_block_count_x/y/z
    struct.pack_into("<HHH", expected, IMPLICIT_BASE + 12, 256, 1, 1)    # hidden_group_size_x/y/z
    struct.pack_into("<HHH", expected, IMPLICIT_BASE + 18, 0, 0, 0)      # hidden_remainder_x/y/z
    struct.pack_into("<QQQ", expected, IMPLICIT_BASE + 40, 0, 0, 0)      # hidden_global_offset_x/y/z
    struct.pack_into("<H", expected, IMPLICIT_BASE + 64, 3)              # hidden_grid_dims
    assert packed == bytes(expected)


def test_constexpr_parameters_are_not_kernel_arguments():
    signature = dict(amd_kernels.MIXED_SIGNATURE)
    signature = {**dict(list(signature.items())[:2]), "BLOCK": "constexpr", **dict(list(signature.items())[2:])}
    layout = KernargLayout.from_metadata(mixed_kernel(False), signature)
    assert "BLOCK" not in [slot.name for slot in layout.explicit]
    assert layout.pack(VALUES) == bytes(expected_explicit(60))


def test_layout_from_the_raw_metadata_map_without_a_signature():
    kernel = mixed_kernel(False)
    layout = KernargLayout.from_metadata(kernel.metadata)
    assert [slot.type for slot in layout.explicit] == ["*i8", "i32", "i64", "i32", "i16", "*i8", "i8", "i64",
                                                       "i16"]
    assert [slot.offset for slot in layout.explicit] == ABI_OFFSETS


def test_pointer_sources():
    assert encode_scalar(CudaArrayInterface(0xABC000), "*fp32", "p") == struct.pack("<Q", 0xABC000)
    assert encode_scalar(FakeTensor(0x1234), "*fp16", "p") == struct.pack("<Q", 0x1234)
    assert encode_scalar(None, "*fp16", "p") == bytes(8)
    np = pytest.importorskip("numpy")
    with pytest.raises(ArgumentValueError, match="'p' is a host array"):
        encode_scalar(np.zeros(4), "*fp32", "p")


def test_scalar_encodings():
    assert encode_scalar(-2.5, "bf16", "x") == struct.pack("<H", 0xC020)
    assert encode_scalar(1.0 + 2 ** -9, "bf16", "x") == struct.pack("<H", 0x3F80)  # ties to even
    assert encode_scalar(0.1, "fp16", "x") == struct.pack("<e", 0.1)
    assert encode_scalar(True, "i1", "x") == b"\x01"
    assert encode_scalar(2 ** 32 - 1, "u32", "x") == b"\xff\xff\xff\xff"


def test_argument_errors_name_the_parameter():
    layout = KernargLayout.from_metadata(mixed_kernel(False), amd_kernels.MIXED_SIGNATURE)
    with pytest.raises(KernelArgumentError, match="takes 9 arguments.*got 8"):
        layout.pack(VALUES[:8])
    bad = list(VALUES)
    bad[1] = 2 ** 31
    with pytest.raises(ArgumentValueError, match="'n': 2147483648 does not fit in i32"):
        layout.pack(bad)
    bad = list(VALUES)
    bad[3] = "fast"
    with pytest.raises(ArgumentTypeError, match=r"'scale' must be a number \(fp32\)"):
        layout.pack(bad)


def test_signature_that_disagrees_with_the_code_object():
    kernel = mixed_kernel(False)
    wrong = dict(amd_kernels.MIXED_SIGNATURE, n="i64")
    with pytest.raises(KernelArgumentError, match="'n' of type i64 takes 8 bytes.*gives it 4"):
        KernargLayout.from_metadata(kernel, wrong)
    with pytest.raises(KernelArgumentError, match="9 arguments in its code object.*lists 2"):
        KernargLayout.from_metadata(kernel, ["*fp32", "i32"])
