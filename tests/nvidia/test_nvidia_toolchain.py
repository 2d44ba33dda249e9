"""LLVM IR -> PTX -> cubin without a GPU: llvmlite, libdevice, ptxas (pip wheel nvidia-cuda-nvcc), nvJitLink."""
from __future__ import annotations

import io

import pytest

ELFFile = pytest.importorskip("elftools.elf.elffile", reason="pip install pyelftools").ELFFile

from nv_kernels import build_store_scalars, build_vector_add
from tilejit.errors import CompilationError
from tilejit_nvidia import ptx_isa, toolchain
from tilejit_nvidia.toolchain import (assemble_ptx, find_ptxas_or_none, llir_to_ptx, parse_resource_usage,
                                      ptx_to_cubin, toolchain_status)
from toolchain_paths import filecheck

requires_ptxas = pytest.mark.skipif(find_ptxas_or_none() is None,
                                    reason="ptxas not found: pip install nvidia-cuda-nvcc")
requires_nvjitlink = pytest.mark.skipif(toolchain.nvjitlink_version() is None,
                                        reason="nvJitLink not found: pip install cuda-bindings nvidia-nvjitlink")
requires_libdevice = pytest.mark.skipif(toolchain.find_libdevice(find_ptxas_or_none()) is None,
                                        reason="libdevice.10.bc not found: pip install nvidia-nvvm")


def elf_of(cubin: bytes) -> ELFFile:
    return ELFFile(io.BytesIO(cubin))


def function_symbols(elf: ELFFile) -> set[str]:
    symtab = elf.get_section_by_name(".symtab")
    return {s.name for s in symtab.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}


def test_vector_add_ptx_for_sm90a():
    ptx = llir_to_ptx(build_vector_add(), 90)
    version = ptx_isa.choose_ptx_version("sm_90a", toolchain._assembler_cuda_version_or_none())
    filecheck(ptx, f"""
CHECK: .version {version // 10}.{version % 10}
CHECK: .target sm_90a
CHECK: .address_size 64
CHECK: .visible .entry vector_add(
CHECK: mov.u32 {{{{.*}}}}%ctaid.x
CHECK: mov.u32 {{{{.*}}}}%tid.x
CHECK: ld.global
CHECK: ld.global
CHECK: add.rn.f32
CHECK: st.global
CHECK: ret;
""")


def test_vector_add_ptx_for_sm80_has_no_arch_suffix():
    ptx = llir_to_ptx(build_vector_add(), 80)
    filecheck(ptx, "CHECK: .target sm_80{{$}}\nCHECK: .visible .entry vector_add(\n")


@requires_ptxas
@pytest.mark.parametrize("arch", [80, 90])
def test_vector_add_cubin_is_a_cuda_elf(arch):
    assembled = assemble_ptx(llir_to_ptx(build_vector_add(), arch), arch)
    elf = elf_of(assembled.cubin)
    assert elf["e_machine"] == "EM_CUDA"  # 190
    assert "vector_add" in function_symbols(elf)
    usage = assembled.resources["vector_add"]
    assert 0 < usage["registers"] <= 255
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0


@requires_ptxas
@requires_libdevice
def test_libdevice_expf_is_linked_and_inlined():
    ptx = llir_to_ptx(build_vector_add(with_expf=True), 90)
    # libdevice's expf is inlined (ex2.approx is its core); nothing of libdevice stays as a call,
    # and NVVMReflect resolved every __nvvm_reflect query.
    filecheck(ptx, "CHECK: .visible .entry vector_add(\nCHECK: ex2.approx\nCHECK-NOT: call\n")
    assert "__nv_expf" not in ptx and "__nvvm_reflect" not in ptx
    cubin = ptx_to_cubin(ptx, 90)
    assert elf_of(cubin)["e_machine"] == "EM_CUDA"


def test_libdevice_call_without_linking_is_an_error():
    with pytest.raises(CompilationError, match="__nv_expf"):
        llir_to_ptx(build_vector_add(with_expf=True), 90, libdevice=False)


def test_helper_functions_are_internalized_and_inlined():
    # A non-kernel helper must become internal so O3 inlines it and drops the body: no `.func`.
    text = build_vector_add().replace("}\n", "}\n\ndefine float @helper(float %x) {\n  ret float %x\n}\n", 1)
    ptx = llir_to_ptx(text, 80)
    assert ".entry vector_add" in ptx and "helper" not in ptx


def test_explicit_ptx_feature_is_kept():
    ptx = llir_to_ptx(build_vector_add(), 80, features="+ptx80")
    assert ".version 8.0" in ptx


@requires_ptxas
def test_every_scalar_parameter_type_assembles():
    cubin = ptx_to_cubin(llir_to_ptx(build_store_scalars(), 80), 80)
    assert "store_scalars" in function_symbols(elf_of(cubin))


@requires_nvjitlink
def test_nvjitlink_assembles_the_same_kernel():
    assembled = assemble_ptx(llir_to_ptx(build_vector_add(), 90), 90, assembler="nvjitlink")
    assert assembled.assembler == "nvJitLink"
    assert elf_of(assembled.cubin)["e_machine"] == "EM_CUDA"
    assert assembled.resources["vector_add"]["registers"] > 0


@requires_ptxas
def test_ptxas_error_carries_its_message():
    ptx = llir_to_ptx(build_vector_add(), 80).replace("ret;", "bogus.instruction %r1;")
    with pytest.raises(CompilationError, match=r"ptxas failed for sm_80[\s\S]*bogus"):
        ptx_to_cubin(ptx, 80)


def test_no_assembler_says_what_to_install(monkeypatch):
    monkeypatch.setattr(toolchain, "find_ptxas", lambda: None)
    monkeypatch.setattr(toolchain, "_nvjitlink", lambda: None)
    with pytest.raises(CompilationError, match="pip install nvidia-cuda-nvcc"):
        ptx_to_cubin(".version 8.0\n.target sm_80\n.address_size 64\n", 80)
    assert any("pip install" in p for p in toolchain_status()["problems"])


def test_bad_ptxas_knob_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_PTXAS", str(tmp_path / "no-such-ptxas"))
    monkeypatch.setattr(toolchain, "_ptxas_knob", lambda: str(tmp_path / "no-such-ptxas"))
    with pytest.raises(CompilationError, match="TILEJIT_PTXAS"):
        toolchain.find_ptxas()


@requires_ptxas
def test_ptxas_knob_is_used(monkeypatch):
    real = find_ptxas_or_none()
    monkeypatch.setattr(toolchain, "_ptxas_knob", lambda: real)
    assembled = assemble_ptx(llir_to_ptx(build_vector_add(), 80), 80, assembler="ptxas")
    assert assembled.assembler == f"ptxas {real}"


def test_invalid_llvm_ir_is_a_compilation_error():
    with pytest.raises(CompilationError, match="invalid LLVM IR"):
        llir_to_ptx("define void @k( {", 80)


def test_module_without_kernel_is_rejected():
    text = 'target triple = "nvptx64-nvidia-cuda"\ndefine void @not_a_kernel() {\n  ret void\n}\n'
    with pytest.raises(CompilationError, match="no kernel"):
        llir_to_ptx(text, 80)


def test_resource_usage_is_parsed_per_kernel():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'first' for 'sm_90a'
ptxas info    : Function properties for first
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 384 bytes cmem[0]
ptxas info    : Compiling entry function 'second' for 'sm_90a'
ptxas info    : Function properties for second
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""
    assert parse_resource_usage(log) == {
        "first": {"registers": 40, "spill_stores": 8, "spill_loads": 4, "stack_frame": 16, "shared": 1024},
        "second": {"registers": 12, "spill_stores": 0, "spill_loads": 0, "stack_frame": 0, "shared": 0},
    }


def test_cuda_to_ptx_isa_table():
    assert ptx_isa.ptx_isa_for_cuda((11, 8)) == 78
    assert ptx_isa.ptx_isa_for_cuda((12, 6)) == 85  # 12.6 kept PTX 8.5
    assert ptx_isa.ptx_isa_for_cuda((12, 9)) == 88
    assert ptx_isa.ptx_isa_for_cuda((13, 0)) == 90
    assert ptx_isa.ptx_isa_for_cuda((13, 9)) == 91  # newer than the table: the newest known
    with pytest.raises(CompilationError):
        ptx_isa.ptx_isa_for_cuda((9, 0))


def test_ptx_version_is_the_newest_both_tools_accept():
    lowest, highest = ptx_isa.llvm_ptx_range("sm_90a")
    assert lowest == 80 and highest >= 88  # LLVM 22 knows sm_90a from PTX 8.0 up to at least 8.8
    assert ptx_isa.choose_ptx_version("sm_90a", (12, 4)) == 84
    assert ptx_isa.choose_ptx_version("sm_90a", None) == highest
    with pytest.raises(CompilationError, match="needs PTX ISA 8.0"):
        ptx_isa.choose_ptx_version("sm_90a", (11, 8))


def test_unknown_architecture_is_an_error():
    with pytest.raises(CompilationError, match="does not know the NVIDIA target sm_990a"):
        ptx_isa.llvm_ptx_range("sm_990a")
    with pytest.raises(CompilationError, match="invalid CUDA architecture"):
        ptx_isa.cpu_name("90")


def test_toolchain_status_reports_what_was_found():
    status = toolchain_status()
    assert set(status) >= {"llvm", "ptxas", "ptxas_version", "ptx_isa", "libdevice", "nvjitlink", "problems"}
    if status["ptxas"]:
        assert status["ptxas_version"].count(".") == 1 and status["ptx_isa"] >= 70
