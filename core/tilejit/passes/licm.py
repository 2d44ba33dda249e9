"""`licm`: hoist loop-invariant pure computations out of `scf.for` bodies.

Only ops that cannot trap are hoisted, because the loop may run zero times: integer division and
remainder (undefined for a zero divisor) and loads stay in the loop.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Module, Operation
from ..ir.ops import info
from .unroll import _loops_innermost_first

_MAY_TRAP = ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui")
DISABLE_LICM = "tt.disable_licm"


def _defined_outside(value, loop: Operation) -> bool:
    owner = value.owner
    owner_op = owner if isinstance(owner, Operation) else owner.parent_op
    return owner_op is None or not loop.is_ancestor_of(owner_op)


def hoist_invariants(loop: Operation) -> int:
    body = loop.regions[0].blocks[0]
    hoisted = 0
    for op in list(body.ops):
        if op.regions or not op.results or not info(op.name).pure or op.name in _MAY_TRAP:
            continue
        if all(_defined_outside(v, loop) for v in op.operands):
            body.ops.remove(op)
            loop.parent.insert(loop.parent.ops.index(loop), op)
            hoisted += 1
    return hoisted


@dataclass(frozen=True)
class LICM:
    """Loop-invariant code motion (inner loops first, so invariants can leave a whole nest); a loop
    marked `tt.disable_licm` (`tl.range(..., disable_licm=True)`, as Triton's) keeps its ops."""
    name: str = "licm"

    def apply(self, module: Module) -> None:
        for func in module.functions:
            for loop in _loops_innermost_first(func):
                if not loop.attrs.get(DISABLE_LICM):
                    hoist_invariants(loop)
