"""The interpreter's sanitizer (issue 11 item 8): data races between the programs of one launch,
with both programs and the source lines; reads of memory marked uninitialised; no report for
programs that synchronise through atomics (locks, arrival counters)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import InterpreterError
from tilejit_interpreter import sanitizer


@tilejit.jit
def same_address_kernel(out):
    tl.store(out, tl.program_id(0))


@tilejit.jit
def shift_in_place_kernel(x, BLOCK: tl.constexpr):
    # Program p reads the block of program p + 1 and writes its own: read/write race.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs + 1)
    tl.store(x + offs, v)


@tilejit.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@tilejit.jit
def histogram_kernel(x, bins, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(bins + tl.load(x + offs), 1)


@tilejit.jit
def last_arrival_kernel(x, partial, counter, out, P: tl.constexpr, BLOCK: tl.constexpr, RELAXED: tl.constexpr):
    # Every program publishes a partial sum; the one that arrives last (by the counter) adds them up.
    pid = tl.program_id(0)
    tl.store(partial + pid, tl.sum(tl.load(x + pid * BLOCK + tl.arange(0, BLOCK)), axis=0))
    if RELAXED:
        ticket = tl.atomic_add(counter, 1, sem="relaxed")
    else:
        ticket = tl.atomic_add(counter, 1)
    if ticket == P - 1:
        tl.store(out, tl.sum(tl.load(partial + tl.arange(0, P)), axis=0))


@tilejit.jit
def locked_accumulate_kernel(x, acc, lock, N: tl.constexpr):
    # Plain loads and stores of `acc` by every program, ordered by a spin lock.
    pid = tl.program_id(0)
    cols = tl.arange(0, N)
    v = tl.load(x + pid * N + cols)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(acc + cols, tl.load(acc + cols) + v)
    tl.atomic_xchg(lock, 0)


@tilejit.jit
def unlocked_accumulate_kernel(x, acc, N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, N)
    tl.store(acc + cols, tl.load(acc + cols) + tl.load(x + pid * N + cols))


@tilejit.jit
def read_then_write_kernel(src, dst, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs) * 2)


@tilejit.jit
def env_race_kernel(out):
    tl.store(out + tl.program_id(0) % 2, 1.0)


def test_write_write_race_names_both_programs_and_lines():
    out = np.zeros(1, np.int32)
    same_address_kernel[(3,)](out)  # without the sanitizer: the last program wins
    assert out[0] == 2
    with pytest.raises(InterpreterError) as info:
        same_address_kernel[(3,)](out, sanitize=True)
    msg = str(info.value)
    assert "data race on argument 'out'" in msg and "program (1, 0, 0) writes what program (0, 0, 0) wrote" in msg
    assert "test_sanitizer.py:15" in msg and info.value.line == 15 and info.value.program_id == (1, 0, 0)


def test_read_write_race():
    x = np.arange(65, dtype=np.float32)
    with pytest.raises(InterpreterError, match=r"program \(1, 0, 0\) writes what program \(0, 0, 0\) read"):
        shift_in_place_kernel[(4,)](x, BLOCK=16, sanitize=True)


def test_race_through_a_plain_read_modify_write():
    x = np.ones((4, 8), np.float32)
    acc = np.zeros(8, np.float32)
    with pytest.raises(InterpreterError, match="data race on argument 'acc'"):
        unlocked_accumulate_kernel[(4,)](x, acc, N=8, sanitize=True)


def test_no_report_for_independent_or_synchronised_programs():
    n = 1000
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    add_kernel[(4,)](x, y, out, n, BLOCK=256, sanitize=True)
    assert np.array_equal(out, x + 1)
    keys = np.random.default_rng(0).integers(0, 8, 64).astype(np.int32)
    bins = np.zeros(8, np.int32)
    histogram_kernel[(4,)](keys, bins, BLOCK=16, sanitize=True)
    assert np.array_equal(bins, np.bincount(keys, minlength=8))
    data = np.arange(64, dtype=np.float32)
    partial, counter, total = np.zeros(4, np.float32), np.zeros(1, np.int32), np.zeros(1, np.float32)
    last_arrival_kernel[(4,)](data, partial, counter, total, P=4, BLOCK=16, RELAXED=False, sanitize=True)
    assert total[0] == data.sum()
    rows = np.arange(40, dtype=np.float32).reshape(5, 8)
    acc, lock = np.zeros(8, np.float32), np.zeros(1, np.int32)
    locked_accumulate_kernel[(5,)](rows, acc, lock, N=8, sanitize=True)
    assert np.array_equal(acc, rows.sum(0))


def test_relaxed_atomics_do_not_order_plain_accesses():
    data = np.arange(64, dtype=np.float32)
    partial, counter, total = np.zeros(4, np.float32), np.zeros(1, np.int32), np.zeros(1, np.float32)
    with pytest.raises(InterpreterError, match=r"data race on argument 'partial'.*program \(3, 0, 0\) reads what "
                                               r"program \(0, 0, 0\) wrote"):
        last_arrival_kernel[(4,)](data, partial, counter, total, P=4, BLOCK=16, RELAXED=True, sanitize=True)


def test_reads_of_memory_marked_uninitialised():
    src = sanitizer.empty(32, np.float32)
    dst = np.zeros(32, np.float32)
    with pytest.raises(InterpreterError, match="read of uninitialised memory: argument 'src' at byte offset 0"):
        read_then_write_kernel[(2,)](src, dst, BLOCK=16, sanitize=True)
    # A kernel that writes it initialises it, for later launches too.
    read_then_write_kernel[(2,)](np.arange(32, dtype=np.float32), src, BLOCK=16, sanitize=True)
    read_then_write_kernel[(2,)](src, dst, BLOCK=16, sanitize=True)
    assert np.array_equal(dst, np.arange(32) * 4)
    # Half written from the host, then declared so.
    half = np.empty(32, np.float32)
    sanitizer.mark_uninitialized(half)
    half[:16] = 1
    sanitizer.mark_initialized(half[:16])
    read_then_write_kernel[(1,)](half, dst, BLOCK=16, sanitize=True)
    with pytest.raises(InterpreterError, match="byte offset 64"):
        read_then_write_kernel[(2,)](half, dst, BLOCK=16, sanitize=True)
    # Without the sanitizer nothing is checked.
    read_then_write_kernel[(2,)](half, dst, BLOCK=16)


def test_switch_from_the_environment(monkeypatch):
    monkeypatch.setenv("TILEJIT_SANITIZE", "1")
    out = np.zeros(2, np.float32)
    with pytest.raises(InterpreterError, match="data race"):
        env_race_kernel[(4,)](out)
    (compiled, _), = [entry for per_target in env_race_kernel.cache.values() for entry in per_target.values()]
    assert "sanitize=True" in compiled.asm["py"]


def test_normal_mode_keeps_the_vectorised_program():
    out = np.zeros(1000, np.float32)
    add_kernel[(4,)](np.zeros(1000, np.float32), np.ones(1000, np.float32), out, 1000, BLOCK=256)
    programs = [c.asm["py"] for per_target in add_kernel.cache.values() for c, _ in per_target.values()]
    assert any("scheduler.run_programs" not in p for p in programs)
    assert any("sanitize=True" in p for p in programs)


def test_marking_a_view_tracks_the_memory_while_its_owner_lives():
    base = np.empty(64, np.float32)
    sanitizer.mark_uninitialized(base[16:48])  # the view itself is dropped at once
    dst = np.zeros(32, np.float32)
    read_then_write_kernel[(1,)](base[:16], dst, BLOCK=16, sanitize=True)  # outside the marked part
    with pytest.raises(InterpreterError, match="argument 'src' at byte offset 0"):
        read_then_write_kernel[(2,)](base[16:48], dst, BLOCK=16, sanitize=True)


@tilejit.jit
def flag_handoff_kernel(data, flag, out, LOAD_SEM: tl.constexpr, STORE_SEM: tl.constexpr):
    if tl.program_id(0) == 1:
        tl.store(data, 42)
        tl.atomic_store(flag, 1, sem=STORE_SEM)
    else:
        while tl.atomic_load(flag, sem=LOAD_SEM) == 0:
            pass
        tl.store(out, tl.load(data))


def test_atomic_store_release_and_atomic_load_acquire_order_the_handoff():
    data, flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32)
    flag_handoff_kernel[(2,)](data, flag, out, LOAD_SEM="acquire", STORE_SEM="release", sanitize=True)
    assert out[0] == 42 and flag[0] == 1


@pytest.mark.parametrize("load_sem, store_sem", [("relaxed", "release"), ("acquire", "relaxed")])
def test_a_relaxed_side_of_the_handoff_is_a_race(load_sem, store_sem):
    data, flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32)
    with pytest.raises(InterpreterError, match="data race on argument 'data'"):
        flag_handoff_kernel[(2,)](data, flag, out, LOAD_SEM=load_sem, STORE_SEM=store_sem, sanitize=True)
