"""Named tuples and @jit functions inside tuple arguments, launched through `kernel[grid](...)`."""
from typing import NamedTuple

import numpy as np

import tilejit
import tilejit.language as tl


class Pair(NamedTuple):
    x: object
    y: object


@tilejit.jit
def _sum_pair_kernel(p, out_ptr, BLOCK: tl.constexpr):  # no annotation: the field names come from the value
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(p.x + offs) + 2 * tl.load(p.y + offs))


@tilejit.jit
def _double(v):
    return v * 2


@tilejit.jit
def _negate(v):
    return -v


@tilejit.jit
def _apply_kernel(closure, x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, closure[0](tl.load(x_ptr + offs)) + closure[1])


def test_unannotated_named_tuple_fields_work_in_the_kernel():
    x, y = np.arange(16, dtype=np.float32), np.full(16, 3, np.float32)
    out = np.zeros(16, np.float32)
    _sum_pair_kernel[(1,)](Pair(x, y), out, BLOCK=16)
    np.testing.assert_array_equal(out, x + 2 * y)


def test_named_and_plain_tuples_do_not_share_a_compiled_kernel():
    x, y = np.arange(16, dtype=np.float32), np.ones(16, np.float32)
    out = np.zeros(16, np.float32)
    _sum_pair_kernel[(1,)](Pair(x, y), out, BLOCK=16)
    try:
        _sum_pair_kernel[(1,)]((x, y), out, BLOCK=16)  # a plain tuple has no field `x`
    except tilejit.CompilationError as exc:
        assert "x" in str(exc)
    else:
        raise AssertionError("a plain tuple reused the named tuple's kernel")


def test_jit_function_inside_a_tuple_is_a_compile_time_value():
    x = np.arange(8, dtype=np.int32)
    out = np.zeros(8, np.int32)
    _apply_kernel[(1,)]((_double, 5), x, out, BLOCK=8)
    np.testing.assert_array_equal(out, x * 2 + 5)
    _apply_kernel[(1,)]((_negate, 5), x, out, BLOCK=8)  # another function: another specialization
    np.testing.assert_array_equal(out, -x + 5)
