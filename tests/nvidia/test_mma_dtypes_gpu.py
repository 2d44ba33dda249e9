"""Tensor-core tl.dot beyond f16/bf16 on a real NVIDIA GPU (sm_80+), checked against torch: fp32 with
input_precision tf32 (mma.sync .tf32: the operands' low 13 mantissa bits ignored), tf32x3 / bf16x3 /
bf16x6 (chains of tf32 / bf16 dots), "ieee" (FMAs),
int8 -> int32 (mma.sync .s8, exact), fp8 e4m3 / e5m2 (upcast to f16, exact products; wgmma on sm_90), in a K loop
and in one tile, 4 and 8 warps. The PTX is checked for the instruction. Skips without such a GPU."""
import pytest

import tilejit
import tilejit.language as tl

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8:
    pytest.skip("needs an sm_80+ GPU", allow_module_level=True)


@tilejit.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0)
        acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=ACC)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :], acc)


def _truncate_tf32(x):
    return (x.view(torch.int32) & -8192).view(torch.float32)   # 0xFFFFE000


def _run(a, b, out_dtype, prec, BM, BN, BK, warps, b_t=False):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device="cuda", dtype=out_dtype)
    acc = tl.int32 if out_dtype == torch.int32 else tl.float32
    ck = _mm[(M // BM, N // BN)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 c.stride(0), BM=BM, BN=BN, BK=BK, PREC=prec, ACC=acc, num_warps=warps)
    return c, ck.asm["ptx"]


SHAPES = [(64, 64, 64, 4), (128, 128, 64, 8), (128, 64, 32, 4)]


@pytest.mark.parametrize("BM,BN,BK,warps", SHAPES)
@pytest.mark.parametrize("b_t", [False, True])
def test_tf32_dot_matches_torch_on_truncated_inputs(BM, BN, BK, warps, b_t):
    torch.manual_seed(0)
    M, N, K = 2 * BM, 2 * BN, 3 * BK + 16
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(N, K, device="cuda").t() if b_t else torch.randn(K, N, device="cuda")
    c, ptx = _run(a, b, torch.float32, "tf32", BM, BN, BK, warps)
    # sm_90 takes the pipelined wgmma .tf32: a K-major B is copied in vectors, an N-major one element
    # by element into a K-major tile; sm_80 the mma.sync
    if torch.cuda.get_device_capability()[0] == 9:
        assert f"wgmma.mma_async.sync.aligned.m64n{BN}k8.f32.tf32.tf32" in ptx
    else:
        assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    ref = _truncate_tf32(a.contiguous()).double() @ _truncate_tf32(b.contiguous()).double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-4)
    full = a.double() @ b.double()
    assert (c.double() - full).abs().max() > 1e-4   # the low bits really were dropped


@pytest.mark.parametrize("prec,rtol", [("tf32x3", 2e-6), ("bf16x3", 2e-5), ("bf16x6", 2e-6)])
def test_split_precisions_run_on_tensor_cores_and_are_close_to_fp32(prec, rtol):
    torch.manual_seed(4)
    a, b = torch.rand(128, 96, device="cuda") + 0.5, torch.rand(96, 128, device="cuda") + 0.5
    c, ptx = _run(a, b, torch.float32, prec, 64, 64, 32, 4)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=rtol, atol=0)
    # sm_90: the bf16 parts of B, computed in the loop, are staged for wgmma (as Triton's local_alloc);
    # tf32 parts, and every part on sm_80, run mma.sync
    wgmma = prec.startswith("bf16") and torch.cuda.get_device_capability()[0] == 9
    assert ("wgmma.mma_async" in ptx) == wgmma and ("mma.sync" in ptx) != wgmma


def test_ieee_dot_stays_exact_fp32():
    torch.manual_seed(1)
    a, b = torch.randn(128, 96, device="cuda"), torch.randn(96, 64, device="cuda")
    c, ptx = _run(a, b, torch.float32, "ieee", 64, 64, 32, 4)
    assert "mma" not in ptx
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("BM,BN,BK,warps", SHAPES)
def test_int8_dot_matches_torch_exactly(BM, BN, BK, warps):
    torch.manual_seed(2)
    M, N, K = 2 * BM, 2 * BN, 3 * BK + 32
    a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (K, N), device="cuda", dtype=torch.int8)
    c, ptx = _run(a, b, torch.int32, None, BM, BN, BK, warps)
    assert "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32" in ptx
    ref = (a.cpu().long() @ b.cpu().long()).int()
    assert torch.equal(c.cpu(), ref)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("BM,BN,BK,warps", SHAPES + [(128, 128, 128, 8), (64, 64, 128, 4)])
@pytest.mark.parametrize("b_t", [False, True])
def test_fp8_dot_matches_torch(dtype, BM, BN, BK, warps, b_t):
    fp8 = getattr(torch, dtype)
    torch.manual_seed(3)
    M, N, K = 2 * BM, 2 * BN, 3 * BK + 16
    a = (torch.randn(M, K, device="cuda") * 4).to(fp8)
    b = (torch.randn(N, K, device="cuda") * 4).to(fp8).t() if b_t else (torch.randn(K, N, device="cuda") * 4).to(fp8)
    a[0, 0] = 2.0 ** -9 if dtype == "float8_e4m3fn" else 2.0 ** -16   # a subnormal
    c, ptx = _run(a, b, torch.float32, None, BM, BN, BK, warps)
    ref = a.double() @ b.double()
    if torch.cuda.get_device_capability()[0] == 9:
        # the pipelined wgmma .e4m3 / .e5m2 on K-major tiles (a row-major B rewritten K-major in
        # shared memory each iteration; K of 64 or 32 bytes on the narrower swizzles), which sums in
        # the tensor core's reduced precision (as Triton's default on sm_90): about 2^-13 of the
        # partial sums' size, here ~1 on sums of ~500 (measured on an H100: 1.2 at most)
        kind = "e4m3" if dtype == "float8_e4m3fn" else "e5m2"
        assert f"wgmma.mma_async.sync.aligned.m64n{BN}k32.f32.{kind}.{kind}" in ptx and "mma.sync" not in ptx
        assert ("prmt.b32" in ptx) != b_t
        torch.testing.assert_close(c.double(), ref, rtol=0, atol=8e-3 * ref.abs().max().item())
        if BK == 128:
            assert (c.double() - ref).abs().max() > 1e-3   # really the tensor core's accumulation
        return
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx   # exact f16 products, f32 sums
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-3)


def test_fp8_e4m3_nan_propagates():
    a = torch.ones(64, 64, device="cuda").to(torch.float8_e4m3fn)
    a[5, 7] = float("nan")
    b = torch.ones(64, 64, device="cuda").to(torch.float8_e4m3fn)
    c, _ = _run(a, b, torch.float32, None, 64, 64, 64, 4)
    assert torch.isnan(c[5]).all() and not torch.isnan(c[:5]).any()
