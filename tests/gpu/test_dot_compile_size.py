"""The code size of dots whose LLVM codegen time used to explode (docs/benchmarks.md, "Compile time"):

- `tl.dot_scaled` multiplies its decoded, scaled fp32 operands at input precision tf32 where the
  target allows it (every such value is a tf32 value, so the products stay exact), so on CUDA it
  takes mma.sync instead of an fp32 FMA dot (128x128x128: 425 s -> ~20 s to cross-compile here);
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


@pytest.mark.parametrize("target,precision", [pytest.param("cuda:90", "tf32", marks=needs_ptxas),
                                              pytest.param("hip:gfx942", "tf32", marks=needs_lld),
                                              pytest.param("hip:gfx90a", "ieee", marks=needs_lld),
                                              ("interpreter", "tf32")])
def test_dot_scaled_dot_precision_per_target(target, precision):
    src = ASTSource(_scaled, {"a_ptr": "*fp16", "b_ptr": "*u8", "b_scale_ptr": "*u8", "out_ptr": "*fp32"},
                    {"M": 16, "N": 16, "K": 32})
    ttir = tilejit.compile(src, target=target).asm["ttir"]
    assert re.findall(r'inputPrecision = "(\w+)"', ttir) == [precision]


@needs_ptxas
def test_dot_scaled_takes_mma_sync_on_cuda():
    kernel = _compile_scaled("cuda:90")
    ptx = kernel.asm["ptx"]
    assert set(re.findall(r"mma\.sync[\w.]*", ptx)) == {"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"}
    assert "fma.rn.f32" not in ptx
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


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
