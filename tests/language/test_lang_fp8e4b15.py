"""`tl.float8e4b15`: 1 sign, 4 exponent (bias 15), 3 mantissa bits, no inf/NaN; stored as i8 and
converted with integer code. Checked against a NumPy model of the format built from its definition."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl


def _decode_table() -> np.ndarray:
    """The value of every code 0..255, from the definition of the format."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -14, (1 + mantissa / 8.0) * 2.0 ** (exponent - 15.0))
    return (sign * value).astype(np.float32)


def _encode_reference(x: np.ndarray, rounding: str) -> np.ndarray:
    """Nearest code (ties to the even code), or the code toward zero; saturating at +-1.875."""
    table = _decode_table()[:128].astype(np.float64)  # non-negative values, increasing with the code
    out = np.empty(x.shape, np.uint8)
    for i, v in enumerate(x.astype(np.float64)):
        magnitude = min(abs(v), table[-1]) if not np.isnan(v) else table[-1]
        below = int(np.searchsorted(table, magnitude, side="right") - 1)
        if rounding == "rtz" or below == 127 or magnitude == table[below]:
            code = below
        else:
            low_gap, high_gap = magnitude - table[below], table[below + 1] - magnitude
            code = below if low_gap < high_gap or (low_gap == high_gap and below % 2 == 0) else below + 1
        out[i] = code | (0x80 if np.signbit(v) else 0)
    return out


@tilejit.jit
def _decode_kernel(codes_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(codes_ptr + offs).to(tl.float8e4b15, bitcast=True)
    tl.static_assert(x.dtype == tl.float8e4b15)
    tl.store(out_ptr + offs, x.to(tl.float32))
    tl.store(out_ptr + BLOCK + offs, x.to(tl.float16).to(tl.float32))


def test_every_code_decodes_exactly(device):
    codes = np.arange(256, dtype=np.uint8)
    out = device.zeros(512, np.float32)
    _decode_kernel[(1,)](device.tensor(codes), out, BLOCK=256)
    got = device.numpy(out).reshape(2, 256)
    np.testing.assert_array_equal(got[0], _decode_table())
    np.testing.assert_array_equal(got[1], _decode_table())
    assert got[0][0x7F] == 1.875 and got[0][0x01] == 2.0 ** -17


@tilejit.jit
def _encode_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, ROUNDING: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if ROUNDING == "rtz":
        y = x.to(tl.float8e4b15, fp_downcast_rounding="rtz")
    else:
        y = x.to(tl.float8e4b15)
    tl.store(out_ptr + offs, y.to(tl.uint8, bitcast=True))


def _interesting_floats(n):
    rng = np.random.default_rng(3)
    table = _decode_table()
    midpoints = (table[:127] + table[1:128]) / 2  # exact ties between neighbouring codes
    special = [0.0, -0.0, 1.875, 1.9, 1.9375, 2.0, 100.0, np.inf, -np.inf, np.nan, 2.0 ** -18, 2.0 ** -17,
               3 * 2.0 ** -18, 2.0 ** -14, 1e-30, -1e-30, 2.0 ** -126, 1e-45]
    random = rng.uniform(-2.2, 2.2, n - len(special) - len(midpoints))
    values = np.concatenate([special, midpoints, -midpoints, random]).astype(np.float32)
    return values[:n]


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
def test_float32_encodes_with_rounding_and_saturation(device, rounding):
    x = _interesting_floats(512)
    out = device.zeros(512, np.uint8)
    _encode_kernel[(1,)](device.tensor(x), out, BLOCK=512, ROUNDING=rounding)
    np.testing.assert_array_equal(device.numpy(out), _encode_reference(x, rounding))


@tilejit.jit
def _round_trip_kernel(codes_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(codes_ptr + offs).to(tl.float8e4b15, bitcast=True)
    back = x.to(tl.float16).to(tl.float8e4b15)          # through float16
    back = back.to(tl.int32).to(tl.float8e4b15)          # through an integer: values are truncated
    tl.store(out_ptr + offs, x.to(tl.float32).to(tl.float8e4b15).to(tl.uint8, bitcast=True))
    tl.store(out_ptr + BLOCK + offs, back.to(tl.uint8, bitcast=True))
    full = tl.full((BLOCK,), 0.75, tl.float8e4b15)
    tl.store(out_ptr + 2 * BLOCK + offs, full.to(tl.uint8, bitcast=True))


def test_round_trips_and_constants(device):
    codes = np.arange(256, dtype=np.uint8)
    out = device.zeros(3 * 256, np.uint8)
    _round_trip_kernel[(1,)](device.tensor(codes), out, BLOCK=256)
    got = device.numpy(out).reshape(3, 256)
    np.testing.assert_array_equal(got[0], codes)
    integer_values = np.trunc(_decode_table()) + 0.0  # an int has no -0
    np.testing.assert_array_equal(got[1], _encode_reference(integer_values, "rtne"))
    assert (got[2] == _encode_reference(np.array([0.75], np.float32), "rtne")[0]).all()


@tilejit.jit
def _dot_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    rows, cols = tl.arange(0, N)[:, None], tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + rows * N + cols).to(tl.float8e4b15, bitcast=True)
    b = tl.load(b_ptr + rows * N + cols).to(tl.float8e4b15, bitcast=True)
    tl.store(out_ptr + rows * N + cols, tl.dot(a, b))


def test_dot_of_float8e4b15_operands(device):
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 256, (16, 16), dtype=np.uint8), rng.integers(0, 256, (16, 16), dtype=np.uint8)
    out = device.zeros((16, 16), np.float32)
    _dot_kernel[(1,)](device.tensor(a), device.tensor(b), out, N=16)
    table = _decode_table().astype(np.float64)
    np.testing.assert_allclose(device.numpy(out), table[a] @ table[b], rtol=1e-5, atol=1e-6)


@tilejit.jit
def _abs_kernel(codes_ptr, out_ptr, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(codes_ptr + offs).to(DTYPE, bitcast=True)
    tl.store(out_ptr + offs, tl.abs(x).to(tl.uint8, bitcast=True))


@pytest.mark.parametrize("dtype", ["float8e4b15", "float8e4nv", "float8e5"])
def test_abs_of_fp8_clears_only_the_sign_bit(device, dtype):
    # Triton's test_abs_fp8: |x| of an fp8 code is the code without its sign bit (inf stays inf,
    # NaN stays NaN, -0 becomes +0) — also for e4b15, on which other arithmetic is refused.
    codes = np.arange(256, dtype=np.uint8)
    out = device.zeros(256, np.uint8)
    _abs_kernel[(1,)](device.tensor(codes), out, DTYPE=getattr(tl, dtype), BLOCK=256)
    np.testing.assert_array_equal(device.numpy(out), codes & 0x7F)
