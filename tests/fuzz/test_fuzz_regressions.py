"""Mismatch classes the differential fuzzer found, each as a small kernel with Triton's answer.

A class not fixed yet is a strict xfail naming its reason: the test flips to a failure the day the
fix lands, and then the mark (and the class in known.py) goes. Triton's answers were checked with
Triton 3.x itself (its CPU interpreter, TRITON_INTERPRET=1) where it supports the types.
"""
import numpy as np
import tilejit
import tilejit.language as tl


@tilejit.jit
def _cumprod_int8(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    r = tl.cumprod(tl.load(x_ptr + offs), axis=0)
    tl.store(out_ptr + offs, r)


def test_cumprod_of_narrow_integers_widens_to_32_bits():
    x = np.full(8, 3, dtype=np.int8)
    out = np.zeros(8, dtype=np.int32)
    _cumprod_int8[(1,)](x, out, BLOCK=8)
    np.testing.assert_array_equal(out, 3 ** np.arange(1, 9))  # Triton: 3, 9, 27, 81, 243, 729, ...


@tilejit.jit
def _scan_bf16_type(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.bfloat16)
    s = tl.cumsum(x, axis=0)
    p = tl.cumprod(x, axis=0)
    tl.static_assert(s.dtype == tl.bfloat16, "Triton: cumsum of bf16 is bf16")
    tl.static_assert(p.dtype == tl.bfloat16, "Triton: cumprod of bf16 is bf16")
    tl.store(out_ptr + offs, s.to(tl.float32))


def test_scans_of_bf16_stay_bf16():
    x = np.ones(8, dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    _scan_bf16_type[(1,)](x, out, BLOCK=8)
    np.testing.assert_array_equal(out, np.arange(1, 9, dtype=np.float32))


@tilejit.jit
def _shift_right(x_ptr, s_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    r = tl.load(x_ptr + offs) >> tl.load(s_ptr + offs)
    tl.static_assert(r.dtype == tl.uint32)
    tl.store(out_ptr + offs, r)


def test_signed_shifted_right_by_unsigned_is_arithmetic():
    x = np.array([-16, -1, 16, -2**31], dtype=np.int32)
    s = np.array([2, 31, 2, 4], dtype=np.uint32)
    out = np.zeros(4, dtype=np.uint32)
    _shift_right[(1,)](x, s, out, BLOCK=4)
    np.testing.assert_array_equal(out, [4294967292, 4294967295, 4, 4160749568])  # Triton 3.9's answer
