"""`tritongpu-rematerialize-indices`: a layout conversion of a value that is cheap to compute again
(index arithmetic on `tt.make_range`, splats and constants, and loads smaller than the CTA) is replaced
by computing it again in the wanted layout, as Triton's RemoveLayoutConversions rematerializes. Attention's `cols = start_n +
offs_n` feeds both the K tile (in the transposed load's layout) and the V tile; converting it went
through shared memory, with two barriers, in every iteration.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from .. import ir
from .layouts import DistributedEncoding, DotOperandEncoding, SliceEncoding

# Ops recomputed rather than converted: no memory access, no side effect, cheap per element.
_LEAF_OPS = ("tt.make_range", "tt.splat", "arith.constant")
_CHEAP_ELEMENTWISE = ("arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
                      "arith.shli", "arith.shrui", "arith.shrsi", "arith.cmpi", "arith.select", "tt.addptr",
                      "arith.extsi", "arith.extui", "arith.trunci", "arith.remsi", "arith.remui",
                      "arith.divsi", "arith.divui")
# More than this many ops to recompute: the conversion is kept. Most of a chain's ops are on vectors
# (make_range, compares, expand_dims); fla's gla state loop shares one mask, about 20 ops from the
# induction variable, between a bf16 and an fp32 tile of different layouts: converting it took two
# barriers every iteration.
MAX_OPS = 24


def _may_write(op: ir.Operation) -> bool:
    """Whether `op` (or an op nested in it) may write memory or wait for other threads' writes."""
    for inner in [op] + list(op.walk()):
        name = inner.name
        if any(word in name for word in ("store", "atomic", "call", "scatter", "barrier", "async")) \
                or (name.startswith("tt.descriptor_") and name not in ("tt.descriptor_load", "tt.descriptor_gather")):
            return True
    return False


def _small_load(op: ir.Operation, conv: ir.Operation, threads: int) -> bool:
    """A load worth reading again in another layout rather than converting, as Triton's
    RemoveLayoutConversions rematerializes one (`isExpensiveLoadOrStore`): fewer elements than the CTA
    has threads (they come from the cache), not volatile, and nothing between it and the conversion
    (in the same block) that may write memory: the second read sees what the first saw."""
    if op.name != "tt.load" or op.attrs.get("is_volatile") or not threads:
        return False
    if op.results[0].type.numel >= threads or op.parent is not conv.parent:
        return False
    ops = conv.parent.ops
    return not any(_may_write(between) for between in ops[ops.index(op) + 1:ops.index(conv)])


def _cloneable(v: ir.Value, budget: list, conv: Optional[ir.Operation] = None, threads: int = 0) -> bool:
    """Whether `v` (a tensor) can be recomputed from scalars by cheap ops (and small loads, see
    `_small_load`, for a conversion `conv` in a CTA of `threads`) within `budget[0]` ops."""
    if not isinstance(v.type, ir.TensorType):
        return True   # scalar operands are reused as they are
    op = v.owner
    if isinstance(v, ir.BlockArgument) or not isinstance(op, ir.Operation) or op.regions:
        return False
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if op.name in _LEAF_OPS:
        return all(not isinstance(o.type, ir.TensorType) for o in op.operands)
    if op.name in ("tt.expand_dims", "tt.broadcast") or op.name in _CHEAP_ELEMENTWISE \
            or (conv is not None and _small_load(op, conv, threads)):
        return all(_cloneable(o, budget, conv, threads) for o in op.operands)
    return False


class _Cloner:
    def __init__(self, block: ir.Block, before: ir.Operation):
        self.block, self.before = block, before
        self.done: Dict[Tuple[int, object], ir.Value] = {}

    def value(self, v: ir.Value, enc) -> ir.Value:
        if not isinstance(v.type, ir.TensorType) or v.type.encoding == enc:
            return v
        key = (id(v), enc)
        if key in self.done:
            return self.done[key]
        op = v.owner
        if op.name == "tt.expand_dims":
            operands = [self.value(op.operands[0], SliceEncoding(op.attrs["axis"], enc))]
        elif op.name in _LEAF_OPS:
            operands = list(op.operands)
        else:   # broadcast and elementwise: every tensor operand in the same layout
            operands = [self.value(o, enc) for o in op.operands]
        clone = ir.Operation(op.name, operands, [ir.TensorType(v.type.shape, v.type.element, enc)],
                             dict(op.attrs), loc=op.loc)
        self.block.insert(self.block.ops.index(self.before), clone)
        self.done[key] = clone.result
        return clone.result


def _target_encoding(conv: ir.Operation) -> Optional[DistributedEncoding]:
    enc = conv.result.type.encoding
    base = enc
    while isinstance(base, SliceEncoding):
        base = base.parent
    # Blocked layouts and matrix-unit result layouts (and their slices: attention's
    # `tl.where(cols < seq_len, qk, -inf)` compares in the accumulator's layout), never a dot operand.
    if isinstance(base, DotOperandEncoding) or not isinstance(base, DistributedEncoding):
        return None
    return enc


def rematerialize_indices(func: ir.Operation) -> int:
    """Replace cheap conversions by recomputation; returns how many were replaced."""
    replaced = 0
    threads = (func.attrs.get("ttg.num_warps") or 0) * (func.attrs.get("ttg.threads_per_warp") or 0)
    for conv in [op for op in func.walk() if op.name == "ttg.convert_layout"]:
        src = conv.operands[0]
        enc = _target_encoding(conv)
        if enc is None:
            continue
        if not _cloneable(src, [MAX_OPS], conv, threads):
            continue
        new = _Cloner(conv.parent, conv).value(src, enc)
        conv.result.replace_all_uses_with(new)
        conv.erase()
        replaced += 1
    # The originals may now be unused; dead ones are left to the lowering's (and LLVM's) DCE.
    return replaced

