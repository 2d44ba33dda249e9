"""Frontend behaviours where Triton's code generator is the spec (Triton 3.x's `code_generator.py`):

- a Python number assigned to a name becomes a scalar tensor of the literal's type and takes part in
  type promotion as a tensor (`visit_Assign` converts it with `semantic.to_tensor`);
- `is` / `is not` compare the compile-time objects (a None argument is a constexpr None);
- `@constexpr_function` (`triton.cdiv`, `triton.next_power_of_2`, user functions) runs at compile
  time on constexpr values.

The expected values are Triton's (checked against Triton 3.9's frontend)."""
import math

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.language.extra import libdevice


# -- a Python number assigned to a name is a tensor ----------------------------------------------------
@tilejit.jit
def _int8_times_local(x_ptr, out_ptr):
    offs = tl.arange(0, 2)
    x = tl.load(x_ptr + offs)
    scale = 2
    y = x * scale  # int8 * int32 tensor -> int32 (a literal `x * 2` would stay int8)
    tl.static_assert(y.dtype == tl.int32)
    tl.store(out_ptr + offs, y)


def test_int8_times_a_local_number_promotes_to_int32(device):
    x = device.tensor(np.array([100, -100], np.int8))
    out = device.zeros(2, np.int32)
    _int8_times_local[(1,)](x, out)
    np.testing.assert_array_equal(device.numpy(out), [200, -200])


@tilejit.jit
def _fp16_plus_local_eps(x_ptr, out_ptr):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)
    eps = 1e-4
    y = x + eps  # fp16 + fp32 tensor -> fp32: eps is not lost
    tl.static_assert(y.dtype == tl.float32)
    tl.store(out_ptr + offs, y)


def test_fp16_plus_a_local_float_promotes_to_fp32(device):
    x = np.ones(4, np.float16)
    out = device.zeros(4, np.float32)
    _fp16_plus_local_eps[(1,)](device.tensor(x), out)
    np.testing.assert_array_equal(device.numpy(out), np.float32(1.0) + np.float32(1e-4))


@tilejit.jit
def _local_numbers_have_tensor_methods(out_ptr, N: tl.constexpr):
    acc = 0
    wide = acc.to(tl.int64)
    tl.static_assert(wide.dtype == tl.int64)
    s_i = 3
    r = -s_i
    tl.static_assert(r.dtype == tl.int32)
    a, b = 1, 2.5
    tl.static_assert(a.dtype == tl.int32)
    tl.static_assert(b.dtype == tl.float32)
    big = 2 ** 40
    tl.static_assert(big.dtype == tl.int64)
    flag = True
    tl.static_assert(flag.dtype == tl.int1)
    kept: tl.constexpr = N * 2  # annotated: stays a compile-time value
    offs = tl.arange(0, kept)
    tl.store(out_ptr + offs, (wide + r + a + b + (big >> 40)).to(tl.float32) + offs)


def test_local_numbers_have_tensor_methods_and_types(device):
    out = device.zeros(8, np.float32)
    _local_numbers_have_tensor_methods[(1,)](out, N=4)
    # 0 - 3 + 1 + 2.5 + 1 = 1.5, plus the offsets
    np.testing.assert_array_equal(device.numpy(out), 1.5 + np.arange(8, dtype=np.float32))


@tilejit.jit
def _unrepresentable_local(out_ptr):
    big = 2 ** 70
    tl.store(out_ptr, big)


def test_local_number_that_fits_no_integer_type_is_an_error_at_its_line(device):
    out = device.zeros(1, np.int64)
    with pytest.raises(tilejit.CompilationError, match="nonrepresentable integer") as info:
        _unrepresentable_local[(1,)](out)
    assert "big = 2 ** 70" in info.value.source_line


@tilejit.jit
def _augmented_local(x_ptr, out_ptr):
    offs = tl.arange(0, 2)
    x = tl.load(x_ptr + offs)
    total = 0
    total += 1  # stays an int32 tensor
    tl.static_assert(total.dtype == tl.int32)
    x += 1  # a literal: int8 stays int8 and wraps
    tl.static_assert(x.dtype == tl.int8)
    tl.store(out_ptr + offs, x + total)


def test_augmented_assignment_keeps_tensor_semantics(device):
    x = device.tensor(np.array([127, -1], np.int8))
    out = device.zeros(2, np.int32)
    _augmented_local[(1,)](x, out)
    # x + 1 wraps in int8 (127 -> -128), then int8 + int32 tensor -> int32
    np.testing.assert_array_equal(device.numpy(out), [-127, 1])


@tilejit.jit
def _declared_constexpr_unpack(out_ptr, shape: tl.constexpr):
    d0: tl.constexpr
    d1: tl.constexpr
    d0, d1 = shape  # declared above: they stay compile-time values (usable as a shape)
    n = d0  # not declared: a tensor
    tl.static_assert(n.dtype == tl.int32)
    x = tl.full((d0, d1), 1.0, dtype=tl.float32)
    tl.store(out_ptr + tl.arange(0, d0 * d1), tl.reshape(x, (d0 * d1,)) * n)


def test_bare_constexpr_annotation_keeps_the_next_assignment_constant(device):
    out = device.zeros(8, np.float32)
    _declared_constexpr_unpack[(1,)](out, shape=(2, 4))
    np.testing.assert_array_equal(device.numpy(out), np.full(8, 2.0, np.float32))


# -- `is` / `is not` -----------------------------------------------------------------------------------
@tilejit.jit
def _optional_mask(x_ptr, out_ptr, mask_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if mask_ptr is not None:
        m = tl.load(mask_ptr + offs)
        x = tl.where(m != 0, x, 0.0)
    if mask_ptr is None:
        x = x + 100.0
    tl.static_assert((x is x) and (x is not None))
    tl.store(out_ptr + offs, x)


def test_is_not_none_on_an_argument(device):
    x = np.arange(4, dtype=np.float32)
    out = device.zeros(4, np.float32)
    _optional_mask[(1,)](device.tensor(x), out, device.tensor(np.array([1, 0, 1, 0], np.int32)), N=4)
    np.testing.assert_array_equal(device.numpy(out), [0, 0, 2, 0])
    _optional_mask[(1,)](device.tensor(x), out, None, N=4)
    np.testing.assert_array_equal(device.numpy(out), x + 100)


# -- constexpr_function --------------------------------------------------------------------------------
@tilejit.constexpr_function
def _blocks(h, b):
    return (h + b - 1) // b


@tilejit.jit
def _static_blocks(out_ptr, H: tl.constexpr, BLOCK_H: tl.constexpr):
    acc = tl.zeros((BLOCK_H,), tl.int32)
    for i in tl.static_range(tilejit.cdiv(H, BLOCK_H)):
        acc += 1 << i
    tl.static_assert(_blocks(H, BLOCK_H) == tilejit.cdiv(H, BLOCK_H))
    P: tl.constexpr = tilejit.next_power_of_2(H)
    tl.store(out_ptr + tl.arange(0, BLOCK_H), acc * 1000 + P)


def test_constexpr_functions_run_at_compile_time(device):
    out = device.zeros(4, np.int32)
    _static_blocks[(1,)](out, H=10, BLOCK_H=4)
    # cdiv(10, 4) = 3 iterations: 1 + 2 + 4 = 7; next_power_of_2(10) = 16
    np.testing.assert_array_equal(device.numpy(out), np.full(4, 7016, np.int32))


def test_constexpr_functions_are_plain_functions_on_the_host():
    assert tilejit.cdiv(10, 4) == 3 and tilejit.cdiv(-7, 2) == -3
    assert [tilejit.next_power_of_2(n) for n in (0, 1, 2, 3, 5, 1024, 1025)] == [0, 1, 2, 4, 8, 1024, 2048]
    assert _blocks(9, 3) == 3
    assert tilejit.constexpr_function(lambda v: v + 1)(tl.constexpr(1)) == 2


@tilejit.jit
def _cdiv_of_a_tensor(out_ptr):
    n = tl.load(out_ptr)
    tl.store(out_ptr, tilejit.cdiv(n, 2))


def test_constexpr_function_refuses_a_tensor(device):
    out = device.zeros(1, np.int32)
    with pytest.raises(tilejit.CompilationError, match="constexpr_function"):
        _cdiv_of_a_tensor[(1,)](out)


# -- single constructs of Triton's own tests ------------------------------------------------------------
@tilejit.jit
def _increment_all(values):
    return tl.tuple([v + 1 for v in values])


@tilejit.jit
def _comprehensions(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    powers = [x * (1 << i) for i in range(3)]  # a range with constexpr bounds
    odd = [i for i in tl.static_range(6) if i % 2 == 1]
    tl.static_assert(len(odd) == 3)
    bumped = _increment_all((powers[0], powers[1], powers[2]))
    tl.store(out_ptr + offs, bumped[0] + bumped[1] + bumped[2] + odd[0] + odd[1] + odd[2])


def test_list_comprehensions_unroll(device):
    x = np.arange(4, dtype=np.int32)
    out = device.zeros(4, np.int32)
    _comprehensions[(1,)](device.tensor(x), out, N=4)
    # (x + 1) + (2x + 1) + (4x + 1) + (1 + 3 + 5)
    np.testing.assert_array_equal(device.numpy(out), 7 * x + 3 + 9)


@tilejit.jit
def _tuple_repetition(out_ptr, NDIM: tl.constexpr):
    offs = (0,) * NDIM
    more = 2 * (1,)
    tl.static_assert(len(offs) == NDIM and len(more) == 2)
    tl.store(out_ptr, len(offs + more))


def test_tuple_repetition(device):
    out = device.zeros(1, np.int32)
    _tuple_repetition[(1,)](out, NDIM=3)
    assert device.numpy(out)[0] == 5


@tilejit.jit
def _ternary_stores(ret_ptr, x_true_ptr, x_false_ptr):
    pid = tl.program_id(0)
    tl.store(ret_ptr + pid, tl.load(x_true_ptr)) if pid % 2 == 0 else tl.store(ret_ptr + pid, tl.load(x_false_ptr))


def test_conditional_expression_of_two_stores(device):
    ret = device.zeros(4, np.float32)
    _ternary_stores[(4,)](ret, device.tensor(np.array([3.14], np.float32)),
                          device.tensor(np.array([1.5], np.float32)))
    np.testing.assert_array_equal(device.numpy(ret), np.array([3.14, 1.5, 3.14, 1.5], np.float32))


@tilejit.jit
def _float_bitwise(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 4), x & x)


@tilejit.jit
def _mixed_signedness_mod(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    y = tl.load(y_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 4), x % y)


@tilejit.jit
def _exp_of_fp16(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 4), x.exp())


def test_error_messages_that_tritons_tests_match(device):
    # Triton's test_core.py matches these (case-sensitive) fragments of the messages.
    with pytest.raises(tilejit.CompilationError, match="invalid operands of type"):
        _float_bitwise[(1,)](device.zeros(4, np.float32))
    with pytest.raises(tilejit.CompilationError, match="Cannot use .* because they have different signedness"):
        _mixed_signedness_mod[(1,)](device.zeros(4, np.int32), device.zeros(4, np.uint32))
    with pytest.raises(tilejit.CompilationError, match="Expected dtype"):
        _exp_of_fp16[(1,)](device.zeros(4, np.float16))


@tilejit.jit
def _takes_a_value(value, x_ptr):
    tl.store(x_ptr, value.to(tl.float32))


@pytest.mark.parametrize("value, overflow", [(2**64 - 1, False), (2**64, True), (-2**63, False), (-2**63 - 1, True)])
def test_integer_argument_beyond_64_bits_is_an_overflow_error(device, value, overflow):
    x = device.zeros(1, np.float32)
    if overflow:
        with pytest.raises(OverflowError, match="does not fit in 64 bits"):
            _takes_a_value[(1,)](value, x)
    else:
        _takes_a_value[(1,)](value, x)
        assert device.numpy(x)[0] == np.float32(value)


@tilejit.jit
def _lgamma_fp64(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, libdevice.lgamma(tl.load(x_ptr + offs)))


def test_library_constants_stay_exact_in_fp64(device):
    # tilejit's own @jit library declares its coefficients `: tl.constexpr`: a plain local number is
    # an fp32 tensor (Triton's rule), which cost lgamma's Lanczos sum a decimal digit in fp64.
    x = np.array([0.7, 1.5, 3.3, 10.25, 25.5, 40.0, 60.5, 100.0])
    out = device.zeros(8, np.float64)
    _lgamma_fp64[(1,)](device.tensor(x), out, N=8)
    expected = np.array([math.lgamma(v) for v in x])
    np.testing.assert_allclose(device.numpy(out), expected, rtol=1e-14)


@tilejit.jit
def _join_scalars(x_ptr, y_ptr, z_ptr):
    z = tl.join(tl.load(x_ptr), tl.load(y_ptr))
    tl.static_assert(z.shape == [2])  # a shape (tuple) equals a list with the same sizes, as in Triton
    tl.static_assert(z.shape != [3])
    tl.store(z_ptr + tl.arange(0, 2), z)


def test_shape_compares_equal_to_a_list(device):
    z = device.zeros(2, np.int32)
    _join_scalars[(1,)](device.tensor(np.array([42], np.int32)), device.tensor(np.array([100], np.int32)), z)
    np.testing.assert_array_equal(device.numpy(z), [42, 100])


# -- a tensor given to a called function's `tl.constexpr` parameter is a runtime value -----------------
@tilejit.jit
def _split_program_id(X: tl.constexpr, Y: tl.constexpr = None):
    pid = tl.program_id(0).to(tl.int64)
    if Y is None:
        return pid % X, pid // X
    else:
        return pid % X, (pid // X) % Y, pid // (X * Y)


@tilejit.jit
def _split_by_cdiv(out_ptr, K: tl.constexpr, BK: tl.constexpr):
    # tl.cdiv is a @jit function: its result is a tensor even for constexpr arguments (Triton's too),
    # and a called function with `X: tl.constexpr` takes it as a runtime value (fla's pattern).
    a, b, c = _split_program_id(tl.cdiv(K, BK), 2)
    tl.store(out_ptr + tl.program_id(0) * 3 + tl.arange(0, 1), a + tl.zeros([1], tl.int64))
    tl.store(out_ptr + tl.program_id(0) * 3 + 1 + tl.arange(0, 1), b + tl.zeros([1], tl.int64))
    tl.store(out_ptr + tl.program_id(0) * 3 + 2 + tl.arange(0, 1), c + tl.zeros([1], tl.int64))


def test_tensor_argument_to_a_constexpr_parameter_of_a_called_function(device):
    out = device.zeros(3 * 12, np.int64)
    _split_by_cdiv[(12,)](out, 10, 4)   # X = cdiv(10, 4) = 3, Y = 2
    pid = np.arange(12)
    want = np.stack([pid % 3, (pid // 3) % 2, pid // 6], axis=1).reshape(-1)
    np.testing.assert_array_equal(device.numpy(out), want)


# -- Triton names that kernel libraries use from `tl.core` -------------------------------------------
@tilejit.jit
def _flip_sign_bits(x_ptr, out_ptr, DESCENDING: tl.constexpr = tl.core.CONSTEXPR_0):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)
    idtype = tl.core.get_int_dtype(bitwidth=x.dtype.primitive_bitwidth, signed=True)
    tl.static_assert(idtype == tl.int16)
    bits = x.to(idtype, bitcast=True)
    if DESCENDING:
        bits = ~bits
    tl.store(out_ptr + offs, (bits ^ -32768).to(x.dtype, bitcast=True))   # 0x8000: the sign bit


def test_core_constexpr_0_and_get_int_dtype(device):
    x = np.array([1.5, -2.0, 0.0, 65504.0], np.float16)
    out = device.zeros(4, np.float16)
    _flip_sign_bits[(1,)](device.tensor(x), out)
    np.testing.assert_array_equal(device.numpy(out), -x)
    assert tl.core.get_int_dtype(64, False) == tl.uint64 and tl.core.get_int_dtype(1, True) == tl.int1
    with pytest.raises(ValueError):
        tl.core.get_int_dtype(12, True)


# -- plain Python helpers: run while compiling on compile-time values ---------------------------------
def _block_for(n):
    return 16 if n <= 16 else 32


def _zeros_without_jit():
    return tl.zeros([16], tl.float32)


@tilejit.jit
def _plain_helper_kernel(out_ptr, N: tl.constexpr, BROKEN: tl.constexpr):
    BLOCK: tl.constexpr = _block_for(N)
    offs = tl.arange(0, BLOCK)
    z = _zeros_without_jit() if BROKEN else tl.zeros([BLOCK], tl.float32)
    tl.store(out_ptr + offs, z + BLOCK, mask=offs < N)


def test_plain_python_helpers_run_at_compile_time(device):
    out = device.zeros(20, np.float32)
    _plain_helper_kernel[(1,)](out, N=20, BROKEN=False)
    np.testing.assert_array_equal(device.numpy(out), np.full(20, 32.0, np.float32))
    with pytest.raises(tilejit.CompilationError, match=r"'_zeros_without_jit' is not a @jit function.*@tilejit.jit"):
        _plain_helper_kernel[(1,)](out, N=16, BROKEN=True)
