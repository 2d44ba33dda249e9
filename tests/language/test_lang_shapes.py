"""Shape operations: reshape, view, expand_dims, broadcast_to, trans, permute, join, split, ravel,
cat, interleave, gather, histogram, indexing with None, swizzle2d and cdiv."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl

RNG = np.random.default_rng(3)


@tilejit.jit
def _load_2d(ptr, M: tl.constexpr, N: tl.constexpr):
    return tl.load(ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])


@tilejit.jit
def _store_2d(ptr, x, M: tl.constexpr, N: tl.constexpr):
    tl.store(ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], x)


@tilejit.jit
def _shape_kernel(x_ptr, out_ptr, OP: tl.constexpr):
    x = _load_2d(x_ptr, 4, 8)
    if OP == "reshape":
        _store_2d(out_ptr, tl.reshape(x, 8, 4), 8, 4)
    elif OP == "view":
        _store_2d(out_ptr, x.reshape((2, 16)), 2, 16)
    elif OP == "trans":
        _store_2d(out_ptr, tl.trans(x), 8, 4)
    elif OP == "T":
        _store_2d(out_ptr, x.T, 8, 4)
    elif OP == "permute":
        _store_2d(out_ptr, tl.permute(x, (1, 0)), 8, 4)
    elif OP == "ravel":
        tl.store(out_ptr + tl.arange(0, 32), tl.ravel(x))
    elif OP == "expand_broadcast":
        row = tl.sum(x, axis=0)  # [8]
        _store_2d(out_ptr, tl.broadcast_to(tl.expand_dims(row, 0), (4, 8)), 4, 8)
    elif OP == "broadcast":
        a, b = tl.broadcast(tl.max(x, axis=1, keep_dims=True), tl.arange(0, 8)[None, :].to(tl.float32))
        _store_2d(out_ptr, a + b, 4, 8)
    else:
        tl.static_assert(False, "unknown OP")


@pytest.mark.parametrize("op,reference", [
    ("reshape", lambda x: x.reshape(8, 4)), ("view", None), ("trans", lambda x: x.T), ("T", lambda x: x.T),
    ("permute", lambda x: x.T), ("ravel", lambda x: x.ravel()),
    ("expand_broadcast", lambda x: np.broadcast_to(x.sum(axis=0), (4, 8))),
    ("broadcast", lambda x: x.max(axis=1, keepdims=True) + np.arange(8, dtype=np.float32)[None, :]),
])
def test_shape_ops(device, op, reference):
    x = RNG.integers(-9, 9, (4, 8)).astype(np.float32)
    out = device.zeros(32, np.float32)
    _shape_kernel[(1,)](device.tensor(x), out, OP=op)
    got = device.numpy(out)
    if reference is None:  # view may reorder elements: same multiset
        np.testing.assert_array_equal(np.sort(got), np.sort(x.ravel()))
    else:
        np.testing.assert_array_equal(got, np.ravel(reference(x)))


@tilejit.jit
def _join_split_kernel(a_ptr, b_ptr, joined_ptr, a_out_ptr, b_out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    j = tl.join(a, b)  # [N, 2]
    tl.store(joined_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :], j)
    a2, b2 = tl.split(j)
    tl.store(a_out_ptr + offs, a2)
    tl.store(b_out_ptr + offs, b2)


def test_join_and_split(device):
    a, b = np.arange(8, dtype=np.int32), np.arange(100, 108, dtype=np.int32)
    joined, a_out, b_out = device.zeros(16, np.int32), device.zeros(8, np.int32), device.zeros(8, np.int32)
    _join_split_kernel[(1,)](device.tensor(a), device.tensor(b), joined, a_out, b_out, N=8)
    np.testing.assert_array_equal(device.numpy(joined), np.stack([a, b], axis=-1).ravel())
    np.testing.assert_array_equal(device.numpy(a_out), a)
    np.testing.assert_array_equal(device.numpy(b_out), b)


@tilejit.jit
def _interleave_cat_kernel(a_ptr, b_ptr, inter_ptr, cat_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(inter_ptr + tl.arange(0, 2 * N), tl.interleave(a, b))
    c = tl.cat(a, b, can_reorder=True)
    tl.store(cat_ptr + tl.arange(0, 2 * N), c)


def test_interleave_and_cat(device):
    a, b = np.arange(8, dtype=np.float32), -np.arange(1, 9, dtype=np.float32)
    inter, cat = device.zeros(16, np.float32), device.zeros(16, np.float32)
    _interleave_cat_kernel[(1,)](device.tensor(a), device.tensor(b), inter, cat, N=8)
    np.testing.assert_array_equal(device.numpy(inter), np.stack([a, b], axis=-1).ravel())
    # cat with can_reorder=True only promises the same elements
    np.testing.assert_array_equal(np.sort(device.numpy(cat)), np.sort(np.concatenate([a, b])))


@tilejit.jit
def _gather_kernel(src_ptr, idx_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    src = _load_2d(src_ptr, M, N)
    idx = _load_2d(idx_ptr, M, N)
    _store_2d(out_ptr, tl.gather(src, idx, axis=1), M, N)


def test_gather(device):
    src = RNG.standard_normal((4, 8)).astype(np.float32)
    idx = RNG.integers(0, 8, (4, 8)).astype(np.int32)
    out = device.zeros(32, np.float32)
    _gather_kernel[(1,)](device.tensor(src), device.tensor(idx), out, M=4, N=8)
    np.testing.assert_array_equal(device.numpy(out), np.take_along_axis(src, idx, axis=1).ravel())


@tilejit.jit
def _histogram_kernel(x_ptr, out_ptr, N: tl.constexpr, BINS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr + tl.arange(0, BINS), tl.histogram(x, BINS))


def test_histogram(device):
    x = RNG.integers(0, 16, 64).astype(np.int32)
    out = device.zeros(16, np.int32)
    _histogram_kernel[(1,)](device.tensor(x), out, N=64, BINS=16)
    np.testing.assert_array_equal(device.numpy(out), np.bincount(x, minlength=16))


@tilejit.jit
def _swizzle_kernel(out_i_ptr, out_j_ptr, SIZE_I: tl.constexpr, SIZE_J: tl.constexpr, SIZE_G: tl.constexpr):
    i = tl.arange(0, SIZE_I)[:, None] + tl.zeros([SIZE_I, SIZE_J], tl.int32)
    j = tl.arange(0, SIZE_J)[None, :] + tl.zeros([SIZE_I, SIZE_J], tl.int32)
    new_i, new_j = tl.swizzle2d(i, j, SIZE_I, SIZE_J, SIZE_G)
    _store_2d(out_i_ptr, new_i, SIZE_I, SIZE_J)
    _store_2d(out_j_ptr, new_j, SIZE_I, SIZE_J)


def test_swizzle2d_matches_triton_docstring_example(device):
    out_i, out_j = device.zeros(16, np.int32), device.zeros(16, np.int32)
    _swizzle_kernel[(1,)](out_i, out_j, SIZE_I=4, SIZE_J=4, SIZE_G=2)
    new = device.numpy(out_i) * 4 + device.numpy(out_j)
    # element (i, j) moves to position new[i, j]; Triton's doc shows the inverse view of this map
    layout = np.empty(16, np.int32)
    layout[new] = np.arange(16)
    np.testing.assert_array_equal(layout.reshape(4, 4), [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]])


@tilejit.jit
def _cdiv_kernel(out_ptr, a, b):
    tl.store(out_ptr, tl.cdiv(a, b))
    x = tl.arange(0, 8)
    tl.store(out_ptr + 1 + x, tl.cdiv(x, 3))


def test_cdiv_scalar_and_tensor(device):
    out = device.zeros(9, np.int32)
    _cdiv_kernel[(1,)](out, 17, 5)
    np.testing.assert_array_equal(device.numpy(out), [4] + [(v + 2) // 3 for v in range(8)])


@tilejit.jit
def _zeros_like_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    z = tl.zeros_like(x)
    tl.static_assert(z.dtype == tl.float16)
    tl.store(out_ptr + tl.arange(0, 4), z + x)


def test_zeros_like(device):
    x = np.array([1, 2, 3, 4], np.float16)
    out = device.zeros(4, np.float16)
    _zeros_like_kernel[(1,)](device.tensor(x), out)
    np.testing.assert_array_equal(device.numpy(out), x)


@tilejit.jit
def _expand_dims_kernel(out_ptr, AXES: tl.constexpr, N: tl.constexpr):
    x = tl.expand_dims(tl.arange(0, N), AXES)
    tl.store(out_ptr + tl.arange(0, N), tl.reshape(x, N))


@pytest.mark.parametrize("axes", [0, 1, -1, -2, (0, -1), (-1, 0), (0, 1)])
def test_expand_dims_axes_index_the_result(device, axes):
    out = device.zeros(8, np.int32)
    _expand_dims_kernel[(1,)](out, AXES=axes, N=8)
    np.testing.assert_array_equal(device.numpy(out), np.arange(8))


@pytest.mark.parametrize("axes, message", [
    (-3, "invalid axis -3. Expected -2 <= axis < 2"),      # one new axis: the result has rank 2
    (2, "invalid axis 2. Expected -2 <= axis < 2"),
    ((0, 3), "invalid axis 3. Expected -3 <= axis < 3"),
    ((0, 0), "expand_dims received duplicate axes, normalized axes = [0, 0]"),
    ((0, -3), "expand_dims received duplicate axes, normalized axes = [0, 0]"),
])
def test_expand_dims_bad_axes_are_errors(device, axes, message):
    """As Triton: each axis must index the result; -3 on a 1-D input was wrapped twice into axis 1."""
    with pytest.raises(tilejit.TritonError) as info:
        _expand_dims_kernel[(1,)](device.zeros(8, np.int32), AXES=axes, N=8)
    assert message in str(info.value)


@tilejit.jit
def _batched_trans_kernel(x_ptr, out_ptr, D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr, D3: tl.constexpr,
                          RANK: tl.constexpr):
    """tl.trans / tensor.trans without dims on a rank-3 or rank-4 tensor: the last two axes swap."""
    x = tl.load(x_ptr + tl.arange(0, D0 * D1 * D2 * D3))
    if RANK == 3:
        y = tl.trans(x.reshape(D0 * D1, D2, D3))
    else:
        y = x.reshape(D0, D1, D2, D3).trans()
    tl.store(out_ptr + tl.arange(0, D0 * D1 * D2 * D3), y.reshape(D0 * D1 * D2 * D3))


@pytest.mark.parametrize("rank", [3, 4])
def test_trans_without_dims_swaps_the_last_two_axes(device, rank):
    """Triton 3.x: trans() without dims is a batched 2-D transpose (NumPy's `x.mT`), any rank >= 2."""
    shape = (2, 4, 8, 16)
    x = RNG.integers(-1000, 1000, shape).astype(np.int32)
    out = device.zeros(x.size, np.int32)
    _batched_trans_kernel[(1,)](device.tensor(x), out, *shape, RANK=rank)
    xs = x.reshape(8, 8, 16) if rank == 3 else x
    np.testing.assert_array_equal(device.numpy(out), np.swapaxes(xs, -1, -2).ravel())


@tilejit.jit
def _bad_trans_kernel(x_ptr, OP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 32))
    if OP == "trans1d":
        x = tl.trans(x)
    elif OP == "T3d":
        x = x.reshape(2, 4, 4).T.reshape(32)
    else:
        x = tl.permute(x.reshape(4, 8))
    tl.store(x_ptr + tl.arange(0, 32), x)


@pytest.mark.parametrize("op, message", [
    ("trans1d", "tl.trans without dims needs a tensor of rank >= 2, got rank 1"),
    ("T3d", "tensor.T needs a 2-D tensor, got rank 3"),            # Triton's .T is permute(x, (1, 0))
    ("permute", "permute dims must have the same length as the input shape, got 2 and 0"),
])
def test_transpose_without_dims_errors(device, op, message):
    with pytest.raises(tilejit.TritonError) as info:
        _bad_trans_kernel[(1,)](device.zeros(32, np.float32), OP=op)
    assert message in str(info.value)


@tilejit.jit
def _keep_dims_min_into_indexed_scalar_pointer(x_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    """Triton's test_reduce with keep_dims and no axis: the scalar output pointer is indexed
    `[None, None, :]` to the [1, 1] shape of the reduction (':' past the rank does nothing)."""
    z = tl.min(_load_2d(x_ptr, M, N), axis=None, keep_dims=True)
    tl.store(z_ptr[None, None, :], z)


def test_colon_past_the_rank_is_accepted_as_in_triton(device):
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    out = device.zeros(1, np.float32)
    _keep_dims_min_into_indexed_scalar_pointer[(1,)](device.tensor(x), out, M=8, N=16)
    np.testing.assert_array_equal(device.numpy(out), [x.min()])
