"""`dce`: delete ops whose results nobody uses and that have no effect, and uncalled private functions.

Region ops count as effect-free when everything inside them is: an `scf.for` (always finite) or
`scf.if` whose results are unused and whose bodies only compute values goes away whole. An
`scf.while` may not terminate, so it stays.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Set

from ..ir import Block, Module, Operation, is_removable_if_unused
from ..ir.ops import info

_REMOVABLE_REGION_OPS = ("scf.for", "scf.if")


def has_no_effect(op: Operation) -> bool:
    """Can `op` be deleted when its results are unused (its nested ops included)?"""
    if op.name in _REMOVABLE_REGION_OPS:
        return all(info(inner.name).terminator or has_no_effect(inner) for inner in _nested(op))
    return is_removable_if_unused(op)


def _nested(op: Operation):
    for region in op.regions:
        for block in region.blocks:
            yield from block.ops


def _dce_block(block: Block) -> int:
    removed = 0
    for op in reversed(list(block.ops)):
        for region in op.regions:
            for inner in region.blocks:
                removed += _dce_block(inner)
        if not info(op.name).terminator and not any(r.uses for r in op.results) and has_no_effect(op):
            op.erase()
            removed += 1
    return removed


def called_functions(module: Module) -> Set[str]:
    """Names of the functions some `tt.call` in the module calls."""
    names = set()
    for op in module.walk():
        if op.name == "tt.call":
            names.add(callee_name(op))
    return names


def callee_name(call: Operation) -> str:
    return str(call.attrs.get("callee", "")).lstrip("@")


def remove_uncalled_private_functions(module: Module) -> int:
    """Delete private functions no call reaches (repeatedly: a helper's helpers go too)."""
    removed = 0
    while True:
        called = called_functions(module)
        dead = [f for f in module.functions
                if f.attrs.get("sym_visibility") == "private" and f.attrs.get("sym_name") not in called]
        if not dead:
            return removed
        for f in dead:
            f.erase()
            removed += 1


@dataclass(frozen=True)
class DCE:
    """Dead code elimination."""
    name: str = "dce"

    def apply(self, module: Module) -> None:
        while True:
            removed = 0
            for func in module.functions:
                removed += _dce_block(func.regions[0].blocks[0])
            if not removed:
                break
        remove_uncalled_private_functions(module)
