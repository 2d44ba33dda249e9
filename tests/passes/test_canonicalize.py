"""Text tests of `canonicalize`: folds, identities, control flow."""
import pytest

from passes_testlib import assert_preserves, check_pass, func

from tilejit.passes import Canonicalize

CANON = [Canonicalize()]


def test_addi_folds_with_i32_wraparound():
    body = """
    %0 = arith.constant {value = 2147483647} : i32
    %1 = arith.constant {value = 1} : i32
    %2 = arith.addi %0, %1 : (i32, i32) -> (i32)
    tt.return %2 : (i32) -> ()"""
    check_pass(func(body), CANON, """
CHECK:      %0 = arith.constant {value = -2147483648} : i32
CHECK-NEXT: tt.return %0
""")


def test_division_by_zero_is_not_folded():
    body = """
    %0 = arith.constant {value = 7} : i32
    %1 = arith.constant {value = 0} : i32
    %2 = arith.divsi %0, %1 : (i32, i32) -> (i32)
    %3 = arith.remui %0, %1 : (i32, i32) -> (i32)
    %4 = arith.addi %2, %3 : (i32, i32) -> (i32)
    tt.return %4 : (i32) -> ()"""
    check_pass(func(body), CANON, """
CHECK: arith.divsi
CHECK: arith.remui
""")


def test_signed_overflow_division_is_not_folded():
    body = """
    %0 = arith.constant {value = -128} : i8
    %1 = arith.constant {value = -1} : i8
    %2 = arith.divsi %0, %1 : (i8, i8) -> (i8)
    tt.return %2 : (i8) -> ()"""
    check_pass(func(body, results="i8"), CANON, "CHECK: arith.divsi")


def test_splat_tensor_constants_fold_to_splat():
    body = """
    %0 = arith.constant {value = 3} : tensor<4xi32>
    %1 = arith.constant {value = 5} : tensor<4xi32>
    %2 = arith.muli %0, %1 : (tensor<4xi32>, tensor<4xi32>) -> (tensor<4xi32>)
    tt.return %2 : (tensor<4xi32>) -> ()"""
    check_pass(func(body, results="tensor<4xi32>"), CANON, """
CHECK:     arith.constant {value = 15} : tensor<4xi32>
CHECK-NOT: arith.muli
""")


def test_dense_constants_fold_elementwise():
    body = """
    %0 = arith.constant {value = dense<[1, 2, 3, 4]>} : tensor<4xi32>
    %1 = arith.constant {value = 10} : tensor<4xi32>
    %2 = arith.addi %0, %1 : (tensor<4xi32>, tensor<4xi32>) -> (tensor<4xi32>)
    tt.return %2 : (tensor<4xi32>) -> ()"""
    check_pass(func(body, results="tensor<4xi32>"), CANON,
               "CHECK: arith.constant {value = dense<[11, 12, 13, 14]>}")


@pytest.mark.parametrize("op, identity", [("arith.addi", 0), ("arith.subi", 0), ("arith.muli", 1),
                                          ("arith.divsi", 1), ("arith.ori", 0), ("arith.xori", 0),
                                          ("arith.shli", 0), ("arith.andi", -1)])
def test_integer_identities_return_the_operand(op, identity):
    body = f"""
    %0 = arith.constant {{value = {identity}}} : i32
    %1 = {op} %arg0, %0 : (i32, i32) -> (i32)
    tt.return %1 : (i32) -> ()"""
    check_pass(func(body), CANON, f"CHECK-NOT: {op}\nCHECK: tt.return %arg0")


def test_constant_on_the_left_is_moved_right_then_folded():
    body = """
    %0 = arith.constant {value = 0} : i32
    %1 = arith.muli %0, %arg0 : (i32, i32) -> (i32)
    %2 = arith.addi %0, %arg1 : (i32, i32) -> (i32)
    %3 = arith.addi %1, %2 : (i32, i32) -> (i32)
    tt.return %3 : (i32) -> ()"""
    check_pass(func(body), CANON, "CHECK-NOT: arith.muli\nCHECK-NOT: arith.addi\nCHECK: tt.return %arg1")


def test_int_x_minus_x_is_zero_but_float_is_not():
    body = """
    %0 = arith.subi %arg0, %arg0 : (i32, i32) -> (i32)
    %1 = arith.subf %arg1, %arg1 : (f32, f32) -> (f32)
    %2 = arith.constant {value = 0.0} : f32
    %3 = arith.mulf %arg1, %2 : (f32, f32) -> (f32)
    %4 = arith.addf %1, %3 : (f32, f32) -> (f32)
    tt.return %0, %4 : (i32, f32) -> ()"""
    check_pass(func(body, args="%arg0: i32, %arg1: f32", results="i32, f32"), CANON, """
CHECK: arith.constant {value = 0} : i32
CHECK: arith.subf %arg1, %arg1
CHECK: arith.mulf
""")


def test_float_identities_only_when_exact():
    # x + -0.0 == x for every x, x + 0.0 is not (x = -0.0 gives +0.0).
    body = """
    %0 = arith.constant {value = -0.0} : f32
    %1 = arith.constant {value = 0.0} : f32
    %2 = arith.addf %arg0, %0 : (f32, f32) -> (f32)
    %3 = arith.addf %2, %1 : (f32, f32) -> (f32)
    %4 = arith.constant {value = 1.0} : f32
    %5 = arith.mulf %3, %4 : (f32, f32) -> (f32)
    %6 = arith.negf %5 : (f32) -> (f32)
    %7 = arith.negf %6 : (f32) -> (f32)
    tt.return %7 : (f32) -> ()"""
    check_pass(func(body, args="%arg0: f32", results="f32"), CANON, """
CHECK:      [[Z:%[0-9]+]] = arith.constant {value = 0.0}
CHECK-NEXT: [[S:%[0-9]+]] = arith.addf %arg0, [[Z]]
CHECK-NEXT: tt.return [[S]]
""")


def test_f32_and_f16_fold_in_their_precision_and_bf16_does_not_fold():
    body = """
    %0 = arith.constant {value = 0.1} : f32
    %1 = arith.constant {value = 0.2} : f32
    %2 = arith.addf %0, %1 : (f32, f32) -> (f32)
    %3 = arith.constant {value = 65504.0} : f16
    %4 = arith.addf %3, %3 : (f16, f16) -> (f16)
    %5 = arith.constant {value = 1.0} : bf16
    %6 = arith.addf %5, %5 : (bf16, bf16) -> (bf16)
    tt.return %2, %4, %6 : (f32, f16, bf16) -> ()"""
    # float32(0.1) + float32(0.2) rounds to float32(0.3) = 0.30000001192092896 in double.
    check_pass(func(body, args="", results="f32, f16, bf16"), CANON, """
CHECK-DAG: arith.constant {value = 0.30000001192092896} : f32
CHECK-DAG: arith.constant {value = inf} : f16
CHECK-DAG: arith.addf {{.*}} -> (bf16)
""")


def test_select_cmpi_and_casts_of_constants():
    body = """
    %0 = arith.cmpi %arg0, %arg0 {predicate = "sle"} : (i32, i32) -> (i1)
    %1 = arith.select %0, %arg0, %arg1 : (i1, i32, i32) -> (i32)
    %2 = arith.constant {value = -1} : i8
    %3 = arith.extsi %2 : (i8) -> (i32)
    %4 = arith.extui %2 : (i8) -> (i32)
    %5 = arith.addi %3, %4 : (i32, i32) -> (i32)
    %6 = arith.constant {value = 300} : i32
    %7 = arith.trunci %6 : (i32) -> (i8)
    %8 = arith.extsi %7 : (i8) -> (i32)
    %9 = arith.addi %5, %8 : (i32, i32) -> (i32)
    %10 = arith.addi %1, %9 : (i32, i32) -> (i32)
    tt.return %10 : (i32) -> ()"""
    # -1 + 255 + (300 mod 256 = 44) = 298
    check_pass(func(body), CANON, """
CHECK:      [[C:%[0-9]+]] = arith.constant {value = 298}
CHECK-NEXT: arith.addi %arg0, [[C]]
CHECK-NOT:  arith.select
""")


def test_splat_broadcast_expand_dims_of_splat():
    body = """
    %0 = tt.splat %arg0 : (i32) -> (tensor<1x4xi32>)
    %1 = tt.broadcast %0 : (tensor<1x4xi32>) -> (tensor<8x4xi32>)
    %2 = tt.expand_dims %1 {axis = 0} : (tensor<8x4xi32>) -> (tensor<1x8x4xi32>)
    %3 = arith.constant {value = 2} : i32
    %4 = tt.splat %3 : (i32) -> (tensor<1x8x4xi32>)
    %5 = arith.addi %2, %4 : (tensor<1x8x4xi32>, tensor<1x8x4xi32>) -> (tensor<1x8x4xi32>)
    tt.return %5 : (tensor<1x8x4xi32>) -> ()"""
    check_pass(func(body, args="%arg0: i32", results="tensor<1x8x4xi32>"), CANON, """
CHECK-NOT:  tt.broadcast
CHECK-NOT:  tt.expand_dims
CHECK-DAG:  [[S:%[0-9]+]] = tt.splat %arg0 : (i32) -> (tensor<1x8x4xi32>)
CHECK-DAG:  [[C:%[0-9]+]] = arith.constant {value = 2} : tensor<1x8x4xi32>
CHECK:      arith.addi [[S]], [[C]]
""")


def test_addptr_with_zero_offset_is_the_pointer():
    body = """
    %0 = arith.constant {value = 0} : i32
    %1 = tt.addptr %arg0, %0 : (!tt.ptr<f32>, i32) -> (!tt.ptr<f32>)
    %2 = tt.load %1 : (!tt.ptr<f32>) -> (f32)
    tt.return %2 : (f32) -> ()"""
    check_pass(func(body, args="%arg0: !tt.ptr<f32>", results="f32"), CANON,
               "CHECK-NOT: tt.addptr\nCHECK: tt.load %arg0")


def test_if_with_constant_condition_is_inlined():
    body = """
    %0 = arith.constant {value = false} : i1
    %1 = scf.if %0 (
      {
      ^bb():
        %2 = arith.muli %arg0, %arg1 : (i32, i32) -> (i32)
        scf.yield %2 : (i32) -> ()
      },
      {
      ^bb():
        %3 = arith.subi %arg0, %arg1 : (i32, i32) -> (i32)
        scf.yield %3 : (i32) -> ()
      }
    ) : (i1) -> (i32)
    tt.return %1 : (i32) -> ()"""
    out = check_pass(func(body), CANON, """
CHECK-NOT:  scf.if
CHECK:      [[D:%[0-9]+]] = arith.subi %arg0, %arg1
CHECK-NEXT: tt.return [[D]]
""")
    assert "arith.muli" not in out


def test_for_with_zero_trip_count_is_its_inits():
    body = """
    %0 = arith.constant {value = 10} : i32
    %1 = arith.constant {value = 1} : i32
    %2 = scf.for %0, %0, %1, %arg0 (
      {
      ^bb(%arg2: i32, %arg3: i32):
        %3 = arith.addi %arg3, %arg1 : (i32, i32) -> (i32)
        scf.yield %3 : (i32) -> ()
      }
    ) : (i32, i32, i32, i32) -> (i32)
    tt.return %2 : (i32) -> ()"""
    check_pass(func(body), CANON, "CHECK-NOT: scf.for\nCHECK: tt.return %arg0")


LOOP_OF_ONE_ITERATION = func("""
    %0 = arith.constant {value = 3} : i32
    %1 = arith.constant {value = 4} : i32
    %2 = arith.constant {value = 5} : i32
    %3 = scf.for %0, %1, %2, %arg0 (
      {
      ^bb(%arg2: i32, %arg3: i32):
        %4 = arith.muli %arg3, %arg2 : (i32, i32) -> (i32)
        %5 = arith.addi %4, %arg1 : (i32, i32) -> (i32)
        scf.yield %5 : (i32) -> ()
      }
    ) : (i32, i32, i32, i32) -> (i32)
    tt.return %3 : (i32) -> ()""")


def test_for_with_one_iteration_is_its_body():
    """As MLIR's SimplifyTrivialLoops (which Triton runs): the body once, its induction variable the
    lower bound (3), its carried value the init."""
    check_pass(LOOP_OF_ONE_ITERATION, CANON, """
CHECK-NOT: scf.for
CHECK:     [[C:%[0-9]+]] = arith.constant {value = 3}
CHECK:     [[M:%[0-9]+]] = arith.muli %arg0, [[C]]
CHECK:     [[A:%[0-9]+]] = arith.addi [[M]], %arg1
CHECK:     tt.return [[A]]
""")
    assert_preserves(LOOP_OF_ONE_ITERATION, CANON, [(a, b) for a in (-3, 0, 7) for b in (-1, 0, 1, 5)])


LOOP_WITH_DEAD_CARRIED_VALUE = func("""
    %0 = arith.constant {value = 0} : i32
    %1 = arith.constant {value = 1} : i32
    %2, %3, %4 = scf.for %0, %arg1, %1, %arg0, %arg0, %arg1 (
      {
      ^bb(%arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32):
        %5 = arith.addi %arg3, %arg2 : (i32, i32) -> (i32)
        %6 = arith.muli %arg4, %arg2 : (i32, i32) -> (i32)
        %7 = arith.addi %arg5, %5 : (i32, i32) -> (i32)
        scf.yield %5, %6, %arg5 : (i32, i32, i32) -> ()
      }
    ) : (i32, i32, i32, i32, i32, i32) -> (i32, i32, i32)
    %8 = arith.addi %2, %4 : (i32, i32) -> (i32)
    tt.return %8 : (i32) -> ()""")


def test_unused_and_pass_through_loop_carried_values_are_removed():
    out = check_pass(LOOP_WITH_DEAD_CARRIED_VALUE, CANON, """
CHECK:      scf.for %{{[0-9]+}}, %arg1, %{{[0-9]+}}, %arg0 (
CHECK:      ^bb(%arg2: i32, %arg3: i32):
CHECK-NEXT:   [[N:%[0-9]+]] = arith.addi %arg3, %arg2
CHECK-NEXT:   scf.yield [[N]] : (i32) -> ()
CHECK:      ) : (i32, i32, i32, i32) -> (i32)
CHECK:      arith.addi %{{[0-9]+}}, %arg1
""")
    assert "arith.muli" not in out


def test_loop_simplification_preserves_results():
    assert_preserves(LOOP_WITH_DEAD_CARRIED_VALUE, CANON, [(a, b) for a in (-3, 0, 7) for b in (-1, 0, 1, 5)])
