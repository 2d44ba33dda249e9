"""`tritongpu-transpose-loads`: `tl.trans(tl.load(ptrs, mask, other))` feeding a dot becomes
`tl.load(tl.trans(ptrs), tl.trans(mask), other')`, before layouts are assigned.

Attention written the common way loads K as [BLOCK_N, HEAD_DIM] (rows along the sequence) and
multiplies by `tl.trans(k)`. A load is elementwise, so transposing its pointers (and mask, and
`other`) instead of its result gives the same tensor; the load then feeds the dot directly, which is
what lets the matrix-unit selection (wgmma wants B loaded in the loop) and the software pipeline
(cp.async straight into the dot's shared tile) take it, as Triton does with its shared-memory
`memdesc_trans`. The transpose moves onto the index arithmetic, where the layout assignment makes it
free: a `tt.trans` operand is born in the transposed layout of its result, so the lowering only
renames registers (`lower_trans`).
"""
from __future__ import annotations

from .. import ir

NAME = "tritongpu-transpose-loads"


def _feeds_dot(v: ir.Value) -> bool:
    return bool(v.uses) and all(user.name == "tt.dot" and idx in (0, 1) for user, idx in v.uses)


def _splat_constant(v: ir.Value):
    """The scalar of a splat `arith.constant` tensor (None for anything else)."""
    op = v.owner
    if not isinstance(op, ir.Operation) or op.name != "arith.constant":
        return None
    value = op.attrs.get("value")
    return None if isinstance(value, ir.DenseAttr) else value


def _transposed(block: ir.Block, before: ir.Operation, v: ir.Value, order, loc) -> ir.Value:
    t = v.type
    shape = [t.shape[o] for o in order]
    new_t = ir.TensorType(tuple(shape), t.element, None)
    scalar = _splat_constant(v)
    if scalar is not None:   # `other=0.0`: the same constant in the new shape
        op = ir.Operation("arith.constant", [], [new_t], {"value": scalar}, loc=v.owner.loc)
    else:
        op = ir.Operation("tt.trans", [v], [new_t], {"order": list(order)}, loc=loc)
    block.insert(block.ops.index(before), op)
    return op.result


def transpose_loads(func: ir.Operation) -> int:
    """Rewrite every load whose only user is a `tt.trans` that feeds dots; returns how many."""
    done = 0
    for trans in [op for op in func.walk() if op.name == "tt.trans"]:
        load = trans.operands[0].owner
        if (not isinstance(load, ir.Operation) or load.name != "tt.load" or len(load.results[0].uses) != 1
                or load.parent is not trans.parent or not _feeds_dot(trans.results[0])):
            continue
        ptr = load.operands[0]
        if not isinstance(ptr.type, ir.TensorType) or ir.is_block_ptr(ptr.type) or ptr.type.rank != 2:
            continue
        if any(not isinstance(v.type, ir.TensorType) for v in load.operands):
            continue
        order = list(trans.attrs.get("order", [1, 0]))
        block = load.parent
        operands = [_transposed(block, load, v, order, trans.loc) for v in load.operands]
        new = ir.Operation("tt.load", operands, [trans.results[0].type], dict(load.attrs), loc=load.loc)
        block.insert(block.ops.index(load), new)
        trans.results[0].replace_all_uses_with(new.results[0])
        trans.erase()
        load.erase()
        done += 1
    return done
