"""Programs that wait for each other (issue 13 item 9): spin locks, flags and arrival counters run
to completion with a GPU's semantics; a wait no program can end is reported, not a hang.

Each kernel runs in a subprocess with a timeout, so a regression to lockstep fails instead of hanging
the test session."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import InterpreterError


@tilejit.jit
def row_grad_lock_kernel(X, DY, DW, Lock, N, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    # The partial-weight-gradient pattern of layer-norm backward: each row adds x * dy into one of
    # GROUP partial rows, under that row's spin lock; the first writer of a row stores, later add.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    part = tl.load(X + row * N + cols, mask=mask, other=0.0) * tl.load(DY + row * N + cols, mask=mask, other=0.0)
    group = row % GROUP
    lock = Lock + group
    count = Lock + GROUP + group
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    if tl.load(count) == 0:
        tl.atomic_xchg(count, 1)
    else:
        part += tl.load(DW + group * N + cols, mask=mask)
    tl.store(DW + group * N + cols, part, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(lock, 0)


@tilejit.jit
def split_k_kernel(A, B, WS, Flags, Out, K, SPLIT: tl.constexpr, BK: tl.constexpr, N: tl.constexpr):
    # Split-K: program (t, s) multiplies row t of A by B over the K-slice s. Slice 0 (launched
    # first) waits until every other slice has published its partial result and bumped the tile's
    # arrival counter, then reduces: program (t, 0) waits for programs after it in launch order.
    t = tl.program_id(0)
    s = tl.program_id(1)
    ks = s * BK + tl.arange(0, BK)
    ns = tl.arange(0, N)
    a = tl.load(A + t * K + ks)
    b = tl.load(B + ks[:, None] * N + ns[None, :])
    part = tl.sum(a[:, None] * b, axis=0)
    if s == 0:
        while tl.atomic_add(Flags + t, 0) < SPLIT - 1:
            pass
        for j in range(1, SPLIT):
            part += tl.load(WS + (t * SPLIT + j) * N + ns)
        tl.store(Out + t * N + ns, part)
    else:
        tl.store(WS + (t * SPLIT + s) * N + ns, part)
        tl.atomic_add(Flags + t, 1)


@tilejit.jit
def turnstile_kernel(Turn, Log, P):
    # Programs enter in reverse launch order, each waiting on a plain (volatile) load of a flag.
    pid = tl.program_id(0)
    my_turn = P - 1 - pid
    while tl.load(Turn, volatile=True) != my_turn:
        pass
    tl.store(Log + my_turn, pid)
    tl.store(Turn, my_turn + 1)


@tilejit.jit
def never_released_kernel(Lock, Out):
    pid = tl.program_id(0)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    tl.store(Out + pid, pid + 1)


@tilejit.jit(noinline=True)
def _acquire(lock):
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass


@tilejit.jit
def callee_lock_kernel(Total, Lock, Before):
    # The wait is inside a called function: the whole call chain yields to the other programs.
    pid = tl.program_id(0)
    _acquire(Lock)
    tl.store(Before + pid, tl.load(Total))
    tl.store(Total, tl.load(Total) + pid + 1)
    tl.atomic_xchg(Lock, 0)


@tilejit.jit
def plain_kernel(X, Out):
    pid = tl.program_id(0)
    tl.store(Out + pid, tl.load(X + pid) + 1)


def _source(kernel) -> str:
    (compiled, _), = [entry for per_target in kernel.cache.values() for entry in per_target.values()]
    return compiled.asm["py"]


# -- bodies, run in a subprocess by the tests below ----------------------------------------------

def layer_norm_lock_body():
    rng = np.random.default_rng(0)
    rows, n, group = 37, 24, 4
    x = rng.standard_normal((rows, n)).astype(np.float32)
    dy = rng.standard_normal((rows, n)).astype(np.float32)
    dw = np.zeros((group, n), np.float32)
    lock = np.zeros(2 * group, np.int32)
    row_grad_lock_kernel[(rows,)](x, dy, dw, lock, n, GROUP=group, BLOCK=32)
    expected = np.stack([(x[g::group] * dy[g::group]).sum(0) for g in range(group)])
    np.testing.assert_allclose(dw, expected, rtol=1e-5, atol=1e-5)
    assert lock[:group].tolist() == [0] * group and lock[group:].tolist() == [1] * group
    assert "scheduler.run_programs" in _source(row_grad_lock_kernel)


def split_k_body():
    rng = np.random.default_rng(1)
    m, k, n, split = 5, 64, 8, 4
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ws = np.zeros((m, split, n), np.float32)
    flags = np.zeros(m, np.int32)
    out = np.zeros((m, n), np.float32)
    split_k_kernel[(m, split)](a, b, ws, flags, out, k, SPLIT=split, BK=k // split, N=n)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    assert flags.tolist() == [split - 1] * m


def turnstile_body():
    p = 9
    turn, log = np.zeros(1, np.int32), np.full(p, -1, np.int32)
    turnstile_kernel[(p,)](turn, log, p)
    assert log.tolist() == list(range(p - 1, -1, -1)) and turn[0] == p


def callee_lock_body():
    p = 12
    total, lock, before = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(p, np.int32)
    callee_lock_kernel[(p,)](total, lock, before)
    assert total[0] == p * (p + 1) // 2 and lock[0] == 0
    assert "yield from" in _source(callee_lock_kernel)


def deadlock_body():
    lock, out = np.zeros(1, np.int32), np.zeros(3, np.int32)
    try:
        never_released_kernel[(3,)](lock, out)
    except InterpreterError as exc:
        msg = str(exc)
        assert "deadlock" in msg and "(1, 0, 0), (2, 0, 0)" in msg, msg
        assert exc.line is not None and exc.program_id == (1, 0, 0)
        assert out.tolist() == [1, 0, 0]
    else:
        raise AssertionError("a lock that is never released must be reported")


BODIES = ["layer_norm_lock_body", "split_k_body", "turnstile_body", "callee_lock_body", "deadlock_body"]


def run_bodies():
    """Run every body, printing `start NAME` before and `FAIL NAME: error` on failure."""
    for body in BODIES:
        print("start", body, flush=True)
        try:
            globals()[body]()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent process
            print(f"FAIL {body}: {type(exc).__name__}: {exc}", flush=True)


def test_programs_that_wait_for_each_other():
    # One subprocess for all bodies (a process start costs seconds on a busy machine).
    here = os.path.dirname(os.path.abspath(__file__))
    module = os.path.splitext(os.path.basename(__file__))[0]
    code = f"import sys; sys.path[:0] = {[here] + sys.path!r}; import {module} as t; t.run_bodies()"
    timeout = 120
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        started = [line.split()[1] for line in out.splitlines() if line.startswith("start ")]
        pytest.fail(f"{started[-1] if started else 'the first body'}: the programs did not finish in "
                    f"{timeout} s (they wait for each other forever); output:\n{out}")
    assert result.returncode == 0, result.stderr[-3000:]
    failures = [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]
    assert not failures, "\n".join(failures)
    assert result.stdout.count("start ") == len(BODIES)


def test_kernels_that_do_not_wait_stay_vectorised():
    x, out = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    plain_kernel[(5,)](x, out)
    assert np.array_equal(out, x + 1)
    assert "scheduler.run_programs" not in _source(plain_kernel)


@tilejit.jit
def scan_until_zero_kernel(X, Out, Counter):
    # A data-dependent loop over memory no program writes, and an atomic before (not in) a loop:
    # neither waits for another program, so the kernel keeps the vectorised path.
    pid = tl.program_id(0)
    i = pid
    while tl.load(X + i) != 0:
        i += 1
    ticket = tl.atomic_add(Counter, 1)
    j = 0
    while j < ticket:
        j += 1
    tl.store(Out + pid, i * 100 + j)


def test_loops_that_do_not_wait_for_other_programs_stay_vectorised():
    x = np.array([3, 1, 0, 5, 0, 2, 0], np.int32)
    out, counter = np.zeros(4, np.int32), np.zeros(1, np.int32)
    scan_until_zero_kernel[(4,)](x, out, counter)
    assert (out // 100).tolist() == [2, 2, 2, 4] and sorted((out % 100).tolist()) == [0, 1, 2, 3]
    assert "scheduler.run_programs" not in _source(scan_until_zero_kernel)


@tilejit.jit(noinline=True)
def _halve(x):
    return x // 2


@tilejit.jit
def loop_calling_pure_function_kernel(X, Out):
    # A loop that calls a function reading no memory does not wait for anyone.
    pid = tl.program_id(0)
    v = tl.load(X + pid)
    steps = 0
    while v > 1:
        v = _halve(v)
        steps += 1
    tl.store(Out + pid, steps)


def test_loop_calling_a_function_that_reads_no_memory_stays_vectorised():
    x, out = np.array([1, 2, 8, 100], np.int32), np.zeros(4, np.int32)
    loop_calling_pure_function_kernel[(4,)](x, out)
    assert out.tolist() == [0, 1, 3, 6]
    assert "scheduler.run_programs" not in _source(loop_calling_pure_function_kernel)
