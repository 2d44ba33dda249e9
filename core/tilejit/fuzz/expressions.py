"""Random elementwise expressions: Triton source and the NumPy model's value, built together.

Each statement `tN = ...` is generated with its model value (an array of every lane, masked lanes
included, shaped so that NumPy broadcasts like Triton), a per-lane error bound for float results and
whether the value is exact. Only exact values feed what a rounding difference could turn into a
large one (comparisons, float -> int casts, fmod, transcendental arguments), so a correct
implementation always lands within the bound.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tilejit.fuzz import semantics as S
from tilejit.fuzz.semantics import DType

FLOAT_LIMIT = 1e4  # no float value grows past this: fp16 keeps its range, nothing becomes inf or NaN


@dataclasses.dataclass
class Value:
    name: str
    dt: DType
    val: np.ndarray
    tol: np.ndarray    # bound of |implementation - model| per lane (0 for exact values)
    exact: bool


def _finite_small(val, dt: DType) -> bool:
    if dt.kind != "float":
        return True
    with np.errstate(all="ignore"):
        v = np.asarray(val, dtype=np.float64)
        return bool(np.all(np.isfinite(v)) and np.all(np.abs(v) <= FLOAT_LIMIT))


def float_literal(rng) -> float:
    return float(rng.choice([0.25, 0.5, 0.75, 1.0, 1.5, 2.0, -0.5, -1.0, -1.25, -2.0]))


class Expressions:
    """Appends statements to `lines` (already indented by the caller's `indent`)."""

    def __init__(self, rng, lines: list, indent: str = "    ", prefix: str = "t"):
        self.rng = rng
        self.lines = lines
        self.indent = indent
        self.prefix = prefix
        self.pool: list[Value] = []
        self._count = 0

    # ---- the pool -------------------------------------------------------------------------------
    def emit(self, expr: str, dt: DType, val, tol, exact: bool) -> Value:
        name = f"{self.prefix}{self._count}"
        self._count += 1
        self.lines.append(f"{self.indent}{name} = {expr}")
        tol = np.zeros(np.shape(val)) if exact else np.broadcast_to(tol, np.shape(val)).astype(np.float64)
        value = Value(name, dt, np.asarray(val), tol, exact)
        self.pool.append(value)
        return value

    def leaf(self, name: str, dt: DType, val) -> Value:
        value = Value(name, dt, np.asarray(val), np.zeros(np.shape(val)), True)
        self.pool.append(value)
        return value

    def pick(self, want=None) -> Value:
        candidates = [v for v in self.pool if want is None or want(v)]
        # Recent values are likelier: expressions grow deeper rather than wider.
        weights = np.arange(1, len(candidates) + 1, dtype=np.float64)
        return candidates[self.rng.choice(len(candidates), p=weights / weights.sum())]

    # ---- conversions ----------------------------------------------------------------------------
    def operand(self, dt: DType, exact: bool = False) -> Value | None:
        """A value of type `dt` from the pool, converted with `.to()` when needed; None if impossible."""
        same = [v for v in self.pool if v.dt == dt and (v.exact or not exact)]
        if same and self.rng.random() < 0.7:
            return self.pick(lambda v: v in same)
        usable = [v for v in self.pool if (v.exact or not exact) and (v.dt.kind != "float" or not dt.is_int or v.exact)]
        if not usable:
            return None
        src = self.pick(lambda v: v in usable)
        return src if src.dt == dt else self.convert(src, dt)

    def convert(self, src: Value, dt: DType) -> Value | None:
        if src.dt.kind == "float" and dt.is_int:
            if not src.exact:
                return None
            # float -> unsigned of a negative value is undefined in C and in Triton: take |x| first.
            if dt.kind == "uint":
                val = S.cast(np.abs(src.val), src.dt, dt)
                return self.emit(f"tl.abs({src.name}).to({dt.tl})", dt, val, 0, True)
            return self.emit(f"{src.name}.to({dt.tl})", dt, S.cast(src.val, src.dt, dt), 0, True)
        val = S.cast(src.val, src.dt, dt)
        if not _finite_small(val, dt):
            return None
        with np.errstate(all="ignore"):
            exact = src.exact and bool(np.all(val.astype(np.float64) == src.val.astype(np.float64)))
        tol = src.tol + dt.eps * np.abs(val.astype(np.float64))
        return self.emit(f"{src.name}.to({dt.tl})", dt, val, tol, exact)

    # ---- one random statement -------------------------------------------------------------------
    def step(self, dt: DType) -> Value | None:
        """One statement whose result has type `dt` (None when the random choice did not fit)."""
        ops = INT_OPS if dt.is_int else FLOAT_OPS
        op = ops[self.rng.integers(len(ops))]
        return getattr(self, "_" + op)(dt)

    def mixed(self) -> Value | None:
        """A binary operation between two values of different types: Triton promotes them first."""
        a = self.pick()
        others = [v for v in self.pool if v.dt != a.dt]
        if not others:
            return None
        b = self.pick(lambda v: v in others)
        both_int = a.dt.is_int and b.dt.is_int
        ops = ["+", "-", "*", "max", "min", "<"] + (["&", "|", "^", "<<", ">>"] if both_int else [])
        if both_int and a.dt.signed == b.dt.signed:
            ops += ["//", "%"]  # Triton refuses / // % between signed and unsigned integers
        op = ops[self.rng.integers(len(ops))]
        out = S.computation_type(a.dt, b.dt, op in ("//", "%"))
        if op == "<" and not (a.exact and b.exact):
            return None
        x, y = S.cast(a.val, a.dt, out), S.cast(b.val, b.dt, out)
        if not (_finite_small(x, out) and _finite_small(y, out)):
            return None
        if out.kind == "float" and (not np.array_equal(x.astype(np.float64), a.val.astype(np.float64))
                                    or not np.array_equal(y.astype(np.float64), b.val.astype(np.float64))):
            ta = a.tol + out.eps * np.abs(x.astype(np.float64))
            tb = b.tol + out.eps * np.abs(y.astype(np.float64))
            ea = eb = False
        else:
            ta, tb, ea, eb = a.tol, b.tol, a.exact, b.exact
        ca, cb = Value(a.name, out, x, ta, ea), Value(b.name, out, y, tb, eb)
        if op == "<":  # a mixed comparison picks between the two promoted values
            cond = S.binary("<", x, y, out)
            val = np.where(cond, x, y).astype(out.model)
            tol = np.where(cond, np.broadcast_to(ta, val.shape), np.broadcast_to(tb, val.shape))
            return self.emit(f"tl.where({a.name} < {b.name}, {a.name}, {b.name})", out, val, tol, ea and eb)
        if op in ("//", "%"):
            divisor = np.where((y == 0) | ((y == out.model(-1)) if out.signed else False), out.model(3), y).astype(out.model)
            guard = (f"tl.where(({b.name} == 0) | ({b.name} == -1), 3, {b.name})" if b.dt.signed
                     else f"tl.where({b.name} == 0, 3, {b.name})")
            return self.emit(f"{a.name} {op} {guard}", out, S.binary(op, x, divisor, out), 0, True)
        if op in ("<<", ">>"):
            amount = (y & out.model(out.bits - 1)).astype(out.model)
            val = S.binary("<<", x, amount, out) if op == "<<" else S.shift_right(x, amount, a.dt, out)
            return self.emit(f"{a.name} {op} ({b.name} & {out.bits - 1})", out, val, 0, True)
        if op in ("max", "min"):
            expr = f"tl.{'maximum' if op == 'max' else 'minimum'}({a.name}, {b.name})"
        else:
            expr = f"{a.name} {op} {b.name}"
        return self._result(expr, out, S.binary(op, x, y, out), op, ca, cb)

    def _binary(self, dt: DType, op: str, exact_operands=False) -> Value | None:
        a, b = self.operand(dt, exact_operands), self.operand(dt, exact_operands)
        if a is None or b is None:
            return None
        if op in ("max", "min"):
            expr = f"tl.{'maximum' if op == 'max' else 'minimum'}({a.name}, {b.name})"
        else:
            expr = f"{a.name} {op} {b.name}"
        val = S.binary(op, a.val, b.val, dt)
        return self._result(expr, dt, val, op, a, b)

    def _result(self, expr, dt, val, op, a, b=None) -> Value | None:
        if not _finite_small(val, dt):
            return None
        if dt.is_int:
            return self.emit(expr, dt, val, 0, True)
        r = np.abs(val.astype(np.float64))
        ta, aa = a.tol, np.abs(a.val.astype(np.float64))
        tb, ab = (b.tol, np.abs(b.val.astype(np.float64))) if b is not None else (0.0, 0.0)
        if op in ("+", "-"):
            tol = ta + tb + dt.eps * r
        elif op == "*":
            tol = ta * ab + tb * aa + ta * tb + dt.eps * r
        elif op == "/":
            tol = ta + tb * aa + 2 * dt.eps * r  # divisor >= 1
        elif op in ("max", "min", "neg", "abs", "where"):
            tol = np.maximum(ta, tb)
        else:  # math functions of exact arguments: a few ulp of the result or of 1
            tol = 4 * dt.eps * (r + 1.0)
        exact = a.exact and (b is None or b.exact) and op in ("max", "min", "neg", "abs", "where", "%")
        return self.emit(expr, dt, val, tol, exact)

    def _add(self, dt):
        return self._binary(dt, "+")

    def _sub(self, dt):
        return self._binary(dt, "-")

    def _mul(self, dt):
        return self._binary(dt, "*")

    def _max(self, dt):
        return self._binary(dt, "max")

    def _min(self, dt):
        return self._binary(dt, "min")

    def _bitwise(self, dt):
        return self._binary(dt, ["&", "|", "^"][self.rng.integers(3)])

    def _divmod(self, dt):
        """`a // b` or `a % b`, truncating toward zero, with zero (and -1, against MIN // -1) avoided."""
        a, b = self.operand(dt), self.operand(dt)
        if a is None or b is None:
            return None
        op = "//" if self.rng.random() < 0.5 else "%"
        if dt.signed:
            guard = f"tl.where(({b.name} == 0) | ({b.name} == -1), 3, {b.name})"
            divisor = np.where((b.val == 0) | (b.val == -1), dt.model(3), b.val).astype(dt.model)
        else:
            guard = f"tl.where({b.name} == 0, 3, {b.name})"
            divisor = np.where(b.val == 0, dt.model(3), b.val).astype(dt.model)
        return self.emit(f"{a.name} {op} {guard}", dt, S.binary(op, a.val, divisor, dt), 0, True)

    def _shift(self, dt):
        """`a << s` / `a >> s` with 0 <= s < bits (>> is arithmetic for signed, logical for unsigned)."""
        a, b = self.operand(dt), self.operand(dt)
        if a is None or b is None:
            return None
        op = "<<" if self.rng.random() < 0.5 else ">>"
        amount = (b.val & dt.model(dt.bits - 1)).astype(dt.model)
        return self.emit(f"{a.name} {op} ({b.name} & {dt.bits - 1})", dt, S.binary(op, a.val, amount, dt), 0, True)

    def _literal(self, dt):
        """A Python number on either side: it takes the tensor's type (Triton's weak scalars)."""
        a = self.operand(dt)
        if a is None:
            return None
        if dt.is_int:
            lit = int(self.rng.integers(1, 8)) * (1 if dt.kind == "uint" or self.rng.random() < 0.5 else -1)
            op = ["+", "-", "*", "&", "|", "^", "//", "%"][self.rng.integers(8)]
            if op in ("//", "%"):
                lit = abs(lit) + 1
        else:
            lit = float_literal(self.rng)
            op = ["+", "-", "*"][self.rng.integers(3)]
        lit_val = np.full(np.shape(a.val), lit).astype(dt.model) if dt.is_int else S.to_model(
            np.full(np.shape(a.val), lit), dt)
        lit_value = Value(repr(lit), dt, lit_val, np.zeros(np.shape(a.val)), True)
        if self.rng.random() < 0.5 and op not in ("//", "%"):
            return self._result(f"{lit!r} {op} {a.name}", dt, S.binary(op, lit_val, a.val, dt), op, lit_value, a)
        return self._result(f"{a.name} {op} {lit!r}", dt, S.binary(op, a.val, lit_val, dt), op, a, lit_value)

    def _unary(self, dt):
        a = self.operand(dt)
        if a is None:
            return None
        choices = ["neg", "abs"] + (["not"] if dt.is_int else [])
        op = choices[self.rng.integers(len(choices))]
        expr = {"neg": f"-{a.name}", "abs": f"tl.abs({a.name})", "not": f"~{a.name}"}[op]
        return self._result(expr, dt, S.unary(op, a.val, dt), op, a)

    def _where(self, dt):
        """`tl.where(x < y, a, b)`: the comparison is between exact values of any one type."""
        x = self.pick(lambda v: v.exact)
        y = self.operand(x.dt, exact=True)
        a, b = self.operand(dt), self.operand(dt)
        if y is None or a is None or b is None:
            return None
        cmp = ["<", "<=", ">", ">=", "==", "!="][self.rng.integers(6)]
        cond = S.binary(cmp, x.val, y.val, x.dt)
        val = np.where(cond, a.val, b.val).astype(dt.model)
        ta, tb = np.broadcast_to(a.tol, val.shape), np.broadcast_to(b.tol, val.shape)
        tol = np.where(cond, ta, tb)
        exact = a.exact and b.exact
        return self.emit(f"tl.where({x.name} {cmp} {y.name}, {a.name}, {b.name})", dt, val, tol, exact)

    def _div(self, dt):
        """`a / b` (divisor kept >= 1). Triton divides fp16/bf16 in fp32: the result is fp32."""
        a, b = self.operand(dt), self.operand(dt)
        if a is None or b is None:
            return None
        divisor = S.binary("+", S.unary("abs", b.val, dt), S.to_model(np.ones(np.shape(b.val)), dt), dt)
        out = quotient_type(dt)
        d = Value("d", out, divisor, b.tol, b.exact)
        val = S.binary("/", S.cast(a.val, dt, out), S.cast(divisor, dt, out), out)
        return self._result(f"{a.name} / (tl.abs({b.name}) + 1.0)", out, val, "/", a, d)

    def _fmod(self, dt):
        """`a % b` of floats is C's fmod (exact in IEEE arithmetic), on exact operands; fp32 for fp16/bf16."""
        a, b = self.operand(dt, exact=True), self.operand(dt, exact=True)
        if a is None or b is None:
            return None
        divisor = S.binary("+", S.unary("abs", b.val, dt), S.to_model(np.ones(np.shape(b.val)), dt), dt)
        if not np.all(divisor.astype(np.float64) == np.abs(b.val.astype(np.float64)) + 1):
            return None
        out = quotient_type(dt)
        d = Value("d", out, divisor, 0, True)
        val = S.binary("%", S.cast(a.val, dt, out), S.cast(divisor, dt, out), out)
        return self._result(f"{a.name} % (tl.abs({b.name}) + 1.0)", out, val, "%", a, d)

    def _math(self, dt):
        a = self.operand(dt, exact=True)
        if a is None or np.abs(a.val.astype(np.float64)).max(initial=0) > 4:
            return None
        op = ["exp", "log", "sqrt", "sin", "cos", "floor", "ceil"][self.rng.integers(7)]
        if dt.bits < 32:  # Triton: math functions take fp32 and fp64 only
            return None
        if op in ("log", "sqrt"):
            arg = S.binary("+", S.unary("abs", a.val, dt), S.to_model(np.ones(np.shape(a.val)), dt), dt)
            expr = f"tl.{op}(tl.abs({a.name}) + 1.0)"
        else:
            arg, expr = a.val, f"tl.{op}({a.name})"
        val = S.unary(op, arg, dt)
        if op in ("floor", "ceil"):
            return self.emit(expr, dt, val, 0, True)
        return self._result(expr, dt, val, op, a)


def quotient_type(dt: DType) -> DType:
    """The type of `a / b` and `a % b` for floats of type `dt`: Triton computes fp16/bf16 in fp32."""
    return S.FLOAT32 if dt.bits < 32 else dt


INT_OPS = ["add", "sub", "mul", "max", "min", "bitwise", "divmod", "shift", "literal", "unary", "where"]
FLOAT_OPS = ["add", "sub", "mul", "max", "min", "div", "fmod", "math", "literal", "unary", "where"]
