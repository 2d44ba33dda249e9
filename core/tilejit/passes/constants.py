"""Compile-time values of `arith.constant` ops, and the arithmetic that folds them.

Integer constants are kept as Python ints in their *signed* spelling for the type's width (as MLIR
prints them), i1 as a bool. Each operation reinterprets its operands as signed or unsigned, because the
IR's integer types are signless. Float constants are Python floats holding a value exactly
representable in the op's precision; every float op is evaluated in that precision with numpy
(f16 via numpy.float16, f32 via numpy.float32). Formats numpy cannot emulate exactly (bf16, fp8) are
never folded.

A folder returns None whenever folding would change behaviour: division by zero, signed overflow of a
division, shifts by the width or more, out-of-range float-to-int conversions (all undefined or poison
in LLVM, so the program must keep the op and whatever the target does with it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..ir import DenseAttr, FloatType, IntType, TensorType, Type, Value, element_type

# Dense (non-splat) tensors larger than this are not folded element by element: the folded constant
# would bloat the IR and the compile time for no gain.
MAX_DENSE_FOLD_ELEMENTS = 4096

NUMPY_FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


# -- integer representation ---------------------------------------------------------------------
def wrap_signed(value: int, width: int) -> int:
    """`value` modulo 2**width, in the signed range of that width."""
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def as_unsigned(value: int, width: int) -> int:
    return int(value) & ((1 << width) - 1)


def as_signed(value: int, width: int) -> int:
    return wrap_signed(int(value), width)


def normalize_int(value, width: int):
    """The canonical attribute spelling of an integer of `width` bits (bool for i1)."""
    if width == 1:
        return bool(int(value) & 1)
    return wrap_signed(int(value), width)


def normalize_float(value, ftype: FloatType) -> Optional[float]:
    """Round `value` to the float type's precision; None when numpy cannot represent it exactly."""
    np_type = NUMPY_FLOATS.get(ftype.name)
    if np_type is None:
        return None
    return float(np_type(value))


def normalize_scalar(value, elem: Type):
    if isinstance(elem, IntType):
        return normalize_int(value, elem.width)
    if isinstance(elem, FloatType):
        return normalize_float(value, elem)
    return None


def same_scalar(a, b) -> bool:
    """Equality that tells -0.0 from 0.0 and treats NaN as equal to NaN (attribute identity)."""
    if isinstance(a, float) or isinstance(b, float):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return fa == fb and math.copysign(1.0, fa) == math.copysign(1.0, fb)
    return int(a) == int(b)


# -- reading constants ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Constant:
    """The value of a constant SSA value: `splat` for scalars and splat tensors, else `dense`."""
    type: Type
    splat: object = None
    dense: Optional[tuple] = None

    @property
    def is_splat(self) -> bool:
        return self.dense is None

    @property
    def elem(self) -> Type:
        return element_type(self.type)

    def elements(self, count: int) -> List:
        return list(self.dense) if self.dense is not None else [self.splat] * count

    def is_value(self, scalar) -> bool:
        """True when every element equals `scalar` (with `same_scalar`'s float identity)."""
        if self.dense is not None:
            return all(same_scalar(v, scalar) for v in self.dense)
        return same_scalar(self.splat, scalar)


def constant_of(v: Value) -> Optional[Constant]:
    """The compile-time value of `v` when it is defined by `arith.constant`, else None."""
    op = getattr(v, "op", None)
    if op is None or op.name != "arith.constant" or "value" not in op.attrs:
        return None
    raw = op.attrs["value"]
    elem = element_type(v.type)
    if not isinstance(elem, (IntType, FloatType)):
        return None
    if isinstance(raw, DenseAttr):
        values = tuple(normalize_scalar(x, elem) for x in raw.values)
        if any(x is None for x in values):
            return None
        if values and all(same_scalar(x, values[0]) for x in values):
            return Constant(v.type, splat=values[0])
        return Constant(v.type, dense=values)
    if isinstance(raw, (bool, int, float)):
        if isinstance(elem, FloatType) and elem.name not in NUMPY_FLOATS:
            # A bf16/fp8 scalar attribute is still a known value, but only exact for identities.
            return Constant(v.type, splat=float(raw))
        value = normalize_scalar(raw, elem)
        return None if value is None else Constant(v.type, splat=value)
    return None


def attr_for(values: Sequence, elem: Type):
    """The `value` attribute of a constant with these elements: a scalar when all are equal."""
    if values and all(same_scalar(x, values[0]) for x in values):
        return values[0]
    return DenseAttr(values)


# -- scalar folders -------------------------------------------------------------------------------
# Each folder takes (operand scalars, operand element types, result element type, op attrs) and
# returns the result scalar, or None when the op must not be folded.
ScalarFolder = Callable[[list, list, Type, dict], object]
FOLDERS: Dict[str, ScalarFolder] = {}


def _folder(*names):
    def register(fn):
        for n in names:
            FOLDERS[n] = fn
        return fn
    return register


def _int_binary(compute):
    """Wrap `compute(a, b, width)` (Python ints, result wrapped afterwards) as an int folder."""
    def fold(vals, types, rtype, attrs):
        if not isinstance(rtype, IntType):
            return None
        out = compute(int(vals[0]), int(vals[1]), rtype.width)
        return None if out is None else normalize_int(out, rtype.width)
    return fold


def _divsi(a, b, w):
    a, b = as_signed(a, w), as_signed(b, w)
    if b == 0 or (a == -(1 << (w - 1)) and b == -1 and w > 1):
        return None
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _remsi(a, b, w):
    q = _divsi(a, b, w)
    return None if q is None else as_signed(a, w) - q * as_signed(b, w)


def _shift_amount(b, w):
    amount = as_unsigned(b, w)
    return amount if amount < w else None


def _shli(a, b, w):
    s = _shift_amount(b, w)
    return None if s is None else as_unsigned(a, w) << s


def _shrsi(a, b, w):
    s = _shift_amount(b, w)
    return None if s is None else as_signed(a, w) >> s


def _shrui(a, b, w):
    s = _shift_amount(b, w)
    return None if s is None else as_unsigned(a, w) >> s


def _unsigned_div(a, b, w):
    b = as_unsigned(b, w)
    return None if b == 0 else as_unsigned(a, w) // b


def _unsigned_rem(a, b, w):
    b = as_unsigned(b, w)
    return None if b == 0 else as_unsigned(a, w) % b


_INT_BINARY = {
    "arith.addi": lambda a, b, w: a + b,
    "arith.subi": lambda a, b, w: a - b,
    "arith.muli": lambda a, b, w: a * b,
    "arith.divsi": _divsi,
    "arith.remsi": _remsi,
    "arith.divui": _unsigned_div,
    "arith.remui": _unsigned_rem,
    "arith.andi": lambda a, b, w: as_unsigned(a, w) & as_unsigned(b, w),
    "arith.ori": lambda a, b, w: as_unsigned(a, w) | as_unsigned(b, w),
    "arith.xori": lambda a, b, w: as_unsigned(a, w) ^ as_unsigned(b, w),
    "arith.shli": _shli,
    "arith.shrsi": _shrsi,
    "arith.shrui": _shrui,
    "arith.maxsi": lambda a, b, w: max(as_signed(a, w), as_signed(b, w)),
    "arith.minsi": lambda a, b, w: min(as_signed(a, w), as_signed(b, w)),
    "arith.maxui": lambda a, b, w: max(as_unsigned(a, w), as_unsigned(b, w)),
    "arith.minui": lambda a, b, w: min(as_unsigned(a, w), as_unsigned(b, w)),
    "tt.mulhiui": lambda a, b, w: (as_unsigned(a, w) * as_unsigned(b, w)) >> w,
}
for _name, _fn in _INT_BINARY.items():
    FOLDERS[_name] = _int_binary(_fn)

_CMPI = {
    "eq": lambda a, b, w: as_signed(a, w) == as_signed(b, w),
    "ne": lambda a, b, w: as_signed(a, w) != as_signed(b, w),
    "slt": lambda a, b, w: as_signed(a, w) < as_signed(b, w),
    "sle": lambda a, b, w: as_signed(a, w) <= as_signed(b, w),
    "sgt": lambda a, b, w: as_signed(a, w) > as_signed(b, w),
    "sge": lambda a, b, w: as_signed(a, w) >= as_signed(b, w),
    "ult": lambda a, b, w: as_unsigned(a, w) < as_unsigned(b, w),
    "ule": lambda a, b, w: as_unsigned(a, w) <= as_unsigned(b, w),
    "ugt": lambda a, b, w: as_unsigned(a, w) > as_unsigned(b, w),
    "uge": lambda a, b, w: as_unsigned(a, w) >= as_unsigned(b, w),
}


@_folder("arith.cmpi")
def _fold_cmpi(vals, types, rtype, attrs):
    pred = _CMPI.get(attrs.get("predicate"))
    if pred is None or not isinstance(types[0], IntType):
        return None
    return bool(pred(int(vals[0]), int(vals[1]), types[0].width))


@_folder("math.absi")
def _fold_absi(vals, types, rtype, attrs):
    return normalize_int(abs(as_signed(vals[0], rtype.width)), rtype.width)


@_folder("arith.extsi")
def _fold_extsi(vals, types, rtype, attrs):
    return normalize_int(as_signed(vals[0], types[0].width), rtype.width)


@_folder("arith.extui")
def _fold_extui(vals, types, rtype, attrs):
    return normalize_int(as_unsigned(vals[0], types[0].width), rtype.width)


@_folder("arith.trunci")
def _fold_trunci(vals, types, rtype, attrs):
    return normalize_int(int(vals[0]), rtype.width)


# -- float folders ---------------------------------------------------------------------------------
def _np_float(ftype: Type):
    return NUMPY_FLOATS.get(ftype.name) if isinstance(ftype, FloatType) else None


def _float_op(compute, arity):
    """Evaluate `compute` on numpy scalars of the result's precision; IEEE results (inf, nan) fold."""
    def fold(vals, types, rtype, attrs):
        np_type = _np_float(rtype)
        if np_type is None or any(_np_float(t) is not np_type for t in types[:arity]):
            return None
        with np.errstate(all="ignore"):
            out = compute(*(np_type(v) for v in vals[:arity]))
        return float(np_type(out))
    return fold


_FLOAT_OPS = {
    "arith.addf": (lambda a, b: a + b, 2),
    "arith.subf": (lambda a, b: a - b, 2),
    "arith.mulf": (lambda a, b: a * b, 2),
    "arith.divf": (lambda a, b: a / b, 2),
    "tt.precise_divf": (lambda a, b: a / b, 2),
    "arith.remf": (np.fmod, 2),
    "arith.maxnumf": (np.fmax, 2),
    "arith.minnumf": (np.fmin, 2),
    "arith.maximumf": (np.maximum, 2),
    "arith.minimumf": (np.minimum, 2),
    "math.copysign": (np.copysign, 2),
    "arith.negf": (lambda a: -a, 1),
    "math.absf": (np.abs, 1),
    "math.floor": (np.floor, 1),
    "math.ceil": (np.ceil, 1),
    "math.trunc": (np.trunc, 1),
    # sqrt is correctly rounded in IEEE 754, so the host's result is the device's result. Other math
    # functions are approximations whose last bits differ between libm and the GPU: never folded.
    "math.sqrt": (np.sqrt, 1),
    "tt.precise_sqrt": (np.sqrt, 1),
}
for _name, (_fn, _arity) in _FLOAT_OPS.items():
    FOLDERS[_name] = _float_op(_fn, _arity)

_CMPF = {
    "oeq": lambda a, b: a == b, "one": lambda a, b: a != b and not _unordered(a, b),
    "olt": lambda a, b: a < b, "ole": lambda a, b: a <= b, "ogt": lambda a, b: a > b,
    "oge": lambda a, b: a >= b, "ord": lambda a, b: not _unordered(a, b),
    "ueq": lambda a, b: _unordered(a, b) or a == b, "une": lambda a, b: a != b,
    "ult": lambda a, b: _unordered(a, b) or a < b, "ule": lambda a, b: _unordered(a, b) or a <= b,
    "ugt": lambda a, b: _unordered(a, b) or a > b, "uge": lambda a, b: _unordered(a, b) or a >= b,
    "uno": lambda a, b: _unordered(a, b),
}


def _unordered(a, b) -> bool:
    return math.isnan(a) or math.isnan(b)


@_folder("arith.cmpf")
def _fold_cmpf(vals, types, rtype, attrs):
    pred = _CMPF.get(attrs.get("predicate"))
    if pred is None or _np_float(types[0]) is None:
        return None
    return bool(pred(float(vals[0]), float(vals[1])))


@_folder("arith.extf", "arith.truncf", "tt.fp_to_fp")
def _fold_float_cast(vals, types, rtype, attrs):
    if _np_float(types[0]) is None or _np_float(rtype) is None:
        return None
    if attrs.get("rounding", "rtne") != "rtne":
        return None  # numpy only rounds to nearest-even
    with np.errstate(all="ignore"):
        return float(_np_float(rtype)(vals[0]))


@_folder("arith.sitofp", "arith.uitofp")
def _fold_int_to_float(vals, types, rtype, attrs):
    np_type = _np_float(rtype)
    if np_type is None or not isinstance(types[0], IntType):
        return None
    w = types[0].width
    # `sitofp` reads an i1 `true` as -1, `uitofp` as 1 (two's complement of one bit).
    value = as_unsigned(vals[0], w) if attrs.get("_unsigned") else as_signed(vals[0], w)
    with np.errstate(all="ignore"):
        # Python's int -> float rounds to nearest-even in double; a second rounding to f16/f32 could
        # differ from one direct rounding, so only fold when the double is exact.
        as_double = float(value)
        if int(as_double) != value:
            return None
        return float(np_type(as_double))


@_folder("arith.fptosi", "arith.fptoui")
def _fold_float_to_int(vals, types, rtype, attrs):
    if _np_float(types[0]) is None or not isinstance(rtype, IntType):
        return None
    x = float(vals[0])
    if math.isnan(x) or math.isinf(x):
        return None
    value = math.trunc(x)
    w = rtype.width
    lo, hi = (0, (1 << w) - 1) if attrs.get("_unsigned") else (-(1 << (w - 1)), (1 << (w - 1)) - 1)
    if not lo <= value <= hi:
        return None  # poison in LLVM: leave the conversion to the target
    return normalize_int(value, w)


def fold_scalars(name: str, vals: list, types: list, rtype: Type, attrs: dict):
    """Fold one element of op `name`; None when it is not foldable."""
    folder = FOLDERS.get(name)
    if folder is None or any(v is None for v in vals):
        return None
    if name in ("arith.uitofp", "arith.fptoui"):
        attrs = dict(attrs, _unsigned=True)
    try:
        out = folder(vals, types, rtype, attrs)
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    return None if out is None else normalize_scalar(out, rtype)


def fold_elementwise(name: str, constants: Sequence[Constant], result_type: Type, attrs: dict):
    """Fold an elementwise op whose operands are all constants: the result's `value` attr or None."""
    rtype = element_type(result_type)
    types = [c.elem for c in constants]
    if all(c.is_splat for c in constants):
        return fold_scalars(name, [c.splat for c in constants], types, rtype, attrs)
    count = result_type.numel if isinstance(result_type, TensorType) else 1
    if count > MAX_DENSE_FOLD_ELEMENTS:
        return None
    columns = [c.elements(count) for c in constants]
    out = []
    for row in zip(*columns):
        value = fold_scalars(name, list(row), types, rtype, attrs)
        if value is None:
            return None
        out.append(value)
    return attr_for(out, rtype)
