"""TTIR -> TTGIR -> LLVM -> PTX / AMDGCN for hand-written kernels (vector add, softmax, matmul)."""
import os
import re

import llvmlite.binding as llvm
import pytest

import tilejit
import tilejit.language as tl

from tilejit import ir
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit.gpu.llvm import lower_module
from tilejit.gpu.ttgir import GPUConfig, make_ttgir
from tilejit_amd.isa import AmdISA
from tilejit_nvidia.isa import NvidiaISA
from toolchain_paths import filecheck, needs_ptxas

DATA = os.path.join(os.path.dirname(__file__), "data")


def ttgir(name, num_warps=4, isa=None):
    """The core's TTGIR passes for `isa` (default sm_80: mma.sync; sm_75 has no matrix unit)."""
    module = ir.parse_module(open(os.path.join(DATA, name + ".ttir")).read())
    return make_ttgir(module, GPUConfig(num_warps, isa or NvidiaISA(80, 32)))


def llvm_ir(name, isa):
    text, md = lower_module(ttgir(name, 4, isa), isa, 4)
    llvm.parse_assembly(text).verify()
    return text, md


def test_vector_add_is_vectorized_128_bit():
    text = ir.print_module(ttgir("vadd"), with_locations=False)
    filecheck(text, "CHECK: tt.make_range {{.*}}#ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>\n"
                    "CHECK: tt.load {{.*}}sizePerThread = [4]\n"
                    "CHECK-NOT: ttg.convert_layout\n")
    assert ir.print_module(ir.parse_module(text), with_locations=False) == text


def test_softmax_layouts_use_slices_without_conversions():
    text = ir.print_module(ttgir("softmax"), with_locations=False)
    filecheck(text, "CHECK: tt.make_range {start = 0, end = 4} {{.*}}#ttg.slice<{dim = 1, parent = #ttg.blocked\n"
                    "CHECK: tt.reduce\n"
                    "CHECK: -> (tensor<4xf32, #ttg.slice<{dim = 1\n")
    assert "ttg.convert_layout" not in text


def test_matmul_gets_mma_and_dot_operand_layouts():
    text = ir.print_module(ttgir("matmul"), with_locations=False)
    filecheck(text, "CHECK: scf.for\n"
                    "CHECK: ttg.convert_layout {{.*}}#ttg.dot_op<{opIdx = 0, parent = #ttg.nvidia_mma\n"
                    "CHECK: ttg.convert_layout {{.*}}#ttg.dot_op<{opIdx = 1\n"
                    "CHECK: tt.dot {{.*}} -> (tensor<32x32xf32, #ttg.nvidia_mma<{versionMajor = 2\n")


def test_fma_dot_without_mma():
    text = ir.print_module(ttgir("matmul", isa=NvidiaISA(75, 32)), with_locations=False)
    assert "nvidia_mma" not in text and "#ttg.dot_op<{opIdx = 0, parent = #ttg.blocked" in text


@pytest.mark.parametrize("name", ["vadd", "softmax", "matmul"])
@pytest.mark.parametrize("isa", [NvidiaISA(90, 32), NvidiaISA(80, 32), AmdISA("gfx942", 64), AmdISA("gfx1100", 32)],
                         ids=["sm90", "sm80", "gfx942", "gfx1100"])
def test_llvm_module_verifies(name, isa):
    text, md = llvm_ir(name, isa)
    assert md["name"].endswith("_kernel") and md["threads_per_block"] == 4 * isa.warp_size


def test_llvm_vector_add_loads_float4():
    text, _ = llvm_ir("vadd", NvidiaISA(90, 32))
    filecheck(text, "CHECK: define ptx_kernel void @\"add_kernel\"\n"
                    # masked: predicated 16-byte loads (`other` in the result registers) and store
                    # (inline PTX, as Triton's)
                    "CHECK: asm sideeffect \"@$4 ld.global.v4.b32 {$0, $1, $2, $3}, [$5];\", "
                    "\"=r,=r,=r,=r,b,l,0,1,2,3,~{memory}\"\n"
                    "CHECK: asm sideeffect \"@${{[0-9]+}} st.global.v4.b32 [$0], {$1, $2, $3, $4};\"\n")




@pytest.mark.parametrize("arch", [80, 90])
def test_ptx(arch):
    from tilejit_nvidia.toolchain import llir_to_ptx
    isa = NvidiaISA(arch, 32)
    filecheck(llir_to_ptx(llvm_ir("vadd", isa)[0], arch), "CHECK: ld.global.v4.{{[bf]}}32\nCHECK: st.global.v4.{{[bf]}}32\n")
    filecheck(llir_to_ptx(llvm_ir("softmax", isa)[0], arch), "CHECK: shfl.sync.bfly.b32\nCHECK: ex2.approx\n")
    filecheck(llir_to_ptx(llvm_ir("matmul", isa)[0], arch),
              "CHECK: bar.sync\nCHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32\n")


@needs_ptxas
def test_cubin_assembles():
    from tilejit_nvidia.toolchain import llir_to_ptx, ptx_to_cubin
    cubin = ptx_to_cubin(llir_to_ptx(llvm_ir("matmul", NvidiaISA(90, 32))[0], 90), 90)
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch,warp", [("gfx942", 64), ("gfx1100", 32)])
def test_amdgcn(arch, warp):
    from tilejit_amd.toolchain import llir_to_amdgcn
    isa = AmdISA(arch, warp)
    load = "global_load_dwordx4" if arch == "gfx942" else "global_load_b128"
    filecheck(llir_to_amdgcn(llvm_ir("vadd", isa)[0], arch), f"CHECK: {load}\n")
    filecheck(llir_to_amdgcn(llvm_ir("softmax", isa)[0], arch), "CHECK: ds_bpermute_b32\n")
    filecheck(llir_to_amdgcn(llvm_ir("matmul", isa)[0], arch), "CHECK: s_barrier\n")


@tilejit.jit
def _row_scale(x_ptr, w_ptr, out_ptr, n, R: tl.constexpr, C: tl.constexpr):
    cols = tl.arange(0, C)
    w = tl.load(w_ptr + cols, mask=cols < n, other=0.0)   # small: reloaded in the tile's layout
    rows = tl.arange(0, R)
    offs = rows[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * w[None, :])


def test_a_load_nobody_reads_is_not_emitted():
    """The row `w` is loaded again in the tile's layout (tritongpu-rematerialize-indices), which leaves
    the first load unused. A masked load is inline PTX with side effects, so LLVM would keep it: the
    lowering emits nothing for it. PTX: the x tile's 4 plain 16-byte loads, and w's 4 elements a thread
    in the tile's layout, each a predicated 4-byte load (`n` has no known divisibility)."""
    sig = {"x_ptr": "*fp32", "w_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "R": "constexpr", "C": "constexpr"}
    src = ASTSource(_row_scale, sig, {"R": 32, "C": 64}, {(i,): [["tt.divisibility", 16]] for i in range(3)})
    ptx = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 4}).asm["ptx"]
    loads = re.findall(r"(?:@%p\d+ )?ld\.global[\w.]*", ptx)
    kinds = [re.sub(r"@%p\d+ ", "@p ", load) for load in loads]
    assert sorted(kinds) == ["@p ld.global.b32"] * 4 + ["ld.global.v4.b32"] * 4, loads


@pytest.mark.parametrize("isa", [NvidiaISA(90, 32), AmdISA("gfx942", 64)], ids=["sm90", "gfx942"])
def test_unmasked_stores_of_an_owned_layout_make_no_blocks(isa):
    """The matmul's result store: no mask and no replicated lanes, so every thread owns its
    elements and the guard is `true` at lowering: no branch (LLVM folded it, after parsing and
    walking the blocks: the bench attention kernel had 128 of them)."""
    text, _ = llvm_ir("matmul", isa)
    stores = [line for line in text.splitlines() if "store " in line and "addrspace(1)" in line]
    assert stores and "guard.then" not in text
