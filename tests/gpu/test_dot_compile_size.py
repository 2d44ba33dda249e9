"""The code size of dots whose LLVM codegen time used to explode (docs/benchmarks.md, "Compile time"):

- `tl.dot_scaled` multiplies its decoded, scaled operands in Triton's compute type (fp16 next to an
  fp16 operand, else bf16; exact for these values), so GPUs take their f16/bf16 matrix units
  (128x128x128 on CUDA: 425 s as an fp32 FMA dot, ~20 s as mma.sync tf32, a few seconds now);
- fp8 dots on AMD take the f16 MFMA/WMMA (operands upcast exactly), as Triton does;
- an FMA dot decodes each fp8/bf16 operand register once, not once per product (a smaller LLVM
  IR; LLVM's CSE merged the repeated decodes anyway, so this alone did not change compile time)."""
import re

import pytest

import tilejit
import tilejit.language as tl
from tilejit.frontend.source import ASTSource
from toolchain_paths import needs_lld, needs_ptxas

D16 = [["tt.divisibility", 16]]


@tilejit.jit
def _scaled(a_ptr, b_ptr, b_scale_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    b_scale = tl.load(b_scale_ptr + tl.arange(0, N)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    c = tl.dot_scaled(a, None, "fp16", b, b_scale, "e4m3")
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


def _compile_scaled(target, S=64):
    sig = {"a_ptr": "*fp16", "b_ptr": "*u8", "b_scale_ptr": "*u8", "out_ptr": "*fp32"}
    src = ASTSource(_scaled, sig, {"M": S, "N": S, "K": S}, {(i,): D16 for i in range(4)})
    return tilejit.compile(src, target=target, options={"num_warps": 4})


@pytest.mark.parametrize("target", [pytest.param("cuda:90", marks=needs_ptxas), pytest.param("hip:gfx942", marks=needs_lld),
                                    pytest.param("hip:gfx90a", marks=needs_lld), "interpreter"])
def test_dot_scaled_multiplies_in_the_compute_type_on_every_target(target):
    src = ASTSource(_scaled, {"a_ptr": "*fp16", "b_ptr": "*u8", "b_scale_ptr": "*u8", "out_ptr": "*fp32"},
                    {"M": 16, "N": 16, "K": 32})
    ttir = tilejit.compile(src, target=target).asm["ttir"]
    assert re.findall(r"tt\.dot .*: \((tensor<\w+>), (tensor<\w+>), tensor<\w+>\)", ttir) == [
        ("tensor<16x32xf16>", "tensor<32x16xf16>")]


@tilejit.jit
def _scaled_mx(a_ptr, a_scale_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """e2m1 (two codes a byte along K) with scales times e4m3 without: both upcast to bf16."""
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * (K // 2) + tl.arange(0, K // 2)[None, :])
    a_scale = tl.load(a_scale_ptr + tl.arange(0, M)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    c = tl.dot_scaled(a, a_scale, "e2m1", b, None, "e4m3")
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


@needs_ptxas
def test_dot_scaled_takes_the_f16_and_bf16_mma_on_cuda():
    """What Triton's test_scaled_dot asserts in the PTX on sm_90: an f32.f16.f16 / f32.bf16.bf16 mma.sync
    or wgmma (these dots are outside loops: wgmma, B staged in shared memory by the dot)."""
    kernel = _compile_scaled("cuda:90")
    ptx = kernel.asm["ptx"]
    assert _mma_kinds(ptx) == {"f16"}
    assert "fma.rn.f32" not in ptx
    assert kernel.asm["cubin"][:4] == b"\x7fELF"
    src = ASTSource(_scaled_mx, {"a_ptr": "*u8", "a_scale_ptr": "*u8", "b_ptr": "*u8", "out_ptr": "*fp32"},
                    {"M": 64, "N": 64, "K": 64}, {(i,): D16 for i in range(4)})
    ptx = tilejit.compile(src, target="cuda:90", options={"num_warps": 4}).asm["ptx"]
    assert _mma_kinds(ptx) == {"bf16"}


def _mma_kinds(ptx):
    """The operand types of the f32-accumulating f16/bf16 matrix instructions in `ptx`."""
    forms = r"(?:mma\.sync\.aligned\.m16n8k16\.row\.col|wgmma\.mma_async\.sync\.aligned\.m64n\d+k16)"
    return set(re.findall(forms + r"\.f32\.(b?f16)\.\1", ptx))


@tilejit.jit
def _fp8_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot(a, b))


@needs_ptxas
def test_fma_dot_decodes_each_fp8_register_once():
    src = ASTSource(_fp8_dot, {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32"},
                    {"M": 8, "N": 16, "K": 16}, {(i,): D16 for i in range(3)})
    kernel = tilejit.compile(src, target="cuda:90", options={"num_warps": 1})   # M < 16: no mma.sync
    llir = kernel.asm["llir"]
    fmas = llir.count('llvm.fma.f32"(') - 1
    decodes = len(re.findall(r"select\s+i1 %\S+, float 0x7ff8000000000000", llir))   # e4m3's NaN code
    # each lane holds 8 outputs (the 8x16 tile twice over 32 lanes), in 8 rows of one column: 8 rows
    # of A and one column of B, 16 codes each, decoded once (a decode per product was 2 * 128)
    assert fmas == 8 * 16
    assert decodes == 8 * 16 + 16
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


@needs_lld
def test_fp8_dot_takes_the_f16_matrix_core_on_amd():
    """As Triton 3.9 on gfx942 (fuzz seed 8 cross-compiled: 25-30 s of CPU as an FMA dot, 2 s now)."""
    src = ASTSource(_fp8_dot, {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e5", "c_ptr": "*fp32"},
                    {"M": 64, "N": 16, "K": 64}, {(i,): D16 for i in range(3)})
    kernel = tilejit.compile(src, target="hip:gfx942", options={"num_warps": 2})
    assert set(re.findall(r"\bv_mfma\w*", kernel.asm["amdgcn"])) == {"v_mfma_f32_16x16x16_f16"}
    assert 'llvm.fma.f32"(' not in kernel.asm["llir"]
