"""fp64 `tl.dot`: fp64 operands accumulate in fp64 whatever `out_dtype` says (Triton's semantic.dot;
Triton's test_dot3d passes out_dtype=tl.float32 with fp64 inputs), lowered to DMMA (`mma.m8n8k4`,
or `mma.m16n8k16.f64` on sm_90+, as Triton) on NVIDIA sm_80+ where the tile is mma.sync's, else to a chain of fp64 FMAs per output
element (AMD; tiles below 16 x 8), and compiled through to the binary (ptxas's cubin, ld.lld's hsaco). The shapes
are those of Triton's test_dot3d (batched, BLOCK_M = BLOCK_N = 32) and test_dot (8x8x16, one warp).
The numerics are checked on the interpreter in tests/language/test_lang_dot.py."""
import collections
import os
import re
import sys

import pytest

import tilejit
import tilejit.language as tl
from tilejit.frontend.source import ASTSource
from toolchain_paths import needs_lld, needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

D16 = [["tt.divisibility", 16]]


@tilejit.jit
def _dot3d(q_ptr, k_ptr, o_ptr, stride_qb, stride_qm, stride_kb, stride_kk, stride_ob, stride_om,
           B: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, K: tl.constexpr, OUT: tl.constexpr):
    offs_b = tl.arange(0, B)
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, K)
    q = tl.load(q_ptr + offs_b[:, None, None] * stride_qb + offs_m[None, :, None] * stride_qm
                + offs_k[None, None, :])
    k = tl.load(k_ptr + offs_b[:, None, None] * stride_kb + offs_k[None, :, None] * stride_kk
                + offs_n[None, None, :])
    qk = tl.dot(q, k, input_precision="ieee", out_dtype=OUT)
    tl.store(o_ptr + offs_b[:, None, None] * stride_ob + offs_m[None, :, None] * stride_om
             + offs_n[None, None, :], qk)


@tilejit.jit
def _dot2d(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, OUT: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    x = tl.load(x_ptr + m[:, None] * K + k[None, :])
    y = tl.load(y_ptr + k[:, None] * N + n[None, :])
    tl.store(z_ptr + m[:, None] * N + n[None, :], tl.dot(x, y, input_precision="ieee", out_dtype=OUT))


def _compile_3d(target, B, warps, K):
    sig = {"q_ptr": "*fp64", "k_ptr": "*fp64", "o_ptr": "*fp64", "stride_qb": "i32", "stride_qm": "i32",
           "stride_kb": "i32", "stride_kk": "i32", "stride_ob": "i32", "stride_om": "i32"}
    consts = {"B": B, "BM": 32, "BN": 32, "K": K, "OUT": tl.float32}
    src = ASTSource(_dot3d, sig, consts, {(i,): D16 for i in range(9)})
    return tilejit.compile(src, target=target, options={"num_warps": warps})


def _compile_2d(target, M, N, K, warps):
    sig = {"x_ptr": "*fp64", "y_ptr": "*fp64", "z_ptr": "*fp64"}
    src = ASTSource(_dot2d, sig, {"M": M, "N": N, "K": K, "OUT": tl.float32}, {(i,): D16 for i in range(3)})
    return tilejit.compile(src, target=target, options={"num_warps": warps})


TARGETS = [pytest.param("cuda:90", 32, "cubin", marks=needs_ptxas),
           pytest.param("hip:gfx942", 64, "hsaco", marks=needs_lld)]
FMA_TARGETS = TARGETS[1:]   # NVIDIA computes these tiles with DMMA (below)


def _check(kernel, binary, outputs_per_thread, K):
    assert re.findall(r"tt\.dot .*-> \(tensor<[0-9x]+(f\d+)", kernel.asm["ttir"]) == ["f64"]
    llir = kernel.asm["llir"]
    assert "fpext double" not in llir and "fptrunc double" not in llir
    # one fp64 FMA per product: K for each output element the thread holds (+ the declaration)
    fmas = llir.count("llvm.fma.f64\"(") - 1
    if outputs_per_thread is None:   # a tile smaller than the CTA: the layout may repeat elements
        assert fmas > 0 and fmas % K == 0
    else:
        assert fmas == outputs_per_thread * K
    assert "llvm.fma.f32" not in llir
    assert kernel.asm[binary][:4] == b"\x7fELF"


@pytest.mark.parametrize("target,warp_size,binary", FMA_TARGETS)
@pytest.mark.parametrize("B,warps,K", [(1, 1, 64), (2, 16, 64), (8, 16, 32)])
def test_batched_fp64_dot_compiles_to_fp64_fmas(target, warp_size, binary, B, warps, K):
    kernel = _compile_3d(target, B, warps, K)
    _check(kernel, binary, B * 32 * 32 // (warps * warp_size), K)


# DMMA per arch, and how many of them one 16 x 8 tile takes per K16 block: eight m8n8k4s on sm_80,
# one m16n8k16 on sm_90 (as Triton there).
DMMA = {80: ("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", 8),
        90: ("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64", 1)}


@needs_ptxas
@pytest.mark.parametrize("arch", sorted(DMMA))
@pytest.mark.parametrize("B,warps,K", [(1, 1, 64), (2, 16, 64), (8, 16, 32), (8, 2, 32)])
def test_nvidia_batched_fp64_dot_uses_dmma(B, warps, K, arch):
    """Every warp along the batch (replicated where B < warps); per batch 2 x 4 tiles of 16 x 8 and,
    per K16 block and tile, the arch's DMMAs."""
    ptx = _compile_3d(f"cuda:{arch}", B, warps, K).asm["ptx"]
    batches_per_warp = max(B // warps, 1)
    instruction, per_tile = DMMA[arch]
    assert ptx.count(instruction) == batches_per_warp * 8 * (K // 16) * per_tile
    other_arch = 80 if arch == 90 else 90
    assert "fma.rn.f64" not in ptx and DMMA[other_arch][0] not in ptx


@needs_ptxas
@pytest.mark.parametrize("arch", sorted(DMMA))
def test_nvidia_2d_fp64_dot_uses_dmma(arch):
    kernel = _compile_2d(f"cuda:{arch}", 32, 32, 32, 4)
    ptx = kernel.asm["ptx"]
    # 4 warps as 2 x 2 over the 32 x 32 tile: a 16 x 16 block each, 2 tiles, 2 K16 blocks
    instruction, per_tile = DMMA[arch]
    assert ptx.count(instruction) == 2 * 2 * per_tile and "fma.rn.f64" not in ptx
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("target,warp_size,binary", TARGETS)
def test_small_fp64_dot_compiles_to_fp64_fmas(target, warp_size, binary):   # test_dot[1-8-8-16-1-...-float64]
    kernel = _compile_2d(target, 8, 8, 16, 1)
    _check(kernel, binary, None, 16)


@needs_ptxas
@pytest.mark.parametrize("arch", sorted(DMMA))
def test_pipelined_fp64_operand_copies(arch):
    """The K loop's tiles arrive by cp.async. On sm_90 A's tile is kept M-contiguous (8-byte copies)
    so that the m16n8k16's A doubles are single shared loads straight into its register tuple; B, and
    both tiles on sm_80, are copied 16 bytes at a time."""
    from common import load_kernels   # bench/kernels.py's fp64 matmul, as bench/gpu.py times it
    sig = {"a_ptr": "*fp64", "b_ptr": "*fp64", "c_ptr": "*fp64", "M": "i32", "N": "i32", "K": "i32"}
    consts = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 16}
    src = ASTSource(load_kernels("tilejit").matmul_fp64_kernel, sig, consts, {(i,): D16 for i in range(6)})
    kernel = tilejit.compile(src, target=f"cuda:{arch}", options={"num_warps": 4, "num_stages": 3})
    ptx = kernel.asm["ptx"]
    # num_stages buffers of (64x16 + 16x64) doubles, refilled after the dots read them k-step by
    # k-step: the fragments read up front (num_stages - 1 buffers) held 41 more registers a thread
    assert kernel.metadata["shared"] == 3 * 2 * 64 * 16 * 8
    sizes = collections.Counter(re.findall(r"cp\.async\.\w+\.shared\.global \[[^]]+\], \[[^]]+\], (\d+)", ptx))
    assert sizes["16"] > 0 and (sizes["8"] > 0) == (arch == 90), sizes
    loop = ptx[ptx.index("$L__BB0_2:"):]
    if arch == 90:
        assert "ld.shared.v2.b64" not in loop[:loop.index("mma.sync")]   # A read one double at a time
