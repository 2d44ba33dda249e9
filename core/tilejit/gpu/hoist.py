"""`tritongpu-hoist-conversions`: loop-invariant layout conversions moved out of loops."""
from __future__ import annotations

from .. import ir


def hoist_invariant_conversions(func: ir.Operation) -> None:
    """Move each `ttg.convert_layout` whose operand is defined outside its loop to before the loop
    (repeatedly, out of nested loops), so the conversion runs once instead of every iteration."""
    changed = True
    while changed:
        changed = False
        for op in list(func.walk()):
            if op.name != "ttg.convert_layout" or op.parent is None:
                continue
            loop = op.parent.parent_op
            if loop is None or loop.name not in ("scf.for", "scf.while"):
                continue
            if not _defined_outside(op.operands[0], loop):
                continue
            op.parent.ops.remove(op)
            outer = loop.parent
            outer.insert(outer.ops.index(loop), op)
            changed = True


def _defined_outside(v: ir.Value, loop: ir.Operation) -> bool:
    owner = v.owner
    if isinstance(v, ir.BlockArgument):
        holder = owner.parent_op
        return holder is not loop and not (holder is not None and loop.is_ancestor_of(holder))
    return isinstance(owner, ir.Operation) and not loop.is_ancestor_of(owner)
