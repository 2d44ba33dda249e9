"""`unroll`: unroll `scf.for` loops with constant bounds.

- `tt.loop_unroll_factor = N`: the body is repeated N times per iteration of a loop whose step is N
  times larger; the iterations left over (trip count mod N) run in a remainder loop after it. When the
  trip count is at most N the loop is unrolled fully.
- `tt.static = true` (a `tl.static_range`): unrolled fully, each copy seeing its own constant
  induction variable; its bounds must be constants.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

from ..errors import CompilationError
from ..ir import Block, Module, Operation, Region, Value
from .canonicalize import constant_trip_count
from .constants import constant_of
from .rewrite import clone_op, inline_block_before

UNROLL_FACTOR_ATTR = "tt.loop_unroll_factor"
STATIC_ATTR = "tt.static"


def _loops_innermost_first(op: Operation) -> List[Operation]:
    """Every `scf.for` nested in `op`, inner loops before the loops that contain them."""
    found: List[Operation] = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                found.extend(_loops_innermost_first(inner))
    if op.name == "scf.for":
        found.append(op)
    return found


def _constant(anchor: Operation, value: int, like: Value) -> Value:
    c = Operation("arith.constant", (), (like.type,), {"value": value}, loc=anchor.loc)
    anchor.parent.insert(anchor.parent.ops.index(anchor), c)
    return c.results[0]


def _emit_iterations(loop: Operation, anchor: Operation, ivs: Sequence[Value], carried: List[Value]) -> List[Value]:
    """Copy the loop body before `anchor` once per induction value in `ivs`; return the carried values."""
    body = loop.regions[0].blocks[0]
    for iv in ivs:
        mapping = {body.args[0]: iv}
        mapping.update(zip(body.args[1:], carried))
        carried = inline_block_before(body, anchor, mapping)
    return carried


def unroll_fully(loop: Operation, trip_count: int) -> None:
    lb, _, step = loop.operands[:3]
    lb_value, step_value = int(constant_of(lb).splat), int(constant_of(step).splat)
    ivs = [_constant(loop, lb_value + i * step_value, lb) for i in range(trip_count)]
    final = _emit_iterations(loop, loop, ivs, list(loop.operand_group("inits")))
    for result, value in zip(loop.results, final):
        result.replace_all_uses_with(value)
    loop.erase()


def unroll_by(loop: Operation, factor: int, trip_count: int) -> None:
    """Unroll `loop` by `factor` (< trip_count) and put the leftover iterations in a remainder loop."""
    lb, ub, step = loop.operands[:3]
    lb_value, step_value = int(constant_of(lb).splat), int(constant_of(step).splat)
    main_trips = trip_count // factor
    main_ub = _constant(loop, lb_value + main_trips * factor * step_value, lb)
    main_step = _constant(loop, step_value * factor, lb)
    body = loop.regions[0].blocks[0]
    new_body = Block([a.type for a in body.args])
    attrs = {k: v for k, v in loop.attrs.items() if k not in (UNROLL_FACTOR_ATTR, STATIC_ATTR)}
    main = Operation("scf.for", [lb, main_ub, main_step] + list(loop.operand_group("inits")),
                     [r.type for r in loop.results], attrs, [Region([new_body])], loop.loc)
    loop.parent.insert(loop.parent.ops.index(loop), main)
    # Inside the new body: copy k runs at iv + k*step, after a placeholder yield that anchors inserts.
    anchor = new_body.append(Operation("scf.yield", (), (), loc=loop.loc))
    ivs = [new_body.args[0]]
    for k in range(1, factor):
        offset = _constant(anchor, k * step_value, lb)
        add = Operation("arith.addi", [new_body.args[0], offset], [lb.type], loc=loop.loc)
        new_body.insert(new_body.ops.index(anchor), add)
        ivs.append(add.results[0])
    yielded = _emit_iterations(loop, anchor, ivs, list(new_body.args[1:]))
    anchor.set_operands(yielded)
    results = list(main.results)
    if trip_count % factor:
        remainder = clone_op(loop, {})
        remainder.attrs = dict(attrs)
        remainder.set_operands([main_ub, ub, step] + results)
        loop.parent.insert(loop.parent.ops.index(loop), remainder)
        results = list(remainder.results)
    for result, value in zip(loop.results, results):
        result.replace_all_uses_with(value)
    loop.erase()


def unroll_loop(loop: Operation) -> bool:
    """Unroll one loop as its attributes ask; True if it was unrolled."""
    static = bool(loop.attrs.get(STATIC_ATTR, False))
    factor = loop.attrs.get(UNROLL_FACTOR_ATTR)
    if not static and factor is None:
        return False
    if factor is not None and (not isinstance(factor, int) or isinstance(factor, bool) or factor < 1):
        raise CompilationError.at(loop.loc, f"loop_unroll_factor must be a positive integer, got {factor!r}")
    trip_count = constant_trip_count(loop)
    if trip_count is None:
        if static:
            raise CompilationError.at(loop.loc, "a static_range loop needs constant bounds and a positive "
                                                "constant step (tl.constexpr values)")
        return False  # a runtime trip count: the hint is kept for the backend, nothing unrolled here
    if static or factor >= trip_count:
        unroll_fully(loop, trip_count)
    elif factor == 1:
        del loop.attrs[UNROLL_FACTOR_ATTR]
        return False
    else:
        unroll_by(loop, factor, trip_count)
    return True


@dataclass(frozen=True)
class Unroll:
    """Unroll loops marked with `tt.loop_unroll_factor` or `tt.static`."""
    name: str = "unroll"

    def apply(self, module: Module) -> None:
        for func in module.functions:
            for loop in _loops_innermost_first(func):
                unroll_loop(loop)
