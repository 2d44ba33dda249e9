"""Scalar parameters annotated with a type (`val: tl.float16`, `x: "tl.int8"`, `n: int`): as in Triton
3.9, the annotation is the parameter's type in the kernel's signature and the number passed is
converted to it at launch; other annotations (tensors, unknown names) change nothing."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import ArgumentValueError


def _annotated(fn, **types):
    fn.__annotations__ = dict(types)
    return fn


def _float_kernel(dtype):
    def kernel(out_ptr, val, DTYPE):
        tl.static_assert(val.dtype == DTYPE)
        tl.store(out_ptr, val)
    return tilejit.jit(_annotated(kernel, val=dtype, DTYPE=tl.constexpr))


@pytest.mark.parametrize("dtype, value, expected", [
    (tl.float16, 1 + 2 ** -12, 1.0),            # below fp16's precision: rounds to 1
    (tl.float16, 65520.0, np.inf),              # past fp16's largest value
    (tl.bfloat16, 1 + 2 ** -9, 1.0),            # below bf16's precision
    (tl.float32, 1 + 2 ** -30, 1.0),
    (tl.float64, 1 + 2 ** -40, 1 + 2 ** -40),   # kept: the argument is an fp64
    (tl.float16, 3, 3.0),                       # an int passed for a float annotation
])
def test_float_annotation_converts_the_value(device, dtype, value, expected):
    out = device.zeros(1, np.float64)
    _float_kernel(dtype)[(1,)](out, value, DTYPE=dtype)
    assert device.numpy(out)[0] == expected


@tilejit.jit
def _int8_kernel(out_ptr, x: tl.int8, y: "tl.uint8", n: int, flag: bool):
    tl.static_assert(x.dtype == tl.int8 and y.dtype == tl.uint8)
    tl.static_assert(n.dtype == tl.int32 and flag.dtype == tl.int1)
    tl.store(out_ptr, x * x)          # wraps in 8 bits
    tl.store(out_ptr + 1, y + y)
    tl.store(out_ptr + 2, n)
    tl.store(out_ptr + 3, flag.to(tl.int32))


def test_integer_annotations_give_the_argument_their_width(device):
    out = device.zeros(4, np.int32)
    _int8_kernel[(1,)](out, 100, 200, 16, True)
    np.testing.assert_array_equal(device.numpy(out), [np.int8(16), 144, 16, 1])


def test_a_value_outside_the_annotated_integer_type_is_refused(device):
    with pytest.raises(ArgumentValueError, match="does not fit in i8"):
        _int8_kernel[(1,)](device.zeros(4, np.int32), 200, 1, 1, True)


@tilejit.jit
def _string_kernel(out_ptr, a: "fp16", b: "i64", c):  # noqa: F821 (Triton type strings)
    tl.static_assert(a.dtype == tl.float16 and b.dtype == tl.int64 and c.dtype == tl.int32)
    tl.store(out_ptr, a.to(tl.float64) + b + c)


def test_triton_type_strings_annotate_and_unannotated_parameters_follow_the_value(device):
    out = device.zeros(1, np.float64)
    _string_kernel[(1,)](out, 0.5, 2 ** 33, 7)
    assert device.numpy(out)[0] == 0.5 + 2 ** 33 + 7


def test_the_signature_holds_the_annotated_types():
    kernel = _float_kernel(tl.float16)
    compiled = kernel[(1,)](np.zeros(1, np.float32), 2.0, DTYPE=tl.float16)
    assert "%val: f16" in compiled.asm["ttir"]
    compiled = _int8_kernel[(1,)](np.zeros(4, np.int32), 1, 2, 3, False)
    assert "%x: i8" in compiled.asm["ttir"] and "%n: i32" in compiled.asm["ttir"]


@tilejit.jit
def _unknown_kernel(x_ptr, n: "torch.Tensor", m: np.int32):  # noqa: F821
    tl.store(x_ptr, n + m)


def test_annotations_that_are_not_triton_types_change_nothing(device):
    out = device.zeros(1, np.int64)
    _unknown_kernel[(1,)](out, 2 ** 40, 3)   # n stays an i64, as its value
    assert device.numpy(out)[0] == 2 ** 40 + 3


@tilejit.jit
def _bool_offset_kernel(out_ptr, flag: bool, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + flag, 7)                    # int1 is unsigned (Triton): True moves forward by one
    tl.store(out_ptr + 2 + offs + (offs >= 0), offs + 1)


def test_a_bool_offset_moves_a_pointer_forward(device):
    out = device.zeros(8, np.int32)
    _bool_offset_kernel[(1,)](out, True, BLOCK=4)
    np.testing.assert_array_equal(device.numpy(out), [0, 7, 0, 1, 2, 3, 4, 0])
