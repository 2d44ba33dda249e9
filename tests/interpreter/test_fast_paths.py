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


@tilejit.jit
def branch_and_loop_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # The same offsets feed fused accesses in both branches of a divergent if and in a loop: the
    # intp copy of the offsets is made per block, never used outside the block that made it.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if pid % 2 == 0:
        v = tl.load(x_ptr + offs) * 2.0
    else:
        v = tl.load(x_ptr + offs) + 100.0
    for i in range(0, 3):
        v += tl.load(x_ptr + offs, mask=offs + i < 4 * BLOCK, other=0.0)
    tl.store(out_ptr + offs, v)


def test_offsets_path_under_divergent_branch_and_loop():
    block = 8
    x = np.arange(4 * block, dtype=np.float32)
    out = np.zeros_like(x)
    branch_and_loop_kernel[(4,)](x, out, BLOCK=block)
    programs = np.repeat(np.arange(4), block)
    tail = (np.arange(4 * block)[:, None] + np.arange(3)[None, :] < 4 * block).sum(axis=1)
    expected = np.where(programs % 2 == 0, 2 * x, x + 100) + tail * x
    np.testing.assert_array_equal(out, expected)
    assert "rt.load_offsets(" in _source(branch_and_loop_kernel)


@tilejit.jit
def reload_after_store_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # x_ptr's slot is never stored to, so its rows may be read as views of the argument: only valid
    # while no other argument overlaps it. Here out_ptr may be the very same array.
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, a * 0.0)
    b = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, a + 1.0 + b)


@pytest.mark.parametrize("aliased", [False, True])
def test_rows_read_as_views_respect_aliased_arguments(aliased):
    x = np.arange(8, dtype=np.float32)
    original = x.copy()
    out = x if aliased else np.zeros(8, np.float32)
    reload_after_store_kernel[(1,)](x, out, BLOCK=8)
    # Aliased: the first load keeps the old values, the second sees the zeros just stored.
    np.testing.assert_array_equal(out, original + 1 if aliased else 2 * original + 1)
    assert "fresh=False" in _source(reload_after_store_kernel)


def test_row_view_store_with_partial_mask_leaves_masked_lanes_alone():
    # In-bounds rows with a partial mask in the last program: a view, written where the mask holds.
    x, y = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    out = np.full(1024, -7.0, np.float32)
    add_kernel[(4,)](x, y, out, 1000, BLOCK=256)
    np.testing.assert_array_equal(out[:1000], x[:1000] + 1)
    assert np.all(out[1000:] == -7.0)


def test_row_view_only_for_evenly_spaced_rows_inside_the_argument():
    from tilejit_interpreter import memory as mx

    mem = mx.Memory("k", [])
    base = np.int64(mem.add("x", np.arange(64, dtype=np.float32), 0))
    starts = np.array([0, 16, 32], np.int32)
    rows = mx.row_view(mem, 1, base, (starts, 0), 8, np.float32, True)
    np.testing.assert_array_equal(rows, np.arange(64, dtype=np.float32).reshape(4, 16)[:3, :8])
    assert mx.row_view(mem, 1, base, (np.array([0, 16, 40], np.int32), 0), 8, np.float32, False) is None
    assert mx.row_view(mem, 1, base, (np.array([32, 16, 0], np.int32), 0), 8, np.float32, False) is None
    assert mx.row_view(mem, 1, base, (np.array([0, 4, 8], np.int32), 0), 8, np.float32, False) is not None
    assert mx.row_view(mem, 1, base, (np.array([0, 4, 8], np.int32), 0), 8, np.float32, True) is None, \
        "overlapping rows are never a store target: the programs' order would matter"
    assert mx.row_view(mem, 1, base, (np.array([0, 16, 57], np.int32), 0), 8, np.float32, False) is None
    assert mx.row_view(mem, 1, base, (np.int32(0x7FFFFFFF - 3), 0), 8, np.float32, False) is None, \
        "offsets that wrap in i32 are left to the general path"


@tilejit.jit
def transpose_tile_kernel(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    # 2-D pointers built by addptr -> broadcast -> addptr: fused into one sum of offset terms.
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(x_ptr + r[:, None] * cols + c[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + c[None, :] * rows + r[:, None], tile, mask=mask)


def test_fused_pointer_chains_in_two_dimensions():
    rows, cols = 21, 13
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    out = np.zeros((cols, rows), np.float32)
    transpose_tile_kernel[(3, 2)](x, out, rows, cols, BLOCK=8)
    np.testing.assert_array_equal(out, x.T)
    source = _source(transpose_tile_kernel)
    assert "rt.sum_offsets(" in source and "rt.addptr(" not in source
    with pytest.raises(InterpreterError) as info:  # rows too large: unmasked lanes past the end
        transpose_tile_kernel[(3, 2)](x, out, rows + 3, cols, BLOCK=8)
    assert "'x_ptr'" in str(info.value) and info.value.program_id[0] == 2


def test_cached_launch_still_sees_environment_changes(monkeypatch):
    # The launch path reads the selection knobs without os.environ.get; changes must still count.
    x = np.zeros(1, np.float32)
    increment_kernel[(1,)](x)
    monkeypatch.setenv("TILEJIT_TARGET", "cuda:90")
    with pytest.raises(Exception, match="(?i)cuda|gpu"):
        increment_kernel[(1,)](x)  # numpy memory is not a CUDA device's: never run on the interpreter
    assert x[0] == 1
    monkeypatch.delenv("TILEJIT_TARGET")
    increment_kernel[(1,)](x)
    assert x[0] == 2


@tilejit.jit
def atomic_then_reload_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    before = tl.load(x_ptr + offs)
    tl.atomic_add(x_ptr + offs, 1.0)
    tl.store(out_ptr + offs, before + tl.load(x_ptr + offs))


def test_rows_written_by_atomics_are_copied_not_viewed():
    x, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    original = x.copy()
    atomic_then_reload_kernel[(1,)](x, out, BLOCK=8)
    np.testing.assert_array_equal(out, 2 * original + 1)  # `before` kept the values from before the atomic
    assert "fresh=False" not in _source(atomic_then_reload_kernel)


@tilejit.jit
def swap_scalars_kernel(x_ptr, y_ptr):
    a = tl.load(x_ptr)
    b = tl.load(y_ptr)
    tl.store(x_ptr, b)
    tl.store(y_ptr, a)  # `a` must be the value from before x was overwritten


def test_scalar_loads_are_values_not_views():
    x, y = np.array([1.5], np.float32), np.array([-2.0], np.float32)
    swap_scalars_kernel[(1,)](x, y)
    assert (x[0], y[0]) == (-2.0, 1.5)
