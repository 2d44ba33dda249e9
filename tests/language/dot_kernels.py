"""Dot kernels shared by the language tests (every backend) and the GPU code-generation tests."""
import tilejit
import tilejit.language as tl


@tilejit.jit
def f16_accumulator_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """acc = tl.dot(a, b, acc, out_dtype=tl.float16) carried through a K loop."""
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float16)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + m[:, None] * K + (k0 + k)[None, :])
        b = tl.load(b_ptr + (k0 + k)[:, None] * BN + n[None, :])
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + m[:, None] * BN + n[None, :], acc)
