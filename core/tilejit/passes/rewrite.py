"""Rewrite patterns, the greedy driver that applies them, and IR cloning helpers.

A pattern names the ops it looks at (`op_names`; None means every op) and rewrites one op through a
`Rewriter`, which keeps the driver's worklist up to date: when an op changes, its users and the
producers of its operands are visited again, until no pattern applies anywhere (a fixpoint).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

from ..errors import CompilationError
from ..ir import Block, Module, Operation, Region, Type, Value, is_removable_if_unused

# A sane bound on rewrites per run: a pair of patterns that undo each other must not hang the
# compiler; hitting it is a compiler bug, reported as such.
MAX_REWRITES = 1_000_000


class RewritePattern:
    """One local rewrite. Subclasses set `op_names` and implement `match_and_rewrite`."""
    op_names: Optional[Sequence[str]] = None

    def match_and_rewrite(self, op: Operation, rewriter: "Rewriter") -> bool:
        """Rewrite `op` (only through `rewriter`) and return True, or return False untouched."""
        raise NotImplementedError


class Rewriter:
    """The only way patterns change the IR, so that the driver learns what to revisit."""

    def __init__(self):
        self._worklist: List[Operation] = []
        self._queued: set = set()
        self._erased: set = set()
        self.rewrites = 0

    # -- worklist ---------------------------------------------------------------------------------
    def push(self, op: Optional[Operation]) -> None:
        if op is not None and op not in self._queued and op not in self._erased and op.name != "tt.func":
            self._queued.add(op)
            self._worklist.append(op)

    def pop(self) -> Optional[Operation]:
        while self._worklist:
            op = self._worklist.pop()
            self._queued.discard(op)
            if op not in self._erased:
                return op
        return None

    def push_users(self, value: Value) -> None:
        for user, _ in value.uses:
            self.push(user)

    def push_producer(self, value: Value) -> None:
        self.push(getattr(value, "op", None))
        # A block argument's owner (a loop) may simplify once the argument is unused.
        block = getattr(value, "block", None)
        if block is not None:
            self.push(block.parent_op)

    def is_erased(self, op: Operation) -> bool:
        return op in self._erased

    # -- mutations --------------------------------------------------------------------------------
    def create_before(self, anchor: Operation, name: str, operands: Sequence[Value] = (),
                      result_types: Sequence[Type] = (), attrs: Optional[Dict[str, Any]] = None,
                      regions: Sequence[Region] = (), loc=None) -> Operation:
        new = Operation(name, operands, result_types, attrs, regions, loc or anchor.loc)
        block = anchor.parent
        block.insert(block.ops.index(anchor), new)
        self.push(new)
        return new

    def constant_before(self, anchor: Operation, value, type: Type, loc=None) -> Value:
        return self.create_before(anchor, "arith.constant", (), (type,), {"value": value}, loc=loc).results[0]

    def replace_op(self, op: Operation, values: Sequence[Value]) -> None:
        """Replace every result of `op` with `values` and erase `op`."""
        if len(values) != len(op.results):
            raise CompilationError.at(op.loc, f"internal error: replacing {op.name} with {len(values)} values")
        for result, value in zip(op.results, values):
            self.push_users(result)
            result.replace_all_uses_with(value)
            self.push_producer(value)
        self.erase_op(op)

    def erase_op(self, op: Operation) -> None:
        for inner in op.walk():
            for v in inner.operands:
                self.push_producer(v)
        parent_op = op.parent_op()
        for inner in list(op.walk()):
            self._erased.add(inner)
        op.erase()
        self.push(parent_op)
        self.rewrites += 1

    def modified(self, op: Operation) -> None:
        """Tell the driver that `op` changed in place (operands, attrs, regions)."""
        self.rewrites += 1
        self.push(op)
        for r in op.results:
            self.push_users(r)
        for v in op.operands:
            self.push_producer(v)

    def set_operand(self, op: Operation, index: int, value: Value) -> None:
        old = op.operands[index]
        op.set_operand(index, value)
        self.push_producer(old)
        self.modified(op)

    def move_ops_before(self, ops: Iterable[Operation], anchor: Operation) -> None:
        """Move `ops` (in order) out of their block to just before `anchor`."""
        block = anchor.parent
        for op in list(ops):
            op.parent.ops.remove(op)
            block.insert(block.ops.index(anchor), op)
            self.push(op)


def apply_patterns_greedily(module: Module, patterns: Sequence[RewritePattern], pass_name: str,
                            remove_dead: bool = True) -> bool:
    """Apply `patterns` everywhere until none applies; True if the module changed.

    With `remove_dead`, ops that `ir.is_removable_if_unused` allows are deleted once unused, as
    MLIR's canonicalizer does, so folded constants do not leave their inputs behind.
    """
    by_name: Dict[str, List[RewritePattern]] = {}
    generic: List[RewritePattern] = []
    for p in patterns:
        if p.op_names is None:
            generic.append(p)
        else:
            for n in p.op_names:
                by_name.setdefault(n, []).append(p)
    rewriter = Rewriter()
    for op in reversed(list(module.walk())):
        rewriter.push(op)
    while True:
        op = rewriter.pop()
        if op is None:
            break
        if rewriter.rewrites > MAX_REWRITES:
            raise CompilationError.at(op.loc, f"internal error: pass '{pass_name}' does not reach a fixpoint")
        if remove_dead and op.results and is_removable_if_unused(op) and not any(r.uses for r in op.results):
            rewriter.erase_op(op)
            continue
        for pattern in by_name.get(op.name, []) + generic:
            if pattern.match_and_rewrite(op, rewriter):
                break
    return rewriter.rewrites > 0


# -- cloning ----------------------------------------------------------------------------------------
def copy_attr(value):
    """A copy of an attribute value deep enough that editing the clone's lists leaves the original."""
    if isinstance(value, list):
        return [copy_attr(v) for v in value]
    if isinstance(value, dict):
        return {k: copy_attr(v) for k, v in value.items()}
    return value


def clone_op(op: Operation, mapping: Dict[Value, Value]) -> Operation:
    """Copy `op` and its regions; operands are looked up in `mapping` (unmapped ones are kept).

    The clone's results and block arguments are added to `mapping`, so cloning a sequence of ops in
    order rewires each clone to the earlier clones. Locations are kept: an inlined or unrolled op
    still points at the user's line.
    """
    operands = [mapping.get(v, v) for v in op.operands]
    regions = []
    for region in op.regions:
        new_region = Region()
        for block in region.blocks:
            new_block = new_region.add_block(Block([a.type for a in block.args]))
            for old_arg, new_arg in zip(block.args, new_block.args):
                mapping[old_arg] = new_arg
            for inner in block.ops:
                new_block.append(clone_op(inner, mapping))
        regions.append(new_region)
    new = Operation(op.name, operands, [r.type for r in op.results], copy_attr(op.attrs), regions, op.loc)
    for old, new_result in zip(op.results, new.results):
        mapping[old] = new_result
    return new


def inline_block_before(block: Block, anchor: Operation, mapping: Dict[Value, Value]) -> List[Value]:
    """Clone `block`'s ops (but its terminator) before `anchor`; return the terminator's operands.

    `mapping` must already map the block's arguments.
    """
    target = anchor.parent
    ops = block.ops
    for op in ops[:-1]:
        target.insert(target.ops.index(anchor), clone_op(op, mapping))
    return [mapping.get(v, v) for v in ops[-1].operands] if ops else []
