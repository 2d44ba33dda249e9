"""Text tests of `cse` and `dce`."""
from passes_testlib import check_pass, func

from tilejit.passes import CSE, DCE


def test_cse_merges_identical_pure_ops_and_commuted_operands():
    body = """
    %0 = arith.addi %arg0, %arg1 : (i32, i32) -> (i32)
    %1 = arith.addi %arg1, %arg0 : (i32, i32) -> (i32)
    %2 = arith.muli %0, %1 : (i32, i32) -> (i32)
    tt.return %2 : (i32) -> ()"""
    check_pass(func(body), [CSE()], """
CHECK:      [[A:%[0-9]+]] = arith.addi %arg0, %arg1
CHECK-NEXT: arith.muli [[A]], [[A]]
""")


def test_cse_keeps_signed_zeros_and_different_attrs_apart():
    body = """
    %0 = arith.constant {value = 0.0} : f32
    %1 = arith.constant {value = -0.0} : f32
    %2 = arith.cmpi %arg0, %arg1 {predicate = "slt"} : (i32, i32) -> (i1)
    %3 = arith.cmpi %arg0, %arg1 {predicate = "ult"} : (i32, i32) -> (i1)
    tt.return %0, %1, %2, %3 : (f32, f32, i1, i1) -> ()"""
    check_pass(func(body, results="f32, f32, i1, i1"), [CSE()], """
CHECK: value = 0.0
CHECK: value = -0.0
CHECK: "slt"
CHECK: "ult"
""")


def test_cse_does_not_merge_loads_or_reuse_values_out_of_regions():
    body = """
    %0 = tt.load %arg0 : (!tt.ptr<i32>) -> (i32)
    %1 = tt.load %arg0 : (!tt.ptr<i32>) -> (i32)
    %2 = arith.cmpi %0, %1 {predicate = "eq"} : (i32, i32) -> (i1)
    %3 = scf.if %2 (
      {
      ^bb():
        %4 = arith.addi %0, %1 : (i32, i32) -> (i32)
        scf.yield %4 : (i32) -> ()
      },
      {
      ^bb():
        %5 = arith.addi %0, %1 : (i32, i32) -> (i32)
        scf.yield %5 : (i32) -> ()
      }
    ) : (i1) -> (i32)
    %6 = arith.addi %0, %1 : (i32, i32) -> (i32)
    %7 = arith.addi %0, %1 : (i32, i32) -> (i32)
    %8 = arith.muli %3, %6 : (i32, i32) -> (i32)
    %9 = arith.muli %8, %7 : (i32, i32) -> (i32)
    tt.return %9 : (i32) -> ()"""
    out = check_pass(func(body, args="%arg0: !tt.ptr<i32>"), [CSE()], """
CHECK-COUNT-2: tt.load
CHECK:         scf.if
CHECK:         arith.addi
CHECK:         arith.addi
CHECK:         [[OUT:%[0-9]+]] = arith.addi
CHECK-NEXT:    [[M:%[0-9]+]] = arith.muli %{{[0-9]+}}, [[OUT]]
CHECK-NEXT:    arith.muli [[M]], [[OUT]]
""")
    assert out.count("arith.addi") == 3


def test_cse_reuses_outer_values_inside_regions():
    body = """
    %0 = arith.addi %arg0, %arg1 : (i32, i32) -> (i32)
    %1 = arith.cmpi %arg0, %arg1 {predicate = "eq"} : (i32, i32) -> (i1)
    %2 = scf.if %1 (
      {
      ^bb():
        %3 = arith.addi %arg0, %arg1 : (i32, i32) -> (i32)
        scf.yield %3 : (i32) -> ()
      },
      {
      ^bb():
        scf.yield %0 : (i32) -> ()
      }
    ) : (i1) -> (i32)
    tt.return %2 : (i32) -> ()"""
    out = check_pass(func(body), [CSE()], "CHECK: [[A:%[0-9]+]] = arith.addi\nCHECK: scf.yield [[A]]\nCHECK: scf.yield [[A]]")
    assert out.count("arith.addi") == 1


def test_dce_removes_dead_values_loops_and_loads_but_keeps_effects():
    body = """
    %0 = arith.addi %arg1, %arg1 : (i32, i32) -> (i32)
    %1 = tt.load %arg0 : (!tt.ptr<i32>) -> (i32)
    %2 = tt.load %arg0 {is_volatile = true} : (!tt.ptr<i32>) -> (i32)
    %3 = arith.constant {value = 0} : i32
    %4 = arith.constant {value = 1} : i32
    %5 = scf.for %3, %arg1, %4, %3 (
      {
      ^bb(%arg2: i32, %arg3: i32):
        %6 = arith.addi %arg3, %arg2 : (i32, i32) -> (i32)
        scf.yield %6 : (i32) -> ()
      }
    ) : (i32, i32, i32, i32) -> (i32)
    scf.for %3, %arg1, %4 (
      {
      ^bb(%arg4: i32):
        tt.store %arg0, %arg4 : (!tt.ptr<i32>, i32) -> ()
        scf.yield : () -> ()
      }
    ) : (i32, i32, i32) -> ()
    tt.return : () -> ()"""
    out = check_pass(func(body, args="%arg0: !tt.ptr<i32>, %arg1: i32", results=""), [DCE()], """
CHECK-NOT:  arith.addi
CHECK:      tt.load %arg0 {is_volatile = true}
CHECK:      scf.for
CHECK:      tt.store
""")
    assert out.count("tt.load") == 1 and out.count("scf.for") == 1


def test_dce_removes_uncalled_private_functions_only():
    text = """module {
  tt.func public @k() -> () {
    tt.return : () -> ()
  }
  tt.func private @unused() -> () {
    tt.return : () -> ()
  }
  tt.func public @exported() -> () {
    tt.return : () -> ()
  }
}
"""
    check_pass(text, [DCE()], "CHECK: @k\nCHECK-NOT: @unused\nCHECK: @exported")
