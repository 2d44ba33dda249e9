"""Constant folding compared against numpy: integer wrap-around, unsigned ops, shifts, f16/f32."""
import numpy as np
import pytest

from tilejit import ir
from tilejit.passes import Canonicalize, run_passes
from tilejit.passes.constants import constant_of

INT_TYPES = {"i8": (ir.i8, np.int8, np.uint8), "i32": (ir.i32, np.int32, np.uint32),
             "i64": (ir.i64, np.int64, np.uint64)}


def fold_binary(op_name, lhs, rhs, elem, result_elem=None, attrs=None):
    """Build `op(constant lhs, constant rhs)` on tensors, canonicalize, return the folded elements
    (None when the op was left unfolded)."""
    n = len(lhs)
    ty = ir.TensorType((n,), elem)
    rty = ir.TensorType((n,), result_elem or elem)
    f = ir.make_func("f", [], [rty])
    b = ir.Builder(f.regions[0].blocks[0])
    a = b.constant(ir.DenseAttr([_py(x) for x in lhs]), ty)
    c = b.constant(ir.DenseAttr([_py(x) for x in rhs]), ty)
    r = b.create1(op_name, [a, c], rty, attrs)
    b.create("tt.return", [r])
    m = ir.Module([f])
    run_passes(m, [Canonicalize()], dump=False, verify=True)
    returned = f.regions[0].blocks[0].ops[-1].operands[0]
    const = constant_of(returned)
    return None if const is None else const.elements(n)


def _py(x):
    return float(x) if isinstance(x, (float, np.floating)) else int(x)


def _random_ints(np_signed, count, rng):
    info = np.iinfo(np_signed)
    edge = [info.min, info.max, -1, 0, 1, info.min + 1]
    return np.array(edge + list(rng.integers(info.min, info.max, size=count - len(edge), dtype=np_signed,
                                             endpoint=True)), dtype=np_signed)


@pytest.mark.parametrize("type_name", sorted(INT_TYPES))
@pytest.mark.parametrize("op_name, signed, compute", [
    ("arith.addi", True, lambda a, b: a + b),
    ("arith.subi", True, lambda a, b: a - b),
    ("arith.muli", True, lambda a, b: a * b),
    ("arith.andi", True, lambda a, b: a & b),
    ("arith.ori", True, lambda a, b: a | b),
    ("arith.xori", True, lambda a, b: a ^ b),
    ("arith.maxsi", True, np.maximum),
    ("arith.minsi", True, np.minimum),
    ("arith.maxui", False, np.maximum),
    ("arith.minui", False, np.minimum),
])
def test_integer_ops_wrap_like_numpy(type_name, op_name, signed, compute):
    elem, np_signed, np_unsigned = INT_TYPES[type_name]
    rng = np.random.default_rng(0)
    a, b = _random_ints(np_signed, 64, rng), _random_ints(np_signed, 64, rng)[::-1].copy()
    dtype = np_signed if signed else np_unsigned
    with np.errstate(over="ignore"):
        expected = compute(a.astype(dtype), b.astype(dtype)).astype(np_signed)
    assert fold_binary(op_name, a, b, elem) == [int(x) for x in expected]


@pytest.mark.parametrize("type_name", sorted(INT_TYPES))
def test_unsigned_division_and_remainder(type_name):
    elem, np_signed, np_unsigned = INT_TYPES[type_name]
    rng = np.random.default_rng(1)
    a = _random_ints(np_signed, 32, rng)
    b = _random_ints(np_signed, 32, rng)
    b[b == 0] = 3
    for op_name, compute in (("arith.divui", np.floor_divide), ("arith.remui", np.remainder)):
        expected = compute(a.astype(np_unsigned), b.astype(np_unsigned)).astype(np_signed)
        assert fold_binary(op_name, a, b, elem) == [int(x) for x in expected], op_name


@pytest.mark.parametrize("type_name", sorted(INT_TYPES))
def test_signed_division_truncates_toward_zero(type_name):
    elem, np_signed, _ = INT_TYPES[type_name]
    a = np.array([7, -7, 7, -7, 0, np.iinfo(np_signed).max], dtype=np_signed)
    b = np.array([2, 2, -2, -2, 5, -1], dtype=np_signed)
    # numpy floors; C (and LLVM) truncate: step a floored quotient with a remainder back toward zero.
    floored, floored_rem = np.floor_divide(a, b), np.remainder(a, b)
    quotient = (floored + ((floored_rem != 0) & ((a < 0) != (b < 0)))).astype(np_signed)
    assert fold_binary("arith.divsi", a, b, elem) == [int(x) for x in quotient]
    remainder = a - quotient * b  # C semantics: the remainder has the dividend's sign
    assert fold_binary("arith.remsi", a, b, elem) == [int(x) for x in remainder]


@pytest.mark.parametrize("type_name", sorted(INT_TYPES))
def test_shifts_match_numpy_and_oversized_shifts_do_not_fold(type_name):
    elem, np_signed, np_unsigned = INT_TYPES[type_name]
    width = elem.width
    rng = np.random.default_rng(2)
    a = _random_ints(np_signed, 16, rng)
    s = (np.arange(16) % width).astype(np_signed)
    assert fold_binary("arith.shli", a, s, elem) == [int(x) for x in (a.astype(np_unsigned) << s.astype(np_unsigned)).astype(np_signed)]
    assert fold_binary("arith.shrsi", a, s, elem) == [int(x) for x in a >> s]
    assert fold_binary("arith.shrui", a, s, elem) == [int(x) for x in (a.astype(np_unsigned) >> s.astype(np_unsigned)).astype(np_signed)]
    too_far = np.full(16, width, dtype=np_signed)
    assert fold_binary("arith.shli", a, too_far, elem) is None


@pytest.mark.parametrize("pred, compute, unsigned", [
    ("slt", np.less, False), ("sge", np.greater_equal, False), ("ult", np.less, True),
    ("ugt", np.greater, True), ("eq", np.equal, False), ("ne", np.not_equal, False)])
def test_cmpi_signed_and_unsigned_predicates(pred, compute, unsigned):
    rng = np.random.default_rng(3)
    a, b = _random_ints(np.int32, 32, rng), _random_ints(np.int32, 32, rng)[::-1].copy()
    dtype = np.uint32 if unsigned else np.int32
    expected = compute(a.astype(dtype), b.astype(dtype))
    assert fold_binary("arith.cmpi", a, b, ir.i32, ir.i1, {"predicate": pred}) == [bool(x) for x in expected]


@pytest.mark.parametrize("elem, np_type", [(ir.f32, np.float32), (ir.f16, np.float16)])
@pytest.mark.parametrize("op_name, compute", [
    ("arith.addf", np.add), ("arith.subf", np.subtract), ("arith.mulf", np.multiply),
    ("arith.divf", np.divide), ("arith.maxnumf", np.fmax), ("arith.minimumf", np.minimum)])
def test_float_ops_fold_in_the_ops_precision(elem, np_type, op_name, compute):
    rng = np.random.default_rng(4)
    a = np.concatenate([np.array([0.1, -0.0, 1e4, 3.0, 7.0]), rng.standard_normal(27) * 100]).astype(np_type)
    b = np.concatenate([np.array([0.2, 0.0, 1e4, 0.0, 3.0]), rng.standard_normal(27)]).astype(np_type)
    with np.errstate(all="ignore"):
        expected = compute(a, b)
    folded = fold_binary(op_name, a, b, elem)
    assert folded is not None
    assert np.array_equal(np.array(folded, dtype=np_type), expected, equal_nan=True)
    # Bit-exact, signed zeros included.
    assert np.array_equal(np.signbit(np.array(folded, dtype=np_type)), np.signbit(expected))


def test_f16_overflow_folds_to_inf_and_bf16_is_left_alone():
    assert fold_binary("arith.mulf", [300.0], [300.0], ir.f16) == [float("inf")]
    assert fold_binary("arith.addf", [1.0], [2.0], ir.bf16) is None


def test_float_to_int_out_of_range_is_not_folded():
    f = ir.make_func("f", [], [ir.i8, ir.i8])
    b = ir.Builder(f.regions[0].blocks[0])
    big = b.constant(300.0, ir.f32)
    small = b.constant(-2.75, ir.f32)
    r1 = b.create1("arith.fptosi", [big], ir.i8)
    r2 = b.create1("arith.fptosi", [small], ir.i8)
    b.create("tt.return", [r1, r2])
    m = ir.Module([f])
    run_passes(m, [Canonicalize()], dump=False)
    ret = f.regions[0].blocks[0].ops[-1]
    assert ret.operands[0].op.name == "arith.fptosi"
    assert constant_of(ret.operands[1]).splat == -2
