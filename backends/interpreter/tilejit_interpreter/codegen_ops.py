"""Code for the value ops of TTIR: arithmetic, casts, constants and tensor shape ops.

A mixin of the generator (codegen.py): each `op_*` method emits the Python line(s) computing one
op's results. Elementwise ops are one NumPy expression; the program axis needs no care there
because a uniform operand (`ir_shape`) broadcasts against a varying one (`(P, *ir_shape)`).
"""
from __future__ import annotations

import math

import numpy as np

from tilejit import ir
from tilejit.errors import CompilationError
from tilejit.runtime.launch_abi import bf16_bits

from . import numerics as nx
from .memory import DYNAMIC

INT_BINARY = {
    "arith.addi": "({a} + {b})", "arith.subi": "({a} - {b})", "arith.muli": "({a} * {b})",
    "arith.andi": "({a} & {b})", "arith.ori": "({a} | {b})", "arith.xori": "({a} ^ {b})",
    "arith.divsi": "nx.divsi({a}, {b})", "arith.remsi": "nx.remsi({a}, {b})",
    "arith.divui": "nx.divui({a}, {b}, {w})", "arith.remui": "nx.remui({a}, {b}, {w})",
    "arith.shli": "nx.shli({a}, {b}, {w})", "arith.shrsi": "nx.shrsi({a}, {b}, {w})",
    "arith.shrui": "nx.shrui({a}, {b}, {w})",
    "arith.maxsi": "np.maximum({a}, {b})", "arith.minsi": "np.minimum({a}, {b})",
    "arith.maxui": "nx.umax({a}, {b}, {w})", "arith.minui": "nx.umin({a}, {b}, {w})",
    "tt.mulhiui": "nx.mulhiui({a}, {b}, {w})",
}
# i1 is bool: the same ops as bit logic (true is -1 when read as a signed number; x / 0 is all ones).
I1_BINARY = {
    "arith.addi": "({a} ^ {b})", "arith.subi": "({a} ^ {b})", "arith.muli": "({a} & {b})",
    "arith.andi": "({a} & {b})", "arith.ori": "({a} | {b})", "arith.xori": "({a} ^ {b})",
    "arith.divsi": "({a} | ~{b})", "arith.divui": "({a} | ~{b})", "arith.remsi": "({a} & ~{b})",
    "arith.remui": "({a} & ~{b})", "arith.shli": "({a} & ~{b})", "arith.shrui": "({a} & ~{b})",
    "arith.shrsi": "np.asarray({a})", "arith.maxsi": "({a} & {b})", "arith.minsi": "({a} | {b})",
    "arith.maxui": "({a} | {b})", "arith.minui": "({a} & {b})", "tt.mulhiui": "np.zeros_like({a})",
}
FLOAT_BINARY = {
    "arith.addf": "({a} + {b})", "arith.subf": "({a} - {b})", "arith.mulf": "({a} * {b})",
    "arith.divf": "({a} / {b})", "tt.precise_divf": "({a} / {b})", "arith.remf": "np.fmod({a}, {b})",
    "arith.maxnumf": "np.fmax({a}, {b})", "arith.minnumf": "np.fmin({a}, {b})",
    "arith.maximumf": "np.maximum({a}, {b})", "arith.minimumf": "np.minimum({a}, {b})",
    "math.powf": "np.power({a}, {b})", "math.atan2": "np.arctan2({a}, {b})",
    "math.copysign": "np.copysign({a}, {b})",
}
FLOAT_UNARY = {
    "arith.negf": "(-{a})", "math.exp": "np.exp({a})", "math.exp2": "np.exp2({a})", "math.log": "np.log({a})",
    "math.log2": "np.log2({a})", "math.log10": "np.log10({a})", "math.log1p": "np.log1p({a})",
    "math.expm1": "np.expm1({a})", "math.sqrt": "np.sqrt({a})", "tt.precise_sqrt": "np.sqrt({a})",
    "math.rsqrt": "nx.rsqrt({a})", "math.sin": "np.sin({a})", "math.cos": "np.cos({a})",
    "math.tan": "np.tan({a})", "math.tanh": "np.tanh({a})", "math.sinh": "np.sinh({a})",
    "math.cosh": "np.cosh({a})", "math.asin": "np.arcsin({a})", "math.acos": "np.arccos({a})",
    "math.atan": "np.arctan({a})", "math.absf": "np.abs({a})", "math.floor": "np.floor({a})",
    "math.ceil": "np.ceil({a})", "math.trunc": "np.trunc({a})", "math.round": "nx.round_half_away({a})",
    "math.erf": "nx.erf({a})", "math.cbrt": "np.cbrt({a})",
}
SIGNED_CMP = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
UNSIGNED_CMP = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}
# On i1 a signed comparison sees true as -1: the order of the two bool values is reversed.
I1_SIGNED_CMP = {"slt": ">", "sle": ">=", "sgt": "<", "sge": "<="}


def py_literal(value) -> str:
    """A Python expression for a scalar attribute value (nan and inf included)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
    return repr(value)


class ValueOpsMixin:
    """Emitters of the value ops; relies on the generator's `name`, `define`, `emit`, `varying`."""

    # -- helpers --------------------------------------------------------------------------------
    def fmt(self, v) -> str:
        return str(ir.element_type(v.type))

    def dt(self, t) -> str:
        return nx.dtype_name(nx.numpy_dtype(t))

    def width(self, v) -> int:
        t = ir.element_type(v.type)
        if isinstance(t, ir.IntType):
            return t.width
        if isinstance(t, ir.PointerType):
            return 64
        return t.width

    def elementwise(self, op, template: str, **extra) -> None:
        args = {k: self.name(v) for k, v in zip("abc", op.operands)}
        self.define(op.results[0], template.format(**args, **extra), op)

    # -- integer and float arithmetic -----------------------------------------------------------
    def op_int_binary(self, op) -> None:
        w = self.width(op.operands[0])
        table = I1_BINARY if w == 1 else INT_BINARY
        self.elementwise(op, table[op.name], w=w)

    def op_float_binary(self, op) -> None:
        self.float_op(op, FLOAT_BINARY[op.name])

    def op_float_unary(self, op) -> None:
        self.float_op(op, FLOAT_UNARY[op.name])

    def float_op(self, op, template: str) -> None:
        f = self.fmt(op.results[0])
        if f in nx.EMULATED_FLOATS:
            # bf16/fp8 arithmetic: decode to float32, compute, round back to nearest even.
            args = {k: f"nx.decode_float({self.name(v)}, '{f}')" for k, v in zip("abc", op.operands)}
            self.define(op.results[0], f"nx.encode_float({template.format(**args)}, '{f}')", op)
        else:
            self.elementwise(op, template)

    def op_math_absi(self, op) -> None:
        self.elementwise(op, "np.abs({a})" if self.width(op.operands[0]) > 1 else "np.asarray({a})")

    def op_math_fma(self, op) -> None:
        self.float_op(op, "nx.fma({a}, {b}, {c})")

    def op_tt_clampf(self, op) -> None:
        nan = op.attrs.get("propagateNan", op.attrs.get("propagate_nan", 0))
        propagate = nan not in (0, False, "none", "NONE", None)
        self.float_op(op, "nx.clampf({a}, {b}, {c}, " + str(propagate) + ")")

    def op_arith_cmpi(self, op) -> None:
        pred = op.attrs.get("predicate")
        w = self.width(op.operands[0])
        a, b = self.name(op.operands[0]), self.name(op.operands[1])
        if pred in SIGNED_CMP:
            sym = I1_SIGNED_CMP.get(pred, SIGNED_CMP[pred]) if w == 1 else SIGNED_CMP[pred]
            expr = f"({a} {sym} {b})"
        elif pred in UNSIGNED_CMP:
            if w == 1:
                expr = f"({a} {UNSIGNED_CMP[pred]} {b})"
            else:
                expr = f"(nx.unsigned({a}, {w}) {UNSIGNED_CMP[pred]} nx.unsigned({b}, {w}))"
        else:
            raise self.error(op, f"unknown arith.cmpi predicate {pred!r}")
        self.define(op.results[0], expr, op)

    def op_arith_cmpf(self, op) -> None:
        f = self.fmt(op.operands[0])
        a, b = self.name(op.operands[0]), self.name(op.operands[1])
        if f in nx.EMULATED_FLOATS:
            a, b = f"nx.decode_float({a}, '{f}')", f"nx.decode_float({b}, '{f}')"
        self.define(op.results[0], f"nx.cmpf('{op.attrs.get('predicate')}', {a}, {b})", op)

    def op_arith_select(self, op) -> None:
        c, a, b = op.operands
        cond = self.name(c)
        rank = len(ir.shape_of(op.results[0].type))
        if not ir.shape_of(c.type) and rank and self.varying(c):
            cond = f"rt.cond_for({cond}, {rank})"
        r = op.results[0]
        a_name, b_name = self.pinned(a, r), self.pinned(b, r)
        if isinstance(r.type, ir.PointerType) and isinstance(r.type.pointee, ir.TensorType):
            self.define(r, f"rt.merge({cond}, {a_name}, {b_name}, 0)", op)
            return
        self.define(r, f"np.where({cond}, {a_name}, {b_name})", op)

    # -- casts ----------------------------------------------------------------------------------
    def op_cast(self, op) -> None:
        src, dst = op.operands[0], op.results[0]
        a = self.name(src)
        sf, df = self.fmt(src), self.fmt(dst)
        name = op.name
        if name in ("tt.int_to_ptr", "tt.ptr_to_int") or (name in ("tt.bitcast", "arith.bitcast")
                                                           and ir.is_ptr(src.type) and ir.is_ptr(dst.type)):
            self.define(dst, f"np.asarray({a}).astype(np.int64)" if name == "tt.int_to_ptr" else a, op)
            return
        ddt = self.dt(dst.type)
        rounding = op.attrs.get("rounding", "rtne")
        rounding = {0: "rtz", 1: "rtne"}.get(rounding, rounding) if isinstance(rounding, int) else rounding
        if name == "arith.extsi":
            expr = f"nx.extsi({a}, {ddt})"
        elif name == "arith.extui":
            expr = f"nx.extui({a}, {self.width(src)}, {ddt})"
        elif name == "arith.trunci":
            expr = f"nx.trunci({a}, {ddt})"
        elif name in ("arith.extf", "arith.truncf", "tt.fp_to_fp"):
            if sf in ("f16", "f32", "f64") and df in ("f32", "f64") and rounding == "rtne":
                expr = f"np.asarray({a}).astype({ddt})"
            else:
                expr = f"nx.convert_float({a}, '{sf}', '{df}', '{rounding}')"
        elif name == "arith.sitofp":
            expr = f"nx.sitofp({a}, '{df}')"
        elif name == "arith.uitofp":
            expr = f"nx.uitofp({a}, {self.width(src)}, '{df}')"
        elif name in ("arith.fptosi", "arith.fptoui"):
            expr = f"nx.fptoi({a}, '{sf}', {self.width(dst)}, {name == 'arith.fptosi'}, {ddt})"
        elif name in ("arith.bitcast", "tt.bitcast"):
            if self.width(src) != self.width(dst):
                raise self.error(op, f"bitcast between types of different widths ({sf} -> {df})")
            expr = f"nx.bitcast({a}, {ddt})"
        else:
            raise self.error(op, f"the interpreter does not know the cast {name}")
        self.define(dst, expr, op)

    # -- constants and program ids --------------------------------------------------------------
    def op_arith_constant(self, op) -> None:
        r = op.results[0]
        value = op.attrs.get("value")
        shape = ir.shape_of(r.type)
        f = self.fmt(r)
        elem = ir.element_type(r.type)
        if isinstance(value, ir.DenseAttr):
            values = list(value.values)
        else:
            values = [value]
        if isinstance(elem, ir.IntType):
            values = [nx.wrap_int(int(v), elem.width) for v in values]
            if elem.width == 1:
                values = [bool(v) for v in values]
            literal = "[" + ", ".join(py_literal(v) for v in values) + "]"
            array = f"np.array({literal}, dtype={self.dt(elem)})"
        elif isinstance(elem, ir.FloatType) and f == "bf16":
            # The launch ABI's rounding (float32, then bfloat16): the GPUs' constants and bf16 arguments.
            array = "np.array([" + ", ".join(str(bf16_bits(v)) for v in values) + "], dtype=np.uint16)"
        elif isinstance(elem, ir.FloatType):
            literal = "[" + ", ".join(py_literal(float(v)) for v in values) + "]"
            array = f"np.array({literal}, dtype=np.float64)"
            array = (f"nx.encode_float({array}, '{f}')" if f in nx.EMULATED_FLOATS
                     else f"{array}.astype({self.dt(elem)})")
        else:
            raise self.error(op, f"constant of type {r.type} is not supported")
        if shape:
            array = f"{array}.reshape({tuple(shape)})" if len(values) > 1 else \
                f"np.broadcast_to({array}.reshape(()), {tuple(shape)})"
        elif f in nx.EMULATED_FLOATS:
            array = f"{array}.reshape(())[()]"
        else:
            array = f"{self.dt(elem)}({literal[1:-1]})"
        self.define_constant(r, array)

    def op_tt_make_range(self, op) -> None:
        start, end = op.attrs.get("start", 0), op.attrs.get("end")
        self.define_constant(op.results[0], f"np.arange({int(start)}, {int(end)}, dtype=np.int32)")

    def op_tt_get_program_id(self, op) -> None:
        self.define(op.results[0], f"pid{int(op.attrs.get('axis', 0))}", op, alias=True)

    def op_tt_get_num_programs(self, op) -> None:
        self.define(op.results[0], f"nprog{int(op.attrs.get('axis', 0))}", op, alias=True)

    # -- shape ops ------------------------------------------------------------------------------
    def prog(self, v) -> str:
        """`(P,) + ` when `v` is varying: the prefix of shapes built for it."""
        return "(P,) + " if self.varying(v) else ""

    def off(self, v) -> int:
        return 1 if self.varying(v) else 0

    def op_tt_splat(self, op) -> None:
        src, r = op.operands[0], op.results[0]
        shape = tuple(ir.shape_of(r.type))
        if self.varying(src):
            self.define(r, f"rt.splat_varying({self.name(src)}, {shape})", op)
        else:
            self.define(r, f"np.broadcast_to({self.name(src)}, {shape})", op)

    def op_tt_broadcast(self, op) -> None:
        src, r = op.operands[0], op.results[0]
        fused = self.fused_pointers.get(src)
        if fused is not None:  # a pointer tensor that is never built: its offsets broadcast later
            self.fused_pointers[r] = (fused[0], fused[1], None)
            return
        shape = tuple(ir.shape_of(r.type))
        self.define(r, f"np.broadcast_to({self.name(src)}, {self.prog(src)}{shape})", op)

    def op_tt_expand_dims(self, op) -> None:
        src = op.operands[0]
        axis = int(op.attrs.get("axis", 0)) + self.off(src)
        self.define(op.results[0], f"np.expand_dims({self.name(src)}, {axis})", op)

    def op_tt_reshape(self, op) -> None:
        src, r = op.operands[0], op.results[0]
        shape = tuple(ir.shape_of(r.type))
        self.define(r, f"np.reshape({self.name(src)}, {self.prog(src)}{shape})", op)

    def op_tt_trans(self, op) -> None:
        src = op.operands[0]
        order = [int(o) for o in op.attrs.get("order", [1, 0])]
        perm = ([0] + [o + 1 for o in order]) if self.varying(src) else order
        self.define(op.results[0], f"np.transpose({self.name(src)}, {tuple(perm)})", op)

    def same_axis(self, op) -> list:
        """Operand names, made varying together when any of them is (so their shapes agree), pointers
        pinned to their arguments when the result's argument is not known statically."""
        r = op.results[0]
        if any(self.varying(v) for v in op.operands):
            return [self.pinned(v, r, self.as_varying(v)) for v in op.operands]
        return [self.pinned(v, r) for v in op.operands]

    def op_tt_join(self, op) -> None:
        a, b = self.same_axis(op)
        self.define(op.results[0], f"np.stack([{a}, {b}], axis=-1)", op)

    def op_tt_split(self, op) -> None:
        src = self.name(op.operands[0])
        self.define(op.results[0], f"{src}[..., 0]", op)
        self.define(op.results[1], f"{src}[..., 1]", op)

    def op_tt_cat(self, op) -> None:
        a, b = self.same_axis(op)
        axis = 1 if any(self.varying(v) for v in op.operands) else 0
        self.define(op.results[0], f"np.concatenate([{a}, {b}], axis={axis})", op)

    def op_tt_gather(self, op) -> None:
        src, index = op.operands
        axis = int(op.attrs.get("axis", 0)) + (1 if self.varying(src) or self.varying(index) else 0)
        self.define(op.results[0], f"rt.gather({self.name(src)}, {self.name(index)}, {axis})", op)

    def op_tt_histogram(self, op) -> None:
        x = op.operands[0]
        mask = self.name(op.operands[1]) if len(op.operands) > 1 else "None"
        r = op.results[0]
        bins = ir.shape_of(r.type)[0]
        varying = any(self.varying(v) for v in op.operands)
        if varying:
            x_name = self.as_varying(x)
            mask = self.as_varying(op.operands[1]) if len(op.operands) > 1 else "None"
        else:
            x_name = self.name(x)
        self.define(r, f"rt.histogram({x_name}, {mask}, {bins}, {self.dt(r.type)}, {varying})", op)

    def op_tt_dot(self, op) -> None:
        a, b, c = op.operands
        precision = op.attrs.get("inputPrecision", op.attrs.get("input_precision", "ieee"))
        precision = {0: "tf32", 1: "tf32x3", 2: "ieee", 3: "bf16x3", 4: "bf16x6"}.get(precision, precision)
        self.define(op.results[0], f"rt.dot({self.name(a)}, {self.name(b)}, {self.name(c)}, '{self.fmt(a)}', "
                    f"'{self.fmt(b)}', '{self.fmt(c)}', '{precision}', {self.dt(c.type)})", op)

    def op_tt_make_block_ptr(self, op) -> None:
        base, *rest = op.operands
        n = len(rest) // 3
        names = [self.name(v) for v in rest]
        shape, strides, offsets = names[:n], names[n:2 * n], names[2 * n:]
        tup = lambda xs: "(" + "".join(x + ", " for x in xs) + ")"  # noqa: E731
        self.define(op.results[0], f"({self.name(base)}, {tup(shape)}, {tup(strides)}, {tup(offsets)})", op)

    def op_tt_advance(self, op) -> None:
        bp, *deltas = op.operands
        tup = "(" + "".join(self.name(d) + ", " for d in deltas) + ")"
        self.define(op.results[0], f"rt.advance({self.name(bp)}, {tup})", op)

    def op_tt_make_tensor_descriptor(self, op) -> None:
        base, *rest = op.operands
        n = len(rest) // 2
        names = [self.name(v) for v in rest]
        tup = lambda xs: "(" + "".join(x + ", " for x in xs) + ")"  # noqa: E731
        padding = op.attrs.get("padding") or "zero"
        self.define(op.results[0], f"({self.name(base)}, {tup(names[:n])}, {tup(names[n:])}, {padding!r})", op)

    def op_tt_addptr(self, op) -> None:
        ptr, offset = op.operands
        size = np.dtype(nx.memory_dtype(ir.element_type(ptr.type).pointee)).itemsize
        r = op.results[0]
        chain = self.pointer_chain(ptr)
        if chain is not None and self.only_accessed(r):
            # Never materialised: each load/store through it gets the base and the offset terms.
            base, terms = chain
            terms = terms + (offset,)
            self.fused_pointers[r] = (base, terms, self.row_offsets(offset) if len(terms) == 1 else None)
            return
        if self.analysis.slot(r) == DYNAMIC:
            # No single argument: the pointer's slot bits are its provenance, kept by the move.
            self.define(r, f"mx.addptr_keeping_slot({self.name(ptr)}, {self.name(offset)}, {size})", op)
            return
        self.define(r, f"rt.addptr({self.name(ptr)}, {self.name(offset)}, {size})", op)

    def row_offsets(self, offset):
        """(lead, first) when `offset` is `lead + make_range(first, ...)` (`lead` a splat scalar, or
        None for a bare make_range), 1-D: every program reads one run of consecutive elements."""
        owner = offset.owner
        if not isinstance(owner, ir.Operation) or len(ir.shape_of(offset.type)) != 1:
            return None
        if owner.name == "tt.make_range":
            return None, int(owner.attrs.get("start", 0))
        if owner.name != "arith.addi":
            return None
        for lead, rng in (owner.operands, reversed(owner.operands)):
            lead_op, rng_op = lead.owner, rng.owner
            if (isinstance(lead_op, ir.Operation) and lead_op.name == "tt.splat"
                    and isinstance(rng_op, ir.Operation) and rng_op.name == "tt.make_range"):
                return lead_op.operands[0], int(rng_op.attrs.get("start", 0))
        return None

    def pointer_chain(self, ptr):
        """(scalar base, offset terms) of a pointer tensor that is never built: a fused addptr or
        broadcast, or `splat(s)` of a scalar `s` pointing into a known argument at a whole element."""
        fused = self.fused_pointers.get(ptr)
        if fused is not None:
            return fused[0], fused[1]
        splat = ptr.owner
        if isinstance(splat, ir.Operation) and splat.name == "tt.splat" and ir.shape_of(ptr.type):
            base = splat.operands[0]
            if self.analysis.slot(base) >= 0 and self.analysis.is_aligned(base):
                return base, ()
        return None

    def only_accessed(self, v, depth: int = 0) -> bool:
        """Whether every use of the pointer tensor `v` loads or stores through it, or is an addptr or
        broadcast of it whose result is only accessed in turn (so `v` itself is never needed)."""
        if not v.uses or depth > 16:
            return False
        for use, index in v.uses:
            if index != 0:
                return False
            if use.name in ("tt.load", "tt.store"):
                continue
            if use.name not in ("tt.addptr", "tt.broadcast") or not self.only_accessed(use.results[0], depth + 1):
                return False
        return True

    def fused_offsets(self, terms, shape) -> str:
        """The element offsets of a fused pointer: one term as is, several summed as intp."""
        if len(terms) == 1:
            return self.name(terms[0])
        names = "".join(self.name(t) + ", " for t in terms)
        varying = any(self.varying(t) for t in terms)
        return f"rt.sum_offsets(({names}), {'P' if varying else 'None'}, {tuple(shape)})"

    def check_type_supported(self, op) -> None:
        for v in list(op.operands) + list(op.results):
            t = ir.element_type(v.type)
            if isinstance(t, ir.IntType) and t.width not in (1, 8, 16, 32, 64):
                raise CompilationError(f"the interpreter does not support type {t}")
