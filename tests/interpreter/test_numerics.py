"""GPU numerics of the elementwise ops, on hand-built TTIR, against NumPy references."""
import numpy as np
import pytest
from conftest import run_elementwise

from tilejit import ir
from tilejit_interpreter import numerics as nx

I32 = [ir.i32, ir.i32]


def i32(*xs):
    return np.array(xs, dtype=np.int64).astype(np.int32)


def test_integer_overflow_wraps():
    a, b = i32(2**31 - 1, -2**31, 65536), i32(1, -1, 65536)
    assert run_elementwise("arith.addi", [a, b], np.int32, I32, ir.i32).tolist() == [-2**31, 2**31 - 1, 131072]
    assert run_elementwise("arith.muli", [a, b], np.int32, I32, ir.i32).tolist() == [2**31 - 1, -2**31, 0]


def test_signed_division_truncates_and_never_raises():
    a = i32(7, -7, 7, -7, -2**31, 5, -5)
    b = i32(2, 2, -2, -2, -1, 0, 0)
    assert run_elementwise("arith.divsi", [a, b], np.int32, I32, ir.i32).tolist() == [3, -3, -3, 3, -2**31, -1, -1]
    assert run_elementwise("arith.remsi", [a, b], np.int32, I32, ir.i32).tolist() == [1, -1, 1, -1, 0, 5, -5]


def test_unsigned_division():
    a, b = i32(-1, 7, 9), i32(2, 0, 4)
    assert run_elementwise("arith.divui", [a, b], np.int32, I32, ir.i32).view(np.uint32).tolist() == \
        [2**31 - 1, 2**32 - 1, 2]
    assert run_elementwise("arith.remui", [a, b], np.int32, I32, ir.i32).tolist() == [1, 7, 1]


def test_shifts_by_width_or_more():
    a = i32(-8, -8, 5, 5, 1)
    s = i32(1, 32, 33, -1, 31)
    assert run_elementwise("arith.shli", [a, s], np.int32, I32, ir.i32).tolist() == [-16, 0, 0, 0, -2**31]
    assert run_elementwise("arith.shrsi", [a, s], np.int32, I32, ir.i32).tolist() == [-4, -1, 0, 0, 0]
    assert run_elementwise("arith.shrui", [a, s], np.int32, I32, ir.i32).tolist() == [2**31 - 4, 0, 0, 0, 0]


def test_unsigned_compare_and_mulhi():
    a, b = i32(-1, 1), i32(1, -1)
    assert run_elementwise("arith.cmpi", [a, b], np.bool_, I32, ir.i1, {"predicate": "ult"}).tolist() == [False, True]
    assert run_elementwise("arith.cmpi", [a, b], np.bool_, I32, ir.i1, {"predicate": "slt"}).tolist() == [True, False]
    hi = run_elementwise("tt.mulhiui", [i32(-1, 3), i32(-1, 5)], np.int32, I32, ir.i32)
    assert hi.view(np.uint32).tolist() == [2**32 - 2, 0]


def test_i1_arithmetic_is_bit_logic():
    t, f = True, False
    a, b = np.array([t, t, f, f]), np.array([t, f, t, f])
    assert run_elementwise("arith.addi", [a, b], np.bool_, [ir.i1, ir.i1], ir.i1).tolist() == [f, t, t, f]
    # signed: true is -1, so max(true, false) is false
    assert run_elementwise("arith.maxsi", [a, b], np.bool_, [ir.i1, ir.i1], ir.i1).tolist() == [t, f, f, f]
    assert run_elementwise("arith.extsi", [a], np.int32, [ir.i1], ir.i32).tolist() == [-1, -1, 0, 0]
    assert run_elementwise("arith.extui", [a], np.int32, [ir.i1], ir.i32).tolist() == [1, 1, 0, 0]


def test_nan_rules_of_min_max():
    a = np.array([np.nan, 1.0, -0.0], np.float32)
    b = np.array([2.0, np.nan, 0.0], np.float32)
    F = [ir.f32, ir.f32]
    assert run_elementwise("arith.maxnumf", [a, b], np.float32, F, ir.f32)[:2].tolist() == [2.0, 1.0]
    assert np.isnan(run_elementwise("arith.maximumf", [a, b], np.float32, F, ir.f32)[:2]).all()
    assert run_elementwise("arith.minnumf", [a, b], np.float32, F, ir.f32)[:2].tolist() == [2.0, 1.0]


def test_float_predicates_ordered_and_unordered():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([1.0, 1.0, 1.0], np.float32)
    F = [ir.f32, ir.f32]
    assert run_elementwise("arith.cmpf", [a, b], np.bool_, F, ir.i1, {"predicate": "olt"}).tolist() == [False, False, False]
    assert run_elementwise("arith.cmpf", [a, b], np.bool_, F, ir.i1, {"predicate": "ule"}).tolist() == [True, True, False]
    assert run_elementwise("arith.cmpf", [a, b], np.bool_, F, ir.i1, {"predicate": "une"}).tolist() == [True, False, True]


def test_float_to_int_saturates_like_cvt_rzi():
    f = np.array([1.9, -1.9, np.nan, np.inf, -np.inf, 3e9, -3e9], np.float32)
    assert run_elementwise("arith.fptosi", [f], np.int32, [ir.f32], ir.i32).tolist() == \
        [1, -1, 0, 2**31 - 1, -2**31, 2**31 - 1, -2**31]
    assert run_elementwise("arith.fptoui", [f], np.int32, [ir.f32], ir.i32).view(np.uint32).tolist() == \
        [1, 0, 0, 2**32 - 1, 0, 3000000000, 0]
    big = np.array([1e30, -1e30], np.float32)
    assert run_elementwise("arith.fptosi", [big], np.int64, [ir.f32], ir.i64).tolist() == [2**63 - 1, -2**63]


def test_fp16_overflow_and_denormals():
    x = np.array([70000.0, 1e-6, -1e-8, 65504.0], np.float32)
    out = run_elementwise("arith.truncf", [x], np.float16, [ir.f32], ir.f16)
    assert np.isinf(out[0]) and out[1] == np.float16(1e-6) and out[1] != 0 and out[3] == 65504
    assert np.signbit(out[2]) and out[2] == 0


def test_bf16_round_to_nearest_even():
    # 1 + 2^-8 is halfway between two bf16 values: ties to the even mantissa (1.0);
    # 1 + 3*2^-8 is halfway too and rounds up to the even 1 + 2^-6.
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -0.0, np.inf], np.float32)
    bits = run_elementwise("arith.truncf", [x], np.uint16, [ir.f32], ir.bf16)
    assert bits.tolist() == [0x3F80, 0x3F82, 0x3F81, 0x8000, 0x7F80]
    back = run_elementwise("arith.extf", [bits], np.float32, [ir.bf16], ir.f32)
    assert back.tolist()[:3] == [1.0, 1 + 2**-6, 1 + 2**-7]


def test_bf16_arithmetic_rounds_each_result():
    a = nx.f32_to_bf16(np.array([1.0, 256.0], np.float32))
    b = nx.f32_to_bf16(np.array([2**-8, 1.0], np.float32))
    out = run_elementwise("arith.addf", [a, b], np.uint16, [ir.bf16, ir.bf16], ir.bf16)
    assert nx.bf16_to_f32(out).tolist() == [1.0, 256.0]


@pytest.mark.parametrize("fmt,maximum", [("f8E4M3FN", 448.0), ("f8E5M2", 57344.0), ("f8E4M3FNUZ", 240.0),
                                         ("f8E5M2FNUZ", 57344.0)])
def test_fp8_round_trip_and_saturation(fmt, maximum):
    t = ir.FloatType(fmt)
    table = nx.FP8_FORMATS[fmt].decode_table
    finite = np.isfinite(table)
    codes = np.arange(256, dtype=np.uint8)[finite]
    values = run_elementwise("arith.extf", [codes], np.float32, [t], ir.f32)
    again = run_elementwise("arith.truncf", [values], np.uint8, [ir.f32], t)
    same = (again == codes) | ((values == 0) & (nx.FP8_FORMATS[fmt].decode(again) == 0))
    assert same.all()
    sat = run_elementwise("arith.truncf", [np.array([1e6, -1e6, np.nan], np.float32)], np.uint8, [ir.f32], t)
    decoded = nx.FP8_FORMATS[fmt].decode(sat)
    assert decoded[0] == maximum and decoded[1] == -maximum and np.isnan(decoded[2])


def test_fp8_rounds_to_nearest_even():
    # e4m3: between 1.0 (0x38) and 1.125 (0x39), the midpoint 1.0625 goes to the even code 0x38
    out = run_elementwise("arith.truncf", [np.array([1.0625, 1.07, 1.1875], np.float32)], np.uint8,
                          [ir.f32], ir.FloatType("f8E4M3FN"))
    assert out.tolist() == [0x38, 0x39, 0x3A]


def test_math_functions():
    x = np.array([0.3, 1.7, -2.5, 0.5], np.float32)
    F = [ir.f32]
    np.testing.assert_allclose(run_elementwise("math.exp", [x], np.float32, F, ir.f32), np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(run_elementwise("math.rsqrt", [np.abs(x)], np.float32, F, ir.f32),
                               1 / np.sqrt(np.abs(x)), rtol=1e-6)
    assert run_elementwise("math.round", [x], np.float32, F, ir.f32).tolist() == [0.0, 2.0, -3.0, 1.0]
    import math
    np.testing.assert_allclose(run_elementwise("math.erf", [x], np.float32, F, ir.f32),
                               [math.erf(v) for v in x.astype(float)], rtol=2e-6, atol=1e-7)


def test_bitcast_and_int_float_casts():
    x = np.array([1.0, -2.0], np.float32)
    assert run_elementwise("arith.bitcast", [x], np.int32, [ir.f32], ir.i32).tolist() == \
        x.view(np.int32).tolist()
    u = i32(-1, 3)
    assert run_elementwise("arith.uitofp", [u], np.float32, [ir.i32], ir.f32).tolist() == [2.0**32, 3.0]
    assert run_elementwise("arith.trunci", [i32(257, -1)], np.int8, [ir.i32], ir.i8).tolist() == [1, -1]
