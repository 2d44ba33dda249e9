"""`canonicalize`: constant folding, algebraic identities and control-flow simplification.

Every rewrite keeps the program's meaning bit for bit, for every input: float identities are the
IEEE-exact ones only (x + -0.0, x * 1.0), `x * 0` and `x - x` fold for integers only (NaN and inf),
and folds that would hide undefined behaviour (division by zero...) are left to the target.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ..ir import OPS, IntType, Operation, TensorType, Value, element_type, is_removable_if_unused
from .constants import FOLDERS, constant_of, fold_elementwise
from .rewrite import RewritePattern, Rewriter, apply_patterns_greedily, inline_block_before


def _splat_scalar(v: Value):
    """The single element value of `v` when it is a scalar or splat constant, else None."""
    c = constant_of(v)
    return c.splat if c is not None and c.is_splat else None


def _is_constant_value(v: Value, scalar) -> bool:
    c = constant_of(v)
    return c is not None and c.is_value(scalar)


class ConstantFold(RewritePattern):
    """An elementwise op whose operands are all constants becomes one constant."""
    op_names = tuple(FOLDERS)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if len(op.results) != 1:
            return False
        constants = [constant_of(v) for v in op.operands]
        if not constants or any(c is None for c in constants):
            return False
        value = fold_elementwise(op.name, constants, op.result.type, op.attrs)
        if value is None:
            return False
        rewriter.replace_op(op, [rewriter.constant_before(op, value, op.result.type)])
        return True


class ConstantOnTheRight(RewritePattern):
    """Commutative ops keep a constant as their second operand, so the identities and CSE see one form."""
    op_names = tuple(n for n, traits in OPS.items() if traits.commutative)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if len(op.operands) != 2:
            return False
        lhs, rhs = op.operands
        if constant_of(lhs) is None or constant_of(rhs) is not None:
            return False
        op.set_operands([rhs, lhs])
        rewriter.modified(op)
        return True


def _all_ones(v: Value) -> bool:
    c = constant_of(v)
    if c is None or not isinstance(c.elem, IntType):
        return False
    return c.is_value(True if c.elem.width == 1 else -1)


class IntegerIdentities(RewritePattern):
    """x+0, x-0, x*1, x*0, x/1, x-x, x^x, x&x, x|x, x&0, x&-1, x|0, x<<0, min/max(x, x)."""
    op_names = ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.andi",
                "arith.ori", "arith.xori", "arith.shli", "arith.shrsi", "arith.shrui", "arith.maxsi",
                "arith.minsi", "arith.maxui", "arith.minui")

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        x, y = op.operands
        if x.type != op.result.type or y.type != op.result.type:
            return False
        name = op.name
        zero = _is_constant_value(y, 0)
        replacement: Optional[Value] = None
        if zero and name in ("arith.addi", "arith.subi", "arith.ori", "arith.xori", "arith.shli",
                             "arith.shrsi", "arith.shrui"):
            replacement = x
        elif zero and name in ("arith.muli", "arith.andi"):
            replacement = y
        elif _is_constant_value(y, 1) and name in ("arith.muli", "arith.divsi", "arith.divui") and \
                element_type(y.type) != IntType(1):
            replacement = x
        elif name == "arith.andi" and _all_ones(y):
            replacement = x
        elif x is y and name in ("arith.andi", "arith.ori", "arith.maxsi", "arith.minsi", "arith.maxui",
                                 "arith.minui"):
            replacement = x
        elif x is y and name in ("arith.subi", "arith.xori"):
            value = False if element_type(x.type) == IntType(1) else 0
            replacement = rewriter.constant_before(op, value, op.result.type)
        if replacement is None:
            return False
        rewriter.replace_op(op, [replacement])
        return True


class FloatIdentities(RewritePattern):
    """The float identities that hold for every input, signed zeros and NaNs included."""
    op_names = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf")

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if op.name == "arith.negf":
            inner = getattr(op.operands[0], "op", None)
            if inner is not None and inner.name == "arith.negf":
                rewriter.replace_op(op, [inner.operands[0]])
                return True
            return False
        x, y = op.operands
        if x.type != op.result.type:
            return False
        identity = {"arith.addf": -0.0, "arith.subf": 0.0, "arith.mulf": 1.0, "arith.divf": 1.0}[op.name]
        if _is_constant_value(y, identity):
            rewriter.replace_op(op, [x])
            return True
        return False


class SelectSimplify(RewritePattern):
    """select with a constant condition, with equal arms, or `select c, true, false` -> c."""
    op_names = ("arith.select",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        cond, a, b = op.operands
        pick: Optional[Value] = None
        c = _splat_scalar(cond)
        if c is not None:
            pick = a if c else b
        elif a is b:
            pick = a
        elif cond.type == op.result.type and _is_constant_value(a, True) and _is_constant_value(b, False):
            pick = cond
        if pick is None or pick.type != op.result.type:
            return False
        rewriter.replace_op(op, [pick])
        return True


class CompareSameOperands(RewritePattern):
    """`cmpi pred, x, x` is known for every predicate."""
    op_names = ("arith.cmpi",)
    TRUE_PREDICATES = ("eq", "sle", "sge", "ule", "uge")

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if op.operands[0] is not op.operands[1]:
            return False
        value = op.attrs.get("predicate") in self.TRUE_PREDICATES
        rewriter.replace_op(op, [rewriter.constant_before(op, value, op.result.type)])
        return True


class CastChains(RewritePattern):
    """ext(ext x) -> ext x, trunc(ext x) -> x, a cast to the same type -> x."""
    op_names = ("arith.extsi", "arith.extui", "arith.trunci", "arith.bitcast", "tt.bitcast")

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        src = op.operands[0]
        if src.type == op.result.type and op.name in ("arith.bitcast", "tt.bitcast"):
            rewriter.replace_op(op, [src])
            return True
        inner = getattr(src, "op", None)
        if inner is None:
            return False
        if op.name in ("arith.extsi", "arith.extui") and inner.name == op.name:
            new = rewriter.create_before(op, op.name, [inner.operands[0]], [op.result.type], dict(op.attrs))
            rewriter.replace_op(op, new.results)
            return True
        if op.name == "arith.trunci" and inner.name in ("arith.extsi", "arith.extui") and \
                inner.operands[0].type == op.result.type:
            rewriter.replace_op(op, [inner.operands[0]])
            return True
        return False


class SplatOfConstant(RewritePattern):
    """`tt.splat` of a constant scalar is a constant tensor."""
    op_names = ("tt.splat",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        value = _splat_scalar(op.operands[0])
        if value is None:
            return False
        rewriter.replace_op(op, [rewriter.constant_before(op, value, op.result.type)])
        return True


class ShapeOpOfSplat(RewritePattern):
    """broadcast/expand_dims/reshape/trans of a splat is a splat of the new shape; no-op reshapes vanish."""
    op_names = ("tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans")

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if len(op.operands) != 1 or len(op.results) != 1:
            return False
        src = op.operands[0]
        if src.type == op.result.type and op.name in ("tt.broadcast", "tt.reshape"):
            rewriter.replace_op(op, [src])
            return True
        value = _splat_scalar(src)
        if value is not None and isinstance(src.type, TensorType):
            rewriter.replace_op(op, [rewriter.constant_before(op, value, op.result.type)])
            return True
        inner = getattr(src, "op", None)
        if inner is not None and inner.name == "tt.splat":
            new = rewriter.create_before(op, "tt.splat", [inner.operands[0]], [op.result.type])
            rewriter.replace_op(op, new.results)
            return True
        return False


class AddPtrZero(RewritePattern):
    """`tt.addptr p, 0` -> p."""
    op_names = ("tt.addptr",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        ptr, offset = op.operands
        if ptr.type == op.result.type and _is_constant_value(offset, 0):
            rewriter.replace_op(op, [ptr])
            return True
        return False


class IfWithConstantCondition(RewritePattern):
    """`scf.if true/false`: the taken region's ops replace the if."""
    op_names = ("scf.if",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        cond = _splat_scalar(op.operands[0])
        if cond is None:
            return self._erase_if_empty(op, rewriter)
        region = op.regions[0] if cond else (op.regions[1] if len(op.regions) > 1 else None)
        if region is None or not region.blocks:
            if op.results:
                return False  # malformed: an if with results has an else; let the verifier say so
            rewriter.erase_op(op)
            return True
        block = region.blocks[0]
        yielded = list(block.ops[-1].operands) if block.ops else []
        rewriter.move_ops_before(block.ops[:-1], op)
        rewriter.replace_op(op, yielded)
        return True

    @staticmethod
    def _erase_if_empty(op: Operation, rewriter: Rewriter) -> bool:
        if op.results:
            return False
        if all(len(b.ops) <= 1 for r in op.regions for b in r.blocks):
            rewriter.erase_op(op)
            return True
        return False


def _int_constant(v: Value) -> Optional[int]:
    value = _splat_scalar(v)
    return None if value is None or isinstance(value, float) or isinstance(v.type, TensorType) else int(value)


def constant_trip_count(op: Operation) -> Optional[int]:
    """The number of iterations of an `scf.for` with constant bounds (signed, as scf.for), or None."""
    lb, ub, step = (_int_constant(v) for v in op.operands[:3])
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -(-(ub - lb) // step))


class ForLoopSimplify(RewritePattern):
    """Loops that never run become their inits, loops that run once their body (as MLIR's
    SimplifyTrivialLoops, which Triton runs: fla's `for i_v in range(tl.cdiv(V, BV))` with V == BV
    must not become a pipelined loop whose ring buffers take the shared memory of two iterations);
    loop-carried values nobody needs are dropped."""
    op_names = ("scf.for",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        trips = constant_trip_count(op)
        if trips == 0:
            rewriter.replace_op(op, list(op.operand_group("inits")))
            return True
        if trips == 1:
            body = op.regions[0].blocks[0]
            mapping = dict(zip(body.args, [op.operands[0]] + list(op.operand_group("inits"))))
            block, start = op.parent, op.parent.ops.index(op)
            final = inline_block_before(body, op, mapping)
            for new in block.ops[start:block.ops.index(op)]:
                rewriter.push(new)
            rewriter.replace_op(op, final)
            return True
        body = op.regions[0].blocks[0]
        yield_op = body.ops[-1]
        for k in range(len(op.results)):
            arg = body.args[1 + k]
            if yield_op.operands[k] is arg and arg.uses:
                # Passed through unchanged: the value is the init on every iteration.
                init = op.operand_group("inits")[k]
                arg.replace_all_uses_with(init)
                op.results[k].replace_all_uses_with(init)
                rewriter.modified(op)
                return True
            if not op.results[k].uses:
                dead_slice = self._feeds_only_itself(arg, yield_op, k)
                if dead_slice is not None:
                    self._drop_iter_arg(op, k, dead_slice, rewriter)
                    return True
        if not op.results and len(body.ops) == 1:
            rewriter.erase_op(op)  # scf.for always terminates, so an empty body means no effect
            return True
        return False

    @staticmethod
    def _feeds_only_itself(arg: Value, yield_op: Operation, k: int) -> Optional[List[Operation]]:
        """The body ops computing only the next value of iter arg `k` from itself, or None.

        With the loop's result unused, such a slice (e.g. `acc2 = acc * i` yielded back as `acc`)
        is dead: nothing outside the cycle sees it.
        """
        body = yield_op.parent
        slice_ops: List[Operation] = []
        pending = [arg]
        while pending:
            value = pending.pop()
            for user, index in value.uses:
                if user is yield_op:
                    if index != k:
                        return None
                    continue
                if user in slice_ops:
                    continue
                if user.parent is not body or user.regions or not is_removable_if_unused(user):
                    return None
                slice_ops.append(user)
                pending.extend(user.results)
        return sorted(slice_ops, key=body.ops.index)

    @staticmethod
    def _drop_iter_arg(op: Operation, k: int, dead_slice: List[Operation], rewriter: Rewriter) -> None:
        body = op.regions[0].blocks[0]
        yield_op = body.ops[-1]
        dropped_yield = yield_op.operands[k]
        yield_op.set_operands([v for i, v in enumerate(yield_op.operands) if i != k])
        for dead in reversed(dead_slice):
            rewriter.erase_op(dead)
        body.erase_arg(1 + k)
        op.set_operands([v for i, v in enumerate(op.operands) if i != op.operand_index("inits") + k])
        del op.results[k]
        for i, r in enumerate(op.results):
            r.index = i
        rewriter.push_producer(dropped_yield)
        rewriter.modified(op)


def canonicalization_patterns() -> List[RewritePattern]:
    return [ConstantFold(), ConstantOnTheRight(), IntegerIdentities(), FloatIdentities(),
            SelectSimplify(), CompareSameOperands(), CastChains(), SplatOfConstant(), ShapeOpOfSplat(),
            AddPtrZero(), IfWithConstantCondition(), ForLoopSimplify()]


@dataclass(frozen=True)
class Canonicalize:
    """Fold constants, apply identities, simplify control flow, drop what became unused."""
    name: str = "canonicalize"

    def apply(self, module) -> None:
        apply_patterns_greedily(module, canonicalization_patterns(), self.name)
