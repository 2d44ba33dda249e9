"""Structural checks on a module, run after the frontend and after every pass in debug mode.

A failed check is a compiler bug, not a user error, but it is still reported as a
`CompilationError` at the op's source location so the report says where it came from.
"""
from __future__ import annotations

from typing import Set

from ..errors import CompilationError
from .core import Block, Module, Operation
from .ops import OPS, info
from .types import TensorType, shape_of


def _fail(op: Operation, message: str) -> CompilationError:
    return CompilationError.at(op.loc, f"invalid IR: {op.name}: {message}")


def verify(module: Module) -> None:
    for func in module.functions:
        if len(func.regions) != 1 or not func.regions[0].blocks:
            raise _fail(func, "a function needs one region with an entry block")
        # The function's own checks (its body ends with a terminator) before its contents'.
        _verify_op(func)
        _verify_block(func.regions[0].blocks[0], set(), func)


def _verify_block(block: Block, visible: Set[int], func: Operation) -> None:
    visible = set(visible) | {id(a) for a in block.args}
    for i, op in enumerate(block.ops):
        if op.parent is not block:
            raise _fail(op, "parent pointer does not match the enclosing block")
        for v in op.operands:
            if id(v) not in visible:
                raise _fail(op, "operand is used before it is defined or outside its scope")
        if info(op.name).terminator and i != len(block.ops) - 1:
            raise _fail(op, "terminator is not the last op of its block")
        _verify_op(op)
        for region in op.regions:
            for inner in region.blocks:
                _verify_block(inner, visible, func)
        visible |= {id(r) for r in op.results}


def _verify_op(op: Operation) -> None:
    if op.name not in OPS:
        raise _fail(op, "unknown operation")
    traits = OPS[op.name]
    if traits.operand_slices(len(op.operands)) is None:
        raise _fail(op, f"takes operands ({', '.join(traits.operands)}), got {len(op.operands)}")
    if traits.elementwise and op.name != "arith.select":
        shapes = {shape_of(v.type) for v in list(op.operands) + list(op.results)}
        if len(shapes) > 1:
            raise _fail(op, f"operands and results have different shapes {sorted(shapes)}")
    if op.name == "tt.elementwise_inline_asm":
        shapes = {shape_of(v.type) for v in op.operands} | {shape_of(r.type) for r in op.results}
        if len(shapes) > 1:
            raise _fail(op, f"arguments and results have different shapes {sorted(shapes)}")
    if op.name == "arith.select":
        shapes = {shape_of(v.type) for v in op.operands[1:]} | {shape_of(op.result.type)}
        cond_shape = shape_of(op.operands[0].type)
        if len(shapes) > 1 or (cond_shape and cond_shape not in shapes):
            raise _fail(op, "condition and values have different shapes")
    if op.name == "scf.for":
        body = op.regions[0].blocks[0]
        n_iter = len(op.operands) - 3
        if len(body.args) != n_iter + 1 or len(op.results) != n_iter:
            raise _fail(op, "loop-carried values do not match the body's arguments and the results")
    if op.name == "tt.make_range":
        n = op.attrs["end"] - op.attrs["start"]
        ty = op.result.type
        if not isinstance(ty, TensorType) or ty.shape != (n,):
            raise _fail(op, "result shape does not match start/end")
    if traits.has_regions and op.name not in ("scf.if",):
        for region in op.regions:
            if not region.blocks:
                raise _fail(op, "region has no block")
    for region in op.regions:
        for block in region.blocks:
            term = block.terminator
            if term is None or not info(term.name).terminator:
                raise _fail(op, "a block in its region does not end with a terminator")
