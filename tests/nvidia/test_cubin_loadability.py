"""Cubins cross-compiled for sm_90 hold only what cuModuleLoadData accepts (no GPU needed).

Issue 9 item 7: a fused-MoE kernel compiled for sm_90 was refused at load. These kernels carry the
extra parts such a kernel puts into its cubin (see `loadable_kernels`); each cubin must be a CUDA
executable for the target's SM, its kernel a global function under the metadata's name, every
undefined symbol one the driver itself provides, its static shared memory within the 48 KiB a
module may declare, and its PTX aimed at the architecture-specific target when it uses wgmma.
`test_module_load_gpu.py` loads and runs the same kernels on a GPU.
"""
from __future__ import annotations

import io
import re

import numpy as np
import pytest

ELFFile = pytest.importorskip("elftools.elf.elffile", reason="pip install pyelftools").ELFFile

import loadable_kernels as lk
from tilejit_nvidia.ptx_isa import cpu_name
from tilejit_nvidia.toolchain import find_ptxas_or_none

pytestmark = pytest.mark.skipif(find_ptxas_or_none() is None, reason="ptxas not found: pip install nvidia-cuda-nvcc")

ARCH = 90
# Functions a cubin may leave undefined: the driver binds them (device printf, assert, heap).
DRIVER_PROVIDED = {"vprintf", "__assertfail", "malloc", "free"}
STATIC_SHARED_LIMIT = 48 * 1024


def _expert_gemm_args(BM, BN, BK):
    N, K, n_slots = 96, 64, 32
    slots, experts = lk.route_slots([s % 3 for s in range(n_slots)], BM, 3)
    a = np.zeros((n_slots // 2, K), np.float16)
    w = np.zeros((3, N, K), np.float16)
    c = np.zeros((n_slots, N), np.float16)
    route_w = np.zeros(n_slots, np.float32)
    return (a, w, c, route_w, np.array(slots, np.int32), np.array(experts, np.int32),
            np.array([len(slots)], np.int32), N, K, len(slots), n_slots, a.strides[0] // 2, w.strides[0] // 2,
            w.strides[1] // 2, 1, c.strides[0] // 2)


def _compile(case: str):
    f32 = np.zeros(256, np.float32)
    if case == "rem_i64":
        return lk.rem_i64_kernel.warmup(f32, f32, 100, BLOCK=128, grid=(2,), target=f"cuda:{ARCH}")
    if case == "div_i64":
        i64 = np.zeros(256, np.int64)
        return lk.div_i64_kernel.warmup(i64, i64, 7, BLOCK=128, grid=(2,), target=f"cuda:{ARCH}")
    if case == "libdevice_sqrt":
        return lk.libdevice_sqrt_kernel.warmup(f32, f32, BLOCK=128, grid=(1,), target=f"cuda:{ARCH}")
    if case == "print":
        return lk.print_kernel.warmup(f32, BLOCK=32, grid=(1,), target=f"cuda:{ARCH}")
    BM, BN, BK, warps, stages = lk.EXPERT_GEMM_CONFIGS[int(case.rsplit("_", 1)[1])]
    return lk.expert_gemm_kernel.warmup(*_expert_gemm_args(BM, BN, BK), TOP_K=2, BM=BM, BN=BN, BK=BK, WEIGHTED=True,
                                        num_warps=warps, num_stages=stages, grid=(1,), target=f"cuda:{ARCH}")


def _functions(elf) -> dict[str, dict]:
    symtab = elf.get_section_by_name(".symtab")
    return {s.name: {"bind": s["st_info"]["bind"], "defined": s["st_shndx"] != "SHN_UNDEF"}
            for s in symtab.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}


def assert_loadable(compiled) -> dict[str, dict]:
    """The checks a driver makes that a cubin can fail; returns the cubin's function symbols."""
    name = compiled.metadata["name"]
    elf = ELFFile(io.BytesIO(compiled.asm["cubin"]))
    assert elf.header["e_machine"] == "EM_CUDA" and elf.header["e_type"] == "ET_EXEC"
    flags = elf.header["e_flags"]
    # The SM sits in bits 8-15 of e_flags from ELF ABI version 8 (CUDA 13) on, in bits 0-7 before.
    sm = (flags >> 8) & 0xFF if elf.header["e_ident"]["EI_ABIVERSION"] >= 8 else flags & 0xFF
    assert sm == ARCH, f"cubin for SM {sm}, compiled for {ARCH} (e_flags {flags:#x})"
    functions = _functions(elf)
    assert functions.get(name, {}).get("bind") == "STB_GLOBAL" and functions[name]["defined"], functions
    undefined = {f for f, info in functions.items() if not info["defined"]}
    assert undefined <= DRIVER_PROVIDED, f"undefined functions the driver cannot bind: {undefined - DRIVER_PROVIDED}"
    for section in elf.iter_sections():
        if section.name.startswith(".nv.shared.") and not section.name.startswith(".nv.shared.reserved"):
            assert section["sh_size"] <= STATIC_SHARED_LIMIT, (section.name, section["sh_size"])
    ptx = compiled.asm["ptx"]
    target = re.search(r"^\.target\s+(\S+)", ptx, re.MULTILINE).group(1)
    assert target == cpu_name(ARCH)
    if "wgmma." in ptx or "setmaxnreg" in ptx:
        assert target.endswith("a"), "wgmma/setmaxnreg need the architecture-specific target"
    return functions


@pytest.mark.parametrize("case,subroutine", [("rem_i64", "rem_s64"), ("div_i64", "div_s64"),
                                             ("libdevice_sqrt", "sqrt_rn_f32_slowpath")])
def test_kernels_calling_ptxas_subroutines_give_loadable_cubins(case, subroutine):
    functions = assert_loadable(_compile(case))
    # The cubin really holds the internal subroutine (the class of code under test).
    assert any(subroutine in f for f in functions), sorted(functions)


def test_device_print_leaves_only_vprintf_undefined():
    functions = assert_loadable(_compile("print"))
    assert not functions["vprintf"]["defined"]


@pytest.mark.parametrize("config", range(len(lk.EXPERT_GEMM_CONFIGS)))
def test_moe_shaped_expert_gemm_gives_loadable_cubins(config):
    compiled = _compile(f"expert_gemm_{config}")
    functions = assert_loadable(compiled)
    assert any("rem_s64" in f for f in functions), sorted(functions)
    BM, BN = lk.EXPERT_GEMM_CONFIGS[config][:2]
    if BM >= 64 and BN >= 128:
        # the wgmma path, with the subroutine call inside the kernel that issues wgmma
        assert "wgmma.mma_async" in compiled.asm["ptx"]
