"""Dots with an f16 accumulator (`out_dtype=tl.float16`) lowered by FMA: the products are summed in
f32 and the accumulator is rounded to f16 once per k-step of the target's matrix instructions, the
numerics of Triton's mma.sync/wgmma with f16 accumulators on NVIDIA (k16 for fp16, k32 for fp8
operands), once at the end on AMD. An f16 FMA per product (as before) rounded K times: Triton's
test_dot3d[4-4-64-64-64-32-32-float16-float16] then missed rtol=atol=1e-2 on 44 of 16384 elements."""
import os
import re
import sys

import pytest

import tilejit
import tilejit.language as tl
from tilejit.frontend.source import ASTSource
from toolchain_paths import needs_lld, needs_ptxas

from test_fp64_dot import D16, _dot3d

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from dot_kernels import f16_accumulator_matmul  # noqa: E402


@tilejit.jit
def _dot2d(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, out_dtype=tl.float16))


def _rounding_runs(llir):
    """The runs of f32 FMAs between roundings to f16, in emission order (one output after another)."""
    seq = "".join("F" if "fptrunc" not in line else "T" for line in llir.splitlines()
                  if ('llvm.fma.f32"(' in line and "declare" not in line) or re.search(r"fptrunc float .* to half", line))
    return seq


def _dot3d_source():
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp16", "stride_qb": "i32", "stride_qm": "i32",
           "stride_kb": "i32", "stride_kk": "i32", "stride_ob": "i32", "stride_om": "i32"}
    return ASTSource(_dot3d, sig, {"B": 4, "BM": 32, "BN": 32, "K": 64, "OUT": tl.float16},
                     {(i,): D16 for i in range(9)})


@pytest.mark.parametrize("target,binary,outputs,step", [
    pytest.param("hip:gfx942", "hsaco", 4 * 32 * 32 // 256, 64, marks=needs_lld)])
def test_batched_fp16_dot_rounds_once_per_k_step(target, binary, outputs, step):
    """Where a batched dot runs on FMA (AMD), its f16 accumulator is rounded once per K step."""
    kernel = tilejit.compile(_dot3d_source(), target=target, options={"num_warps": 4})
    llir = kernel.asm["llir"]
    assert "llvm.fma.f16" not in llir and "fmul half" not in llir and "fadd half" not in llir
    assert _rounding_runs(llir) == ("F" * step + "T") * (64 // step) * outputs
    assert kernel.asm[binary][:4] == b"\x7fELF"


@needs_ptxas
def test_nvidia_batched_dot_accumulates_in_f16_with_mma():
    """On sm_80+ a batched dot with out_dtype=float16 is mma.sync with f16 C and D, per batch."""
    kernel = tilejit.compile(_dot3d_source(), target="cuda:90", options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16") == 2 * 4 * (64 // 16)
    assert "fma.rn" not in ptx and kernel.asm["cubin"][:4] == b"\x7fELF"


@needs_ptxas
@pytest.mark.parametrize("a_type", ["*fp16", "*fp8e4nv"])
def test_nvidia_2d_dot_accumulates_in_f16_with_mma(a_type):
    """A 2-D dot with out_dtype=float16 runs mma.sync with f16 C and D (Triton's instruction, and
    what Triton's test_dot checks in the PTX), fp8 operands upcast to f16 first."""
    src = ASTSource(_dot2d, {"a_ptr": a_type, "b_ptr": a_type, "c_ptr": "*fp16"},
                    {"M": 32, "N": 32, "K": 64}, {(i,): D16 for i in range(3)})
    kernel = tilejit.compile(src, target="cuda:90", options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    assert re.search(r"mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", ptx)
    assert ".f32.f16.f16" not in ptx and "fma.rn" not in ptx
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


@needs_ptxas
def test_nvidia_f16_accumulator_loop_runs_wgmma_f16():
    """The pipelined matmul with an f16 accumulator carried by the loop: wgmma with f16 D registers
    (.f16x2, N/4 of them per m64 block), kept in flight across iterations as the f32 one."""
    src = ASTSource(f16_accumulator_matmul, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32"},
                    {"BM": 128, "BN": 128, "BK": 64}, {(i,): D16 for i in range(4)})
    kernel = tilejit.compile(src, target="cuda:90", options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16" in ptx
    assert "mma.sync" not in ptx and "wgmma.wait_group.sync.aligned 1" in ptx
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


def test_k_step_is_one_instruction_of_32_bytes():
    """fp16: mma k16, fp8: k32 (fp8 FMA dots are slow to compile, so their step is checked here)."""
    from tilejit_nvidia.isa import NvidiaISA
    from tilejit_amd.isa import AmdISA
    assert [NvidiaISA(90, 32).f16_accumulator_k_step(bits) for bits in (16, 8)] == [16, 32]
    assert AmdISA("gfx942", 64).f16_accumulator_k_step(16) is None
