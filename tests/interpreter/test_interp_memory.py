"""Checked memory: out-of-bounds accesses name the kernel, argument, program, offset and line;
atomics give the results of a sequential order of the programs; print and assert."""
import numpy as np
import pytest

from tilejit.errors import InterpreterError

STRIDED_COPY = """
module {
  tt.func public @copy_rows(%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>, %arg2: i32, %arg3: i32) -> () {
    %0 = tt.get_program_id {axis = 0} : () -> (i32)
    %1 = arith.muli %0, %arg2 : (i32, i32) -> (i32)
    %2 = arith.addi %1, %arg3 : (i32, i32) -> (i32)
    %3 = tt.make_range {start = 0, end = 16} : () -> (tensor<16xi32>)
    %4 = tt.splat %2 : (i32) -> (tensor<16xi32>)
    %5 = arith.addi %4, %3 : (tensor<16xi32>, tensor<16xi32>) -> (tensor<16xi32>)
    %6 = tt.splat %arg0 : (!tt.ptr<f32>) -> (tensor<16x!tt.ptr<f32>>)
    %7 = tt.addptr %6, %5 : (tensor<16x!tt.ptr<f32>>, tensor<16xi32>) -> (tensor<16x!tt.ptr<f32>>)
    %8 = tt.load %7 : (tensor<16x!tt.ptr<f32>>) -> (tensor<16xf32>) loc("rows.py":7:13)
    %9 = arith.constant {value = 16} : i32
    %10 = arith.muli %0, %9 : (i32, i32) -> (i32)
    %11 = tt.splat %10 : (i32) -> (tensor<16xi32>)
    %12 = arith.addi %11, %3 : (tensor<16xi32>, tensor<16xi32>) -> (tensor<16xi32>)
    %13 = tt.splat %arg1 : (!tt.ptr<f32>) -> (tensor<16x!tt.ptr<f32>>)
    %14 = tt.addptr %13, %12 : (tensor<16x!tt.ptr<f32>>, tensor<16xi32>) -> (tensor<16x!tt.ptr<f32>>)
    tt.store %14, %8 : (tensor<16x!tt.ptr<f32>>, tensor<16xf32>) -> () loc("rows.py":9:5)
    tt.return : () -> ()
  }
}
"""


@pytest.fixture
def copy_rows(ttir):
    return ttir(STRIDED_COPY, names=["src", "dst", "stride", "shift"])


def test_in_bounds_copy(copy_rows):
    src = np.arange(64, dtype=np.float32)
    dst = np.zeros(64, np.float32)
    copy_rows[4](src, dst, 16, 0)
    assert np.array_equal(src, dst)


def test_one_past_the_end(copy_rows):
    src = np.arange(64, dtype=np.float32)
    dst = np.zeros(64, np.float32)
    with pytest.raises(InterpreterError) as info:
        copy_rows[4](src, dst, 16, 1)
    msg = str(info.value)
    assert "copy_rows" in msg and "'src'" in msg and "program (3, 0, 0)" in msg
    assert "element offset 64" in msg and "rows.py:7" in msg
    assert info.value.line == 7 and info.value.program_id == (3, 0, 0)
    assert np.all(dst == 0), "nothing may be written once an access faulted"


def test_before_the_start(copy_rows):
    src = np.arange(64, dtype=np.float32)
    dst = np.zeros(64, np.float32)
    with pytest.raises(InterpreterError) as info:
        copy_rows[4](src, dst, 16, -2)
    assert "program (0, 0, 0)" in str(info.value) and "element offset -2" in str(info.value)


def test_wrong_stride(copy_rows):
    src = np.arange(64, dtype=np.float32)
    dst = np.zeros(64, np.float32)
    with pytest.raises(InterpreterError) as info:
        copy_rows[4](src, dst, 17, 0)
    # program 2 reads 34..49 (fine), program 3 reads 51..66: elements 64.. are past the end
    assert "program (3, 0, 0)" in str(info.value) and "element offset 64" in str(info.value)


def test_out_of_bounds_store_names_the_store_line(copy_rows):
    src = np.arange(64, dtype=np.float32)
    dst = np.zeros(48, np.float32)
    with pytest.raises(InterpreterError) as info:
        copy_rows[4](src, dst, 16, 0)
    assert "'dst'" in str(info.value) and info.value.line == 9


def test_views_are_used_in_place_with_their_extent(copy_rows):
    base = np.zeros(128, np.float32)
    dst = base[32:96]  # a view: writes land in `base`; the extent is the view's own
    copy_rows[4](np.arange(64, dtype=np.float32), dst, 16, 0)
    assert np.array_equal(base[32:96], np.arange(64)) and not base[:32].any()


ATOMIC_COUNTER = """
module {
  tt.func public @ticket(%arg0: !tt.ptr<i32>, %arg1: !tt.ptr<i32>, %arg2: !tt.ptr<f32>, %arg3: !tt.ptr<f32>) -> () {
    %0 = tt.get_program_id {axis = 0} : () -> (i32)
    %1 = arith.constant {value = 1} : i32
    %2 = tt.atomic_rmw %arg0, %1 {atomic_rmw_op = "add", sem = "acq_rel", scope = "gpu"} : (!tt.ptr<i32>, i32) -> (i32)
    %3 = tt.addptr %arg1, %0 : (!tt.ptr<i32>, i32) -> (!tt.ptr<i32>)
    tt.store %3, %2 : (!tt.ptr<i32>, i32) -> ()
    %4 = arith.sitofp %0 : (i32) -> (f32)
    %5 = arith.constant {value = 0.5} : f32
    %6 = arith.addf %4, %5 : (f32, f32) -> (f32)
    %7 = tt.atomic_rmw %arg2, %6 {atomic_rmw_op = "fadd", sem = "acq_rel", scope = "gpu"} : (!tt.ptr<f32>, f32) -> (f32)
    %8 = tt.addptr %arg3, %0 : (!tt.ptr<f32>, i32) -> (!tt.ptr<f32>)
    tt.store %8, %7 : (!tt.ptr<f32>, f32) -> ()
    tt.return : () -> ()
  }
}
"""


@pytest.mark.parametrize("batch", [1 << 22, 5])
def test_atomics_return_old_values_of_a_sequential_order(ttir, batch):
    k = ttir(ATOMIC_COUNTER, names=["counter", "tickets", "total", "olds"], max_batch_elements=batch)
    counter, tickets = np.array([7], np.int32), np.zeros(23, np.int32)
    total, olds = np.array([0.0], np.float32), np.zeros(23, np.float32)
    k[23](counter, tickets, total, olds)
    assert counter[0] == 7 + 23
    assert sorted(tickets.tolist()) == list(range(7, 30))
    # Float old values: replaying the programs in ticket order reproduces every returned value.
    order = np.argsort(olds, kind="stable")
    running = np.float32(0)
    for p in order:
        assert olds[p] == running
        running = np.float32(running + np.float32(p + 0.5))
    assert total[0] == running


ATOMIC_MAX_CAS = """
module {
  tt.func public @k(%arg0: !tt.ptr<i32>, %arg1: !tt.ptr<i32>, %arg2: !tt.ptr<i32>) -> () {
    %0 = tt.get_program_id {axis = 0} : () -> (i32)
    %1 = arith.constant {value = 3} : i32
    %2 = arith.remsi %0, %1 : (i32, i32) -> (i32)
    %3 = arith.constant {value = -1} : i32
    %4 = arith.muli %0, %3 : (i32, i32) -> (i32)
    %5 = tt.atomic_rmw %arg0, %4 {atomic_rmw_op = "umax", sem = "relaxed", scope = "gpu"} : (!tt.ptr<i32>, i32) -> (i32)
    %6 = arith.constant {value = 0} : i32
    %7 = tt.atomic_cas %arg1, %6, %0 {sem = "acq_rel", scope = "gpu"} : (!tt.ptr<i32>, i32, i32) -> (i32)
    %8 = tt.addptr %arg2, %0 : (!tt.ptr<i32>, i32) -> (!tt.ptr<i32>)
    tt.store %8, %7 : (!tt.ptr<i32>, i32) -> ()
    tt.return : () -> ()
  }
}
"""


def test_atomic_umax_and_cas(ttir):
    k = ttir(ATOMIC_MAX_CAS, names=["mx", "lock", "seen"])
    mx, lock, seen = np.zeros(1, np.int32), np.zeros(1, np.int32), np.full(6, 9, np.int32)
    k[6](mx, lock, seen)
    assert mx[0] == -1  # 0xFFFFFFFF is the unsigned maximum of 0, -1, ..., -5
    # program 0 swaps 0 -> 0 first; then program 1 swaps 0 -> 1; every later one sees 1
    assert seen.tolist() == [0, 0, 1, 1, 1, 1]
    assert lock[0] == 1


PRINT_ASSERT = """
module {
  tt.func public @k(%arg0: i32) -> () {
    %0 = tt.get_program_id {axis = 0} : () -> (i32)
    %1 = tt.make_range {start = 0, end = 2} : () -> (tensor<2xi32>)
    %2 = tt.splat %0 : (i32) -> (tensor<2xi32>)
    %3 = arith.addi %1, %2 : (tensor<2xi32>, tensor<2xi32>) -> (tensor<2xi32>)
    tt.print %3 {prefix = " x", hex = false, is_signed = [1]} : (tensor<2xi32>) -> ()
    %4 = arith.cmpi %0, %arg0 {predicate = "slt"} : (i32, i32) -> (i1)
    tt.assert %4 {message = "pid too large"} : (i1) -> () loc("a.py":4:5)
    tt.return : () -> ()
  }
}
"""


def test_print_format_and_program_order(ttir, capsys):
    ttir(PRINT_ASSERT, names=["limit"])[2](10)
    assert capsys.readouterr().out.splitlines() == [
        "pid (0, 0, 0) idx (0) x: 0", "pid (0, 0, 0) idx (1) x: 1",
        "pid (1, 0, 0) idx (0) x: 1", "pid (1, 0, 0) idx (1) x: 2"]


def test_assert_names_the_failing_program(ttir, capsys):
    with pytest.raises(InterpreterError) as info:
        ttir(PRINT_ASSERT, names=["limit"])[4](2)
    assert "pid too large" in str(info.value) and info.value.program_id == (2, 0, 0)
    assert info.value.line == 4
