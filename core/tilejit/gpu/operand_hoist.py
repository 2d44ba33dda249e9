"""A conversion into a dot-operand layout moved above the elementwise ops that compute the operand
from loaded tiles, as Triton's RemoveLayoutConversions rematerializes such a chain.

fla's gated state update computes its A operand from two tiles in its loop,
`b_k = (b_k * exp2(b_gk_last[:, None] - b_gk)).to(bf16)`, then `tl.dot(b_k, b_v, b_h)`. Computed in
the loads' layout, the product has to be converted into the operand layout through shared memory
(stores, barriers, ldmatrix) every iteration. When the backend reads the loaded tiles from shared
memory anyway (pipelined loads), it can read them straight into the operand layout instead; the
chain then runs in that layout and the conversion is gone. Which loads qualify is the backend's
call (`source_ok`); this module only rewrites.

The chain is the ops between the conversion and its sources, in the conversion's block:
- elementwise ops (arith, math, casts) and `tt.broadcast`, each used only by the chain;
- sources: 2-D loads the backend accepts (used only by the chain), or a layout conversion of one;
- 1-D vectors through `tt.expand_dims` (fla's `b_gk_last[:, None]`): converted to the slice of
  the operand layout, which is cheap (a vector, not a tile);
- splats and constants, made again in the operand layout.
Anything else (a tile from before the loop, a reduction) leaves the conversion where it is.
"""
from __future__ import annotations

from typing import Callable, Dict, List

from .. import ir
from .layouts import DotOperandEncoding, SliceEncoding

MAX_OPS = 32   # a longer chain is left alone


def _single_use_in(v: ir.Value, block: ir.Block) -> bool:
    return len(v.uses) == 1 and v.uses[0][0].parent is block


class _Chain:
    """The ops to recompute (in block order) and how each source is brought into the new layout."""

    def __init__(self, conv: ir.Operation, source_ok: Callable[[ir.Operation, object], bool]):
        self.conv, self.block, self.source_ok = conv, conv.parent, source_ok
        self.enc = conv.results[0].type.encoding
        self.ops: Dict[int, ir.Operation] = {}
        self.sources = 0

    def collect(self, v: ir.Value, enc) -> bool:
        """Whether `v` (wanted in layout `enc`) can be brought into it by the chain's rules."""
        if not isinstance(v.type, ir.TensorType):
            return True
        if v.type.rank == 1:      # a vector on its way to `expand_dims`: converted as it is
            return isinstance(enc, SliceEncoding)
        op = v.owner
        if isinstance(v, ir.BlockArgument) or not isinstance(op, ir.Operation) or op.regions:
            return False
        if op.name in ("tt.splat", "arith.constant"):
            return True
        if op.parent is not self.block or not _single_use_in(v, self.block):
            return False
        if id(op) in self.ops:
            return True
        source = op.operands[0].owner if op.name == "ttg.convert_layout" else op
        if isinstance(source, ir.Operation) and source.name == "tt.load":
            if source.parent is not self.block or not _single_use_in(source.results[0], self.block):
                return False
            if not self.source_ok(source, enc):
                return False
            self.sources += 1
            self.ops[id(op)] = op
            return True
        if len(self.ops) >= MAX_OPS:
            return False
        if op.name == "tt.expand_dims":
            self.ops[id(op)] = op
            return self.collect(op.operands[0], SliceEncoding(op.attrs["axis"], enc))
        if op.name == "ttg.convert_layout":   # the chain takes the new layout instead
            self.ops[id(op)] = op
            return self.collect(op.operands[0], enc)
        if op.name == "tt.broadcast" or (ir.op_info(op.name).elementwise and len(op.results) == 1):
            self.ops[id(op)] = op
            return all(self.collect(o, enc) for o in op.operands)
        return False


class _Rewriter:
    def __init__(self, chain: _Chain):
        self.chain, self.block, self.before = chain, chain.block, chain.conv
        self.done: Dict[tuple, ir.Value] = {}
        self.bypassed: List[ir.Operation] = []   # vector conversions the chain now reads around

    def _insert(self, op: ir.Operation) -> ir.Value:
        self.block.insert(self.block.ops.index(self.before), op)
        return op.results[0]

    def _convert(self, v: ir.Value, enc, loc) -> ir.Value:
        return self._insert(ir.Operation("ttg.convert_layout", [v], [ir.TensorType(v.type.shape, v.type.element, enc)],
                                         loc=loc))

    def value(self, v: ir.Value, enc) -> ir.Value:
        if not isinstance(v.type, ir.TensorType) or v.type.encoding == enc:
            return v
        key = (id(v), enc)
        if key not in self.done:
            self.done[key] = self._make(v, enc)
        return self.done[key]

    def _make(self, v: ir.Value, enc) -> ir.Value:
        op = v.owner
        if isinstance(v, ir.BlockArgument):   # a loop-carried vector
            return self._convert(v, enc, self.before.loc)
        if op.name == "ttg.convert_layout":   # the chain's, a source load's or a vector's: of the original
            self.bypassed.append(op)
            return self.value(op.operands[0], enc)
        if op.name == "tt.load" or id(op) not in self.chain.ops and op.name not in ("tt.splat", "arith.constant"):
            return self._convert(v, enc, op.loc)   # a source load, or a vector from anywhere
        if op.name == "tt.expand_dims":
            operands = [self.value(op.operands[0], SliceEncoding(op.attrs["axis"], enc))]
        elif op.name in ("tt.splat", "arith.constant"):
            operands = list(op.operands)
        else:
            operands = [self.value(o, enc) for o in op.operands]
        clone = ir.Operation(op.name, operands, [ir.TensorType(v.type.shape, v.type.element, enc)],
                             dict(op.attrs), loc=op.loc)
        return self._insert(clone)


def _erase_dead(ops: List[ir.Operation]) -> None:
    """Erase those of `ops` left without users (the original chain; what it read around), until
    none is left to erase: a user goes before what it uses."""
    left = list(ops)
    while True:
        dead = [op for op in left if op.parent is not None and not any(r.uses for r in op.results)]
        if not dead:
            return
        for op in dead:
            op.erase()
        left = [op for op in left if op.parent is not None]


def hoist_operand_conversion(conv: ir.Operation, source_ok: Callable[[ir.Operation, object], bool]) -> bool:
    """Rewrite `convert_layout(chain(sources)) -> dot operand` as `chain(convert_layout(sources))`
    when the chain follows the module's rules and reaches at least one source load; `source_ok(load,
    encoding)` says whether the backend reads that load into that layout without a conversion
    through shared memory. Returns whether it rewrote."""
    enc = conv.results[0].type.encoding
    if not isinstance(enc, DotOperandEncoding):
        return False
    chain = _Chain(conv, source_ok)
    src = conv.operands[0]
    if src.owner is None or not isinstance(src.owner, ir.Operation) or src.owner.name == "tt.load":
        return False
    if not chain.collect(src, enc) or not chain.sources or id(src.owner) not in chain.ops:
        return False
    rewriter = _Rewriter(chain)
    new = rewriter.value(src, enc)
    conv.results[0].replace_all_uses_with(new)
    conv.erase()
    _erase_dead(list({id(op): op for op in list(chain.ops.values()) + rewriter.bypassed}.values()))
    return True


def operand_conversions(block: ir.Block) -> List[ir.Operation]:
    """The conversions into dot-operand layouts in `block`, in order."""
    return [op for op in block.ops if op.name == "ttg.convert_layout"
            and isinstance(op.results[0].type.encoding, DotOperandEncoding)]
