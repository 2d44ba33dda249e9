"""The last `triton.language` names: TRITON_MAX_TENSOR_NUMEL, add, async_task, condition, const,
constexpr_type, float8e4b15, slice, target_info, tuple (map_elementwise: test_lang_map_elementwise.py)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit import ir
from tilejit.backends.gpu_target import GPUTarget
from tilejit.frontend import ASTSource

RNG = np.random.default_rng(7)


# -- TRITON_MAX_TENSOR_NUMEL ----------------------------------------------------------------------------
@tilejit.jit
def _max_numel_kernel(out_ptr, TOO_BIG: tl.constexpr):
    tl.static_assert(tl.TRITON_MAX_TENSOR_NUMEL == 1048576)
    if TOO_BIG:
        tl.store(out_ptr + tl.arange(0, 2 * tl.TRITON_MAX_TENSOR_NUMEL), 0)
    tl.store(out_ptr, tl.TRITON_MAX_TENSOR_NUMEL)


def test_triton_max_tensor_numel(device):
    assert tl.TRITON_MAX_TENSOR_NUMEL == 2 ** 20
    out = device.zeros(1, np.int32)
    _max_numel_kernel[(1,)](out, TOO_BIG=False)
    assert device.numpy(out)[0] == 2 ** 20
    with pytest.raises(tilejit.CompilationError, match="exceeds"):
        _max_numel_kernel[(1,)](out, TOO_BIG=True)


# -- add (and its siblings sub, mul) -----------------------------------------------------------------------
@tilejit.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(tl.add(x_ptr, offs))  # pointer + offsets
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.add(x, y))
    tl.store(out_ptr + BLOCK + offs, tl.sub(x, y))
    tl.store(out_ptr + 2 * BLOCK + offs, tl.mul(x, 3))
    tl.store(out_ptr + 3 * BLOCK + offs, tl.add(7, y, sanitize_overflow=False))


@pytest.mark.parametrize("dtype", ["int32", "int8", "float32"])
def test_add_is_the_function_form_of_plus(device, dtype):
    if np.dtype(dtype).kind == "i":
        x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, 32, dtype=dtype, endpoint=True)
        y = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, 32, dtype=dtype, endpoint=True)
    else:
        x, y = RNG.standard_normal(32).astype(dtype), RNG.standard_normal(32).astype(dtype)
    out = device.zeros(4 * 32, dtype)
    _add_kernel[(1,)](device.tensor(x), device.tensor(y), out, BLOCK=32)
    got = device.numpy(out).reshape(4, 32)
    with np.errstate(over="ignore"):
        expected = [x + y, x - y, x * np.array(3, dtype), np.array(7, dtype) + y]
    for row, want in zip(got, expected):
        np.testing.assert_array_equal(row, want)


@tilejit.jit(debug=True)
def _sanitized_add_kernel(x_ptr, y_ptr, out_ptr):
    offs = tl.arange(0, 4)
    tl.store(out_ptr + offs, tl.add(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


def test_add_sanitizes_integer_overflow_in_debug_mode(device):
    x = np.array([1, 2, 3, 2 ** 31 - 1], np.int32)
    out = device.zeros(4, np.int32)
    _sanitized_add_kernel[(1,)](device.tensor(x), device.tensor(np.array([1, 1, 1, 0], np.int32)), out)
    np.testing.assert_array_equal(device.numpy(out), x + np.array([1, 1, 1, 0], np.int32))
    if device.is_gpu:  # a trapped kernel poisons the CUDA context: fail in a child process
        from gpu_subprocess import run_failing_launch
        proc = run_failing_launch("test_lang_names", """
            x = torch.tensor([1, 2, 3, 2 ** 31 - 1], dtype=torch.int32, device="cuda")
            m._sanitized_add_kernel[(1,)](x, torch.ones(4, dtype=torch.int32, device="cuda"), torch.empty_like(x))
        """)
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "int32 overflow detected" in output, output
        return
    with pytest.raises((AssertionError, tilejit.TilejitError), match="int32 overflow detected"):
        _sanitized_add_kernel[(1,)](device.tensor(x), device.tensor(np.ones(4, np.int32)), out)
    # the compile option turns the check off, as in Triton: the sum wraps
    _sanitized_add_kernel[(1,)](device.tensor(x), device.tensor(np.ones(4, np.int32)), out, sanitize_overflow=False)
    np.testing.assert_array_equal(device.numpy(out), (x.astype(np.int64) + 1).astype(np.int32))


# -- async_task ---------------------------------------------------------------------------------------------
@tilejit.jit
def _async_task_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    with tl.async_task([0]):
        x = tl.load(x_ptr + offs)
    with tl.async_task(num_warps=4, registers=232):
        y = x * 2.0 + 1.0
    with tl.async_task("default"):
        tl.store(out_ptr + offs, y)


def test_async_task_partitions_run_in_place(device):
    x = RNG.standard_normal(64).astype(np.float32)
    out = device.zeros(64, np.float32)
    _async_task_kernel[(1,)](device.tensor(x), out, BLOCK=64)
    np.testing.assert_array_equal(device.numpy(out), x * 2.0 + 1.0)


@tilejit.jit
def _bad_async_task_kernel(out_ptr):
    with tl.async_task([-1]):
        tl.store(out_ptr, 1)


def test_async_task_checks_its_arguments(device):
    with pytest.raises(tilejit.CompilationError, match="task ids must be non-negative"):
        _bad_async_task_kernel[(1,)](device.zeros(1, np.int32))


# -- condition ------------------------------------------------------------------------------------------------
@tilejit.jit
def _condition_kernel(out_ptr, n):
    i = 0
    total = 0
    while tl.condition(i < n, disable_licm=True):
        total += i * i
        i += 1
    tl.store(out_ptr, total)


def test_condition_wraps_a_while_loop_condition(device):
    out = device.zeros(1, np.int32)
    _condition_kernel[(1,)](out, 10)
    assert device.numpy(out)[0] == sum(i * i for i in range(10))
    text = ir.print_module(ASTSource(_condition_kernel, {"out_ptr": "*i32", "n": "i32"}).make_ir())
    assert "scf.while" in text and "tt.disable_licm = true" in text


@tilejit.jit
def _range_without_licm_kernel(out_ptr, n, scale):
    total = 0
    for i in tl.range(0, n, disable_licm=True):   # Triton 3.6's loop hint
        total += i * scale
    tl.store(out_ptr, total)


def test_range_takes_disable_licm(device):
    out = device.zeros(1, np.int32)
    _range_without_licm_kernel[(1,)](out, 10, 3)
    assert device.numpy(out)[0] == 3 * sum(range(10))
    text = ir.print_module(ASTSource(_range_without_licm_kernel, {"out_ptr": "*i32", "n": "i32", "scale": "i32"}).make_ir())
    assert "scf.for" in text and "tt.disable_licm = true" in text


# -- const ----------------------------------------------------------------------------------------------------
@tilejit.jit
def _const_copy_kernel(x_ptr: tl.const, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)


@tilejit.jit
def _const_store_kernel(x_ptr: tl.const, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)


def test_const_pointer_can_be_read_but_not_written(device):
    x = np.arange(16, dtype=np.float32)
    out = device.zeros(16, np.float32)
    _const_copy_kernel[(1,)](device.tensor(x), out, BLOCK=16)
    np.testing.assert_array_equal(device.numpy(out), x + 1)
    with pytest.raises(tilejit.CompilationError, match="Cannot store to a constant pointer"):
        _const_store_kernel[(1,)](device.tensor(x), BLOCK=16)


# -- constexpr_type -------------------------------------------------------------------------------------------
@tilejit.jit
def _helper_of_constexpr_type(x, N):
    tl.static_assert(N.type == tl.constexpr_type(4))
    return x * N


@tilejit.jit
def _constexpr_type_kernel(out_ptr, N: tl.constexpr):
    tl.static_assert(N.type == tl.constexpr_type(N))
    tl.static_assert(N.type != tl.constexpr_type(N + 1))
    tl.store(out_ptr, _helper_of_constexpr_type(tl.full((), 3, tl.int32), N))


def test_constexpr_type(device):
    assert tl.constexpr(4).type == tl.constexpr_type(4)
    assert tl.constexpr(4).type != tl.constexpr_type(4.5)
    assert hash(tl.constexpr_type(4)) == hash(tl.constexpr(4).type)
    assert repr(tl.constexpr_type(4)) == "constexpr_type[4]"
    out = device.zeros(1, np.int32)
    _constexpr_type_kernel[(1,)](out, N=4)
    assert device.numpy(out)[0] == 12
    with pytest.raises(tilejit.CompilationError, match="static_assert failed"):
        _constexpr_type_kernel[(1,)](out, N=5)


# -- slice ----------------------------------------------------------------------------------------------------
@tilejit.jit
def _slice_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    values = (x, x + 1, x + 2, x + 3)
    tail = values[1:]                        # a Python slice becomes tl.slice in the frontend
    head = values[tl.slice(0, 4, 2)]          # tl.slice spelled out: elements 0 and 2
    tl.static_assert(len(tail) == 3 and len(head) == 2)
    col = x[:, None]                          # tensor subscripts still take ':' and None
    tl.static_assert(col.shape[1] == 1)
    tl.store(out_ptr + offs, tail[0] + tail[2] + head[1] + tl.sum(col, axis=1))


def test_slice(device):
    assert tl.slice(1, None, 2).as_python_slice() == slice(1, None, 2)
    assert tl.slice(1, 3, None) == slice(1, 3)
    x = np.arange(8, dtype=np.float32)
    out = device.zeros(8, np.float32)
    _slice_kernel[(1,)](device.tensor(x), out, BLOCK=8)
    np.testing.assert_array_equal(device.numpy(out), (x + 1) + (x + 3) + (x + 2) + x)


# -- target_info ----------------------------------------------------------------------------------------------
@tilejit.jit
def _target_info_kernel(out_ptr):
    tl.store(out_ptr + 0, int(tl.target_info.is_cuda()))
    tl.store(out_ptr + 1, int(tl.target_info.is_hip()))
    tl.store(out_ptr + 2, int(tl.target_info.cuda_capability_geq(8, 0)))
    tl.store(out_ptr + 3, int(tl.target_info.cuda_capability_geq(9)))
    tl.store(out_ptr + 4, int(tl.target_info.is_hip_cdna3()))
    if tl.target_info.cuda_capability_geq(9, 0):   # a compile-time branch
        tl.store(out_ptr + 5, 90)
    else:
        tl.store(out_ptr + 5, -1)


def _stored_constants(target):
    module = ASTSource(_target_info_kernel, {"out_ptr": "*i32"}).make_ir(GPUTarget.parse(target), None)
    values = []
    for op in module.functions[0].regions[0].blocks[0].ops:
        if op.name == "tt.store":
            values.append(op.operands[1].owner.attrs["value"])
    return values


@pytest.mark.parametrize("target,expected", [
    ("cuda:80", [1, 0, 1, 0, 0, -1]), ("cuda:90", [1, 0, 1, 1, 0, 90]),
    ("hip:gfx942", [0, 1, 0, 0, 1, -1]), ("interpreter", [0, 0, 0, 0, 0, -1])])
def test_target_info_answers_for_the_compilation_target(target, expected):
    assert [int(v) for v in _stored_constants(target)] == expected


def test_target_info_in_a_launched_kernel(device, backend):
    out = device.zeros(6, np.int32)
    _target_info_kernel[(1,)](out)
    got = device.numpy(out)
    assert got[0] == (backend == "cuda") and got[1] == (backend == "hip")
    with tilejit.target("cuda:75"):
        assert tl.target_info.is_cuda() and tl.target_info.cuda_capability_geq(7, 5)
        assert not tl.target_info.cuda_capability_geq(8)


# -- tuple ----------------------------------------------------------------------------------------------------
@tilejit.jit
def _swap_and_scale(pair, factor):
    return tl.tuple([pair[1] * factor, pair[0] * factor])


@tilejit.jit
def _tuple_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    t = tl.tuple([x, x + 10])
    tl.static_assert(len(t) == 2)
    tl.static_assert(t.type == tl.tuple_type([x.type, x.type]))
    swapped = _swap_and_scale(t, 2)
    longer = swapped + (x,)
    a, b, c = longer
    tl.store(out_ptr + offs, a)
    tl.store(out_ptr + BLOCK + offs, b)
    tl.store(out_ptr + 2 * BLOCK + offs, c + longer[1:][0])


def test_tuple(device):
    t = tl.tuple([1, 2, 3])
    assert isinstance(t, tuple) and t[1] == 2 and isinstance(t[1:], tl.tuple) and t + (4,) == (1, 2, 3, 4)
    x = np.arange(8, dtype=np.float32)
    out = device.zeros(24, np.float32)
    _tuple_kernel[(1,)](device.tensor(x), out, BLOCK=8)
    got = device.numpy(out).reshape(3, 8)
    np.testing.assert_array_equal(got[0], (x + 10) * 2)
    np.testing.assert_array_equal(got[1], x * 2)
    np.testing.assert_array_equal(got[2], x + x * 2)
