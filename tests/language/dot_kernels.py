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


@tilejit.jit
def multi_batch_dot(a_ptr, b_ptr, c_ptr, out_ptr, BATCH: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                    K: tl.constexpr, TRANS_A: tl.constexpr, TRANS_B: tl.constexpr, USE_ACC: tl.constexpr):
    """[*BATCH, M, K] @ [*BATCH, K, N] (operands stored transposed where TRANS_*, then tl.trans'ed back)."""
    nb: tl.constexpr = len(BATCH)
    size: tl.constexpr = BATCH[0] * BATCH[1] * (BATCH[2] if nb == 3 else 1)
    a = tl.load(a_ptr + tl.arange(0, size * M * K))
    b = tl.load(b_ptr + tl.arange(0, size * K * N))
    if TRANS_A:
        a = tl.trans(a.reshape(list(BATCH) + [K, M]))
    else:
        a = a.reshape(list(BATCH) + [M, K])
    if TRANS_B:
        b = tl.trans(b.reshape(list(BATCH) + [N, K]))
    else:
        b = b.reshape(list(BATCH) + [K, N])
    if USE_ACC:
        c = tl.dot(a, b, tl.load(c_ptr + tl.arange(0, size * M * N)).reshape(list(BATCH) + [M, N]))
    else:
        c = tl.dot(a, b)
    tl.static_assert(len(c.shape) == nb + 2)
    tl.store(out_ptr + tl.arange(0, size * M * N), c.reshape(size * M * N))
