"""Reductions, scans, sort/topk/flip and the reductions written in tl (standard.py)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl

RNG = np.random.default_rng(11)


@tilejit.jit
def _reduce_2d_kernel(x_ptr, out_ptr, OP: tl.constexpr, AXIS: tl.constexpr, KEEP: tl.constexpr,
                      M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if OP == "sum":
        r = tl.sum(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "max":
        r = tl.max(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "min":
        r = x.min(AXIS, keep_dims=KEEP)
    elif OP == "argmax":
        r = tl.argmax(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "argmin":
        r = x.argmin(AXIS, keep_dims=KEEP)
    elif OP == "xor_sum":
        r = tl.xor_sum(x, axis=AXIS, keep_dims=KEEP)
    else:
        r = tl.reduce_or(x, axis=AXIS, keep_dims=KEEP)
    if AXIS is None:
        if KEEP:
            tl.store(out_ptr + tl.zeros([1, 1], tl.int32), r)
        else:
            tl.store(out_ptr, r)
    elif AXIS == 0:
        if KEEP:
            tl.store(out_ptr + tl.arange(0, N)[None, :], r)
        else:
            tl.store(out_ptr + tl.arange(0, N), r)
    else:
        if KEEP:
            tl.store(out_ptr + tl.arange(0, M)[:, None], r)
        else:
            tl.store(out_ptr + tl.arange(0, M), r)


def _reduce(device, x, op, axis, keep, out_dtype):
    M, N = x.shape
    out = device.zeros({None: 1, 0: N, 1: M}[axis], out_dtype)
    _reduce_2d_kernel[(1,)](device.tensor(x), out, OP=op, AXIS=axis, KEEP=keep, M=M, N=N)
    return device.numpy(out)


@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_float_reductions(device, op, axis, keep):
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    expected = {"sum": np.sum, "max": np.max, "min": np.min}[op](x, axis=axis)
    got = _reduce(device, x, op, axis, keep, np.float32)
    np.testing.assert_allclose(got, np.ravel(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,acc", [("int8", "int32"), ("uint8", "uint32"), ("int16", "int32"), ("int64", "int64")])
def test_sum_of_small_ints_accumulates_in_32_bits(device, dtype, acc):
    x = np.full((8, 16), 100, dtype=dtype)  # 16 * 100 overflows 8 bits
    got = _reduce(device, x, "sum", 1, False, acc)
    np.testing.assert_array_equal(got, np.full(8, 1600, acc))


@tilejit.jit
def _sum_dtype_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    s = tl.sum(x, axis=0, dtype=tl.int8)  # explicit dtype: wraps in 8 bits
    tl.static_assert(s.dtype == tl.int8)
    tl.store(out_ptr, s)


def test_sum_with_explicit_dtype(device):
    out = device.zeros(1, np.int8)
    _sum_dtype_kernel[(1,)](device.tensor(np.full(16, 100, np.int8)), out)
    assert device.numpy(out)[0] == np.int8(np.int64(1600).astype(np.int8))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_ties_pick_first_index(device, op, axis):
    x = RNG.integers(0, 4, (8, 16)).astype(np.float32)  # many ties
    expected = {"argmax": np.argmax, "argmin": np.argmin}[op](x, axis=axis)
    np.testing.assert_array_equal(_reduce(device, x, op, axis, False, np.int32), expected)


@pytest.mark.parametrize("op", ["xor_sum", "reduce_or"])
@pytest.mark.parametrize("axis", [0, 1])
def test_bitwise_reductions(device, op, axis):
    x = RNG.integers(0, 1 << 30, (8, 16)).astype(np.int32)
    ufunc = np.bitwise_xor if op == "xor_sum" else np.bitwise_or
    np.testing.assert_array_equal(_reduce(device, x, op, axis, False, np.int32), ufunc.reduce(x, axis=axis))


@tilejit.jit
def _max_with_indices_kernel(x_ptr, v_ptr, i_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    v, i = tl.max(x, 0, return_indices=True)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)


def test_max_return_indices(device):
    x = np.array([3, 9, 1, 9, 2, 0, 9, 5], dtype=np.int16)
    v, i = device.zeros(1, np.int32), device.zeros(1, np.int32)
    _max_with_indices_kernel[(1,)](device.tensor(x), v, i, N=8)
    assert device.numpy(v)[0] == 9 and device.numpy(i)[0] == 1


@tilejit.jit
def _combine_maxabs(a, b):
    return tl.where(tl.abs(a) > tl.abs(b), a, b)


@tilejit.jit
def _combine_pair(a_value, a_count, b_value, b_count):
    return a_value + b_value, a_count + b_count


@tilejit.jit
def _custom_reduce_kernel(x_ptr, out_ptr, cnt_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.reduce(x, 0, _combine_maxabs))
    s, c = tl.reduce((x, tl.full([N], 1, tl.int32)), 0, _combine_pair)
    tl.store(out_ptr + 1, s)
    tl.store(cnt_ptr, c)


def test_reduce_with_custom_combine_fn_and_tuples(device):
    x = np.array([1.0, -7.0, 3.0, 6.5, -2.0, 0.0, 4.0, 5.0], dtype=np.float32)
    out, cnt = device.zeros(2, np.float32), device.zeros(1, np.int32)
    _custom_reduce_kernel[(1,)](device.tensor(x), out, cnt, N=8)
    np.testing.assert_allclose(device.numpy(out), [-7.0, x.sum()])
    assert device.numpy(cnt)[0] == 8


@tilejit.jit
def _scan_kernel(x_ptr, out_ptr, OP: tl.constexpr, AXIS: tl.constexpr, REVERSE: tl.constexpr,
                 M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=AXIS, reverse=REVERSE)
    elif OP == "cumprod":
        y = tl.cumprod(x, AXIS, reverse=REVERSE)
    else:
        y = tl.associative_scan(x, AXIS, _combine_maxabs, reverse=REVERSE)
    tl.store(out_ptr + offs, y)


def _np_scan(x, op, axis, reverse):
    if reverse:
        x = np.flip(x, axis)
    if op == "cumsum":
        y = np.cumsum(x, axis=axis)
    elif op == "cumprod":
        y = np.cumprod(x, axis=axis)
    else:
        y = np.copy(x)
        for k in range(1, x.shape[axis]):
            prev, cur = np.take(y, k - 1, axis), np.take(y, k, axis)
            pick = np.where(np.abs(prev) > np.abs(cur), prev, cur)
            if axis == 0:
                y[k] = pick
            else:
                y[:, k] = pick
    return np.flip(y, axis) if reverse else y


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "maxabs"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans(device, op, axis, reverse):
    x = RNG.integers(-3, 4, (4, 8)).astype(np.float32)
    if op == "cumprod":
        x[x == 0] = 1
    out = device.zeros(x.shape, np.float32)
    _scan_kernel[(1,)](device.tensor(x), out, OP=op, AXIS=axis, REVERSE=reverse, M=4, N=8)
    np.testing.assert_allclose(device.numpy(out), _np_scan(x, op, axis, reverse), rtol=1e-6)


@tilejit.jit
def _int_cumsum_kernel(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    y = tl.cumsum(x, 0)
    tl.static_assert(y.dtype == tl.int32)
    tl.store(out_ptr + tl.arange(0, N), y)


def test_cumsum_of_int8_widens(device):
    x = np.full(16, 100, np.int8)
    out = device.zeros(16, np.int32)
    _int_cumsum_kernel[(1,)](device.tensor(x), out, N=16)
    np.testing.assert_array_equal(device.numpy(out), np.cumsum(x.astype(np.int32)))


@tilejit.jit
def _sort_kernel(x_ptr, out_ptr, DESC: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.sort(x, descending=DESC))


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "uint8", "int64"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_last_dim(device, dtype, descending):
    if np.dtype(dtype).kind == "f":
        x = RNG.standard_normal((4, 16)).astype(dtype)
    else:
        x = RNG.integers(0, 100, (4, 16)).astype(dtype)
    out = device.zeros(x.shape, dtype)
    _sort_kernel[(1,)](device.tensor(x), out, DESC=descending, M=4, N=16)
    expected = np.sort(x, axis=1)
    np.testing.assert_array_equal(device.numpy(out), expected[:, ::-1] if descending else expected)


@tilejit.jit
def _topk_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K))


def test_topk(device):
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    out = device.zeros((4, 4), np.float32)
    _topk_kernel[(1,)](device.tensor(x), out, M=4, N=32, K=4)
    np.testing.assert_array_equal(device.numpy(out), -np.sort(-x, axis=1)[:, :4])


@tilejit.jit
def _flip_kernel(x_ptr, out_ptr, DIM: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + offs, tl.flip(tl.load(x_ptr + offs), DIM))


@pytest.mark.parametrize("dim", [0, 1, None, -1])
@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_flip(device, dim, dtype):
    x = RNG.integers(-100, 100, (4, 8)).astype(dtype)
    out = device.zeros(x.shape, dtype)
    _flip_kernel[(1,)](device.tensor(x), out, DIM=dim, M=4, N=8)
    np.testing.assert_array_equal(device.numpy(out), np.flip(x, axis=1 if dim is None else dim))


@tilejit.jit
def _softmax_member_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.softmax(x, dim=1, keep_dims=True))


def test_softmax_along_dim(device):
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    out = device.zeros(x.shape, np.float32)
    _softmax_member_kernel[(1,)](device.tensor(x), out, M=4, N=16)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(device.numpy(out), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@tilejit.jit
def _member_reductions_kernel(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr + 0, x.sum())
    tl.store(out_ptr + 1, x.max())
    tl.store(out_ptr + 2, x.min(0))
    tl.store(out_ptr + 3, x.argmax(0).to(tl.float32))
    tl.store(out_ptr + 4, tl.sum(x.cumsum(0)))
    tl.store(out_ptr + 5, tl.sigmoid(x).sum())


def test_tensor_member_reductions(device):
    x = RNG.standard_normal(16).astype(np.float32)
    out = device.zeros(6, np.float32)
    _member_reductions_kernel[(1,)](device.tensor(x), out, N=16)
    expected = [x.sum(), x.max(), x.min(), np.argmax(x), np.cumsum(x).sum(), (1 / (1 + np.exp(-x))).sum()]
    np.testing.assert_allclose(device.numpy(out), expected, rtol=1e-5, atol=1e-5)


@tilejit.jit
def _reduce_3d_kernel(x_ptr, out_ptr, AXIS: tl.constexpr):
    offs = tl.arange(0, 2)[:, None, None] * 32 + tl.arange(0, 4)[None, :, None] * 8 + tl.arange(0, 8)[None, None, :]
    r = tl.sum(tl.load(x_ptr + offs), axis=AXIS, keep_dims=True)
    tl.store(out_ptr + tl.arange(0, 1)[:, None, None] + tl.zeros_like(r).to(tl.int32)
             + tl.arange(0, r.shape[0])[:, None, None] * (r.shape[1] * r.shape[2])
             + tl.arange(0, r.shape[1])[None, :, None] * r.shape[2] + tl.arange(0, r.shape[2])[None, None, :], r)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reduce_3d_keep_dims(device, axis):
    x = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    expected = x.sum(axis=axis, keepdims=True)
    out = device.zeros(expected.size, np.float32)
    _reduce_3d_kernel[(1,)](device.tensor(x), out, AXIS=axis)
    np.testing.assert_allclose(device.numpy(out), expected.ravel(), rtol=1e-5, atol=1e-6)


@tilejit.jit
def _bitonic_merge_kernel(x_ptr, out_ptr, DESC: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + offs, tl.bitonic_merge(tl.load(x_ptr + offs), descending=DESC))


@pytest.mark.parametrize("descending", [False, True])
def test_bitonic_merge_sorts_a_bitonic_sequence(device, descending):
    up = np.sort(RNG.integers(0, 1000, (4, 8)), axis=1)
    down = -np.sort(-RNG.integers(0, 1000, (4, 8)), axis=1)
    x = np.concatenate([up, down], axis=1).astype(np.int32)  # rises then falls: bitonic
    out = device.zeros(x.shape, np.int32)
    _bitonic_merge_kernel[(1,)](device.tensor(x), out, DESC=descending, M=4, N=16)
    expected = np.sort(x, axis=1)
    np.testing.assert_array_equal(device.numpy(out), expected[:, ::-1] if descending else expected)


@tilejit.jit
def _chained_sums_5d(x_ptr, out_ptr, D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr, D3: tl.constexpr,
                     D4: tl.constexpr):
    vals = tl.load(x_ptr + tl.arange(0, D0 * D1 * D2 * D3 * D4).reshape(D0, D1, D2, D3, D4))
    vals = tl.permute(vals, [4, 0, 1, 3, 2])
    r = tl.sum(tl.sum(tl.sum(vals, 0), 2), 0)
    tl.store(out_ptr + tl.arange(0, r.shape[0] * r.shape[1]).reshape(r.shape), r)


def test_chained_reductions_of_a_permuted_5d_block(device):
    """Each reduction over the previous one's result (Triton's test_chained_reductions)."""
    shape = (8, 2, 32, 4, 16)
    x = np.random.default_rng(3).integers(0, 1000, shape).astype(np.int32)
    out = device.zeros((2, 32), np.int32)
    _chained_sums_5d[(1,)](device.tensor(x), out, *shape)
    np.testing.assert_array_equal(device.numpy(out), np.transpose(x, (4, 0, 1, 3, 2)).sum(0).sum(2).sum(0))


@tilejit.jit
def _row_norm_backward_kernel(x_ptr, dy_ptr, rstd_ptr, dx_ptr, dw_ptr, n_rows, n_cols,
                              ROWS_PER_PROGRAM: tl.constexpr, BLOCK: tl.constexpr):
    """A layer-norm-like backward (Liger's shape): per row, 16-bit loads, two row sums and a stored
    row; across rows, an fp32 accumulator stored once after the loop."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    dw_acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for row in range(pid * ROWS_PER_PROGRAM, min((pid + 1) * ROWS_PER_PROGRAM, n_rows)):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        c1 = tl.sum(x_hat * dy, axis=0) / n_cols
        c2 = tl.sum(dy, axis=0) / n_cols
        tl.store(dx_ptr + row * n_cols + cols, ((dy - (x_hat * c1 + c2)) * rstd).to(tl.float16), mask=mask)
        dw_acc += dy * x_hat
    tl.store(dw_ptr + pid * n_cols + cols, dw_acc, mask=mask)


def test_row_loop_with_an_accumulator_stored_after_it(device):
    n_rows, n_cols, per_program = 10, 200, 4
    x = RNG.standard_normal((n_rows, n_cols)).astype(np.float16)
    dy = RNG.standard_normal((n_rows, n_cols)).astype(np.float16)
    rstd = RNG.uniform(0.5, 2.0, n_rows).astype(np.float32)
    programs = -(-n_rows // per_program)
    dx = device.zeros((n_rows, n_cols), np.float16)
    dw = device.zeros((programs, n_cols), np.float32)
    _row_norm_backward_kernel[(programs,)](device.tensor(x), device.tensor(dy), device.tensor(rstd), dx, dw,
                                           n_rows, n_cols, ROWS_PER_PROGRAM=per_program, BLOCK=256)
    x_hat = x.astype(np.float32) * rstd[:, None]
    dyf = dy.astype(np.float32)
    c1 = (x_hat * dyf).sum(axis=1, keepdims=True) / n_cols
    c2 = dyf.sum(axis=1, keepdims=True) / n_cols
    np.testing.assert_allclose(device.numpy(dx).astype(np.float32), (dyf - (x_hat * c1 + c2)) * rstd[:, None],
                               rtol=1e-2, atol=1e-2)
    want_dw = np.stack([(dyf * x_hat)[p * per_program:(p + 1) * per_program].sum(axis=0) for p in range(programs)])
    np.testing.assert_allclose(device.numpy(dw), want_dw, rtol=1e-4, atol=1e-4)


@tilejit.jit
def _gated_scores_kernel(q_ptr, g_ptr, k_ptr, a_ptr, T, K: tl.constexpr, BC: tl.constexpr):
    """a[i, j] = sum_k q[i, k] k[j, k] exp2(g[i, k] - g[j, k]) for j < T, one key row a step (gla's
    `intra_sub_intra`): a 16-bit and an fp32 tile loaded in their own layouts, scaled by broadcast
    rows, summed along K; the columns j >= T of each row zeroed by a [BC, BC] store."""
    o_i = tl.arange(0, BC)
    o_k = tl.arange(0, K)
    m_i = o_i < T
    b_q = tl.load(q_ptr + o_i[:, None] * K + o_k[None, :], mask=m_i[:, None], other=0.0)
    b_g = tl.load(g_ptr + o_i[:, None] * K + o_k[None, :], mask=m_i[:, None], other=0.0)
    for j in range(0, tl.minimum(BC, T)):
        b_k = tl.load(k_ptr + j * K + o_k).to(tl.float32)
        b_gk = tl.load(g_ptr + j * K + o_k)
        b_a = tl.sum(b_q * b_k[None, :] * tl.exp2(b_g - b_gk[None, :]), 1)
        tl.store(a_ptr + o_i * BC + j, b_a, mask=m_i)
    tl.store(a_ptr + o_i[:, None] * BC + o_i[None, :], tl.zeros([BC, BC], tl.float32),
             mask=m_i[:, None] & (o_i[None, :] >= T))


@pytest.mark.parametrize("T", [16, 11])
def test_gated_scores_of_tiles_loaded_in_two_layouts(device, T):
    K, BC = 128, 16
    q = RNG.uniform(-1, 1, (BC, K)).astype(np.float16)
    k = RNG.uniform(-1, 1, (BC, K)).astype(np.float16)
    g = RNG.uniform(-1, 0, (BC, K)).astype(np.float32)
    a = device.full((BC, BC), 7, np.float32)
    _gated_scores_kernel[(1,)](device.tensor(q), device.tensor(g), device.tensor(k), a, T, K=K, BC=BC)
    want = np.einsum("ik,jk,ijk->ij", q.astype(np.float64), k.astype(np.float64),
                     np.exp2(g[:, None, :].astype(np.float64) - g[None, :, :]))
    want[:, T:] = 0
    want[T:, :] = 7   # rows past T are masked everywhere
    np.testing.assert_allclose(device.numpy(a), want, rtol=1e-4, atol=1e-4)
