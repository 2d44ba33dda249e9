"""Triton 3.x builtins that Triton's own tests use: `tl.cat(..., dim=)`, sort/topk edge cases,
`tensor.item()`, `tl.atomic_poll`, Triton's atomic element rules, descriptor `gather`/`scatter` and
the 16-byte descriptor block rule. Every backend, against NumPy."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import CompilationError, InterpreterError, TritonError

RNG = np.random.default_rng(13)


# -- tl.cat -----------------------------------------------------------------------------------------

@tilejit.jit
def _cat_kernel(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    z = tl.cat(tl.load(x_ptr + offs), tl.load(y_ptr + offs), dim=DIM)
    if DIM == 0:
        out = tl.arange(0, 2 * M)[:, None] * N + tl.arange(0, N)[None, :]
    else:
        out = tl.arange(0, M)[:, None] * (2 * N) + tl.arange(0, 2 * N)[None, :]
    tl.store(z_ptr + out, z)


@tilejit.jit
def _cat_1d_kernel(x_ptr, y_ptr, z_ptr, N: tl.constexpr):
    z = tl.cat(tl.load(x_ptr + tl.arange(0, N)), tl.load(y_ptr + tl.arange(0, N)))
    tl.store(z_ptr + tl.arange(0, 2 * N), z)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_along_dim_keeps_order(device, dim):
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    y = RNG.standard_normal((4, 8)).astype(np.float32)
    ref = np.concatenate([x, y], axis=dim)
    z = device.zeros(ref.shape, np.float32)
    _cat_kernel[(1,)](device.tensor(x), device.tensor(y), z, 4, 8, dim)
    np.testing.assert_array_equal(device.numpy(z), ref)


def test_cat_without_can_reorder_concatenates(device):
    x = np.arange(16, dtype=np.int32)
    y = np.arange(-16, 0, dtype=np.int32)
    z = device.zeros(32, np.int32)
    _cat_1d_kernel[(1,)](device.tensor(x), device.tensor(y), z, 16)
    np.testing.assert_array_equal(device.numpy(z), np.concatenate([x, y]))


def test_cat_shape_mismatch_is_a_compile_error():
    @tilejit.jit
    def kernel(x_ptr, y_ptr):
        z = tl.cat(tl.load(x_ptr + tl.arange(0, 16)), tl.load(y_ptr + tl.arange(0, 8)), dim=0)
        tl.store(x_ptr + tl.arange(0, 24), z)

    with pytest.raises(CompilationError, match="tl.cat requires tensors of the same shape"):
        kernel[(1,)](np.zeros(24, np.float32), np.zeros(8, np.float32))


# -- sort / topk --------------------------------------------------------------------------------------

@tilejit.jit
def _sort_kernel(x_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, DESCENDING: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    if K is None:
        z = tl.sort(x, descending=DESCENDING)
        width: tl.constexpr = N
    else:
        z = tl.topk(x, K, descending=DESCENDING)
        width: tl.constexpr = K
    tl.store(z_ptr + tl.arange(0, M)[:, None] * width + tl.arange(0, width)[None, :], z)


@pytest.mark.parametrize("M, N, K, descending", [
    (1, 1, None, False), (1, 1, None, True), (4, 1, None, True),   # one element per row
    (8, 64, 1, True), (8, 64, 1, False),                           # k == 1
    (8, 64, 8, False), (2, 16, 4, True), (4, 32, None, True),
])
def test_sort_and_topk(device, M, N, K, descending):
    x = RNG.permutation(M * N).reshape(M, N).astype(np.float32)
    z = device.zeros((M, K or N), np.float32)
    _sort_kernel[(1,)](device.tensor(x), z, M, N, K, descending)
    ref = np.sort(x, axis=1)
    if descending:
        ref = ref[:, ::-1]
    np.testing.assert_array_equal(device.numpy(z), ref[:, :K or N])


# -- tensor.item() -------------------------------------------------------------------------------------

@tilejit.jit
def _item_kernel(x_ptr, out_ptr):
    one = tl.load(x_ptr + tl.arange(0, 1)).item()  # a [1] block as a scalar
    two = tl.full((1, 1), 3, tl.int32).item()
    tl.store(out_ptr + tl.arange(0, 4), one * two + tl.zeros([4], tl.int32))


def test_item_turns_a_single_element_block_into_a_scalar(device):
    out = device.zeros(4, np.int32)
    _item_kernel[(1,)](device.tensor(np.array([14], np.int32)), out)
    np.testing.assert_array_equal(device.numpy(out), [42] * 4)


def test_item_of_a_larger_block_is_an_error():
    @tilejit.jit
    def kernel(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr + tl.arange(0, 2)).item())

    with pytest.raises(CompilationError, match="single-element"):
        kernel[(1,)](np.zeros(2, np.int32))


# -- atomics -----------------------------------------------------------------------------------------------

@tilejit.jit
def _poll_kernel(flag_ptr, out_ptr, expected, SEM: tl.constexpr, SCOPE: tl.constexpr):
    matched = tl.atomic_poll(flag_ptr + tl.arange(0, 4), expected, sem=SEM, scope=SCOPE)
    tl.store(out_ptr + tl.arange(0, 4), matched.to(tl.int32))


@tilejit.jit
def _poll_producer_kernel(flag_ptr, payload_ptr, out_ptr):
    if tl.program_id(0) == 0:
        tl.atomic_poll(flag_ptr, 1)  # waits for program 1
        tl.store(out_ptr, tl.load(payload_ptr))
    else:
        tl.store(payload_ptr, 42)
        tl.atomic_xchg(flag_ptr, 1, sem="release")


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64])
def test_atomic_poll_returns_once_the_value_is_there(device, dtype):
    flag = device.full(4, 7, dtype)
    out = device.zeros(4, np.int32)
    _poll_kernel[(1,)](flag, out, 7, SEM="acquire", SCOPE="gpu")
    np.testing.assert_array_equal(device.numpy(out), [1, 1, 1, 1])
    np.testing.assert_array_equal(device.numpy(flag), [7] * 4)  # polling never changes memory


def test_atomic_poll_waits_for_another_program(device):
    flag, payload, out = device.zeros(1, np.int32), device.zeros(1, np.int32), device.zeros(1, np.int32)
    _poll_producer_kernel[(2,)](flag, payload, out)
    assert device.numpy(out)[0] == 42 and device.numpy(flag)[0] == 1


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.int8, np.uint8])
def test_atomic_add_on_unsupported_types_raises_tritons_error(dtype):
    @tilejit.jit
    def kernel(i_ptr, o_ptr):
        tl.atomic_add(o_ptr, tl.load(i_ptr))

    with pytest.raises(TritonError, match="does not support"):
        kernel[(1,)](np.zeros(1, dtype), np.zeros(1, dtype))


# -- tensor descriptors: gather, scatter, block size --------------------------------------------------

@tilejit.jit
def _gather_kernel(out_ptr, in_ptr, idx_ptr, y, X: tl.constexpr, Y: tl.constexpr, BX: tl.constexpr,
                   BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, BX))
    desc = tl.make_tensor_descriptor(in_ptr, [X, Y], [Y, 1], [1, BY])
    tl.store(out_ptr + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :], desc.gather(idx, y))


@tilejit.jit
def _scatter_kernel(out_ptr, in_ptr, idx_ptr, y, X: tl.constexpr, Y: tl.constexpr, BX: tl.constexpr,
                    BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, BX))
    data = tl.load(in_ptr + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :])
    desc = tl.make_tensor_descriptor(out_ptr, [X, Y], [Y, 1], [1, BY])
    desc.scatter(data, idx, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int16])
def test_descriptor_gather_rows(device, dtype, idx_dtype):
    X, Y, BX, BY, y = 32, 64, 8, 32, 16
    src = (RNG.standard_normal((X, Y)) * 50).astype(dtype)
    src[0, y] = -0.0 if dtype != np.int8 else 0
    idx = np.concatenate([[0, X + 3], RNG.integers(0, X, BX - 2)]).astype(idx_dtype)  # X + 3: outside
    out = device.full((BX, BY), 1, dtype)
    _gather_kernel[(1,)](out, device.tensor(src), device.tensor(idx), y, X, Y, BX, BY)
    padded = np.concatenate([src, np.zeros((4, Y), dtype)])  # rows past the tensor read as zero
    ref = padded[idx.astype(np.int64)][:, y:y + BY]
    np.testing.assert_array_equal(device.numpy(out).view(np.uint8), ref.view(np.uint8))  # bit-exact, -0.0 too


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
def test_descriptor_scatter_rows(device, dtype):
    X, Y, BX, BY, y = 32, 64, 8, 32, 32
    src = (RNG.standard_normal((BX, BY)) * 50).astype(dtype)
    src[0, 0] = -0.0 if dtype != np.int8 else 0
    idx = RNG.permutation(X)[:BX].astype(np.int32)
    out = device.full((X, Y), 5, dtype)
    _scatter_kernel[(1,)](out, device.tensor(src), device.tensor(idx), y, X, Y, BX, BY)
    ref = np.full((X, Y), 5, dtype)
    ref[idx, y:y + BY] = src
    np.testing.assert_array_equal(device.numpy(out).view(np.uint8), ref.view(np.uint8))


def test_descriptor_block_under_16_bytes_is_refused():
    @tilejit.jit
    def kernel(ptr):
        desc = tl.make_tensor_descriptor(ptr, [128, 128], [128, 1], [8, 4])
        desc.store([0, 0], tl.zeros([8, 4], dtype=tl.int16))

    with pytest.raises(CompilationError) as info:
        kernel[(1,)](np.zeros((128, 128), np.int16))
    # On the interpreter Triton reports it as an InterpreterError; tilejit's error is both.
    assert isinstance(info.value, InterpreterError)
    assert "Descriptor block shape must have at least 16 bytes" in str(info.value.__cause__)


# -- dtype lists --------------------------------------------------------------------------------------------

def test_dtype_class_lists_match_triton():
    assert tl.dtype.SINT_TYPES == ["int8", "int16", "int32", "int64"]
    assert tl.dtype.UINT_TYPES == ["int1", "uint8", "uint16", "uint32", "uint64"]
    assert tl.dtype.STANDARD_FP_TYPES == ["fp16", "bf16", "fp32", "fp64"]
    assert tl.str_to_ty("fp32", None) == tl.float32


# -- squeeze / unsqueeze, to_tensor, expect_zero, one-element conditions ---------------------------

@tilejit.jit
def _squeeze_kernel(out_ptr, DIM: tl.constexpr):
    a = tl.reshape(tl.arange(0, 8), (2, 4))
    b = tl.unsqueeze(a, DIM)
    tl.static_assert(len(b.shape) == 3)
    c = tl.squeeze(b, DIM)
    tl.static_assert(c.shape == a.shape)
    one = tl.to_tensor(1)
    tl.static_assert(one.dtype == tl.int32)
    big = tl.to_tensor(2 ** 40)
    tl.static_assert(big.dtype == tl.int64)
    flat = tl.ravel(b) * 10 + one
    tl.store(out_ptr + tl.arange(0, 8), tl.expect_zero(flat, flat < 0))
    x = tl.arange(0, 8).to(tl.float32) * 4.0
    tl.store(out_ptr + 8 + tl.arange(0, 8), x.sqrt_rn().to(tl.int32))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_squeeze_unsqueeze_to_tensor_expect_zero(device, dim):
    out = device.zeros(16, np.int32)
    _squeeze_kernel[(1,)](out, DIM=dim)
    got = device.numpy(out)
    np.testing.assert_array_equal(got[:8], np.arange(8) * 10 + 1)
    np.testing.assert_array_equal(got[8:], np.sqrt(np.arange(8) * 4.0).astype(np.int32))


@tilejit.jit
def _squeeze_bad_kernel(out_ptr, DIM: tl.constexpr):
    a = tl.reshape(tl.arange(0, 8), (2, 4))
    tl.store(out_ptr + tl.arange(0, 8), tl.ravel(tl.squeeze(a, DIM)))


@pytest.mark.parametrize("dim, message", [(0, "has length 2, not 1"), (2, r"dim must be in \[-2, 2\)")])
def test_squeeze_of_a_longer_dimension_is_a_compile_error(dim, message):
    with pytest.raises(CompilationError, match=message):
        _squeeze_bad_kernel[(1,)](np.zeros(8, np.int32), DIM=dim)


@tilejit.jit
def _one_element_condition_kernel(x_ptr):
    condition = tl.load(x_ptr + tl.arange(0, 1)) > 42  # a block of one element, used as `if` condition
    if condition:
        tl.store(x_ptr, 42)


@pytest.mark.parametrize("value, expected", [(41, 41), (43, 42)])
def test_a_one_element_block_is_an_if_condition(device, value, expected):
    x = device.tensor(np.array([value], dtype=np.int32))
    _one_element_condition_kernel[(1,)](x)
    assert device.numpy(x)[0] == expected
