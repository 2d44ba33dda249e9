"""wgmma kernels shared by the cross-compiled PTX tests (tests/gpu/test_wgmma.py) and the GPU tests
(tests/nvidia/test_wgmma_gpu.py, which skips where there is no Hopper GPU)."""
import tilejit
import tilejit.language as tl


@tilejit.jit
def fp8_tile_dots(x_ptr, y_ptr, w_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                  CHAIN: tl.constexpr):
    """Triton's test_dot fp8 case, loop-free: one dot of whole tiles (B row-major), and with `CHAIN`
    its result cast to fp8 as the A of a second dot; the dots stage their operands K-major."""
    om, on, ok = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    x = tl.load(x_ptr + om[:, None] * K + ok[None, :])
    y = tl.load(y_ptr + ok[:, None] * N + on[None, :])
    z = tl.dot(x, y)
    if CHAIN:
        w = tl.load(w_ptr + on[:, None] * N + on[None, :])
        z = tl.dot(z.to(w.dtype), w)
    tl.store(z_ptr + om[:, None] * N + on[None, :], z)


@tilejit.jit
def strided_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, A_COMPUTED: tl.constexpr = False):
    """A K loop over tiles of any operand major (the strides pick it), K masked; with A_COMPUTED, A
    is no longer the loaded tile (wgmma reads it from registers)."""
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        if A_COMPUTED:
            a = a * 2 - 1   # no longer the loaded tile: wgmma reads A from registers
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :], acc)
