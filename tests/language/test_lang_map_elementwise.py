"""`tl.map_elementwise` (Triton 3.5): a scalar `@jit` function, with scalar control flow, mapped over
tensors; results checked against the same function applied by Python to each element."""
import math

import numpy as np
import pytest

import tilejit
import tilejit.language as tl

RNG = np.random.default_rng(11)


@tilejit.jit
def _selu_scalar(x, alpha):
    if x > 0:
        return x
    else:
        return alpha * (tl.exp(x) - 1)


@tilejit.jit
def _selu_kernel(x_ptr, out_ptr, alpha, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.map_elementwise(_selu_scalar, x, alpha))  # alpha is broadcast


def test_branches_with_returns(device):
    x = RNG.standard_normal(128).astype(np.float32)
    out = device.zeros(128, np.float32)
    _selu_kernel[(1,)](device.tensor(x), out, 1.5, BLOCK=128)
    expected = np.where(x > 0, x, 1.5 * (np.exp(x.astype(np.float64)) - 1)).astype(np.float32)
    np.testing.assert_allclose(device.numpy(out), expected, rtol=1e-5, atol=1e-6)


@tilejit.jit
def _classify(x, limit):
    """Several results, assignments merged across nested branches, code after a returning if."""
    kind = 0
    value = x
    if x < 0:
        kind = 1
        value = -x
        if value > limit:
            kind = 2
            value = limit
    elif x == 0:
        return 3, x + 100.0
    value = value * 2.0
    return kind, value


@tilejit.jit
def _classify_kernel(x_ptr, kind_ptr, value_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    kind, value = tl.map_elementwise(_classify, tl.load(x_ptr + offs), 2.5)
    tl.store(kind_ptr + offs, kind)
    tl.store(value_ptr + offs, value)


def _classify_reference(x, limit):
    kind, value = 0, x
    if x < 0:
        kind, value = 1, -x
        if value > limit:
            kind, value = 2, limit
    elif x == 0:
        return 3, x + 100.0
    return kind, value * 2.0


def test_multiple_results_and_nested_branches(device):
    x = np.round(RNG.uniform(-5, 5, 64)).astype(np.float32)
    x[:4] = [0.0, -2.5, -2.0, 7.0]
    kinds, values = device.zeros(64, np.int32), device.zeros(64, np.float32)
    _classify_kernel[(1,)](device.tensor(x), kinds, values, BLOCK=64)
    expected = [_classify_reference(float(v), 2.5) for v in x]
    np.testing.assert_array_equal(device.numpy(kinds), [k for k, _ in expected])
    np.testing.assert_array_equal(device.numpy(values), np.array([v for _, v in expected], np.float32))


@tilejit.jit
def _collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@tilejit.jit
def _collatz_kernel(n_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.map_elementwise(_collatz_steps, tl.load(n_ptr + offs)))


def _collatz_reference(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_data_dependent_loop(device):
    n = np.arange(1, 33, dtype=np.int32)
    out = device.zeros(32, np.int32)
    _collatz_kernel[(1,)](device.tensor(n), out, BLOCK=32)
    np.testing.assert_array_equal(device.numpy(out), [_collatz_reference(int(v)) for v in n])


@tilejit.jit
def _pairwise_minmax(a0, a1, b0, b1):
    """pack=2: two elements of each argument (argument-major), two values per result (result-major)."""
    lo0 = a0 if a0 < b0 else b0
    lo1 = a1 if a1 < b1 else b1
    hi0 = a0 if a0 >= b0 else b0
    hi1 = a1 if a1 >= b1 else b1
    return lo0, lo1, hi0 + hi1, hi0 - hi1


@tilejit.jit
def _pack2_kernel(a_ptr, b_ptr, lo_ptr, hi_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    lo, hi = tl.map_elementwise(_pairwise_minmax, tl.load(a_ptr + offs), tl.load(b_ptr + offs), pack=2)
    tl.store(lo_ptr + offs, lo)
    tl.store(hi_ptr + offs, hi)


def test_pack_2(device):
    a, b = RNG.standard_normal((4, 8)).astype(np.float32), RNG.standard_normal((4, 8)).astype(np.float32)
    lo, hi = device.zeros((4, 8), np.float32), device.zeros((4, 8), np.float32)
    _pack2_kernel[(1,)](device.tensor(a), device.tensor(b), lo, hi, M=4, N=8)
    np.testing.assert_array_equal(device.numpy(lo), np.minimum(a, b))
    flat_hi = np.maximum(a, b).reshape(-1, 2)
    expected_hi = np.stack([flat_hi[:, 0] + flat_hi[:, 1], flat_hi[:, 0] - flat_hi[:, 1]], 1).reshape(4, 8)
    np.testing.assert_array_equal(device.numpy(hi), expected_hi)


@tilejit.jit
def _reverse4(x0, x1, x2, x3):
    return x3, x2, x1, x0


@tilejit.jit
def _pack4_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.map_elementwise(_reverse4, tl.load(x_ptr + offs), pack=4))


def test_pack_4_keeps_the_element_order(device):
    x = np.arange(32, dtype=np.int32)
    out = device.zeros(32, np.int32)
    _pack4_kernel[(1,)](device.tensor(x), out, BLOCK=32)
    np.testing.assert_array_equal(device.numpy(out), x.reshape(-1, 4)[:, ::-1].reshape(-1))


@tilejit.jit
def _clipped_log(x):
    # calls a @jit helper that itself branches per element
    return _selu_scalar(tl.log(x) if x > 0 else -1.0, 1.0)


@tilejit.jit
def _nested_call_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.map_elementwise(_clipped_log, tl.load(x_ptr + offs)))


def test_nested_jit_calls_branch_per_element(device):
    x = RNG.uniform(-1, 3, 64).astype(np.float32)
    out = device.zeros(64, np.float32)
    _nested_call_kernel[(1,)](device.tensor(x), out, BLOCK=64)
    inner = [math.log(v) if v > 0 else -1.0 for v in x.astype(np.float64)]
    expected = [v if v > 0 else math.exp(v) - 1 for v in inner]
    np.testing.assert_allclose(device.numpy(out), np.array(expected, np.float32), rtol=1e-5, atol=1e-6)


@tilejit.jit
def _stores_in_branch(x, ptr):
    if x > 0:
        tl.store(ptr, x)
    return x


@tilejit.jit
def _bad_map_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.map_elementwise(_stores_in_branch, tl.load(x_ptr + offs), x_ptr + offs)


def test_side_effects_in_a_branch_are_an_error(device):
    with pytest.raises(tilejit.CompilationError, match="a store .* inside a data-dependent branch"):
        _bad_map_kernel[(1,)](device.zeros(8, np.float32), BLOCK=8)


@tilejit.jit
def _bad_if_outside_map(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if x > 0:  # outside map_elementwise a tensor condition stays an error, as in Triton
        tl.store(x_ptr, 1.0)


def test_tensor_conditions_outside_map_elementwise_are_still_an_error(device):
    with pytest.raises(tilejit.CompilationError, match="condition must be a scalar"):
        _bad_if_outside_map[(1,)](device.zeros(8, np.float32), BLOCK=8)
