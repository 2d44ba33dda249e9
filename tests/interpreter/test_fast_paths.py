"""The interpreter's fast paths give the same results and errors as the general ones: accesses
through `addptr(splat(base), offsets)` (never materialised as int64 pointers), one-program scalar
launches, argument slots, and the floating-point error state. Also regressions from
/work/notes/interp_bugs.md."""
import warnings

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import InterpreterError


def _source(kernel) -> str:
    """The generated NumPy program of the kernel's only compiled specialization."""
    (compiled, _), = [entry for per_target in kernel.cache.values() for entry in per_target.values()]
    return compiled.asm["py"]


@tilejit.jit
def scalars_first_kernel(a, b, c, out_ptr):
    tl.store(out_ptr, a + b * c)


def test_pointer_after_scalar_parameters():
    # interp_bugs.md: slots are parameter index + 1, so scalars must hold their slots too.
    out = np.zeros(1, np.int32)
    scalars_first_kernel[(1,)](5, 7, 3, out)
    assert out[0] == 26


@tilejit.jit
def pid_branch_store_kernel(out_ptr):
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(out_ptr, 42)
    else:
        tl.store(out_ptr + pid, pid)


def test_scalar_store_under_divergent_branch():
    # interp_bugs.md: a scalar store under a per-program branch mask is one store per active program.
    out = np.zeros(4, np.int32)
    pid_branch_store_kernel[(4,)](out)
    assert out.tolist() == [42, 1, 2, 3]


@tilejit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_offsets_path_with_masked_out_of_bounds_tail():
    n = 1000  # not a multiple of BLOCK: the last program's masked lanes point past the end
    x, y = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
    out = np.zeros(n, np.float32)
    add_kernel[(4,)](x, y, out, n, BLOCK=256)
    np.testing.assert_array_equal(out, x + y)
    source = _source(add_kernel)
    assert source.count("rt.load_offsets(") == 2 and "rt.store_offsets(" in source
    assert "rt.addptr(" not in source, "pointers only loaded and stored through are never built"


def test_offsets_path_reports_unmasked_out_of_bounds():
    n = 1000
    x, y, out = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)
    with pytest.raises(InterpreterError) as info:
        add_kernel[(4,)](x, y, out, 1024, BLOCK=256)  # n larger than the arrays: lanes 1000.. are live
    assert "'x_ptr'" in str(info.value) and info.value.program_id == (3, 0, 0)
    assert "element offset 1000" in str(info.value)


@tilejit.jit
def reverse_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # A per-program base pointer at the end of its row, read with negative offsets.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    last = x_ptr + row * n_cols + (n_cols - 1)
    values = tl.load(last - cols, mask=cols < n_cols, other=-1.0)
    tl.store(out_ptr + row * n_cols + cols, values, mask=cols < n_cols)


def test_offsets_path_with_per_program_base_and_negative_offsets():
    rows, cols = 5, 13
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    out = np.zeros_like(x)
    reverse_rows_kernel[(rows,)](x, out, cols, BLOCK=16)
    np.testing.assert_array_equal(out, x[:, ::-1])


@tilejit.jit
def read_backwards_kernel(x_ptr, out_ptr, start, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + start - offs))


def test_offsets_path_reads_before_the_start_as_an_error():
    x, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    read_backwards_kernel[(1,)](x, out, 7, BLOCK=8)
    np.testing.assert_array_equal(out, x[::-1])
    with pytest.raises(InterpreterError) as info:
        read_backwards_kernel[(1,)](x, out, 3, BLOCK=8)  # lanes 4.. read x[-1], x[-2], ...
    assert "'x_ptr'" in str(info.value) and "element offset -1" in str(info.value)


@tilejit.jit
def increment_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)


def test_cached_one_program_launch_sees_each_new_array():
    a, b = np.zeros(1, np.float32), np.full(1, 10, np.float32)
    for _ in range(3):
        increment_kernel[(1,)](a)
    increment_kernel[(1,)](b)
    increment_kernel[(1,)](a[0:1])  # a view of `a`: the same memory
    assert a[0] == 4 and b[0] == 11


def test_strided_argument_after_contiguous_one():
    x = np.zeros(8, np.float32)
    increment_kernel[(1,)](x[::2][1:])  # a non-contiguous view whose first element is x[2]
    assert x.tolist() == [0, 0, 1, 0, 0, 0, 0, 0]


@tilejit.jit
def divide_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) / tl.load(y_ptr + offs))


def test_float_errors_are_silent_inside_and_restored_after():
    x = np.array([1, -1, 0, 2], np.float32)
    y = np.array([0, 0, 0, 4], np.float32)
    out = np.zeros(4, np.float32)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning would fail the test
        divide_kernel[(1,)](x, y, out, BLOCK=4)
    assert np.geterr() == before
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2]) and out[3] == 0.5
    with np.errstate(divide="raise"):  # the caller's own state comes back after a launch
        divide_kernel[(1,)](x, y, out, BLOCK=4)
        with pytest.raises(FloatingPointError):
            np.float32(1) / np.float32(0)
