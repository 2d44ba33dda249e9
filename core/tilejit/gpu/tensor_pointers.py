"""`tritongpu-rewrite-tensor-pointers`: block pointers and tensor descriptors become tensors of
pointers with masks, before layouts are assigned (as Triton's RewriteTensorPointer pass).

A block pointer (`tt.make_block_ptr`, moved by `tt.advance`) and a tensor descriptor
(`tt.make_tensor_descriptor`) are, at run time, a handful of scalars: the base pointer, the shape
and strides of the whole tensor (i64), and for block pointers the block's offsets (i32). This pass
tracks those scalars for every such value, and rewrites each access on them into the plain
`tt.load`/`tt.store` the rest of the GPU lowering already handles:

    ptrs = base + sum_d (offset_d + arange(block_d)) * stride_d        (i64 index math)
    mask = AND over the checked dims of 0 <= offset_d + arange(block_d) < shape_d

A block pointer carried by `scf.for` is expanded into its scalars (one iter arg each), so a loop that
`tt.advance`s a pointer costs one integer add per dim and iteration. Descriptors check every dim
and read zeros outside the tensor (TMA semantics); block pointers check the dims the user names in
`boundary_check` and pad with zero or NaN.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .. import ir
from ..errors import CompilationError

I32, I64, I1 = ir.IntType(32), ir.IntType(64), ir.IntType(1)
NAME = "tritongpu-rewrite-tensor-pointers"


def is_tensor_pointer(t) -> bool:
    return ir.is_block_ptr(t) or isinstance(t, ir.TensorDescType)


@dataclass
class PointerFields:
    """The run-time scalars of one block pointer or tensor descriptor."""
    block: ir.TensorType           # the block's shape and element type
    base: ir.Value
    shapes: List[ir.Value]         # i64 each
    strides: List[ir.Value]        # i64 each
    offsets: List[ir.Value] = field(default_factory=list)   # i32 each; empty for descriptors
    padding: str = "zero"          # a descriptor's loads outside the tensor: "zero" or "nan"

    def flat(self) -> List[ir.Value]:
        return [self.base, *self.shapes, *self.strides, *self.offsets]

    def rebuilt_from(self, values: List[ir.Value]) -> "PointerFields":
        n = len(self.shapes)
        return PointerFields(self.block, values[0], list(values[1:1 + n]), list(values[1 + n:1 + 2 * n]),
                             list(values[1 + 2 * n:]), self.padding)


def _constant_value(v: ir.Value):
    owner = v.owner
    if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
        return owner.attrs.get("value")
    return None


class TensorPointerRewriter:
    def __init__(self, func: ir.Operation):
        self.func = func
        self.fields: Dict[int, PointerFields] = {}
        self.dead: List[ir.Operation] = []

    def get(self, v: ir.Value, op: ir.Operation) -> PointerFields:
        got = self.fields.get(id(v))
        if got is None:
            raise CompilationError.at(op.loc, f"{op.name}: cannot trace this block pointer or tensor descriptor "
                                              "back to where it was made (only scf.for may carry one)")
        return got

    # --- walking ---------------------------------------------------------------------------------
    def run(self) -> None:
        self.rewrite_block(self.func.regions[0].blocks[0])
        for op in reversed(self.dead):
            op.erase()

    def rewrite_block(self, block: ir.Block) -> None:
        for op in list(block.ops):
            handler = self.HANDLERS.get(op.name)
            if handler is not None and (op.name not in ("tt.load", "tt.store") or ir.is_block_ptr(op.operands[0].type)):
                getattr(self, handler)(op)
                continue
            if op.name == "scf.for" and any(is_tensor_pointer(v.type) for v in op.operand_group("inits")):
                op = self.expand_for(op)
            elif any(is_tensor_pointer(r.type) for r in op.results) or (
                    op.name in ("scf.yield", "scf.condition", "tt.call", "tt.return")
                    and any(is_tensor_pointer(v.type) for v in op.operands)):
                if op.name != "scf.yield" or op.parent.parent_op is None or op.parent.parent_op.name != "scf.for":
                    raise CompilationError.at(op.loc, f"{op.name} cannot carry a block pointer or tensor descriptor "
                                                      "on the GPU (only scf.for loops can)")
                self.expand_yield(op)
                continue
            for region in op.regions:
                for inner in region.blocks:
                    self.rewrite_block(inner)

    # --- makers ----------------------------------------------------------------------------------
    def make_block_ptr(self, op):
        rank = op.result.type.pointee.rank
        vals = op.operands
        self.fields[id(op.result)] = PointerFields(op.result.type.pointee, vals[0], list(vals[1:1 + rank]),
                                                   list(vals[1 + rank:1 + 2 * rank]), list(vals[1 + 2 * rank:]))
        self.dead.append(op)

    def make_descriptor(self, op):
        block = op.result.type.block
        rank = block.rank
        b = ir.Builder()
        b.loc = op.loc
        b.set_insertion_point_before(op)
        shapes = [v if v.type == I64 else b.create1("arith.extsi", [v], I64) for v in op.operands[1:1 + rank]]
        strides = [v if v.type == I64 else b.create1("arith.extsi", [v], I64) for v in op.operands[1 + rank:]]
        self.fields[id(op.result)] = PointerFields(block, op.operands[0], shapes, strides,
                                                   padding=op.attrs.get("padding") or "zero")
        self.dead.append(op)

    def advance(self, op):
        f = self.get(op.operands[0], op)
        b = ir.Builder()
        b.loc = op.loc
        b.set_insertion_point_before(op)
        offsets = [old if _constant_value(delta) == 0 else b.create1("arith.addi", [old, delta], I32)
                   for old, delta in zip(f.offsets, op.operands[1:])]
        self.fields[id(op.result)] = PointerFields(f.block, f.base, f.shapes, f.strides, offsets)
        self.dead.append(op)

    # --- accesses --------------------------------------------------------------------------------
    def _addresses(self, b: ir.Builder, f: PointerFields, offsets, checked):
        """(tensor of pointers, mask or None) for the block at `offsets`."""
        shape = f.block.shape
        rank = len(shape)
        ptr_t = ir.TensorType(shape, f.base.type)
        ptrs = b.create1("tt.splat", [f.base], ptr_t)
        mask = None
        for d in range(rank):
            line = ir.TensorType((shape[d],), I32)
            idx = b.create1("tt.make_range", [], line, {"start": 0, "end": shape[d]})
            if _constant_value(offsets[d]) != 0:
                idx = b.create1("arith.addi", [idx, b.create1("tt.splat", [offsets[d]], line)], line)
            idx64 = b.create1("arith.extsi", [idx], ir.TensorType((shape[d],), I64))
            step = idx64
            if _constant_value(f.strides[d]) != 1:
                stride = b.create1("tt.splat", [f.strides[d]], idx64.type)
                step = b.create1("arith.muli", [idx64, stride], idx64.type)
            ptrs = b.create1("tt.addptr", [ptrs, self._spread(b, step, d, shape)], ptr_t)
            if d in checked:
                zero = b.constant(0, idx64.type)
                limit = b.create1("tt.splat", [f.shapes[d]], idx64.type)
                cond_t = ir.TensorType((shape[d],), I1)
                ok = b.create1("arith.andi", [b.create1("arith.cmpi", [idx64, zero], cond_t, {"predicate": "sge"}),
                                              b.create1("arith.cmpi", [idx64, limit], cond_t, {"predicate": "slt"})],
                               cond_t)
                ok = self._spread(b, ok, d, shape)
                mask = ok if mask is None else b.create1("arith.andi", [mask, ok], ok.type)
        return ptrs, mask

    @staticmethod
    def _spread(b, line, dim, shape):
        """A 1-D tensor along `dim`, expanded and broadcast to `shape`."""
        cur = line
        elem = ir.element_type(line.type)
        cur_shape = [shape[dim]]
        for _ in range(dim):
            cur_shape.insert(0, 1)
            cur = b.create1("tt.expand_dims", [cur], ir.TensorType(tuple(cur_shape), elem), {"axis": 0})
        while len(cur_shape) < len(shape):
            cur_shape.append(1)
            cur = b.create1("tt.expand_dims", [cur], ir.TensorType(tuple(cur_shape), elem),
                            {"axis": len(cur_shape) - 1})
        if tuple(cur_shape) != tuple(shape):
            cur = b.create1("tt.broadcast", [cur], ir.TensorType(tuple(shape), elem))
        return cur

    def _padding(self, b, op, block: ir.TensorType, padding: str):
        elem = block.element
        if padding == "nan":
            if not isinstance(elem, ir.FloatType):
                raise CompilationError.at(op.loc, f"padding_option='nan' needs float elements, not {elem}")
            return b.constant(float("nan"), ir.TensorType(block.shape, elem))
        return b.constant(0.0 if isinstance(elem, ir.FloatType) else 0, ir.TensorType(block.shape, elem))

    def _rewrite_load(self, op, f: PointerFields, offsets, checked, padding):
        b = ir.Builder()
        b.loc = op.loc
        b.set_insertion_point_before(op)
        ptrs, mask = self._addresses(b, f, offsets, checked)
        operands = [ptrs] if mask is None else [ptrs, mask, self._padding(b, op, f.block, padding)]
        attrs = {k: op.attrs[k] for k in ("cache", "evict", "is_volatile") if k in op.attrs}
        new = b.create1("tt.load", operands, op.result.type, attrs)
        op.result.replace_all_uses_with(new)
        self.dead.append(op)

    def _rewrite_store(self, op, f: PointerFields, value, offsets, checked):
        b = ir.Builder()
        b.loc = op.loc
        b.set_insertion_point_before(op)
        ptrs, mask = self._addresses(b, f, offsets, checked)
        attrs = {k: op.attrs[k] for k in ("cache", "evict") if k in op.attrs}
        b.create("tt.store", [ptrs, value] + ([mask] if mask is not None else []), (), attrs)
        self.dead.append(op)

    def load(self, op):
        f = self.get(op.operands[0], op)
        self._rewrite_load(op, f, f.offsets, set(op.attrs.get("boundary_check") or []), op.attrs.get("padding") or "zero")

    def store(self, op):
        f = self.get(op.operands[0], op)
        self._rewrite_store(op, f, op.operands[1], f.offsets, set(op.attrs.get("boundary_check") or []))

    def descriptor_load(self, op):
        f = self.get(op.operands[0], op)
        self._rewrite_load(op, f, list(op.operands[1:]), set(range(f.block.rank)), f.padding)

    def descriptor_store(self, op):
        f = self.get(op.operands[0], op)
        self._rewrite_store(op, f, op.operands[1], list(op.operands[2:]), set(range(f.block.rank)))

    # --- loops -----------------------------------------------------------------------------------
    def expand_for(self, op: ir.Operation) -> ir.Operation:
        """A new scf.for whose block-pointer iter args are replaced by their scalars."""
        old_body = op.regions[0].blocks[0]
        inits = list(op.operands[:3])
        groups: List[Optional[PointerFields]] = []
        for init in op.operand_group("inits"):
            if is_tensor_pointer(init.type):
                f = self.get(init, op)
                groups.append(f)
                inits.extend(f.flat())
            else:
                groups.append(None)
                inits.append(init)
        new_body = ir.Block([old_body.args[0].type] + [v.type for v in inits[3:]])
        new_op = ir.Operation("scf.for", inits, [v.type for v in inits[3:]], dict(op.attrs), loc=op.loc)
        old_body.args[0].replace_all_uses_with(new_body.args[0])
        pos = 1
        result_pos = 0
        for k, f in enumerate(groups):
            old_arg, old_res = old_body.args[1 + k], op.results[k]
            if f is None:
                old_arg.replace_all_uses_with(new_body.args[pos])
                old_res.replace_all_uses_with(new_op.results[result_pos])
                pos, result_pos = pos + 1, result_pos + 1
                continue
            n = len(f.flat())
            self.fields[id(old_arg)] = f.rebuilt_from(new_body.args[pos:pos + n])
            self.fields[id(old_res)] = f.rebuilt_from(new_op.results[result_pos:result_pos + n])
            pos, result_pos = pos + n, result_pos + n
        for inner in list(old_body.ops):
            old_body.ops.remove(inner)
            new_body.append(inner)
        new_op.add_region(ir.Region([new_body]))
        op.parent.insert(op.parent.ops.index(op), new_op)
        self.dead.append(op)
        return new_op

    def expand_yield(self, op: ir.Operation) -> None:
        values = []
        for v in op.operands:
            values.extend(self.get(v, op).flat() if is_tensor_pointer(v.type) else [v])
        op.set_operands(values)

    HANDLERS = {"tt.make_block_ptr": "make_block_ptr", "tt.make_tensor_descriptor": "make_descriptor",
                "tt.advance": "advance", "tt.load": "load", "tt.store": "store",
                "tt.descriptor_load": "descriptor_load", "tt.descriptor_store": "descriptor_store"}


def rewrite_tensor_pointers(module: ir.Module) -> ir.Module:
    for func in module.functions:
        if any(is_tensor_pointer(v.type) for op in func.walk() for v in list(op.operands) + list(op.results)):
            TensorPointerRewriter(func).run()
    return module
