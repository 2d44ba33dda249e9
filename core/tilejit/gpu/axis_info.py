"""Axis analysis (as Triton's AxisInfo): what is known about the values of an integer or pointer tensor.

Per dimension: `contiguity` (runs of consecutive values of this length start at aligned positions),
`divisibility` (the first value of each run is a multiple of this power of two; for pointers in
bytes), `constancy` (runs of equal values). The coalescing decision and the vector width of loads and
stores come from it: a run of 4 contiguous f32 whose start is 16-byte aligned is one 128-bit access.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Dict, Tuple

from .. import ir

MAX_DIV = 1 << 30


def _pow2_divisor(n: int) -> int:
    n = abs(int(n))
    if n == 0:
        return MAX_DIV
    return min(n & -n, MAX_DIV)


@dataclass(frozen=True)
class AxisInfo:
    contiguity: Tuple[int, ...]
    divisibility: Tuple[int, ...]
    constancy: Tuple[int, ...]

    @staticmethod
    def unknown(rank: int) -> "AxisInfo":
        r = max(rank, 1)
        return AxisInfo((1,) * r, (1,) * r, (1,) * r)


def _elem_bytes(t) -> int:
    e = ir.element_type(t)
    if isinstance(e, ir.PointerType):
        e = e.pointee
    width = getattr(e, "width", 8)
    return max(1, width // 8)


def _as_list(attr, rank):
    if attr is None:
        return None
    if isinstance(attr, (list, tuple)):
        return [int(v) for v in attr]
    if isinstance(attr, ir.DenseAttr):
        return [int(v) for v in attr.values]
    return [int(attr)] * max(rank, 1)


class AxisAnalysis:
    """Runs once over a function; `info(value)` answers for any value (unknown when not tensor-like)."""

    def __init__(self, func: ir.Operation):
        # Loop-carried values start as their initial value's info; after a walk, each is met with
        # what the loop yields (and with what it was: the facts only shrink, so the walks end) and
        # the walk repeats until nothing changes (a fixpoint).
        self.loop_args: Dict[int, AxisInfo] = {}
        while True:
            self._walk(func)
            changed = False
            for op in self._loops:
                body = op.regions[0].blocks[0]
                for k, arg in enumerate(body.args[1:]):
                    met = _meet(self.info(op.operand_group("inits")[k]), self.info(body.ops[-1].operands[k]))
                    if id(arg) in self.loop_args:
                        met = _meet(self.loop_args[id(arg)], met)
                    if self.loop_args.get(id(arg)) != met:
                        self.loop_args[id(arg)] = met
                        changed = True
            if not changed:
                break

    def _walk(self, func: ir.Operation) -> None:
        self.infos: Dict[int, AxisInfo] = {}
        self._loops = []  # the function's scf.for ops, in walk order (the fixpoint visits them)
        entry = func.regions[0].blocks[0]
        for arg, attrs in zip(entry.args, func.attrs.get("arg_attrs") or []):
            div = (attrs or {}).get("tt.divisibility", 1)
            self.infos[id(arg)] = AxisInfo((1,), (int(div),), (1,))
        for op in func.walk():
            if op is func:
                continue
            if op.name == "scf.for":
                self._loops.append(op)
                body = op.regions[0].blocks[0]
                # The induction variable is lb + i * step: a multiple of what divides both (for
                # `range(0, n, BLOCK)` that is BLOCK, so `off + tl.arange(0, BLOCK)` stays vectorizable).
                lower, step = self.info(op.operand("lower")), self.info(op.operand("step"))
                self.infos[id(body.args[0])] = AxisInfo((1,), (gcd(lower.divisibility[0], step.divisibility[0]),),
                                                        (1,))
                for k, arg in enumerate(body.args[1:]):
                    self.infos[id(arg)] = self.loop_args.get(id(arg), self.info(op.operand_group("inits")[k]))
            self._visit(op)

    def info(self, v: ir.Value) -> AxisInfo:
        got = self.infos.get(id(v))
        return got if got is not None else AxisInfo.unknown(len(ir.shape_of(v.type)))

    def _visit(self, op: ir.Operation) -> None:
        for r in op.results:
            info = self._compute(op, r)
            contig = _as_list(op.attrs.get("tt.contiguity"), len(ir.shape_of(r.type)))
            div = _as_list(op.attrs.get("tt.divisibility"), len(ir.shape_of(r.type)))
            if contig or div:
                info = AxisInfo(tuple(contig or info.contiguity), tuple(div or info.divisibility),
                                info.constancy)
            self.infos[id(r)] = info

    def _compute(self, op: ir.Operation, r: ir.Value) -> AxisInfo:
        shape = ir.shape_of(r.type) or (1,)
        rank = len(shape)
        name = op.name
        ins = [self.info(v) for v in op.operands]
        if name == "arith.constant":
            value = op.attrs.get("value")
            if isinstance(value, int) and not isinstance(value, bool):
                return AxisInfo((1,) * rank, (_pow2_divisor(value),) * rank, tuple(shape))
            if isinstance(value, ir.DenseAttr):   # element by element: nothing known (folded ranges)
                return AxisInfo.unknown(rank)
            return AxisInfo((1,) * rank, (1,) * rank, tuple(shape))
        if name == "tt.make_range":
            return AxisInfo((shape[0],), (_pow2_divisor(op.attrs.get("start", 0)),), (1,))
        if name == "tt.splat":
            return AxisInfo((1,) * rank, (ins[0].divisibility[0],) * rank, tuple(shape))
        if name in ("ttg.convert_layout", "arith.extsi", "arith.extui", "arith.trunci"):
            # Widening keeps every property; truncation keeps them for the index ranges tensors have.
            return ins[0]
        if name == "tt.bitcast" and ir.is_ptr(r.type) and not ir.is_block_ptr(r.type) and ins:
            # `ptr.to(tl.pointer_type(...))`: the same addresses (divisibility is in bytes)
            return ins[0]
        if name == "tt.get_program_id" or name == "tt.get_num_programs":
            return AxisInfo((1,), (1,), (1,))
        if name == "tt.expand_dims":
            axis = op.attrs["axis"]
            src = ins[0]
            c, d, k = list(src.contiguity), list(src.divisibility), list(src.constancy)
            c.insert(axis, 1)
            # The new dim has runs of one element, each a value of the source: what divides every value.
            d.insert(axis, min(_element_divisibility(src)))
            k.insert(axis, 1)
            return AxisInfo(tuple(c), tuple(d), tuple(k))
        if name == "tt.trans":
            # result dim i is source dim order[i]
            src = ins[0]
            order = op.attrs.get("order") or list(reversed(range(rank)))
            if len(src.contiguity) != rank:
                return AxisInfo.unknown(rank)
            return AxisInfo(tuple(src.contiguity[o] for o in order), tuple(src.divisibility[o] for o in order),
                            tuple(src.constancy[o] for o in order))
        if name == "tt.broadcast":
            src_shape = ir.shape_of(op.operands[0].type)
            src = ins[0]
            c, k = [], []
            for i, (s_in, s_out) in enumerate(zip(src_shape, shape)):
                c.append(1 if s_in != s_out else src.contiguity[i])
                k.append(s_out if s_in != s_out else src.constancy[i])
            return AxisInfo(tuple(c), src.divisibility, tuple(k))
        if len(ins) == 2 and len(ins[0].contiguity) == rank and len(ins[1].contiguity) == rank:
            a, b = ins
            if name in ("arith.addi", "tt.addptr", "arith.subi"):
                scale = _elem_bytes(op.operands[0].type) if name == "tt.addptr" else 1
                bdiv = tuple(min(v * scale, MAX_DIV) for v in b.divisibility)
                contig = tuple(max(gcd(a.contiguity[i], b.constancy[i]),
                                   gcd(a.constancy[i], b.contiguity[i]) if name != "arith.subi" else 1)
                               for i in range(rank))
                return AxisInfo(contig, tuple(gcd(x, y) for x, y in zip(a.divisibility, bdiv)),
                                tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)))
            if name == "arith.muli":
                # The product has no runs, so each element counts: [0, 1, 2, ...] * 3 is 3, 6, 9.
                div = tuple(min(x * y, MAX_DIV) for x, y in zip(_element_divisibility(a), _element_divisibility(b)))
                return AxisInfo((1,) * rank, div, tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)))
            if name in ("arith.remsi", "arith.remui") and all(b.constancy[i] == shape[i] for i in range(rank)):
                # x % n with n the same everywhere: runs of x stay contiguous within multiples of n;
                # x's runs start at multiples of its divisibility, so runs of gcd(run, div x, div n)
                # never cross one ((1 + arange(8)) % 4 is 1, 2, 3, 0, ...: no runs).
                return AxisInfo(tuple(gcd(a.contiguity[i], gcd(a.divisibility[i], b.divisibility[i]))
                                      for i in range(rank)),
                                tuple(gcd(a.divisibility[i], b.divisibility[i]) for i in range(rank)),
                                a.constancy)
            if name == "arith.cmpi":
                return AxisInfo((1,) * rank, (1,) * rank, _compare_constancy(op.attrs.get("predicate"), a, b, shape))
            if name in ("arith.andi", "arith.ori"):
                return AxisInfo((1,) * rank, (1,) * rank,
                                tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)))
        if ir.op_info(name).elementwise and ins and all(len(i.constancy) == rank for i in ins):
            k = ins[0].constancy
            for other in ins[1:]:
                k = tuple(gcd(x, y) for x, y in zip(k, other.constancy))
            return AxisInfo((1,) * rank, (1,) * rank, k)
        return AxisInfo.unknown(rank)


def _element_divisibility(info: AxisInfo) -> Tuple[int, ...]:
    """Per dim, what divides every element (not only each run's first): a contiguous dim's
    divisibility holds at its runs' starts alone, so there it is 1."""
    return tuple(1 if c > 1 else d for c, d in zip(info.contiguity, info.divisibility))


# `x < c` and `x >= c` change value only where x crosses c: when x runs contiguously from an aligned
# start and c is a multiple of the run's alignment, a run compares alike. `x <= c`, `x > c`, `x == c` and
# `x != c` change value next to c (c + 1, or c alone), inside a run. The predicates below are those
# with the contiguous operand on the left ("x < c") or on the right ("c > x").
_RUN_PREDICATES_LHS = frozenset(("slt", "ult", "sge", "uge"))
_RUN_PREDICATES_RHS = frozenset(("sgt", "ugt", "sle", "ule"))


def _compare_constancy(predicate, a: AxisInfo, b: AxisInfo, shape) -> Tuple[int, ...]:
    """Constancy of `a <predicate> b` per dim: runs where both sides are constant compare alike; a
    contiguous side against a constant one compares alike over aligned groups of
    gcd(contiguity, divisibilities) for the predicates that change value only at the constant."""
    k = []
    for i in range(len(shape)):
        if a.constancy[i] > 1 and b.constancy[i] > 1:
            k.append(gcd(a.constancy[i], b.constancy[i]))
        elif predicate in _RUN_PREDICATES_LHS and a.contiguity[i] > 1 and b.constancy[i] > 1:
            k.append(gcd(a.contiguity[i], gcd(a.divisibility[i], b.divisibility[i])))
        elif predicate in _RUN_PREDICATES_RHS and b.contiguity[i] > 1 and a.constancy[i] > 1:
            k.append(gcd(b.contiguity[i], gcd(b.divisibility[i], a.divisibility[i])))
        else:
            k.append(1)
    return tuple(max(1, min(v, shape[i])) for i, v in enumerate(k))


def _meet(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds for both a and b."""
    if len(a.contiguity) != len(b.contiguity):
        return AxisInfo.unknown(len(a.contiguity))
    g = lambda x, y: tuple(gcd(p, q) for p, q in zip(x, y))
    return AxisInfo(g(a.contiguity, b.contiguity), g(a.divisibility, b.divisibility), g(a.constancy, b.constancy))


def vector_width(analysis: AxisAnalysis, ptr: ir.Value, dim: int, mask: ir.Value = None) -> int:
    """Elements of `ptr` (a tensor of pointers) one thread may access with one instruction along `dim`."""
    if not isinstance(ptr.type, ir.TensorType):
        return 1
    info = analysis.info(ptr)
    elem = _elem_bytes(ptr.type)
    vec = min(info.contiguity[dim], max(1, info.divisibility[dim] // elem), max(1, 16 // elem))
    if mask is not None and isinstance(mask.type, ir.TensorType):
        vec = min(vec, analysis.info(mask).constancy[dim])
    return max(1, 1 << (max(vec, 1).bit_length() - 1))


def access_order(analysis: AxisAnalysis, ptr: ir.Value) -> Tuple[int, ...]:
    """Dims sorted by contiguity, most contiguous first (ties: the last dim first, row-major)."""
    shape = ir.shape_of(ptr.type)
    info = analysis.info(ptr)
    return tuple(sorted(range(len(shape)), key=lambda d: (-info.contiguity[d], -d)))
