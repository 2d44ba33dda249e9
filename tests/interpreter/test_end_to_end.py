"""@tilejit.jit kernels compiled through the frontend and the core's passes, run by the interpreter."""
import numpy as np
import pytest

tilejit = pytest.importorskip("tilejit")
tl = pytest.importorskip("tilejit.language")
from tilejit.errors import InterpreterError  # noqa: E402

try:
    from tilejit.backends import available_backends
    _registered = "interpreter" in available_backends()
except Exception:  # noqa: BLE001 - a broken registry means the backend is not usable here
    _registered = False
pytestmark = pytest.mark.skipif(not _registered, reason="tilejit-interpreter is not installed (make test installs it)")

RNG = np.random.default_rng(0)


@tilejit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_vector_add_and_generated_program_is_kept():
    x, y = RNG.random(1000, dtype=np.float32), RNG.random(1000, dtype=np.float32)
    out = np.zeros_like(x)
    add_kernel[(8,)](x, y, out, 1000, BLOCK=128)
    np.testing.assert_array_equal(out, x + y)
    compiled = add_kernel.warmup(x, y, out, 1000, BLOCK=128, grid=(8,))
    assert "def kernel(" in compiled.asm["py"] and "rt.load" in compiled.asm["py"]


def test_out_of_bounds_through_jit_names_parameter_and_line():
    x = np.zeros(100, np.float32)
    with pytest.raises(InterpreterError) as info:
        add_kernel[(2,)](x, np.zeros(128, np.float32), np.zeros(128, np.float32), 128, BLOCK=64)
    assert "'x_ptr'" in str(info.value) and info.value.program_id == (1, 0, 0)
    assert info.value.line is not None and "test_end_to_end.py" in str(info.value)


@tilejit.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offs, e / tl.sum(e, axis=0), mask=mask)


def test_softmax():
    x = RNG.standard_normal((17, 100)).astype(np.float32)
    out = np.zeros_like(x)
    softmax_kernel[(17,)](x, out, 100, BLOCK=128)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@tilejit.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    y = d / tl.sqrt(var + eps) * tl.load(w_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + row * n + offs, y, mask=mask)


def test_layer_norm():
    x = RNG.standard_normal((8, 200)).astype(np.float32)
    w, b = RNG.standard_normal(200).astype(np.float32), RNG.standard_normal(200).astype(np.float32)
    y = np.zeros_like(x)
    layer_norm_kernel[(8,)](x, w, b, y, 200, 1e-5, BLOCK=256)
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


@tilejit.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_matmul_fp16_accumulates_in_fp32():
    a = RNG.standard_normal((48, 40)).astype(np.float16)
    b = RNG.standard_normal((40, 33)).astype(np.float16)
    c = np.zeros((48, 33), np.float16)
    matmul_kernel[(3, 3)](a, b, c, 48, 33, 40, BM=16, BN=16, BK=16)
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(c.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)


@tilejit.jit
def divergent_kernel(out_ptr, n):
    pid = tl.program_id(0)
    acc = 0
    for i in range(pid):
        acc += i
    if pid % 3 == 0:
        acc = acc * 2
    while acc > 10:
        acc = acc // 2
    tl.store(out_ptr + pid, acc)


def test_divergent_python_control_flow():
    out = np.zeros(12, np.int32)
    divergent_kernel[(12,)](out, 12)
    expected = []
    for p in range(12):
        acc = sum(range(p)) * (2 if p % 3 == 0 else 1)
        while acc > 10:
            acc //= 2
        expected.append(acc)
    assert out.tolist() == expected


@tilejit.jit
def argmax_cumsum_kernel(x_ptr, idx_ptr, cs_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(idx_ptr, tl.argmax(x, axis=0))
    tl.store(cs_ptr + offs, tl.cumsum(x, axis=0))


def test_general_reduction_and_scan():
    x = np.array([3, 9, 1, 9, 4, 0, 2, 8], np.int32)
    idx, cs = np.zeros(1, np.int32), np.zeros(8, np.int32)
    argmax_cumsum_kernel[(1,)](x, idx, cs, BLOCK=8)
    assert idx[0] == 1 and cs.tolist() == np.cumsum(x).tolist()


@tilejit.jit
def histogram_atomic_kernel(x_ptr, hist_ptr, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    h = tl.histogram(tl.load(x_ptr + offs), BINS)
    tl.atomic_add(hist_ptr + tl.arange(0, BINS), h)


def test_histogram_with_atomic_accumulation():
    x = RNG.integers(0, 8, 64).astype(np.int32)
    hist = np.zeros(8, np.int32)
    histogram_atomic_kernel[(4,)](x, hist, BLOCK=16, BINS=8)
    assert hist.tolist() == np.bincount(x, minlength=8).tolist()


@tilejit.jit
def block_ptr_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(pid * BM, 0), block_shape=(BM, BN),
                            order=(1, 0))
    tile = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    dst = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(N, 1), offsets=(pid * BM, 0), block_shape=(BM, BN),
                            order=(1, 0))
    tl.store(dst, tile * 2, boundary_check=(0, 1))


def test_block_pointers_with_boundary_check():
    x = RNG.standard_normal((10, 6)).astype(np.float32)
    out = np.zeros_like(x)
    block_ptr_kernel[(3,)](x, out, 10, 6, BM=4, BN=8)
    np.testing.assert_array_equal(out, x * 2)
