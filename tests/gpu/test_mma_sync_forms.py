"""Tensor-core dots beyond f16/bf16 on NVIDIA: fp32 with inputPrecision tf32 (mma.sync m16n8k8 .tf32),
int8 -> int32 (m16n8k32 .s8) and fp8 e4m3/e5m2 (upcast to f16 exactly, m16n8k16; wgmma on sm_90), cross-compiled for
sm_80 and sm_90: the registers each call packs against the PTX ISA fragments, the instruction in the
PTX, and ptxas accepting the code without spills. (The GPU results: tests/nvidia/test_mma_dtypes_gpu.py.)"""
import re
import subprocess

import pytest

import tilejit
import tilejit.language as tl
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit_nvidia.layouts import NvidiaMmaEncoding
from tilejit_nvidia.mma_sync import MMA_FORMS
from toolchain_paths import needs_ptxas, ptxas


# -- the fragments, from the PTX ISA ("Matrix Fragments for mma.m16n8k*"), per lane g = lane / 4,
# t = lane % 4, element i of the instruction's A / B vector -> (row, col) in the instruction's tile.
def _ptx_a(form, g, t, i):
    if form == "f64":    # m8n8k4: a0 (g, t); word i is the instruction for rows 8i..8i+7
        return g + 8 * i, t
    if form in ("tf32", "f64_sm90"):   # m16n8k8 tf32 / m16n8k16 f64: a0 (g, t), a1 (g+8, t), a2 (g, t+4), ...
        return g + 8 * (i % 2), t + 4 * (i // 2)
    if form == "s8":     # m16n8k32: a0..a3 row g, a4..a7 g+8, a8..a15 the same 16 columns on
        return g + 8 * ((i // 4) % 2), 4 * t + i % 4 + 16 * (i // 8)
    return g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)   # m16n8k16 f16


def _ptx_b(form, g, t, i):
    if form in ("tf32", "f64", "f64_sm90"):
        return t + 4 * i, g
    if form == "s8":
        return 4 * t + i % 4 + 16 * (i // 4), g
    return 2 * t + i % 2 + 8 * (i // 2), g


@pytest.mark.parametrize("form", sorted(MMA_FORMS))
def test_each_call_packs_its_ptx_fragments_under_one_k_renaming(form):
    """For every lane, the elements a call packs (by lane-0 offsets, from the m16n8k16 operand
    layouts) are the instruction's A and B fragments, rows and columns exact and K renamed by one map,
    the same for every lane and for A and B; over the calls of a K step that map covers each K once."""
    k_step, calls = MMA_FORMS[form]
    enc = NvidiaMmaEncoding(2, 0, (1, 1))
    a_ll, b_ll = enc.operand_linear(0, (16, k_step)), enc.operand_linear(1, (k_step, 8))
    a_reg = {off: r for r, off in enumerate(a_ll.register_offsets())}
    b_reg = {off: r for r, off in enumerate(b_ll.register_offsets())}
    covered = []
    for _, a_words, b_words in calls:
        k_map = {}
        for lane in range(32):
            g, t = lane // 4, lane % 4
            a_elems = [off for word in a_words for off in word]
            b_elems = [off for word in b_words for off in word]
            for i, off in enumerate(a_elems):
                row, col = a_ll.coords(a_reg[off], lane, 0)
                want_row, logical_k = _ptx_a(form, g, t, i)
                assert row == want_row, (form, lane, i)
                assert k_map.setdefault(logical_k, col) == col, (form, lane, i)
            for i, off in enumerate(b_elems):
                k, col = b_ll.coords(b_reg[off], lane, 0)
                logical_k, want_col = _ptx_b(form, g, t, i)
                assert col == want_col, (form, lane, i)
                assert k_map.setdefault(logical_k, k) == k, (form, lane, i)
        covered += list(k_map.values())
    assert sorted(covered) == list(range(k_step))


# -- compiled code ----------------------------------------------------------------------------------
@tilejit.jit
def _dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
         ACC: tl.constexpr):
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + m[:, None] * BK + k[None, :])
    b = tl.load(b_ptr + k[:, None] * BN + n[None, :])
    tl.store(c_ptr + m[:, None] * BN + n[None, :], tl.dot(a, b, input_precision=PREC, out_dtype=ACC))


D16 = [["tt.divisibility", 16]]
CASES = {   # operand type, accumulator, input precision, the instruction expected
    "tf32": ("fp32", "fp32", "tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    "s8": ("i8", "i32", None, "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32"),
    "e4m3": ("fp8e4nv", "fp32", None, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    "e5m2": ("fp8e5", "fp32", None, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
}


def _compile(case, arch, BM, BN, BK, warps):
    elem, acc, prec, _ = CASES[case]
    sig = {"a_ptr": f"*{elem}", "b_ptr": f"*{elem}", "c_ptr": f"*{acc}", "BM": "constexpr", "BN": "constexpr",
           "BK": "constexpr", "PREC": "constexpr", "ACC": "constexpr"}
    consts = {"BM": BM, "BN": BN, "BK": BK, "PREC": prec, "ACC": tl.int32 if acc == "i32" else tl.float32}
    src = ASTSource(_dot, sig, consts, {(i,): D16 for i in range(3)})
    return tilejit.compile(src, target=GPUTarget.parse(f"cuda:{arch}"), options={"num_warps": warps})


@needs_ptxas
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 64, 4), (128, 128, 64, 8)])
def test_dot_uses_the_tensor_core_instruction_without_spills(case, arch, BM, BN, BK, warps, tmp_path):
    ptx = _compile(case, arch, BM, BN, BK, warps).asm["ptx"]
    instrs = set(re.findall(r"(?:mma\.sync|wgmma\.mma_async)[\w.]*", ptx))
    if arch == 90 and case in ("e4m3", "e5m2"):
        # sm_90: wgmma, both tiles staged K-major by the loop-free dot; per warpgroup's m64 block one
        # k32 instruction per 32 of K
        instr = f"wgmma.mma_async.sync.aligned.m64n{BN}k32.f32.{case}.{case}"
        assert instrs == {instr}
        assert ptx.count(instr) == BM // (16 * warps) * (BK // 32)
    else:
        assert instrs == {CASES[case][3]}
        calls_per_k16 = {"tf32": 2, "s8": 0.5}.get(case, 1)
        assert ptx.count(CASES[case][3]) == (BM // 16) * (BN // 8) * (BK // 16) * calls_per_k16 // warps
    (tmp_path / "k.ptx").write_text(ptx)
    out = subprocess.run([ptxas(), f"-arch=sm_{arch}{'a' if arch == 90 else ''}", "-v", str(tmp_path / "k.ptx"),
                          "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr, out.stderr


def test_fp32_dot_at_ieee_keeps_fmas():
    precision = "ieee"   # (tf32x3, bf16x3, bf16x6 are split into tf32 / bf16 dots: test_f32_dot_split.py)
    src = ASTSource(_dot, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "BM": "constexpr",
                           "BN": "constexpr", "BK": "constexpr", "PREC": "constexpr", "ACC": "constexpr"},
                    {"BM": 16, "BN": 16, "BK": 16, "PREC": precision, "ACC": tl.float32}, {(i,): D16 for i in range(3)})
    ptx = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 4}).asm["ptx"]
    assert "mma" not in ptx and "fma.rn.f32" in ptx


@tilejit.jit
def _bf16_chained_dot(q_ptr, k_ptr, v_ptr, o_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)
    tile = rows[:, None] * N + rows[None, :]
    p = tl.dot(tl.load(q_ptr + tile), tl.load(k_ptr + tile))   # fp32 in the mma layout
    o = tl.dot(p.to(tl.bfloat16), tl.load(v_ptr + tile))      # bf16 A operand from registers
    tl.store(o_ptr + tile, o)


@pytest.mark.parametrize("arch", [80, 90])
def test_bf16_operands_from_registers_are_rounded_in_pairs(arch):
    """An A operand computed in registers (attention's `p.to(tl.bfloat16)`) is rounded two fp32
    values at a time, `cvt.rn.bf16x2.f32` straight into the mma register, as Triton. Packed by
    integer shifts, every element took its own `cvt.rn.bf16.f32` and three moves."""
    sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*fp32", "N": "constexpr"}
    src = ASTSource(_bf16_chained_dot, sig, {"N": 64}, {(i,): D16 for i in range(4)})
    ptx = tilejit.compile(src, target=GPUTarget.parse(f"cuda:{arch}"), options={"num_warps": 4}).asm["ptx"]
    # the 64x64 fp32 P, 32 values a thread: 16 pairs
    assert len(re.findall(r"cvt\.rn\.bf16x2\.f32", ptx)) == 16
    assert not re.findall(r"cvt\.rn\.bf16\.f32", ptx)
