"""tl.random: Philox bit-exact against a NumPy reference, uniform range, normal moments."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tl_reference import philox4x32, uint32_to_uniform


def test_reference_matches_random123_known_answers():
    """The NumPy reference itself, against the Random123 known-answer vectors for philox4x32-10."""
    cases = [
        ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
        ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
        ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
         [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
    ]
    for counters, key, expected in cases:
        assert [int(v) for v in philox4x32(counters, key)] == expected


@tilejit.jit
def _philox_kernel(c_ptr, out_ptr, seed_lo, seed_hi, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    c0 = tl.load(c_ptr + offs * 4 + 0)
    c1 = tl.load(c_ptr + offs * 4 + 1)
    c2 = tl.load(c_ptr + offs * 4 + 2)
    c3 = tl.load(c_ptr + offs * 4 + 3)
    k0 = seed_lo.to(tl.uint32, bitcast=True) + tl.zeros([BLOCK], tl.uint32)
    k1 = seed_hi.to(tl.uint32, bitcast=True) + tl.zeros([BLOCK], tl.uint32)
    r0, r1, r2, r3 = tl.philox_impl(c0, c1, c2, c3, k0, k1)
    tl.store(out_ptr + offs * 4 + 0, r0)
    tl.store(out_ptr + offs * 4 + 1, r1)
    tl.store(out_ptr + offs * 4 + 2, r2)
    tl.store(out_ptr + offs * 4 + 3, r3)


def test_philox_impl_known_answers(device):
    counters = np.array([[0, 0, 0, 0], [0xFFFFFFFF] * 4, [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
                         [1, 2, 3, 4]], dtype=np.uint32)
    out = device.zeros((4, 4), np.uint32)
    # one key for the whole launch: the known answers use different keys, so launch per key
    keys = [(0, 0), (0xFFFFFFFF, 0xFFFFFFFF), (0xA4093822, 0x299F31D0), (0x12345678, 0x9ABCDEF0)]
    for row, (k0, k1) in enumerate(keys):
        _philox_kernel[(1,)](device.tensor(counters[row:row + 1].repeat(4, axis=0)), out,
                             int(np.uint32(k0).view(np.int32)), int(np.uint32(k1).view(np.int32)), BLOCK=4)
        got = device.numpy(out)[0]
        expected = philox4x32(counters[row], (k0, k1))
        np.testing.assert_array_equal(got, expected)


@tilejit.jit
def _randint4x_kernel(out_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.randint4x(seed, offs)
    single = tl.randint(seed, offs)
    tl.store(out_ptr + offs * 5 + 0, r0)
    tl.store(out_ptr + offs * 5 + 1, r1)
    tl.store(out_ptr + offs * 5 + 2, r2)
    tl.store(out_ptr + offs * 5 + 3, r3)
    tl.store(out_ptr + offs * 5 + 4, single)


@pytest.mark.parametrize("seed", [0, 42, 0x1234567890AB])
def test_randint_bit_exact_with_triton(device, seed):
    n = 64
    out = device.zeros((n, 5), np.uint32)
    _randint4x_kernel[(2,)](out, seed, BLOCK=32)
    offsets = np.arange(n, dtype=np.uint64)
    zero = np.zeros(n, np.uint64)
    # Triton's key: (low 32 bits of the seed, high 32 bits)
    expected = philox4x32([offsets, zero, zero, zero], (seed & 0xFFFFFFFF, seed >> 32))
    got = device.numpy(out)
    for word in range(4):
        np.testing.assert_array_equal(got[:, word], expected[word])
    np.testing.assert_array_equal(got[:, 4], expected[0])


@tilejit.jit
def _rand_kernel(out_ptr, seed, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.rand(seed, offs), mask=offs < n)


def test_rand_bit_exact_and_in_unit_interval(device):
    n, seed = 4096, 1234
    out = device.zeros(n, np.float32)
    _rand_kernel[(n // 256,)](out, seed, n, BLOCK=256)
    got = device.numpy(out)
    zero = np.zeros(n, np.uint64)
    expected = uint32_to_uniform(philox4x32([np.arange(n), zero, zero, zero], (seed, 0))[0])
    np.testing.assert_array_equal(got, expected)
    assert got.min() >= 0.0 and got.max() < 1.0
    assert abs(got.mean() - 0.5) < 0.02 and abs(got.var() - 1 / 12) < 0.01


def test_uint_to_uniform_float_never_reaches_one():
    extremes = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], dtype=np.uint32)
    u = uint32_to_uniform(extremes)
    assert u.max() < 1.0 and u.min() >= 0.0


@tilejit.jit
def _rand_extremes_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 8)
    tl.store(out_ptr + offs, tl.uint_to_uniform_float(tl.load(x_ptr + offs)))


def test_uint_to_uniform_float_kernel(device):
    x = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 12345, 0xDEADBEEF, 7], dtype=np.uint32)
    out = device.zeros(8, np.float32)
    _rand_extremes_kernel[(1,)](device.tensor(x), out)
    np.testing.assert_array_equal(device.numpy(out), uint32_to_uniform(x))


@tilejit.jit
def _randn_kernel(out_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.randn(seed, offs))
    a, b, c, d = tl.randn4x(seed, offs)
    tl.store(out_ptr + 8192 + offs, a + b + c + d)


def test_randn_moments(device):
    n = 8192
    out = device.zeros(2 * n, np.float32)
    _randn_kernel[(n // 512,)](out, 77, BLOCK=512)
    normal, sum_of_four = device.numpy(out)[:n], device.numpy(out)[n:]
    assert abs(normal.mean()) < 0.05 and abs(normal.std() - 1) < 0.05
    assert abs(sum_of_four.mean()) < 0.1 and abs(sum_of_four.std() - 2) < 0.1  # four independent normals
    # Box-Muller from the first two words, as Triton computes it
    zero = np.zeros(n, np.uint64)
    words = philox4x32([np.arange(n), zero, zero, zero], (77, 0))
    u1 = np.maximum(np.float32(1e-7), uint32_to_uniform(words[0]))
    u2 = uint32_to_uniform(words[1])
    expected = np.sqrt(-2.0 * np.log(u1.astype(np.float64))) * np.cos(2 * np.pi * u2.astype(np.float64))
    np.testing.assert_allclose(normal, expected, rtol=1e-4, atol=1e-4)


def test_same_seed_same_numbers_different_seed_different_numbers(device):
    a, b, c = (device.zeros(256, np.float32) for _ in range(3))
    _rand_kernel[(1,)](a, 5, 256, BLOCK=256)
    _rand_kernel[(1,)](b, 5, 256, BLOCK=256)
    _rand_kernel[(1,)](c, 6, 256, BLOCK=256)
    np.testing.assert_array_equal(device.numpy(a), device.numpy(b))
    assert np.mean(device.numpy(a) == device.numpy(c)) < 0.01


@tilejit.jit
def _philox_rand4x_kernel(words_ptr, uniform_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a, b, c, d = tl.philox(seed, offs, offs + 1, offs + 2, offs + 3)
    tl.store(words_ptr + offs * 4 + 0, a)
    tl.store(words_ptr + offs * 4 + 1, b)
    tl.store(words_ptr + offs * 4 + 2, c)
    tl.store(words_ptr + offs * 4 + 3, d)
    u0, u1, u2, u3 = tl.rand4x(seed, offs)
    tl.store(uniform_ptr + offs * 4 + 0, u0)
    tl.store(uniform_ptr + offs * 4 + 1, u1)
    tl.store(uniform_ptr + offs * 4 + 2, u2)
    tl.store(uniform_ptr + offs * 4 + 3, u3)


def test_philox_and_rand4x_bit_exact(device):
    n, seed = 64, 0xABCDEF12345
    words, uniform = device.zeros((n, 4), np.uint32), device.zeros((n, 4), np.float32)
    _philox_rand4x_kernel[(1,)](words, uniform, seed, BLOCK=n)
    offs = np.arange(n, dtype=np.uint64)
    key = (seed & 0xFFFFFFFF, seed >> 32)
    expected = philox4x32([offs, offs + 1, offs + 2, offs + 3], key)
    np.testing.assert_array_equal(device.numpy(words), np.stack(expected, axis=1))
    zero = np.zeros(n, np.uint64)
    expected_u = [uint32_to_uniform(w) for w in philox4x32([offs, zero, zero, zero], key)]
    np.testing.assert_array_equal(device.numpy(uniform), np.stack(expected_u, axis=1))
