"""`tt.dot` on AMD matrix cores (MFMA on CDNA, WMMA on RDNA3/4), checked without an AMD GPU.

Three levels: (1) the accumulator and operand layouts place every element (exactly once, or with
the replication the hardware needs); (2) the per-lane data movement that the lowering emits,
simulated in NumPy against a model of each instruction written from the ISA tables (element ->
lane/register, the inverse direction of `tilejit_amd/matrix_cores.py`), computes A @ B + C; (3) real kernels
compile to verified LLVM and AMDGCN that contains the MFMA/WMMA instruction.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from amd_support import requires_lld
from tilejit import ir
from tilejit.compiler import compile as tj_compile
from tilejit.frontend.source import ASTSource
from tilejit_amd.matrix_cores import (INSTRUCTIONS, AmdMfmaEncoding, AmdWmmaEncoding, MatrixInstr,
                                     select_matrix_core, spread_warps)
from tilejit.gpu.layouts import DotOperandEncoding
from tilejit_amd.matrix_core_dot import matrix_core_plan

WARP_SIZE = {"mfma": 64, "wmma1": 32, "wmma2": 32}


def _instr_case(instr: MatrixInstr):
    return pytest.param(instr, id=f"{instr.intrinsic.split('amdgcn.')[1]}-{instr.archs[0]}")


def _encoding(instr: MatrixInstr, warps):
    if instr.kind == "mfma":
        return AmdMfmaEncoding(3, 0, warps, (instr.m, instr.n), instr.k_width)
    return AmdWmmaEncoding(int(instr.kind[-1]), warps, instr.k_width)


def _layouts(enc, M, N, K):
    a = DotOperandEncoding(0, enc, enc.k_width).to_linear((M, K))
    b = DotOperandEncoding(1, enc, enc.k_width).to_linear((K, N))
    return a, b, enc.to_linear((M, N))


# ------------------------------------------------------------------------ (1) layout ownership

@pytest.mark.parametrize("instr", [_instr_case(i) for i in INSTRUCTIONS])
@pytest.mark.parametrize("warps", [(1, 1), (2, 2), (4, 1), (1, 2)])
def test_each_element_is_owned_once_or_replicated_as_promised(instr, warps):
    wm, wn = warps
    M, N, K = instr.m * wm * 2, instr.n * wn, instr.k * 2
    a, b, c = _layouts(_encoding(instr, warps), M, N, K)
    for layout, shape in ((a, (M, K)), (b, (K, N)), (c, (M, N))):
        assert layout.num_lanes == WARP_SIZE[instr.kind] and layout.num_warps == wm * wn
    owners = Counter(coords for _, coords in c.all_owners())
    assert set(owners) == {(m, n) for m in range(M) for n in range(N)} and set(owners.values()) == {1}
    # A is shared by the warps along N, B by those along M; WMMA v1 repeats A/B in both half-waves.
    half_wave = 2 if instr.kind == "wmma1" else 1
    for layout, shape, copies in ((a, (M, K), wn * half_wave), (b, (K, N), wm * half_wave)):
        owners = Counter(coords for _, coords in layout.all_owners())
        assert set(owners) == {(i, j) for i in range(shape[0]) for j in range(shape[1])}
        assert set(owners.values()) == {copies}


def test_mfma_32x32_accumulator_matches_the_isa_table():
    # CDNA3 ISA, v_mfma_f32_32x32x8_f16: D[i][j] is in lane j + 32*((i/4)%2), register 4*(i/8) + i%4.
    c = AmdMfmaEncoding(3, 0, (1, 1), (32, 32), 4).to_linear((32, 32))
    assert c.coords(0, 0, 0) == (0, 0) and c.coords(3, 5, 0) == (3, 5)
    assert c.coords(0, 32, 0) == (4, 0) and c.coords(4, 0, 0) == (8, 0) and c.coords(15, 63, 0) == (31, 31)


@pytest.mark.parametrize("text", [
    "#ttg.amd_mfma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [2, 2], instrShape = [32, 32], kWidth = 8}>",
    "#ttg.amd_wmma<{version = 1, warpsPerCTA = [4, 1], kWidth = 16}>",
    "#ttg.dot_op<{opIdx = 1, parent = #ttg.amd_wmma<{version = 2, warpsPerCTA = [1, 2], kWidth = 8}>, kWidth = 8}>",
])
def test_encodings_print_and_parse_back(text):
    assert str(ir.default_context().parse_encoding(text)) == text


# ------------------------------------------------------- (2) simulated per-lane data movement

def _isa_a(instr, lane, j):
    """(m, k) of element j of lane `lane`'s A operand, from the ISA's operand tables."""
    if instr.kind == "mfma":
        return lane % instr.m, instr.k_width * (lane // instr.m) + j
    if instr.kind == "wmma1":
        return lane % 16, j
    return lane % 16, 8 * (lane // 16) + j


def _isa_b(instr, lane, j):
    if instr.kind == "mfma":
        return instr.k_width * (lane // instr.n) + j, lane % instr.n
    if instr.kind == "wmma1":
        return j, lane % 16
    return 8 * (lane // 16) + j, lane % 16


def _isa_d(instr, i, j):
    """(lane, register) holding D[i][j] (the calculator's element -> lane/register direction)."""
    if instr.kind == "mfma":
        groups = 64 // instr.n
        return j + instr.n * ((i // 4) % groups), 4 * (i // (4 * groups)) + i % 4
    if instr.kind == "wmma1":
        return j + 16 * (i % 2), i // 2
    return j + 16 * (i // 8), i % 8


def _execute(instr, a_ops, b_ops, acc):
    """One wave executes `instr`: per-lane operand lists and accumulators in, accumulators out."""
    lanes = WARP_SIZE[instr.kind]
    A = np.full((instr.m, instr.k), np.nan)
    B = np.full((instr.k, instr.n), np.nan)
    for lane in range(lanes):
        for j in range(instr.k_width):
            m, k = _isa_a(instr, lane, j)
            assert np.isnan(A[m, k]) or A[m, k] == a_ops[lane][j], "half-waves disagree on A"
            A[m, k] = a_ops[lane][j]
            k, n = _isa_b(instr, lane, j)
            assert np.isnan(B[k, n]) or B[k, n] == b_ops[lane][j], "half-waves disagree on B"
            B[k, n] = b_ops[lane][j]
    assert not np.isnan(A).any() and not np.isnan(B).any()
    D = A @ B
    out = [list(x) for x in acc]
    for i in range(instr.m):
        for j in range(instr.n):
            lane, reg = _isa_d(instr, i, j)
            out[lane][reg] = acc[lane][reg] + D[i, j]
    return out


def simulate_dot(instr, enc, A, B, C, num_warps, plan=None):
    """What the lowered kernel computes: registers filled by the layouts, the plan's instruction
    sequence run through `_execute`, the result read back through the accumulator layout."""
    M, K = A.shape
    N = B.shape[1]
    la, lb, lc = _layouts(enc, M, N, K)
    plan = matrix_core_plan(instr, la, lb, lc) if plan is None else plan
    lanes = WARP_SIZE[instr.kind]
    result = np.full((M, N), np.nan)
    for warp in range(num_warps):
        a_regs = [[A[la.coords(r, l, warp)] for r in range(la.num_registers)] for l in range(lanes)]
        b_regs = [[B[lb.coords(r, l, warp)] for r in range(lb.num_registers)] for l in range(lanes)]
        c_regs = [[C[lc.coords(r, l, warp)] for r in range(lc.num_registers)] for l in range(lanes)]
        for result_regs, steps in plan:
            acc = [[c_regs[l][r] for r in result_regs] for l in range(lanes)]
            for a_idx, b_idx in steps:
                acc = _execute(instr, [[a_regs[l][r] for r in a_idx] for l in range(lanes)],
                               [[b_regs[l][r] for r in b_idx] for l in range(lanes)], acc)
            for l in range(lanes):
                for i, r in enumerate(result_regs):
                    c_regs[l][r] = acc[l][i]
        for l in range(lanes):
            for r in range(lc.num_registers):
                result[lc.coords(r, l, warp)] = c_regs[l][r]
    return result


@pytest.mark.parametrize("instr", [_instr_case(i) for i in INSTRUCTIONS])
@pytest.mark.parametrize("num_warps,tiles", [(1, (1, 1, 1)), (4, (2, 2, 2)), (2, (1, 2, 4)), (8, (4, 1, 1))])
def test_simulated_lanes_compute_the_matrix_product(instr, num_warps, tiles):
    M, N, K = instr.m * tiles[0], instr.n * tiles[1], instr.k * tiles[2]
    enc = _encoding(instr, spread_warps(tiles[0], tiles[1], num_warps))
    assert enc.instruction(instr.operand) == instr
    rng = np.random.default_rng(M * 7 + N * 3 + K)
    A = rng.integers(-4, 5, (M, K)).astype(np.float64)
    B = rng.integers(-4, 5, (K, N)).astype(np.float64)
    C = rng.integers(-9, 10, (M, N)).astype(np.float64)
    np.testing.assert_array_equal(simulate_dot(instr, enc, A, B, C, num_warps), A @ B + C)


def test_simulation_catches_a_wrong_accumulator_layout():
    """The check is not vacuous: swapping two accumulator registers breaks it."""
    instr = INSTRUCTIONS[0]
    enc = _encoding(instr, (1, 1))
    A, B, C = np.eye(32), np.arange(32 * 32.0).reshape(32, 32), np.zeros((32, 32))
    la, lb, lc = _layouts(enc, 32, 32, 32)
    good = matrix_core_plan(instr, la, lb, lc)
    swapped = [([res[1], res[0]] + res[2:], steps) for res, steps in good]
    np.testing.assert_array_equal(simulate_dot(instr, enc, A, B, C, 1, good), A @ B + C)
    assert not np.array_equal(simulate_dot(instr, enc, A, B, C, 1, swapped), A @ B + C)


# --------------------------------------------------------------- (3) compiled kernels (LLVM 22)

@tilejit.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32 if a_ptr.dtype.element_ty != tl.int8 else tl.int32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BLOCK_N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], acc)


def _compile_matmul(arch, elem, block, num_warps=4):
    out = "*i32" if elem == "i8" else "*fp32"
    sig = {"a_ptr": f"*{elem}", "b_ptr": f"*{elem}", "c_ptr": out, "K": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    consts = dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), block))
    return tj_compile(ASTSource(_matmul_kernel, sig, consts), target=f"hip:{arch}", options={"num_warps": num_warps})


@requires_lld
@pytest.mark.parametrize("arch,elem,block,instruction,layout", [
    ("gfx942", "fp16", (64, 64, 32), "v_mfma_f32_32x32x8_f16", "#ttg.amd_mfma"),
    ("gfx942", "fp16", (16, 16, 32), "v_mfma_f32_16x16x16_f16", "#ttg.amd_mfma"),
    ("gfx942", "bf16", (64, 64, 32), "v_mfma_f32_32x32x8_bf16", "#ttg.amd_mfma"),
    ("gfx942", "i8", (64, 64, 32), "v_mfma_i32_32x32x16_i8", "#ttg.amd_mfma"),
    ("gfx90a", "fp16", (32, 32, 16), "v_mfma_f32_32x32x8f16", "#ttg.amd_mfma"),
    ("gfx90a", "i8", (32, 32, 16), "v_mfma_i32_32x32x8i8", "#ttg.amd_mfma"),
    ("gfx950", "bf16", (32, 64, 32), "v_mfma_f32_32x32x8_bf16", "#ttg.amd_mfma"),
    ("gfx1100", "fp16", (32, 32, 32), "v_wmma_f32_16x16x16_f16", "#ttg.amd_wmma<{version = 1"),
    ("gfx1100", "bf16", (16, 32, 16), "v_wmma_f32_16x16x16_bf16", "#ttg.amd_wmma<{version = 1"),
    ("gfx1201", "fp16", (32, 32, 32), "v_wmma_f32_16x16x16_f16", "#ttg.amd_wmma<{version = 2"),
    # OCP fp8 operands run on the f16 instructions, upcast exactly (as Triton on gfx942)
    ("gfx942", "fp8e4nv", (64, 64, 32), "v_mfma_f32_32x32x8_f16", "#ttg.amd_mfma"),
    ("gfx942", "fp8e5", (16, 16, 32), "v_mfma_f32_16x16x16_f16", "#ttg.amd_mfma"),
    ("gfx1100", "fp8e4nv", (32, 32, 32), "v_wmma_f32_16x16x16_f16", "#ttg.amd_wmma<{version = 1"),
])
def test_matmul_compiles_to_the_matrix_instruction(arch, elem, block, instruction, layout):
    kernel = _compile_matmul(arch, elem, block)
    assert layout in kernel.asm["ttgir"]
    # The loop keeps the accumulator in the matrix layout: no conversion of it inside the loop.
    ir.parse_module(kernel.asm["ttgir"])
    found = re.findall(r"\bv_(?:mfma|wmma)\w*", kernel.asm["amdgcn"])
    assert found and set(found) == {instruction}
    assert kernel.asm["hsaco"][:4] == b"\x7fELF"


@requires_lld
@pytest.mark.parametrize("arch,elem,block", [
    ("gfx942", "fp32", (32, 32, 32)),   # fp32 inputs: no f32 MFMA used, FMA
    ("gfx1100", "i8", (16, 16, 16)),    # no int8 WMMA lowering yet
    ("gfx942", "i8", (16, 16, 16)),     # K below both int8 MFMA tiles (16x16x32, 32x32x16)
])
def test_unsupported_dots_fall_back_to_fma(arch, elem, block):
    kernel = _compile_matmul(arch, elem, block)
    assert "amd_mfma" not in kernel.asm["ttgir"] and "amd_wmma" not in kernel.asm["ttgir"]
    assert not re.search(r"\bv_(?:mfma|wmma)", kernel.asm["amdgcn"])


def test_selection_respects_arch_and_wave_size():
    assert select_matrix_core("gfx942", 64, 4, "f16", "f16", "f32", (64, 64, 32)) is not None
    assert select_matrix_core("gfx942", 32, 4, "f16", "f16", "f32", (64, 64, 32)) is None
    assert select_matrix_core("gfx1100", 32, 4, "f16", "f16", "f32", (64, 64, 32)).version == 1
    assert select_matrix_core("gfx90a", 64, 4, "i8", "i8", "i32", (32, 32, 16)).k_width == 4
    assert select_matrix_core("gfx942", 64, 4, "i8", "i8", "i32", (32, 32, 16)).k_width == 8
    assert select_matrix_core("gfx942", 64, 4, "f16", "f16", "f16", (64, 64, 32)) is None   # f16 accumulator
    assert select_matrix_core("gfx942", 64, 4, "f16", "bf16", "f32", (64, 64, 32)) is None
    assert select_matrix_core("gfx942", 64, 4, "f8E4M3FN", "f8E5M2", "f32", (64, 64, 32)) is not None
    assert select_matrix_core("gfx942", 64, 4, "f8E4M3FN", "f16", "f32", (64, 64, 32)) is None
    assert select_matrix_core("gfx942", 64, 4, "f8E4M3FN", "f8E4M3FN", "f16", (64, 64, 32)) is None
