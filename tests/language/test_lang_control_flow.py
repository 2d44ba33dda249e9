"""Control flow, nested @jit calls, constexprs, program ids and grids, printing and assertions."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl

RNG = np.random.default_rng(23)


@tilejit.jit
def _scalar_if_kernel(out_ptr, flag):
    if flag > 0:
        v = 10
        w = 1.5
    else:
        v = 20
        w = 2.5
    tl.store(out_ptr, v + w)


def test_scalar_if_else_yields_values(device):
    for flag, expected in [(3, 11.5), (-1, 22.5)]:
        out = device.zeros(1, np.float32)
        _scalar_if_kernel[(1,)](out, flag)
        assert device.numpy(out)[0] == expected


@tilejit.jit
def _tensor_if_kernel(x_ptr, out_ptr, threshold, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    total = tl.sum(x)
    if total > threshold:  # a scalar tensor condition: scf.if with a tensor result
        y = x * 2
    else:
        y = x - 1
    tl.store(out_ptr + tl.arange(0, BLOCK), y)


def test_if_on_runtime_scalar_tensor(device):
    x = np.arange(8, dtype=np.float32)
    for threshold, expected in [(0.0, x * 2), (100.0, x - 1)]:
        out = device.zeros(8, np.float32)
        _tensor_if_kernel[(1,)](device.tensor(x), out, threshold, BLOCK=8)
        np.testing.assert_array_equal(device.numpy(out), expected)


@tilejit.jit
def _ternary_kernel(out_ptr, a, b):
    tl.store(out_ptr, a if a > b else b)
    c = 7 if a > 1000 else 9  # constants: folded or selected
    tl.store(out_ptr + 1, c)


def test_conditional_expression(device):
    out = device.zeros(2, np.int32)
    _ternary_kernel[(1,)](out, 3, 8)
    np.testing.assert_array_equal(device.numpy(out), [8, 9])


@tilejit.jit
def _for_kernel(x_ptr, out_ptr, n_iters, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = 0
    ptr = x_ptr + offs
    for i in range(0, n_iters):  # runtime trip count, loop-carried tensor, scalar and pointer
        acc += tl.load(ptr) * i
        count += 1
        ptr += BLOCK
    for j in tl.range(1, 4):
        acc += j
    tl.store(out_ptr + offs, acc)
    tl.store(out_ptr + BLOCK, count.to(tl.float32))


def test_for_loop_with_iter_args(device):
    n_iters, block = 5, 16
    x = RNG.standard_normal((n_iters, block)).astype(np.float32)
    out = device.zeros(block + 1, np.float32)
    _for_kernel[(1,)](device.tensor(x), out, n_iters, BLOCK=block)
    expected = (x * np.arange(n_iters)[:, None]).sum(axis=0) + 6
    np.testing.assert_allclose(device.numpy(out)[:block], expected, rtol=1e-5)
    assert device.numpy(out)[block] == n_iters


def test_for_loop_with_zero_iterations(device):
    out = device.zeros(17, np.float32)
    _for_kernel[(1,)](device.tensor(np.ones(16, np.float32)), out, 0, BLOCK=16)
    np.testing.assert_array_equal(device.numpy(out), [6.0] * 16 + [0.0])


@tilejit.jit
def _negative_step_kernel(out_ptr, start):
    total = 0
    count = 0
    for j in range(start, 0, -2):  # a constant negative step, runtime bounds
        total += j
        count += 1
    tl.store(out_ptr, total)
    tl.store(out_ptr + 1, count)


def test_for_loop_with_negative_step(device):
    out = device.zeros(2, np.int32)
    _negative_step_kernel[(1,)](out, 9)
    np.testing.assert_array_equal(device.numpy(out), [9 + 7 + 5 + 3 + 1, 5])


@tilejit.jit
def _while_kernel(out_ptr, start):
    n = start
    steps = 0
    while n != 1:  # Collatz
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    tl.store(out_ptr, steps)


def test_while_loop(device):
    out = device.zeros(1, np.int32)
    _while_kernel[(1,)](out, 27)
    assert device.numpy(out)[0] == 111


@tilejit.jit
def _stats(x):
    return tl.sum(x), tl.max(x), tl.min(x)


@tilejit.jit
def _clipped(x, lo, hi):
    if lo > hi:
        return x  # early return
    return tl.minimum(tl.maximum(x, lo), hi)


@tilejit.jit
def _nested_call_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    s, mx, mn = _stats(x)
    tl.store(out_ptr + 0, s)
    tl.store(out_ptr + 1, mx)
    tl.store(out_ptr + 2, mn)
    tl.store(out_ptr + 3 + tl.arange(0, BLOCK), _clipped(x, -0.5, 0.5))
    tl.store(out_ptr + 3 + BLOCK + tl.arange(0, BLOCK), _clipped(x, 0.5, -0.5))


def test_nested_jit_calls_multiple_returns_and_early_return(device):
    x = RNG.standard_normal(8).astype(np.float32)
    out = device.zeros(3 + 16, np.float32)
    _nested_call_kernel[(1,)](device.tensor(x), out, BLOCK=8)
    got = device.numpy(out)
    np.testing.assert_allclose(got[:3], [x.sum(), x.max(), x.min()], rtol=1e-5)
    np.testing.assert_array_equal(got[3:11], np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(got[11:], x)


@tilejit.jit
def _static_range_kernel(out_ptr, N: tl.constexpr):
    acc = tl.zeros([4], dtype=tl.int32)
    for i in tl.static_range(N):
        tl.static_assert(i < N)
        acc += tl.full([4], 1 << i, tl.int32)  # i is a compile-time constant here
    tl.store(out_ptr + tl.arange(0, 4), acc)


def test_static_range_unrolls_with_constexpr_index(device):
    out = device.zeros(4, np.int32)
    _static_range_kernel[(1,)](out, N=5)
    np.testing.assert_array_equal(device.numpy(out), [31] * 4)


@tilejit.jit
def _static_assert_kernel(out_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 2 == 0, "BLOCK must be even")
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.arange(0, BLOCK))


def test_static_assert(device):
    out = device.zeros(4, np.int32)
    _static_assert_kernel[(1,)](out, BLOCK=4)
    np.testing.assert_array_equal(device.numpy(out), np.arange(4))
    with pytest.raises(tilejit.CompilationError, match="BLOCK must be even"):
        _static_assert_kernel[(1,)](device.zeros(1, np.int32), BLOCK=1)


SCALE: tl.constexpr = tl.constexpr(3)


@tilejit.jit
def _constexpr_kernel(out_ptr, K: tl.constexpr, USE_SCALE: tl.constexpr, DTYPE: tl.constexpr):
    x = tl.arange(0, 8).to(DTYPE) * K
    if USE_SCALE:
        x = x * SCALE
    tl.store(out_ptr + tl.arange(0, 8), x)


def test_constexpr_arguments_and_globals(device):
    out = device.zeros(8, np.float32)
    _constexpr_kernel[(1,)](out, K=2, USE_SCALE=True, DTYPE=tl.float32)
    np.testing.assert_array_equal(device.numpy(out), np.arange(8) * 6)
    _constexpr_kernel[(1,)](out, K=5, USE_SCALE=False, DTYPE=tl.float32)
    np.testing.assert_array_equal(device.numpy(out), np.arange(8) * 5)


@tilejit.jit
def _grid_kernel(out_ptr):
    pid0 = tl.program_id(0)
    pid1 = tl.program_id(1)
    pid2 = tl.program_id(axis=2)
    n0 = tl.num_programs(0)
    n1 = tl.num_programs(1)
    n2 = tl.num_programs(2)
    linear = (pid2 * n1 + pid1) * n0 + pid0
    tl.store(out_ptr + linear * 4 + 0, pid0)
    tl.store(out_ptr + linear * 4 + 1, pid1)
    tl.store(out_ptr + linear * 4 + 2, pid2)
    tl.store(out_ptr + linear * 4 + 3, n0 * n1 * n2)


@pytest.mark.parametrize("grid", [(5,), (3, 2), (2, 3, 2)])
def test_program_id_and_num_programs(device, grid):
    dims = grid + (1,) * (3 - len(grid))
    total = dims[0] * dims[1] * dims[2]
    out = device.full(total * 4, -1, np.int32)
    _grid_kernel[grid](out)
    got = device.numpy(out).reshape(total, 4)
    expected = [(p0, p1, p2, total) for p2 in range(dims[2]) for p1 in range(dims[1]) for p0 in range(dims[0])]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("grid", [(0,), (4, 0), (2, 2, 0)])
def test_grid_with_a_zero_dimension_runs_nothing(device, grid):
    out = device.full(64, -1, np.int32)
    _grid_kernel[grid](out)
    np.testing.assert_array_equal(device.numpy(out), -1)


@tilejit.jit
def _print_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.device_print("vals", x)
    print("pid", tl.program_id(0))


def test_device_print(device, capfd):
    _print_kernel[(1,)](device.tensor(np.array([11, 22, 33, 44], np.int32)))
    device.synchronize()
    out = capfd.readouterr().out
    for value in ("11", "22", "33", "44"):
        assert value in out
    assert "vals" in out and "pid" in out


@tilejit.jit(debug=True)
def _assert_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.device_assert(x > 0, "x must be positive")


def test_device_assert(device):
    _assert_kernel[(1,)](device.tensor(np.array([1, 2, 3, 4], np.int32)))  # passes
    if device.is_gpu:  # a trapped kernel poisons the CUDA context: fail in a child process
        from gpu_subprocess import run_failing_launch
        proc = run_failing_launch("test_lang_control_flow", """
            m._assert_kernel[(1,)](torch.tensor([1, -2, 3, 4], dtype=torch.int32, device="cuda"))
        """)
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0, output
        assert "x must be positive" in output and "test_lang_control_flow.py" in output, output
        return
    with pytest.raises((AssertionError, tilejit.TilejitError), match="x must be positive"):
        _assert_kernel[(1,)](device.tensor(np.array([1, -2, 3, 4], np.int32)))


@tilejit.jit
def _python_assert_kernel(out_ptr, N: tl.constexpr):
    assert N > 2, "N too small"  # a constexpr condition is checked at compile time
    tl.store(out_ptr, N)


def test_python_assert_on_constexpr(device):
    out = device.zeros(1, np.int32)
    _python_assert_kernel[(1,)](out, N=4)
    assert device.numpy(out)[0] == 4
    with pytest.raises(tilejit.CompilationError, match="N too small"):
        _python_assert_kernel[(1,)](out, N=1)


@tilejit.jit
def _min_max_builtin_kernel(out_ptr, a, B: tl.constexpr):
    tl.store(out_ptr, min(a, B))
    tl.store(out_ptr + 1, max(B, 3))


def test_python_min_max_builtins(device):
    out = device.zeros(2, np.int32)
    _min_max_builtin_kernel[(1,)](out, 9, B=5)
    np.testing.assert_array_equal(device.numpy(out), [5, 5])


@tilejit.jit
def _hints_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    offs = tl.multiple_of(tl.program_id(0) * BLOCK, 16) + tl.max_contiguous(tl.arange(0, BLOCK), BLOCK)
    offs = tl.max_constancy(offs, 1)
    tl.static_print("compiling with BLOCK =", BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.debug_barrier()
    tl.store(out_ptr + offs, x + 1, mask=offs < n)


def test_compiler_hints_do_not_change_results(device, capfd, monkeypatch):
    # static_print runs at compile time: make sure this test compiles (another variant may have already).
    monkeypatch.setenv("TILEJIT_ALWAYS_COMPILE", "1")
    _hints_kernel.clear_cache()
    x = np.arange(40, dtype=np.float32)
    out = device.zeros(40, np.float32)
    _hints_kernel[(3,)](device.tensor(x), out, 40, BLOCK=16)
    np.testing.assert_array_equal(device.numpy(out), x + 1)
    assert "compiling with BLOCK = 16" in capfd.readouterr().out
