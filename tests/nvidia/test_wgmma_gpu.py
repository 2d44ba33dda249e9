"""tl.dot through wgmma on a real sm_90 GPU, checked against torch: both operand majors (A K- or
M-major, B N- or K-major), f16 and bf16, 4 and 8 warps, N from 64 to 256, K not a multiple of the
tile (cp.async zero-fill), one or two m64 blocks per warpgroup, A through a descriptor or from
registers. Skips where there is no Hopper GPU."""
import pytest

from wgmma_kernels import fp8_tile_dots, strided_matmul

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("needs an sm_90 GPU", allow_module_level=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 128, 64, 8), (64, 64, 64, 4), (64, 256, 64, 4),
                                            (128, 64, 128, 8), (128, 64, 64, 4), (256, 128, 64, 8)])
def test_wgmma_matmul_matches_torch(dtype, a_t, b_t, BM, BN, BK, warps):
    torch.manual_seed(0)
    M, N, K = 2 * BM, 2 * BN, 3 * BK + 32
    a = torch.randn(K, M, device="cuda", dtype=dtype).t() if a_t else torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(N, K, device="cuda", dtype=dtype).t() if b_t else torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    ck = strided_matmul[(M // BM, N // BN)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                 BM=BM, BN=BN, BK=BK, num_warps=warps, num_stages=3)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=5e-2)
    assert "wgmma.mma_async" in ck.asm["ptx"]   # every operand major here is pipelined into wgmma


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 128, 64, 8), (64, 64, 64, 8), (128, 256, 128, 8), (64, 64, 32, 4)])
def test_fp8_wgmma_matmul_in_every_operand_major(dtype, a_t, b_t, BM, BN, BK, warps):
    """fp8 wgmma reads K-major tiles only: an A stored along M or a B along N is copied as it is and
    rewritten K-major every iteration (`ByteTranspose`); K of 64 / 32 bytes on the narrower
    swizzles; 8 warps on 64 rows split N. Values against torch at the tensor core's reduced-precision
    accumulation (about 2^-13 of the partial sums)."""
    fp8 = getattr(torch, dtype)
    torch.manual_seed(6)
    M, N, K = 2 * BM, 2 * BN, 3 * BK + 16
    a = (torch.randn(K, M, device="cuda") * 2).to(fp8).t() if a_t else (torch.randn(M, K, device="cuda") * 2).to(fp8)
    b = (torch.randn(N, K, device="cuda") * 2).to(fp8).t() if b_t else (torch.randn(K, N, device="cuda") * 2).to(fp8)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    ck = strided_matmul[(M // BM, N // BN)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                 BM=BM, BN=BN, BK=BK, num_warps=warps, num_stages=3)
    ptx = ck.asm["ptx"]
    assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx
    assert ("prmt.b32" in ptx) == (a_t or not b_t)   # a rewrite where an operand is not K-major
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, rtol=0, atol=8e-3 * ref.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("a_t", [False, True])
@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 64, 4), (128, 64, 64, 4), (128, 128, 64, 8), (64, 256, 32, 4)])
def test_wgmma_with_a_from_registers_matches_torch(dtype, a_t, BM, BN, BK, warps):
    torch.manual_seed(1)
    M, N, K = 2 * BM, 2 * BN, 3 * BK + 16
    a = torch.randn(K, M, device="cuda", dtype=dtype).t() if a_t else torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    ck = strided_matmul[(M // BM, N // BN)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                 BM=BM, BN=BN, BK=BK, A_COMPUTED=True, num_warps=warps, num_stages=3)
    # Past K, A reads 0 (so 2 * 0 - 1 = -1) but B reads 0: those products add nothing.
    torch.testing.assert_close(c, (a * 2 - 1).float() @ b.float(), rtol=1e-2, atol=1e-1)
    assert "wgmma.mma_async" in ck.asm["ptx"] and "}, {%r" in ck.asm["ptx"]   # the register-A form


@pytest.mark.parametrize("BM,warps", [(128, 4), (64, 4), (256, 8)])
def test_unpipelined_loop_runs_mma_sync_on_the_wgmma_layout(BM, warps):
    """num_stages=1: no copy ring, so B never reaches shared memory for a descriptor; the dot keeps
    the version-3 layout (one or two m64 blocks per warpgroup) and runs mma.sync on it."""
    torch.manual_seed(2)
    BN, BK = 64, 32
    M, N, K = 2 * BM, 2 * BN, 3 * BK
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    ck = strided_matmul[(M // BM, N // BN)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                 BM=BM, BN=BN, BK=BK, num_warps=warps, num_stages=1)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=5e-2)
    assert "versionMajor = 3" in ck.asm["ttgir"] and "mma.sync" in ck.asm["ptx"]



@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("chain", [False, True])
def test_fp8_dots_outside_loops_take_wgmma(dtype, chain):
    fp8 = getattr(torch, dtype)
    torch.manual_seed(5)
    M, N, K = 128, 128, 64
    x = (torch.randn(M, K, device="cuda")).to(fp8)
    y = (torch.randn(K, N, device="cuda")).to(fp8)   # row-major: the dot stages it K-major
    w = (torch.randn(N, N, device="cuda") * 0.1).to(fp8)
    z = torch.empty(M, N, device="cuda")
    ck = fp8_tile_dots[(1,)](x, y, w, z, M=M, N=N, K=K, CHAIN=chain, num_warps=4)
    kind = "e4m3" if dtype == "float8_e4m3fn" else "e5m2"
    assert f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{kind}.{kind}" in ck.asm["ptx"]
    ref = x.double() @ y.double()
    if chain:
        # the second dot's A is the first dot's result rounded to fp8: that of the same wgmmas (a
        # reference sum may round to the neighbouring fp8 value, a quarter apart in e5m2)
        first = torch.empty_like(z)
        fp8_tile_dots[(1,)](x, y, w, first, M=M, N=N, K=K, CHAIN=False, num_warps=4)
        torch.testing.assert_close(first.double(), ref, rtol=0, atol=1e-2 * ref.abs().max().item())
        ref = first.to(fp8).double() @ w.double()
    torch.testing.assert_close(z.double(), ref, rtol=0, atol=1e-2 * ref.abs().max().item())
