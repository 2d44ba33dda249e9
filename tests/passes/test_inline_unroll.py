"""Text and semantic tests of `inline`, `unroll` and `licm`."""
import pytest

from passes_testlib import assert_preserves, check_pass, evaluate, func, run_text

from tilejit.errors import CompilationError
from tilejit.passes import LICM, Canonicalize, Inline, Unroll

CALLS = """module {
  tt.func public @f(%arg0: i32, %arg1: i32) -> (i32) {
    %0 = tt.call %arg0, %arg1 {callee = "madd"} : (i32, i32) -> (i32) loc("k.py":3:8)
    %1 = tt.call %0, %arg1 {callee = "keep"} : (i32, i32) -> (i32) loc("k.py":4:8)
    tt.return %1 : (i32) -> () loc("k.py":5:4)
  } loc("k.py":1:0)
  tt.func private @madd(%arg0: i32, %arg1: i32) -> (i32) {
    %0 = arith.muli %arg0, %arg1 : (i32, i32) -> (i32) loc("helpers.py":10:11)
    %1 = tt.call %0 {callee = "twice"} : (i32) -> (i32) loc("helpers.py":11:11)
    tt.return %1 : (i32) -> () loc("helpers.py":12:4)
  } loc("helpers.py":9:0)
  tt.func private @twice(%arg0: i32) -> (i32) {
    %0 = arith.addi %arg0, %arg0 : (i32, i32) -> (i32) loc("helpers.py":20:11)
    tt.return %0 : (i32) -> () loc("helpers.py":21:4)
  } loc("helpers.py":19:0)
  tt.func private @keep(%arg0: i32, %arg1: i32) -> (i32) attributes {noinline = true} {
    %0 = arith.subi %arg0, %arg1 : (i32, i32) -> (i32) loc("helpers.py":30:11)
    tt.return %0 : (i32) -> () loc("helpers.py":31:4)
  } loc("helpers.py":29:0)
}
"""


def test_inline_keeps_callee_locations_and_noinline_calls():
    out = check_pass(CALLS, [Inline()], """
CHECK:     tt.func public @f
CHECK:     arith.muli %arg0, %arg1 {{.*}} loc("helpers.py":10:11)
CHECK:     arith.addi {{.*}} loc("helpers.py":20:11)
CHECK:     tt.call {{.*}} {callee = "keep"}
CHECK-NOT: @madd
CHECK-NOT: @twice
CHECK:     tt.func private @keep
""")
    assert "madd" not in out and "twice" not in out


def test_inline_preserves_results():
    assert_preserves(CALLS, [Inline()], [(2, 3), (-5, 7), (2**30, 4)])


def test_recursive_functions_are_not_inlined():
    text = """module {
  tt.func public @f(%arg0: i32, %arg1: i32) -> (i32) {
    %0 = tt.call %arg0 {callee = "r"} : (i32) -> (i32)
    tt.return %0 : (i32) -> ()
  }
  tt.func private @r(%arg0: i32) -> (i32) {
    %0 = tt.call %arg0 {callee = "r"} : (i32) -> (i32)
    tt.return %0 : (i32) -> ()
  }
}
"""
    check_pass(text, [Inline()], "CHECK: tt.call\nCHECK: tt.func private @r")


def _loop(attrs: str, lb=0, ub=10, step=1) -> str:
    return func(f"""
    %0 = arith.constant {{value = {lb}}} : i32
    %1 = arith.constant {{value = {ub}}} : i32
    %2 = arith.constant {{value = {step}}} : i32
    %3, %4 = scf.for %0, %1, %2, %arg0, %arg1 {attrs}(
      {{
      ^bb(%arg2: i32, %arg3: i32, %arg4: i32):
        %5 = arith.muli %arg3, %arg2 : (i32, i32) -> (i32)
        %6 = arith.addi %5, %arg4 : (i32, i32) -> (i32)
        %7 = arith.xori %arg4, %arg2 : (i32, i32) -> (i32)
        scf.yield %6, %7 : (i32, i32) -> ()
      }}
    ) : (i32, i32, i32, i32, i32) -> (i32, i32)
    %8 = arith.subi %3, %4 : (i32, i32) -> (i32)
    tt.return %8 : (i32) -> ()""")


INPUTS = [(1, 2), (3, -4), (0, 0), (2**20, 17)]


@pytest.mark.parametrize("lb, ub, step, factor", [(0, 10, 1, 4), (0, 10, 3, 2), (1, 9, 2, 4), (0, 7, 1, 7),
                                                  (0, 5, 1, 8), (-3, 6, 2, 3)])
def test_unroll_by_factor_with_remainder_preserves_results(lb, ub, step, factor):
    text = _loop(f"{{tt.loop_unroll_factor = {factor}}} ", lb, ub, step)
    out = assert_preserves(text, [Unroll()], INPUTS)
    trips = len(range(lb, ub, step))
    loops = out.count("scf.for")
    if factor >= trips:
        assert loops == 0
    else:
        assert loops == (1 if trips % factor == 0 else 2)
        assert "tt.loop_unroll_factor" not in out
        assert out.count("arith.muli") == factor + (1 if trips % factor else 0)


def test_unroll_by_factor_text():
    check_pass(_loop("{tt.loop_unroll_factor = 4} ", 0, 10, 1), [Unroll(), Canonicalize()], """
CHECK:     [[STEP:%[0-9]+]] = arith.constant {value = 4}
CHECK:     scf.for %{{[0-9]+}}, %{{[0-9]+}}, [[STEP]]
CHECK-COUNT-4: arith.muli
CHECK:     scf.yield
CHECK:     scf.for
CHECK-COUNT-1: arith.muli
CHECK-NOT: arith.muli
""")


def test_static_loops_unroll_fully_with_constant_induction_values():
    out = assert_preserves(_loop("{tt.static = true} ", 0, 3, 1), [Unroll(), Canonicalize()], INPUTS)
    assert "scf.for" not in out
    assert out.count("arith.xori") == 2  # iv = 0 makes the first xori vanish (x ^ 0 = x)


def test_static_loop_with_runtime_bounds_is_an_error():
    text = func("""
    %0 = arith.constant {value = 0} : i32
    %1 = arith.constant {value = 1} : i32
    scf.for %0, %arg0, %1 {tt.static = true} (
      {
      ^bb(%arg2: i32):
        scf.yield : () -> ()
      }
    ) : (i32, i32, i32) -> () loc("k.py":7:4)
    tt.return %arg0 : (i32) -> ()""")
    with pytest.raises(CompilationError, match="static_range") as e:
        run_text(text, [Unroll()])
    assert e.value.line == 7


def _loop_with_invariants(attrs=""):
    return func(f"""
    %0 = arith.constant {{value = 0}} : i32
    %1 = arith.constant {{value = 1}} : i32
    %2 = scf.for %0, %arg1, %1, %0 {attrs}(
      {{
      ^bb(%arg2: i32, %arg3: i32):
        %3 = arith.muli %arg0, %arg1 : (i32, i32) -> (i32)
        %4 = arith.divsi %3, %arg0 : (i32, i32) -> (i32)
        %5 = arith.addi %arg3, %4 : (i32, i32) -> (i32)
        scf.yield %5 : (i32) -> ()
      }}
    ) : (i32, i32, i32, i32) -> (i32)
    tt.return %2 : (i32) -> ()""")


def test_licm_hoists_invariants_but_not_divisions():
    text = _loop_with_invariants()
    check_pass(text, [LICM()], "CHECK: arith.muli %arg0, %arg1\nCHECK-NEXT: scf.for\nCHECK: arith.divsi")
    assert evaluate(run_text(text, [LICM()]), (3, 4)) == evaluate(text, (3, 4))


def test_licm_leaves_loops_marked_disable_licm():
    """`tl.range(..., disable_licm=True)` marks its loop `tt.disable_licm`, as Triton's."""
    check_pass(_loop_with_invariants("{tt.disable_licm = true} "), [LICM()],
               "CHECK: scf.for\nCHECK: arith.muli %arg0, %arg1")
