"""fp8 kernels shared by the cross-compiled PTX tests (tests/gpu/test_wgmma.py) and the GPU tests."""
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
