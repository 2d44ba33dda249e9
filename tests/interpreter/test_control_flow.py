"""Per-program divergent control flow: every program sees exactly its own semantics."""
import numpy as np

DIVERGENT_IF = """
module {
  tt.func public @k(%arg0: !tt.ptr<i32>, %arg1: !tt.ptr<i32>) -> () {
    %0 = tt.get_program_id {axis = 0} : () -> (i32)
    %1 = arith.constant {value = 2} : i32
    %2 = arith.remsi %0, %1 : (i32, i32) -> (i32)
    %3 = arith.constant {value = 0} : i32
    %4 = arith.cmpi %2, %3 {predicate = "eq"} : (i32, i32) -> (i1)
    %5 = tt.addptr %arg1, %0 : (!tt.ptr<i32>, i32) -> (!tt.ptr<i32>)
    %6 = scf.if %4 (
      {
      ^bb():
        %7 = arith.constant {value = 10} : i32
        %8 = arith.muli %0, %7 : (i32, i32) -> (i32)
        tt.store %5, %7 : (!tt.ptr<i32>, i32) -> ()
        scf.yield %8 : (i32) -> ()
      },
      {
      ^bb():
        %9 = arith.subi %3, %0 : (i32, i32) -> (i32)
        scf.yield %9 : (i32) -> ()
      }
    ) : (i1) -> (i32)
    %10 = tt.addptr %arg0, %0 : (!tt.ptr<i32>, i32) -> (!tt.ptr<i32>)
    tt.store %10, %6 : (!tt.ptr<i32>, i32) -> ()
    tt.return : () -> ()
  }
}
"""


def test_divergent_if_merges_results_and_masks_stores(ttir):
    k = ttir(DIVERGENT_IF, names=["out", "flags"])
    out = np.zeros(7, np.int32)
    flags = np.full(7, -5, np.int32)
    k[7](out, flags)
    p = np.arange(7)
    assert out.tolist() == np.where(p % 2 == 0, p * 10, -p).tolist()
    assert flags.tolist() == np.where(p % 2 == 0, 10, -5).tolist()
    assert "divergent scf.if" in k.source


UNIFORM_IF = DIVERGENT_IF.replace("%2 = arith.remsi %0, %1", "%2 = arith.remsi %1, %1")


def test_uniform_if_is_plain_python(ttir):
    k = ttir(UNIFORM_IF, names=["out", "flags"])
    out = np.zeros(3, np.int32)
    flags = np.zeros(3, np.int32)
    k[3](out, flags)
    assert out.tolist() == [0, 10, 20]
    assert "divergent scf.if" not in k.source and "if v" in k.source


DIVERGENT_FOR = """
module {
  tt.func public @k(%arg0: !tt.ptr<i32>, %arg1: i32) -> () {
    %0 = tt.get_program_id {axis = 0} : () -> (i32)
    %1 = arith.constant {value = 0} : i32
    %2 = arith.constant {value = 1} : i32
    %3 = scf.for %1, %0, %2, %1 (
      {
      ^bb(%iv: i32, %acc: i32):
        %4 = arith.addi %acc, %iv : (i32, i32) -> (i32)
        scf.yield %4 : (i32) -> ()
      }
    ) : (i32, i32, i32, i32) -> (i32)
    %5 = scf.for %1, %arg1, %2, %3 (
      {
      ^bb(%iv2: i32, %acc2: i32):
        %6 = arith.addi %acc2, %2 : (i32, i32) -> (i32)
        scf.yield %6 : (i32) -> ()
      }
    ) : (i32, i32, i32, i32) -> (i32)
    %7 = tt.addptr %arg0, %0 : (!tt.ptr<i32>, i32) -> (!tt.ptr<i32>)
    tt.store %7, %5 : (!tt.ptr<i32>, i32) -> ()
    tt.return : () -> ()
  }
}
"""


def test_for_with_per_program_trip_count(ttir):
    k = ttir(DIVERGENT_FOR, names=["out", "extra"])
    out = np.zeros(9, np.int32)
    k[9](out, 3)
    p = np.arange(9)
    assert out.tolist() == (p * (p - 1) // 2 + 3).tolist()
    assert "divergent scf.for" in k.source and "rt.irange" in k.source


DIVERGENT_WHILE = """
module {
  tt.func public @k(%arg0: !tt.ptr<i32>) -> () {
    %0 = tt.get_program_id {axis = 0} : () -> (i32)
    %1 = arith.constant {value = 0} : i32
    %2 = arith.constant {value = 1} : i32
    %3 = arith.constant {value = 2} : i32
    %4, %5 = scf.while %0, %1 (
      {
      ^bb(%x: i32, %n: i32):
        %6 = arith.cmpi %x, %2 {predicate = "sgt"} : (i32, i32) -> (i1)
        scf.condition %6, %x, %n : (i1, i32, i32) -> ()
      },
      {
      ^bb(%y: i32, %m: i32):
        %7 = arith.divsi %y, %3 : (i32, i32) -> (i32)
        %8 = arith.addi %m, %2 : (i32, i32) -> (i32)
        scf.yield %7, %8 : (i32, i32) -> ()
      }
    ) : (i32, i32) -> (i32, i32)
    %9 = tt.addptr %arg0, %0 : (!tt.ptr<i32>, i32) -> (!tt.ptr<i32>)
    tt.store %9, %5 : (!tt.ptr<i32>, i32) -> ()
    tt.return : () -> ()
  }
}
"""


def test_while_runs_until_every_program_is_done(ttir):
    k = ttir(DIVERGENT_WHILE, names=["out"])
    out = np.full(20, -1, np.int32)
    k[20](out)
    expected = [0 if p <= 1 else int(np.floor(np.log2(p))) for p in range(20)]
    assert out.tolist() == expected
    assert "divergent scf.while" in k.source


def test_small_batches_give_the_same_result(ttir):
    k = ttir(DIVERGENT_WHILE, names=["out"], max_batch_elements=3)
    assert k.launcher.batch == 3
    out = np.full(20, -1, np.int32)
    k[20](out)
    assert out.tolist() == [0 if p <= 1 else int(np.floor(np.log2(p))) for p in range(20)]


def test_grid_with_a_zero_dimension_launches_nothing(ttir):
    k = ttir(DIVERGENT_WHILE, names=["out"])
    out = np.full(4, -1, np.int32)
    k[(4, 0)](out)
    assert out.tolist() == [-1] * 4
