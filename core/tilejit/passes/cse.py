"""`cse`: merge identical pure ops, scoped by region nesting.

Two ops are identical when they have the same name, operands, attributes and result types and no
regions. A value defined inside a region is only reused inside that region (it does not dominate
what follows the region's op), and the two arms of an `scf.if` never share values.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Block, Module, Type
from ..ir.ops import info


def freeze_attr(value):
    """A hashable key for an attribute value that keeps apart what prints apart (0.0 and -0.0, 1 and
    True, 1 and 1.0), since the folded constants must stay bit-exact."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", repr(value))
    if isinstance(value, (list, tuple)):
        return ("l",) + tuple(freeze_attr(v) for v in value)
    if isinstance(value, dict):
        return ("d",) + tuple(sorted((k, freeze_attr(v)) for k, v in value.items()))
    if hasattr(value, "values") and type(value).__name__ == "DenseAttr":
        return ("dense",) + tuple(freeze_attr(v) for v in value.values)
    if isinstance(value, (str, Type)) or value is None:
        return ("v", value)
    return ("r", repr(value))


def _key(op):
    operands = list(op.operands)
    if info(op.name).commutative and len(operands) == 2:
        operands.sort(key=id)
    return (op.name, tuple(id(v) for v in operands), freeze_attr(op.attrs),
            tuple(r.type for r in op.results))


class _Scope:
    """The ops visible in a block: its own, then its enclosing blocks' (a ChainMap without the
    exception ChainMap raises inside for every key an inner scope lacks)."""
    __slots__ = ("maps",)

    def __init__(self, maps=None):
        self.maps = maps if maps is not None else [{}]

    def new_child(self) -> "_Scope":
        return _Scope([{}] + self.maps)

    def get(self, key):
        for mapping in self.maps:
            found = mapping.get(key)
            if found is not None:
                return found
        return None

    def __setitem__(self, key, op) -> None:
        self.maps[0][key] = op


def _cse_block(block: Block, scope: _Scope) -> int:
    merged = 0
    for op in list(block.ops):
        for region in op.regions:
            for inner in region.blocks:
                merged += _cse_block(inner, scope.new_child())
        if op.regions or not op.results or not info(op.name).pure:
            continue
        key = _key(op)
        existing = scope.get(key)
        if existing is None:
            scope[key] = op
            continue
        for old, new in zip(op.results, existing.results):
            old.replace_all_uses_with(new)
        op.erase()
        merged += 1
    return merged


@dataclass(frozen=True)
class CSE:
    """Common subexpression elimination of pure, region-free ops."""
    name: str = "cse"

    def apply(self, module: Module) -> None:
        for func in module.functions:
            for region in func.regions:
                for block in region.blocks:
                    _cse_block(block, _Scope())
