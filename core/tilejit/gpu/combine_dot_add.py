"""`acc += tl.dot(a, b)` as `acc = tl.dot(a, b, acc)` on the GPU (Triton's combine patterns
`dot(a, b, 0) + d -> dot(a, b, d)`, run in its `make_ttir` for NVIDIA and AMD alike).

The form with the add is common in real kernels (Liger's neighborhood attention, many tutorials).
Left as written, the dot starts from zeros and its result is added to the accumulator afterwards:
the matrix unit cannot accumulate in place, a loop's wgmma has to be waited for inside the iteration
that issued it (its result is read by the add), and the add costs one instruction an element.

As Triton, the rewrite applies when the dot's accumulator is a zero constant, its result has no
other use, and (for floats) it has no `max_num_imprecise_acc` limit of its own. The sum is then
rounded as the matrix unit accumulates, which is Triton's GPU result; the interpreter computes the
program as written (as Triton's interpreter does), so the two may differ in the last bits of fp32.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..passes.constants import constant_of

_ADDS = {"arith.addf": True, "arith.addi": False}   # op -> whether it is a float add


def _zero(value: ir.Value) -> bool:
    c = constant_of(value)
    return c is not None and c.is_splat and c.splat == 0   # +0.0 and -0.0 alike, as Triton's isZero


def _combinable_dot(value: ir.Value, is_float: bool):
    """The `tt.dot` defining `value` when the add may absorb it, else None."""
    dot = getattr(value, "op", None)
    if dot is None or dot.name != "tt.dot" or len(value.uses) != 1 or not _zero(dot.operands[2]):
        return None
    if is_float and int(dot.attrs.get("maxNumImpreciseAcc", 0) or 0) != 0:
        return None
    return dot


def combine_dot_add(add: ir.Operation) -> bool:
    """Rewrite `add` (`dot(a, b, 0) + d` or `d + dot(a, b, 0)`) into `dot(a, b, d)`; True if done."""
    is_float = _ADDS[add.name]
    for k in (0, 1):
        dot = _combinable_dot(add.operands[k], is_float)
        other = add.operands[1 - k]
        if dot is None or other.type != dot.results[0].type or dot.parent is not add.parent:
            continue
        # The dot moves to the add's place: its accumulator `other` is defined by then, and its
        # operands were defined before the dot, which comes before the add in the same block.
        block = add.parent
        block.ops.remove(dot)
        block.insert(block.ops.index(add), dot)
        dot.set_operand(2, other)
        add.results[0].replace_all_uses_with(dot.results[0])
        add.erase()
        return True
    return False


@dataclass(frozen=True)
class CombineDotAdd:
    """The pass: every `dot(a, b, 0) + d` (either order, float or integer) into `dot(a, b, d)`."""
    name: str = "triton-combine-dot-add"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            for op in [o for o in func.walk() if o.name in _ADDS]:
                combine_dot_add(op)
