"""Parser diagnostics carry line and column; the verifier rejects malformed IR."""
import pytest

from tilejit import ir
from tilejit.errors import CompilationError

GOOD = """module {
  tt.func public @f(%arg0: i32) -> (i32) {
    %0 = arith.addi %arg0, %arg0 : (i32, i32) -> (i32)
    tt.return %0 : (i32) -> ()
  }
}
"""


@pytest.mark.parametrize("bad, fragment, line, col", [
    (GOOD.replace("%arg0, %arg0", "%arg0, %9"), "undefined value %9", 3, 28),
    (GOOD.replace("(i32, i32) -> (i32)", "(i32, i64) -> (i32)"), "annotated i64", 3, 5),
    (GOOD.replace("-> (i32) {", "-> (u32) {"), "unknown type 'u32'", 2, 37),
    (GOOD.replace("tt.return %0 : (i32)", "tt.return %0 (i32)"), "expected '{'", 4, 19),
    (GOOD.replace("%arg0, %arg0", "%arg0, %"), "expected a value name", 3, 28),
    (GOOD + "junk", "unexpected text after the module", 7, 1),
])
def test_parse_errors_point_at_line_and_column(bad, fragment, line, col):
    with pytest.raises(CompilationError) as e:
        ir.parse_module(bad, filename="bad.ttir")
    assert fragment in e.value.message
    assert e.value.file == "bad.ttir" and e.value.line == line
    if col:
        assert e.value.col == col
    assert "bad.ttir:" in str(e.value) and "^" in str(e.value)


def _func(*arg_types):
    f = ir.make_func("f", list(arg_types), [])
    return f, ir.Builder(f.regions[0].blocks[0], loc=ir.Location("k.py", 9, 2)), f.regions[0].blocks[0].args


def test_verifier_catches_use_before_def():
    f, b, (n,) = _func(ir.i32)
    first = b.create1("arith.addi", [n, n], ir.i32)
    second = b.create1("arith.addi", [first, n], ir.i32)
    b.create("tt.return", [])
    ops = f.regions[0].blocks[0].ops
    ops[0], ops[1] = ops[1], ops[0]  # the user now comes first
    with pytest.raises(CompilationError, match="before it is defined") as e:
        ir.verify(ir.Module([f]))
    assert e.value.line == 9 and second is not None


def test_verifier_catches_value_used_outside_its_region():
    f, b, (n,) = _func(ir.i32)
    cond = b.create1("arith.cmpi", [n, n], ir.i1, {"predicate": "eq"})
    then = ir.Block()
    inner = ir.Builder(then).create1("arith.muli", [n, n], ir.i32)
    ir.Builder(then).create("scf.yield", [])
    b.create("scf.if", [cond], [], None, [ir.Region([then]), ir.Region()])
    b.create1("arith.addi", [inner, n], ir.i32)
    b.create("tt.return", [])
    with pytest.raises(CompilationError, match="outside its scope"):
        ir.verify(ir.Module([f]))


def test_verifier_catches_missing_terminators():
    f, b, (n,) = _func(ir.i32)
    b.create1("arith.addi", [n, n], ir.i32)
    with pytest.raises(CompilationError, match="terminator"):
        ir.verify(ir.Module([f]))  # the function body has no tt.return
    f, b, (n,) = _func(ir.i32)
    body = ir.Block([ir.i32])
    b.create("scf.for", [n, n, n], [], None, [ir.Region([body])])
    b.create("tt.return", [])
    with pytest.raises(CompilationError, match="terminator"):
        ir.verify(ir.Module([f]))  # the loop body is empty


def test_verifier_catches_elementwise_shape_mismatch():
    f, b, (x,) = _func(ir.f32)
    four = b.create1("tt.splat", [x], ir.TensorType((4,), ir.f32))
    eight = b.create1("tt.splat", [x], ir.TensorType((8,), ir.f32))
    b.create1("arith.addf", [four, eight], ir.TensorType((4,), ir.f32))
    b.create("tt.return", [])
    with pytest.raises(CompilationError, match="different shapes"):
        ir.verify(ir.Module([f]))


def test_verifier_accepts_good_ir():
    ir.verify(ir.parse_module(GOOD))
