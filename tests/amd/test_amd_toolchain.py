"""LLVM IR -> AMDGCN -> object -> hsaco without an AMD GPU: llvmlite (LLVM 22) and ld.lld."""
from __future__ import annotations

import io
import os
import stat

import llvmlite.binding as llvm
import pytest
from elftools.elf.elffile import ELFFile

import amd_kernels
from amd_support import requires_lld
from tilejit.errors import CompilationError
from tilejit_amd import toolchain
from tilejit_amd.targets import SUPPORTED_ARCHS, lds_limit, wavefront_size
from toolchain_paths import filecheck

WAVE64 = ("gfx90a", "gfx942", "gfx950")
WAVE32 = ("gfx1100", "gfx1201")


def write_script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def fake_lld(path, version: str, link_body: str = 'echo "ld.lld: error: cannot link" >&2; exit 1\n') -> str:
    """A shell script that answers --version like LLD `version` and otherwise runs `link_body`."""
    return write_script(path, f'if [ "$1" = "--version" ]; then echo "LLD {version} (compatible with GNU '
                              f'linkers)"; exit 0; fi\n{link_body}')


# -- targets ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", sorted(SUPPORTED_ARCHS))
def test_llvmlite_llvm_accepts_every_supported_arch(arch):
    assert toolchain.llvm_knows_arch(arch)


def test_wavefront_sizes_and_lds_limits():
    assert [wavefront_size(a) for a in WAVE64] == [64, 64, 64]
    assert [wavefront_size(a) for a in WAVE32] == [32, 32]
    assert wavefront_size("gfx942:sramecc+:xnack-") == 64  # HIP's gcnArchName carries feature flags
    assert lds_limit("gfx942") == 64 * 1024 and lds_limit("gfx950") == 160 * 1024


def test_unknown_arch_is_a_compilation_error_listing_the_supported_ones():
    with pytest.raises(CompilationError, match="gfx9999.*gfx942"):
        toolchain.llir_to_amdgcn(amd_kernels.build_vector_add(), "gfx9999")
    assert not toolchain.llvm_knows_arch("gfx9999")


# -- LLVM IR -> AMDGCN ---------------------------------------------------------------------------------

@pytest.mark.parametrize("arch,wave_directive", [
    ("gfx942", "CHECK-NOT: .amdhsa_wavefront_size32 1"),
    ("gfx1100", "CHECK: .amdhsa_wavefront_size32 1"),
])
def test_vector_add_to_amdgcn(arch, wave_directive):
    asm = toolchain.llir_to_amdgcn(amd_kernels.build_vector_add(), arch)
    wave = 32 if arch == "gfx1100" else 64
    filecheck(asm, f"""
CHECK: .amdgcn_target "amdgcn-amd-amdhsa--{arch}"
CHECK: .amdhsa_code_object_version 5
CHECK: add_kernel:
CHECK: global_load
CHECK: global_load
CHECK: global_store
CHECK: s_endpgm
CHECK: .amdhsa_kernel add_kernel
{wave_directive}
CHECK: .end_amdhsa_kernel
CHECK: .name: x_ptr
CHECK: .value_kind: global_buffer
CHECK: .name: n
CHECK: .value_kind: by_value
CHECK: .wavefront_size: {wave}
""")


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_lds_reduction_uses_lds_and_a_barrier(arch):
    asm = toolchain.llir_to_amdgcn(amd_kernels.build_lds_reduction(), arch)
    filecheck(asm, """
CHECK: block_sum:
CHECK: {{ds_write|ds_store}}_b32
CHECK: s_barrier
CHECK: {{ds_read|ds_load}}
CHECK: s_endpgm
CHECK: .amdhsa_group_segment_fixed_size 1024
""")


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_ds_bpermute_becomes_a_lane_shuffle(arch):
    asm = toolchain.llir_to_amdgcn(amd_kernels.build_bpermute_rotate(), arch)
    filecheck(asm, "CHECK: rotate_lanes:\nCHECK: ds_bpermute_b32\nCHECK: s_endpgm\n")


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_math_intrinsics_lower_to_instructions_without_calls(arch):
    asm = toolchain.llir_to_amdgcn(amd_kernels.build_math(), arch)
    filecheck(asm, """
CHECK: math_kernel:
CHECK-NOT: s_swappc
CHECK-DAG: v_exp_f32
CHECK-DAG: v_log_f32
CHECK-DAG: v_sqrt_f32
CHECK-DAG: v_sin_f32
CHECK-DAG: v_cos_f32
CHECK-DAG: v_floor_f32
CHECK: s_endpgm
""")


@pytest.mark.parametrize("name,element", [("llvm.tanh.f32", amd_kernels.F32), ("llvm.atan2.f32", None),
                                          ("llvm.sin.f64", amd_kernels.F64), ("llvm.exp.f64", amd_kernels.F64)])
def test_intrinsics_amdgpu_cannot_lower_are_refused_not_fatal(name, element):
    # Without the check LLVM ends the whole process ("no libcall available for ftanh").
    if element is None:
        module = amd_kernels.new_module("two_args")
        kernel, builder = amd_kernels.new_kernel(module, "k", [amd_kernels.GLOBAL_PTR])
        x = builder.load(kernel.args[0], typ=amd_kernels.F32)
        callee = amd_kernels.intrinsic(module, name, amd_kernels.F32, [amd_kernels.F32, amd_kernels.F32])
        builder.store(builder.call(callee, [x, x]), kernel.args[0])
        builder.ret_void()
        text = str(module)
    else:
        text = amd_kernels.build_call(name, ret=element, element=element)
    with pytest.raises(CompilationError, match=name.replace(".", r"\.") + ".*ocml"):
        toolchain.llir_to_amdgcn(text, "gfx942")


def test_call_to_an_undefined_device_library_function_is_refused():
    with pytest.raises(CompilationError, match="__ocml_exp_f32.*not linked"):
        toolchain.llir_to_object(amd_kernels.build_call("__ocml_exp_f32"), "gfx942")


def test_invalid_ir_and_modules_without_kernels_are_compilation_errors():
    with pytest.raises(CompilationError, match="invalid LLVM IR"):
        toolchain.llir_to_amdgcn("define void @broken( {", "gfx942")
    plain = 'target triple = "amdgcn-amd-amdhsa"\ndefine void @helper() {\n  ret void\n}\n'
    with pytest.raises(CompilationError, match="amdgpu_kernel"):
        toolchain.llir_to_amdgcn(plain, "gfx942")
    nvptx = 'target triple = "nvptx64-nvidia-cuda"\ndefine void @k() {\n  ret void\n}\n'
    with pytest.raises(CompilationError, match="nvptx64"):
        toolchain.llir_to_amdgcn(nvptx, "gfx942")


def test_code_object_version_flag_of_the_module_is_kept():
    module = amd_kernels.new_module("v6")
    kernel, builder = amd_kernels.new_kernel(module, "k", [])
    builder.ret_void()
    flag = module.add_metadata([amd_kernels.I32(1), "amdhsa_code_object_version", amd_kernels.I32(600)])
    module.add_named_metadata("llvm.module.flags", flag)
    filecheck(toolchain.llir_to_amdgcn(str(module), "gfx942"), "CHECK: .amdhsa_code_object_version 6\n")


@pytest.mark.parametrize("arch", sorted(SUPPORTED_ARCHS))
def test_object_is_an_amdgpu_relocatable_elf_for_the_arch(arch):
    obj = toolchain.llir_to_object(amd_kernels.build_vector_add(), arch)
    elf = ELFFile(io.BytesIO(obj))
    assert elf.header.e_machine == "EM_AMDGPU" and elf.header.e_type == "ET_REL"
    assert elf.header.e_ident.EI_ABIVERSION == 3  # ELFABIVERSION_AMDGPU_HSA_V5
    assert elf.header.e_flags & 0xFF == SUPPORTED_ARCHS[arch].elf_mach


# -- linking ---------------------------------------------------------------------------------------

@requires_lld
@pytest.mark.parametrize("arch", ["gfx942", "gfx1100", "gfx950", "gfx1201"])
def test_link_hsaco_gives_a_shared_code_object(arch):
    artifacts = toolchain.compile_llir(amd_kernels.build_vector_add(), arch)
    elf = ELFFile(io.BytesIO(artifacts.hsaco))
    assert elf.header.e_machine == "EM_AMDGPU" and elf.header.e_type == "ET_DYN"
    assert "add_kernel:" in artifacts.amdgcn and "amdgpu_kernel" in artifacts.optimized_llir


@requires_lld
def test_undefined_symbol_fails_the_link_with_the_linkers_message():
    # Emitted directly through llvmlite, bypassing the toolchain's own check for external calls.
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple(toolchain.AMDGPU_TRIPLE).create_target_machine(
        cpu="gfx942", reloc="pic", codemodel="default")
    obj = machine.emit_object(llvm.parse_assembly(amd_kernels.build_call("__ocml_exp_f32")))
    with pytest.raises(CompilationError, match="undefined symbol: __ocml_exp_f32"):
        toolchain.link_hsaco(bytes(obj))


def test_link_rejects_bytes_that_are_not_an_object():
    with pytest.raises(CompilationError, match="ELF relocatable"):
        toolchain.link_hsaco(b"definitely not ELF")


def test_no_linker_anywhere_says_what_to_install(no_lld_anywhere):
    assert toolchain.find_lld() is None
    obj = toolchain.llir_to_object(amd_kernels.build_vector_add(), "gfx942")  # compiling still works
    with pytest.raises(CompilationError, match="no ld.lld found.*apt-get install lld-19"):
        toolchain.link_hsaco(obj)
    status = toolchain.toolchain_status()
    assert status["lld"] is None and not status["can_link"] and status["can_compile"]
    assert any("apt-get install lld-19" in problem for problem in status["problems"])


def test_tilejit_lld_names_the_linker_and_its_errors_reach_the_user(no_lld_anywhere, tmp_path, monkeypatch):
    lld = fake_lld(tmp_path / "my-lld", "19.1.0",
                   'echo "ld.lld: error: kernel.o: relocation R_AMDGPU_REL32 out of range" >&2; exit 1\n')
    monkeypatch.setenv("TILEJIT_LLD", lld)
    assert toolchain.find_lld() == lld
    obj = toolchain.llir_to_object(amd_kernels.build_vector_add(), "gfx942")
    with pytest.raises(CompilationError, match=r"exit 1\):\n.*relocation R_AMDGPU_REL32 out of range"):
        toolchain.link_hsaco(obj)


def test_tilejit_lld_pointing_nowhere(no_lld_anywhere, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_LLD", str(tmp_path / "missing" / "ld.lld"))
    with pytest.raises(CompilationError, match="does not exist"):
        toolchain.link_hsaco(b"\x7fELF" + bytes(60))


def test_lld_older_than_15_is_refused_with_the_reason(no_lld_anywhere, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_LLD", fake_lld(tmp_path / "ld.lld", "14.0.6"))
    with pytest.raises(CompilationError, match="LLD 14.0.6, too old.*code object v5"):
        toolchain.link_hsaco(b"\x7fELF" + bytes(60))


def test_newest_lld_on_path_wins_over_plain_ld_lld(no_lld_anywhere, tmp_path):
    fake_lld(tmp_path / "ld.lld", "14.0.6")
    newest = fake_lld(tmp_path / "ld.lld-19", "19.1.7")
    fake_lld(tmp_path / "ld.lld-17", "17.0.1")
    assert toolchain.find_lld() == newest
    assert toolchain.lld_version(newest) == (19, 1, 7)


@pytest.mark.skipif(not os.access("/usr/bin/ld.lld-14", os.X_OK), reason="Debian's lld 14 is not installed")
def test_real_lld_14_cannot_link_code_object_v5(monkeypatch):
    monkeypatch.setenv("TILEJIT_LLD", "/usr/bin/ld.lld-14")
    obj = toolchain.llir_to_object(amd_kernels.build_vector_add(), "gfx942")
    with pytest.raises(CompilationError, match="too old"):
        toolchain.link_hsaco(obj)


@requires_lld
def test_toolchain_status_reports_a_working_toolchain():
    status = toolchain.toolchain_status()
    assert status["can_compile"] and status["can_link"] and status["problems"] == []
    assert status["code_object_version"] == 5 and status["llvm"].startswith("22.")
    assert int(status["lld_version"].split(".")[0]) >= toolchain.MIN_LLD_MAJOR
