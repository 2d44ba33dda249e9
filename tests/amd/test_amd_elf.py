"""Reading hsaco files: ELF header, kernel symbols, and the msgpack metadata note."""
from __future__ import annotations

import io

import llvmlite.binding as llvm
import pytest
from elftools.elf.elffile import ELFFile

import amd_kernels
from amd_support import LLD_PROBLEM, requires_lld
from tilejit.errors import CompilationError
from tilejit_amd import toolchain
from tilejit_amd.elf import EM_AMDGPU, InvalidHsacoError, inspect_hsaco
from tilejit_amd.targets import SUPPORTED_ARCHS


@pytest.fixture(scope="module")
def vector_add_hsaco():
    if LLD_PROBLEM:
        pytest.skip(LLD_PROBLEM)
    return {arch: toolchain.compile_llir(amd_kernels.build_vector_add(), arch).hsaco
            for arch in ("gfx942", "gfx1100")}


def elf_symbols(data: bytes) -> dict[str, str]:
    """name -> symbol type, read straight from pyelftools (independently of inspect_hsaco)."""
    elf = ELFFile(io.BytesIO(data))
    table = elf.get_section_by_name(".dynsym") or elf.get_section_by_name(".symtab")
    return {s.name: s["st_info"]["type"] for s in table.iter_symbols() if s.name}


@requires_lld
@pytest.mark.parametrize("arch,wave", [("gfx942", 64), ("gfx1100", 32)])
def test_vector_add_hsaco_header_symbols_and_metadata(vector_add_hsaco, arch, wave):
    data = vector_add_hsaco[arch]
    info = inspect_hsaco(data)
    assert info.e_machine == EM_AMDGPU == 224
    assert info.e_type == "ET_DYN"
    assert info.arch == arch and info.code_object_version == 5
    assert info.target == f"amdgcn-amd-amdhsa--{arch}"
    assert list(info.kernels) == ["add_kernel"]
    kernel = info.kernel("add_kernel")
    assert kernel.has_symbol and kernel.has_descriptor
    symbols = elf_symbols(data)
    assert symbols["add_kernel"] == "STT_FUNC" and symbols["add_kernel.kd"] == "STT_OBJECT"
    assert kernel.wavefront_size == wave
    assert kernel.max_flat_workgroup_size == 256  # from "amdgpu-flat-work-group-size"="1,256"
    # One metadata argument per kernel parameter: three global pointers, then the i32 by value.
    assert [(a.name, a.offset, a.size, a.value_kind, a.address_space) for a in kernel.args] == [
        ("x_ptr", 0, 8, "global_buffer", "global"),
        ("y_ptr", 8, 8, "global_buffer", "global"),
        ("out_ptr", 16, 8, "global_buffer", "global"),
        ("n", 24, 4, "by_value", None),
    ]
    assert kernel.kernarg_segment_size == 28 and kernel.kernarg_segment_align == 8
    assert kernel.group_segment_fixed_size == 0 and kernel.private_segment_fixed_size == 0
    assert kernel.sgpr_count > 0 and kernel.vgpr_count > 0


@requires_lld
def test_wave32_and_wave64_differ_in_metadata_and_header(vector_add_hsaco):
    cdna, rdna = inspect_hsaco(vector_add_hsaco["gfx942"]), inspect_hsaco(vector_add_hsaco["gfx1100"])
    assert (cdna.kernel("add_kernel").wavefront_size, rdna.kernel("add_kernel").wavefront_size) == (64, 32)
    assert "workgroup_processor_mode" not in str(cdna.kernel("add_kernel").metadata)
    assert rdna.kernel("add_kernel").metadata[".workgroup_processor_mode"] == 1  # RDNA only


@pytest.mark.parametrize("arch", sorted(SUPPORTED_ARCHS))
def test_unlinked_object_is_readable_too(arch):
    info = inspect_hsaco(toolchain.llir_to_object(amd_kernels.build_lds_reduction(), arch))
    assert info.e_type == "ET_REL" and info.arch == arch
    kernel = info.kernel("block_sum")
    assert kernel.group_segment_fixed_size == 256 * 4  # the [256 x float] LDS array
    assert kernel.wavefront_size == SUPPORTED_ARCHS[arch].wavefront_size
    assert [a.value_kind for a in kernel.args] == ["global_buffer", "global_buffer"]


def test_hidden_arguments_appear_when_the_kernel_reads_implicit_args():
    info = inspect_hsaco(toolchain.llir_to_object(amd_kernels.build_mixed_args(True), "gfx942"))
    kernel = info.kernel("mixed_kernel")
    hidden = {a.value_kind: (a.offset, a.size) for a in kernel.hidden_args}
    assert len(kernel.explicit_args) == len(amd_kernels.MIXED_PARAMS)
    # Implicit arguments start 8-aligned after the explicit ones (which end at 58 -> 64).
    assert hidden["hidden_block_count_x"] == (64, 4) and hidden["hidden_group_size_x"] == (76, 2)
    assert kernel.kernarg_segment_size == 64 + 256


def test_not_an_elf_file():
    with pytest.raises(InvalidHsacoError, match="not an ELF"):
        inspect_hsaco(b"hello world, this is not a code object at all......................")
    with pytest.raises(ValueError):  # InvalidHsacoError is also a ValueError and a CompilationError
        inspect_hsaco(b"\x7fELF")
    assert issubclass(InvalidHsacoError, CompilationError)


def test_elf_for_another_machine_is_refused():
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple("x86_64-unknown-linux-gnu").create_target_machine()
    x86 = machine.emit_object(llvm.parse_assembly("define i32 @f() {\n  ret i32 1\n}\n"))
    with pytest.raises(InvalidHsacoError, match="not EM_AMDGPU"):
        inspect_hsaco(bytes(x86))


def test_unknown_kernel_name_lists_the_kernels():
    info = inspect_hsaco(toolchain.llir_to_object(amd_kernels.build_vector_add(), "gfx942"))
    with pytest.raises(InvalidHsacoError, match="no kernel 'sub_kernel'.*add_kernel"):
        info.kernel("sub_kernel")
