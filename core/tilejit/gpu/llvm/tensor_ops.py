"""Tensor ops that depend on layouts: creation, memory, data movement, reductions, scans, dots.

A mixin of `FunctionLowering`: `self.b` is the builder, `self.get/set` map IR values to the lists of
LLVM scalars a thread holds, `element_coords(layout)` gives each register's coordinates.
"""
from __future__ import annotations

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from ..axis_info import vector_width
from ..isa import I32, call_intrinsic
from .scalar_ops import from_compute, is_storage_float, llvm_bits, llvm_type, to_compute

I1 = llir.IntType(1)
I8 = llir.IntType(8)


def _row_major_index(b, coords, shape):
    idx = None
    for c, s in zip(coords, shape):
        idx = c if idx is None else b.add(b.mul(idx, llir.Constant(I32, s)), c)
    return idx if idx is not None else llir.Constant(I32, 0)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _byte_size(ty) -> int:
    """Bytes of an LLVM scalar type (integers by width, floats by kind)."""
    if isinstance(ty, llir.IntType):
        return max(1, ty.width // 8)
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(ty)]


def _memory_hints(op) -> dict:
    """The cache modifier, eviction policy and volatility of a `tt.load` / `tt.store`, as the
    target's `global_load` / `global_store` take them."""
    return {"cache": op.attrs.get("cache", "none"), "evict": op.attrs.get("evict", "normal"),
            "volatile": bool(op.attrs.get("is_volatile", False))}


def _has_replicas(layout) -> bool:
    """Whether some lane or warp bit of `layout` maps to no element (threads holding copies)."""
    return any(not any(basis) for basis in list(layout.lanes) + list(layout.warps))


class TensorOps:
    TENSOR_HANDLERS = {
        "arith.constant": "lower_constant", "tt.get_program_id": "lower_program_id",
        "tt.get_num_programs": "lower_num_programs", "tt.make_range": "lower_make_range",
        "tt.splat": "lower_splat", "tt.broadcast": "lower_broadcast", "tt.expand_dims": "lower_expand_dims",
        "ttg.convert_layout": "lower_convert", "tt.reshape": "lower_reshape", "tt.trans": "lower_trans",
        "tt.join": "lower_join", "tt.split": "lower_split", "tt.cat": "lower_cat",
        "tt.addptr": "lower_addptr", "tt.load": "lower_load", "tt.store": "lower_store",
        "tt.atomic_rmw": "lower_atomic_rmw", "tt.atomic_cas": "lower_atomic_cas",
        "tt.atomic_load": "lower_atomic_load", "tt.atomic_store": "lower_atomic_store",
        "tt.reduce": "lower_reduce", "tt.scan": "lower_scan", "tt.dot": "lower_dot",
        "tt.assert": "lower_assert", "tt.assume": "lower_nothing", "gpu.barrier": "lower_barrier",
        "tt.histogram": "lower_histogram", "tt.gather": "lower_gather", "tt.print": "lower_print",
        "tt.elementwise_inline_asm": "lower_inline_asm",
    }

    # --- creation ------------------------------------------------------------------------------
    def lower_constant(self, op):
        t = op.result.type
        value = op.attrs["value"]
        layout = self.layout(t)
        if isinstance(value, ir.DenseAttr):
            # Each thread picks its elements by coordinates: a table in the module, indexed at run time.
            elem = llvm_type(t)
            arr_ty = llir.ArrayType(elem, len(value.values))
            table = llir.GlobalVariable(self.module, arr_ty, self.module.get_unique_name("dense"))
            table.global_constant = True
            table.linkage = "internal"
            table.initializer = llir.Constant(arr_ty, [self.const(t, v) for v in value.values])
            table.type = llir.PointerType()   # opaque, so it is indexed by element (see smem_base)
            out = []
            for coords in self.element_coords(layout):
                ptr = self.b.gep(table, [_row_major_index(self.b, coords, t.shape)],
                                 source_etype=elem)
                out.append(self.b.load(ptr, typ=elem))
            self.set(op.result, out)
            return
        self.set(op.result, [self.const(t, value)] * layout.num_registers)

    def layout(self, t):
        from .lowering import layout_of
        return layout_of(t)

    def lower_program_id(self, op):
        self.set(op.result, [self.isa.program_id(self.b, op.attrs.get("axis", 0))])

    def lower_num_programs(self, op):
        self.set(op.result, [self.isa.num_programs(self.b, op.attrs.get("axis", 0))])

    def lower_make_range(self, op):
        start = op.attrs.get("start", 0)
        out = []
        for coords in self.element_coords(self.layout(op.result.type)):
            out.append(self.b.add(coords[0], llir.Constant(I32, start)) if start else coords[0])
        self.set(op.result, out)

    def lower_splat(self, op):
        self.set(op.result, self.get(op.operands[0]) * self.layout(op.result.type).num_registers)

    def lower_nothing(self, op):
        pass

    def lower_barrier(self, op):
        self.isa.user_barrier(self.b)

    def lower_expand_dims(self, op):
        # A slice of P expanded back is P on a shape with a 1: the registers are the same list.
        src_layout = self.layout(op.operands[0].type)
        dst_layout = self.layout(op.result.type)
        if src_layout.num_registers != dst_layout.num_registers:
            raise CompilationError("internal: expand_dims of a layout that is not a slice of the result's")
        self.set(op.result, self.get(op.operands[0]))

    def lower_broadcast(self, op):
        src_t, dst_t = op.operands[0].type, op.result.type
        if not isinstance(src_t, ir.TensorType):
            return self.lower_splat(op)
        src, dst = self.layout(src_t), self.layout(dst_t)
        keep = [s_in == s_out for s_in, s_out in zip(src_t.shape, dst_t.shape)]
        by_offset = {off: i for i, off in enumerate(src.register_offsets())}
        values = self.get(op.operands[0])
        out = []
        for off in dst.register_offsets():
            key = tuple(o if k else 0 for o, k in zip(off, keep))
            if key not in by_offset:
                return self._remap(op, [op.operands[0]], lambda c: (0, tuple(x if k else 0 for x, k in zip(c, keep))))
            out.append(values[by_offset[key]])
        self.set(op.result, out)

    # --- data movement through shared memory ---------------------------------------------------
    def _remap(self, op, sources, source_of, result=None):
        """Generic data movement: every source element is written to shared memory (row-major per
        source), then each result register reads the element `source_of(result coords)` names:
        (source index, source coords as ints or i32 values)."""
        result = result if result is not None else op.result
        dst_t = result.type
        elem = llvm_type(dst_t)
        store_ty = I8 if elem == I1 else elem
        sizes = [s.type.numel for s in sources]
        offsets = [sum(sizes[:i]) for i in range(len(sources))]
        nbytes = sum(sizes) * max(1, store_ty.width // 8 if isinstance(store_ty, llir.IntType)
                                  else {"half": 2, "float": 4, "double": 8}.get(str(store_ty), 8))
        self.smem_base(nbytes)
        self.isa.barrier(self.b)
        for s, base in zip(sources, offsets):
            layout = self.layout(s.type)
            for value, coords in zip(self.get(s), self.element_coords(layout)):
                idx = self.b.add(_row_major_index(self.b, coords, s.type.shape), llir.Constant(I32, base))
                self.b.store(self.b.zext(value, I8) if elem == I1 else value, self.smem_ptr(store_ty, idx))
        self.isa.barrier(self.b)
        out = []
        for coords in self.element_coords(self.layout(dst_t)):
            which, src_coords = source_of(coords)
            src_coords = [c if isinstance(c, llir.Value) else llir.Constant(I32, c) for c in src_coords]
            idx = self.b.add(_row_major_index(self.b, src_coords, sources[which].type.shape),
                             llir.Constant(I32, offsets[which]))
            v = self.b.load(self.smem_ptr(store_ty, idx), typ=store_ty)
            out.append(self.b.trunc(v, I1) if elem == I1 else v)
        self.isa.barrier(self.b)
        self.set(result, out)

    def lower_convert(self, op):
        values, src = self.registers_of(op.operands[0])
        if self._in_registers(op.result, values, src):
            return
        how = self.dot_operand_plan(src, op.result.type)
        if how is not None:   # into an mma.sync operand: swizzled tile + ldmatrix
            self.set(op.result, self.convert_to_dot_operand(values, src, op.result.type, how))
            return
        self.set(op.result, self.convert_registers(values, src, op.result.type))

    def registers_of(self, v: ir.Value):
        """(registers, layout) of `v` as its conversions read them: a renamed tensor whose every use
        is a conversion (`_relayout`) is read in its operand's registers, laid out by the renaming."""
        pending = self.renamed.get(id(v))
        return pending if pending is not None else (self.get(v), self.layout(v.type))

    def layout_read(self, v: ir.Value):
        """The layout `registers_of(v)` reads `v` in; before `v` is lowered, its type's."""
        pending = self.renamed.get(id(v))
        return pending[1] if pending is not None else self.layout(v.type)

    def _in_registers(self, result, values, layout) -> bool:
        """Set `result` from `values`, laid out by `layout` (a layout of the result's shape), when each
        thread already holds the result's elements: then only the register order may differ."""
        dst = self.layout(result.type)
        if layout == dst:
            self.set(result, values)
            return True
        if layout.lanes != dst.lanes or layout.warps != dst.warps:
            return False
        by_offset = {off: i for i, off in enumerate(layout.register_offsets())}
        if not all(off in by_offset for off in dst.register_offsets()):
            return False
        self.set(result, [values[by_offset[off]] for off in dst.register_offsets()])
        return True

    def _relayout(self, result, values, layout):
        """`result` from `values` laid out by `layout`: a register permutation where each thread holds
        the result's elements already, else a layout conversion (vectorized, padded, in rounds).
        A result only converted further in this block (`tl.dot(tl.trans(p), v)`: the transpose
        of an MMA result into a dot operand) is left to those conversions, which read `values`
        where they stand: one trip through shared memory instead of two."""
        if self._in_registers(result, values, layout):
            return
        uses = result.uses
        block = result.owner.parent
        if uses and all(user.name == "ttg.convert_layout" and user.parent is block for user, _ in uses):
            self.renamed[id(result)] = (values, layout)
            return
        self.set(result, self.convert_registers(values, layout, result.type))

    def lower_reshape(self, op):
        # The operand's elements renamed by their coordinates in the new shape: nothing moves unless
        # the result's layout asks.
        src = self.layout(op.operands[0].type)
        self._relayout(op.result, self.get(op.operands[0]), src.reshaped(op.result.type.shape))

    def lower_trans(self, op):
        # The operand's layout with its dims permuted: each thread keeps its elements, now named by
        # result coordinates. A transpose moves no data until the result's layout asks.
        order = op.attrs.get("order", list(reversed(range(op.result.type.rank))))
        src = self.layout(op.operands[0].type)
        self._relayout(op.result, self.get(op.operands[0]), src.permuted(order))

    def lower_join(self, op):
        # join(a, b): a new minor dim of size 2, a at index 0 and b at index 1. With a and b in one
        # layout, each thread holds both halves of its elements: a new register bit, then the result's
        # layout where it asks.
        a, b_ = op.operands
        if not isinstance(a.type, ir.TensorType):
            self._join_select(op)
            return
        values = [v for pair in zip(self.get(a), self._values_like(b_, a.type)) for v in pair]
        self._relayout(op.result, values, self.layout(a.type).joined())

    def _join_select(self, op):
        a, b_ = op.operands
        shape = op.result.type.shape
        sizes = [a.type.numel, b_.type.numel]
        elem = llvm_type(op.result.type)
        store_ty = I8 if elem == I1 else elem
        nbytes = 2 * sizes[0] * 8
        self.smem_base(nbytes)
        self.isa.barrier(self.b)
        for k, s in enumerate((a, b_)):
            for value, coords in zip(self.get(s), self.element_coords(self.layout(s.type))):
                idx = self.b.add(self.b.mul(_row_major_index(self.b, coords, s.type.shape), llir.Constant(I32, 2)),
                                 llir.Constant(I32, k))
                self.b.store(self.b.zext(value, I8) if elem == I1 else value, self.smem_ptr(store_ty, idx))
        self.isa.barrier(self.b)
        out = []
        for coords in self.element_coords(self.layout(op.result.type)):
            idx = _row_major_index(self.b, coords, shape)
            v = self.b.load(self.smem_ptr(store_ty, idx), typ=store_ty)
            out.append(self.b.trunc(v, I1) if elem == I1 else v)
        self.isa.barrier(self.b)
        self.set(op.result, out)

    def lower_split(self, op):
        src = op.operands[0]
        layout = self.layout(src.type)
        halves = layout.split_minor()
        if halves is None:
            # Lanes or warps hold the split dim: one conversion into the results' layout joined (both
            # halves of each result element in one thread, the lowest register bit between them).
            result_layout = self.layout(op.results[0].type)
            values = self.convert_registers(self.get(src), layout, src.type, result_layout.joined())
            for k, r in enumerate(op.results):
                self._relayout(r, values[k::2], result_layout)
            return
        # Each thread holds both halves of its elements: the split dim's register bit picks them.
        bit, half_layout = halves
        values = self.get(src)
        for k, r in enumerate(op.results):
            picked = [v for i, v in enumerate(values) if (i >> bit) & 1 == k]
            self._relayout(r, picked, half_layout)

    def lower_cat(self, op):
        # [a; b] along dim 0, in order. With a and b in one layout each thread holds its elements of
        # both: one more register bit, then the result's layout where it asks.
        a, b_ = op.operands
        self._relayout(op.result, self.get(a) + self._values_like(b_, a.type), self.layout(a.type).stacked())

    def _values_like(self, value, like):
        """`value`'s registers in the layout of the tensor type `like` (of its shape), converted if
        they are not."""
        layout = self.layout(value.type)
        if layout == self.layout(like):
            return self.get(value)
        return self.convert_registers(self.get(value), layout, like)

    # --- memory --------------------------------------------------------------------------------
    def lower_addptr(self, op):
        ptrs, offs = self.get(op.operands[0]), self.get(op.operands[1])
        pointee = ir.element_type(op.operands[0].type).pointee
        ety = llvm_type(pointee)
        n = max(len(ptrs), len(offs))
        self.set(op.result, [self.b.gep(ptrs[i if len(ptrs) > 1 else 0], [offs[i if len(offs) > 1 else 0]],
                                        source_etype=ety) for i in range(n)])

    def _vector_width(self, op, ptr, mask):
        if not isinstance(ptr.type, ir.TensorType):
            return 1
        layout = self.layout(ptr.type)
        if not layout.registers:
            return 1
        dim = next((d for d, v in enumerate(layout.registers[0]) if v), 0)
        vec = min(vector_width(self.analysis, ptr, dim, mask), layout.contiguous_registers(dim))
        elem_bits = llvm_bits(llvm_type(ir.element_type(ptr.type).pointee))
        return max(1, min(vec, 128 // max(elem_bits, 8)))   # a bool is a byte in memory

    def _guarded(self, cond, body, default=None):
        """Run `body()` only when `cond` (i1) holds; returns its value (or `default` when skipped),
        or for a `body` that returns a list, the list (each element `default` when skipped)."""
        if cond is None:
            return body()
        if isinstance(cond, llir.Constant) and isinstance(cond.constant, int):
            # known when lowering (a layout without replicas owns every element): no blocks for
            # LLVM to fold away again
            return body() if cond.constant else default
        fn = self.b.block.function
        then_bb = fn.append_basic_block("guard.then")
        merge = fn.append_basic_block("guard.end")
        before = self.b.block
        self.b.cbranch(cond, then_bb, merge)
        self.b.position_at_end(then_bb)
        value = body()
        then_end = self.b.block
        self.b.branch(merge)
        self.b.position_at_end(merge)
        if value is None:
            return None
        phis = []
        for v in (value if isinstance(value, list) else [value]):
            phi = self.b.phi(v.type)
            phi.add_incoming(v, then_end)
            phi.add_incoming(default, before)
            phis.append(phi)
        return phis if isinstance(value, list) else phis[0]

    def lower_load(self, op, valid=None):
        """`valid` (an i1, or None): a further condition of every element's load, as a false mask
        (a pipelined loop's load of a later iteration, which may lie past the loop's end)."""
        ptr = op.operands[0]
        if ir.is_block_ptr(ptr.type):
            raise CompilationError.at(op.loc, "block pointers must be rewritten before the GPU lowering")
        mask, other = op.operand("mask"), op.operand("other")
        ptrs = self.get(ptr)
        masks = self.get(mask) if mask is not None else None
        elem = llvm_type(op.result.type)
        if not op.result.uses and not op.attrs.get("is_volatile"):
            # Nobody reads it (a small load reloaded in its users' layout leaves the first one
            # unused): emit nothing. A target's loads may be inline PTX with side effects, which
            # LLVM would keep.
            self.set(op.result, [llir.Constant(elem, None)] * len(ptrs))
            return
        others = self.get(other) if other is not None else [llir.Constant(elem, None)] * len(ptrs)
        result_elem = elem
        if elem == I1:   # a bool is a byte in memory (a block pointer's load keeps i1 up to here)
            elem = I8
            others = [self.b.zext(o, I8) for o in others]
        vec = self._vector_width(op, ptr, mask)
        bytes_per = llvm_bits(elem) // 8
        hints = _memory_hints(op)

        def load_where(cond, ptr, ty, align, default):
            # a predicated load where the target has one (as Triton's `@p ld`), else a branch
            if cond is not None and not isinstance(cond, llir.Constant):
                value = self.isa.predicated_global_load(self.b, ptr, ty, align, cond, default, **hints)
                if value is not None:
                    return value
            return self._guarded(cond, lambda: self._load(ptr, ty, align, hints), default)

        out = []
        for g in range(0, len(ptrs), vec):
            cond = masks[g] if masks is not None else None
            if valid is not None:
                cond = valid if cond is None else self.b.and_(valid, cond)
            if vec == 1:
                out.append(load_where(cond, ptrs[g], elem, bytes_per, others[g]))
                continue
            vty = llir.VectorType(elem, vec)
            default = llir.Constant(vty, None)
            for i in range(vec):
                default = self.b.insert_element(default, others[g + i], llir.Constant(I32, i))
            loaded = load_where(cond, ptrs[g], vty, bytes_per * vec, default)
            out.extend(self.b.extract_element(loaded, llir.Constant(I32, i)) for i in range(vec))
        if result_elem == I1:
            out = [self.b.icmp_unsigned("!=", v, llir.Constant(I8, 0)) for v in out]
        self.set(op.result, out)

    def _load(self, ptr, ty, align, hints):
        return self.isa.global_load(self.b, ptr, ty, align, **hints)

    def lower_store(self, op):
        ptr, value, mask = op.operand("ptr"), op.operand("value"), op.operand("mask")
        ptrs, vals = self.get(ptr), self.get(value)
        masks = self.get(mask) if mask is not None else None
        layout = self.layout(ptr.type)
        owner = self.is_owner(layout) if isinstance(ptr.type, ir.TensorType) else \
            self.b.icmp_unsigned("==", self.isa.thread_id_x(self.b), llir.Constant(I32, 0))
        vec = self._vector_width(op, ptr, mask)
        if vals and vals[0].type == I1:   # a bool is a byte in memory
            vals = [self.b.zext(v, I8) for v in vals]
        elem = vals[0].type
        bytes_per = llvm_bits(elem) // 8
        hints = _memory_hints(op)
        hints.pop("volatile")

        def store(value, ptr, align):
            self.isa.global_store(self.b, value, ptr, align, **hints)

        def store_where(cond, value, ptr, align):
            # a predicated store where the target has one (as Triton's `@p st`), else a branch
            if isinstance(cond, llir.Constant) or \
                    not self.isa.predicated_global_store(self.b, value, ptr, align, cond, **hints):
                self._guarded(cond, lambda: store(value, ptr, align))
        for g in range(0, len(ptrs), vec):
            cond = owner if masks is None else self.b.and_(owner, masks[g])
            if vec == 1:
                store_where(cond, vals[g], ptrs[g], bytes_per)
                continue
            vty = llir.VectorType(elem, vec)
            packed = llir.Constant(vty, None)
            for i in range(vec):
                packed = self.b.insert_element(packed, vals[g + i], llir.Constant(I32, i))
            store_where(cond, packed, ptrs[g], bytes_per * vec)

    _RMW = {"add": "add", "fadd": "fadd", "max": "max", "umax": "umax", "min": "min", "umin": "umin",
            "and": "and", "or": "or", "xor": "xor", "xchg": "xchg"}

    def _atomic_each(self, op, make, after=None, vector=None):
        """Apply `make(i)` (an atomic on element i) once per element, in the owning thread only; the
        old values are shared with replicas (and, for scalars, with the whole CTA) via shared memory.
        `after()` runs in every thread once the atomics are made, before the values are shared.
        `vector` (kind, IR element name, values, sem, scope): where the target updates consecutive
        elements in one instruction (`vector_atomic_rmw`), runs of them the pointers' alignment and
        the mask allow go together, predicated, instead of one branch-guarded atomic each."""
        ptr = op.operands[0]
        is_tensor = isinstance(ptr.type, ir.TensorType)
        layout = self.layout(ptr.type)
        owner = self.is_owner(layout) if is_tensor else \
            self.b.icmp_unsigned("==", self.isa.thread_id_x(self.b), llir.Constant(I32, 0))
        mask = op.operand("mask") if op.name in ("tt.atomic_rmw", "tt.atomic_load") else None
        masks = self.get(mask) if mask is not None else None
        elem = llvm_type(op.result.type)
        vec = 1
        if vector is not None and is_tensor:
            vec = min(self._vector_width(op, ptr, mask), self.isa.vector_atomic_width(vector[0], vector[1]))
        def cond(i):   # element i is updated here (a run's mask is its first element's)
            return owner if masks is None else self.b.and_(owner, masks[i])
        results, ptrs = [], self.get(ptr)
        for g in range(0, len(ptrs), vec):
            group = self._vector_atomic(ptrs[g], vector, g, vec, cond(g), elem) if vec > 1 else None
            if group is None:
                group = [self._guarded(cond(i), lambda i=i: make(i), llir.Constant(elem, None))
                         for i in range(g, g + vec)]
            results.extend(group)
        if after is not None:
            after()
        if not is_tensor:
            # Broadcast thread 0's old value to every thread.
            self.smem_base(8)
            self.isa.barrier(self.b)
            slot = self.smem_ptr(elem, llir.Constant(I32, 0))
            self._guarded(owner, lambda: self.b.store(results[0], slot) and None)
            self.isa.barrier(self.b)
            results = [self.b.load(slot, typ=elem)]
            self.isa.barrier(self.b)
        elif op.result.has_uses() and _has_replicas(layout):
            # Replicas skipped the atomic and hold no old value: the owners publish theirs through
            # the scratch, indexed by element, and every thread reads back its own elements (a loop
            # over atomic_cas results, as tl.atomic_poll makes, never ended in the replica lanes).
            shape = ptr.type.shape
            self.smem_base(max(1, _numel(shape)) * _byte_size(elem))
            slots = [self.smem_ptr(elem, _row_major_index(self.b, coords, shape))
                     for coords in self.element_coords(layout)]
            self.isa.barrier(self.b)
            for i, (value, slot) in enumerate(zip(results, slots)):
                cond = owner if masks is None else self.b.and_(owner, masks[i])
                self._guarded(cond, lambda value=value, slot=slot: self.b.store(value, slot) and None)
            self.isa.barrier(self.b)
            results = [self.b.load(slot, typ=elem) for slot in slots]
            self.isa.barrier(self.b)
        self.set(op.result, results)

    def _vector_atomic(self, ptr, vector, first, count, cond, elem):
        """One `vector_atomic_rmw` of elements first..first+count-1 where `cond` holds; None where
        the target declines it."""
        kind, elem_name, vals, sem, scope = vector
        if isinstance(cond, llir.Constant) and isinstance(cond.constant, int):
            if not cond.constant:   # nobody updates these elements
                return [llir.Constant(elem, None)] * count
            cond = None
        values = [vals[i] if len(vals) > 1 else vals[0] for i in range(first, first + count)]
        if cond is None or self.isa.predicated_vector_atomics:
            return self.isa.vector_atomic_rmw(self.b, kind, ptr, values, sem, scope, elem_name, cond)
        # a target without predicated atomics (AMDGPU) is branched around, as the scalar ones are
        return self._guarded(cond, lambda: self.isa.vector_atomic_rmw(self.b, kind, ptr, values, sem, scope, elem_name),
                             llir.Constant(elem, None))

    def lower_atomic_rmw(self, op):
        kind = op.attrs.get("atomic_rmw_op", "add")
        if kind not in self._RMW:
            raise CompilationError.at(op.loc, f"unknown atomic op {kind!r}")
        sem, scope = op.attrs.get("sem", "acq_rel"), op.attrs.get("scope", "gpu")
        ptrs, vals = self.get(op.operands[0]), self.get(op.operands[1])
        elem_t = ir.element_type(op.result.type)
        if kind in ("max", "min") and str(elem_t) in ("f16", "bf16"):
            self._half_minmax(op, kind, ptrs, vals, sem, scope)
            return
        if is_storage_float(elem_t):
            # bf16 has no LLVM type here (it is kept as i16): the target's own atomic add where it
            # has one (sm_90's atom.add.bf16), else a compare-and-swap loop on the bits.
            if kind not in ("fadd", "xchg"):
                raise CompilationError.at(op.loc, f"atomic {kind} is not supported for {elem_t}")
            if kind == "xchg":
                bits = f"i{elem_t.width}"
                self._atomic_each(op, lambda i: self.isa.atomic_rmw(
                    self.b, "xchg", ptrs[i], vals[i if len(vals) > 1 else 0], sem, scope, bits))
                return
            t = op.result.type

            def combine(old, i):
                new = vals[i if len(vals) > 1 else 0]
                if kind == "xchg":
                    return new
                total = self.b.fadd(to_compute(self.b, old, t, self.isa), to_compute(self.b, new, t, self.isa))
                return from_compute(self.b, total, t)

            def add(i):
                old = self.isa.atomic_rmw(self.b, "fadd", ptrs[i], vals[i if len(vals) > 1 else 0], sem, scope,
                                          str(elem_t))
                return old if old is not None else self._cas_loop(ptrs[i], lambda old: combine(old, i), sem, scope)
            self._atomic_each(op, add, vector=("fadd", str(elem_t), vals, sem, scope) if kind == "fadd" else None)
            return
        self._atomic_each(op, lambda i: self.isa.atomic_rmw(self.b, self._RMW[kind], ptrs[i],
                                                            vals[i if len(vals) > 1 else 0], sem, scope, str(elem_t)),
                          vector=(self._RMW[kind], str(elem_t), vals, sem, scope))

    def _half_minmax(self, op, kind, ptrs, vals, sem, scope):
        """fp16/bf16 atomic max/min (descriptor reductions; no GPU has the atom): a compare-and-swap
        loop on the 16 bits, the comparison in f32 (exact: the result is one of the two), NaN-
        propagating and -0 < +0 as `llvm.maximum`/`minimum` (NumPy's maximum/minimum in the
        interpreter)."""
        t = op.result.type
        half = str(ir.element_type(t)) == "f16"
        i16, f32, f16 = llir.IntType(16), llir.FloatType(), llir.HalfType()

        def to_f32(bits):
            return self.b.fpext(self.b.bitcast(bits, f16), f32) if half else to_compute(self.b, bits, t, self.isa)

        def combine(old, i):
            new = vals[i if len(vals) > 1 else 0]
            new = self.b.bitcast(new, i16) if half else new
            picked = call_intrinsic(self.b, f"llvm.{'maximum' if kind == 'max' else 'minimum'}.f32", f32,
                                    [to_f32(old), to_f32(new)])
            return self.b.bitcast(self.b.fptrunc(picked, f16), i16) if half else from_compute(self.b, picked, t)

        def each(i):
            old = self._cas_loop(ptrs[i], lambda old: combine(old, i), sem, scope)
            return self.b.bitcast(old, f16) if half else old
        self._atomic_each(op, each)

    def _cas_loop(self, ptr, combine, sem, scope):
        """Atomically replace *ptr (an integer) by combine(old); returns old."""
        elem = llvm_type(ir.IntType(16))
        first = self.b.load(ptr, typ=elem, align=2)
        fn = self.b.block.function
        pre = self.b.block
        loop = fn.append_basic_block("cas.loop")
        done = fn.append_basic_block("cas.done")
        self.b.branch(loop)
        self.b.position_at_end(loop)
        old = self.b.phi(elem)
        old.add_incoming(first, pre)
        seen = self.isa.atomic_cas(self.b, ptr, old, combine(old), sem, scope)
        old.add_incoming(seen, self.b.block)
        self.b.cbranch(self.b.icmp_unsigned("==", seen, old), done, loop)
        self.b.position_at_end(done)
        return seen

    def lower_atomic_cas(self, op):
        sem, scope = op.attrs.get("sem", "acq_rel"), op.attrs.get("scope", "gpu")
        ptrs, cmps, vals = (self.get(v) for v in op.operands[:3])
        elem = llvm_type(op.result.type)
        # cas(p, e, e) never changes memory: with relaxed or acquire semantics it is an atomic read
        # of *p (tl.atomic_poll's loop, spelled as Triton's poll: ld.relaxed + fence.acquire). A
        # thread reads its elements relaxed and acquires once, after the last (same guard: no mask).
        read_only = op.operands[1] is op.operands[2] and sem in ("relaxed", "acquire")

        def read(i, ty):
            return self.isa.atomic_read(self.b, ptrs[i], ty, sem if i == len(ptrs) - 1 else "relaxed", scope)

        def cas(i):
            cmp, val = cmps[i if len(cmps) > 1 else 0], vals[i if len(vals) > 1 else 0]
            if not isinstance(elem, llir.IntType):   # cmpxchg works on integers
                ity = llir.IntType(llvm_bits(elem))
                if read_only:
                    return self.b.bitcast(read(i, ity), elem)
                old = self.isa.atomic_cas(self.b, ptrs[i], self.b.bitcast(cmp, ity), self.b.bitcast(val, ity),
                                          sem, scope)
                return self.b.bitcast(old, elem)
            if read_only:
                return read(i, elem)
            return self.isa.atomic_cas(self.b, ptrs[i], cmp, val, sem, scope)
        self._atomic_each(op, cas)

    def lower_atomic_load(self, op):
        """tl.atomic_load as Triton spells it: each element read relaxed by its owner (masked), then
        for acquire one fence in every thread, after the reads and before the values are shared."""
        sem, scope = op.attrs.get("sem", "acquire"), op.attrs.get("scope", "gpu")
        ptrs = self.get(op.operands[0])
        elem = llvm_type(op.result.type)
        ity = elem if isinstance(elem, llir.IntType) else \
            llir.IntType({"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(elem)])

        def read(i):
            value = self.isa.atomic_read(self.b, ptrs[i], ity, "relaxed", scope)
            return value if ity is elem else self.b.bitcast(value, elem)
        after = (lambda: self.isa.atomic_fence(self.b, "acquire", scope)) if sem == "acquire" else None
        self._atomic_each(op, read, after)

    def lower_atomic_store(self, op):
        """tl.atomic_store as Triton spells it: for release one fence in every thread, then each
        element written relaxed by its owning thread (masked; thread 0 for a scalar pointer)."""
        sem, scope = op.attrs.get("sem", "release"), op.attrs.get("scope", "gpu")
        ptr = op.operands[0]
        ptrs, vals, masks = self.get(ptr), self.get(op.operands[1]), self.get(op.operands[2])
        is_tensor = isinstance(ptr.type, ir.TensorType)
        owner = self.is_owner(self.layout(ptr.type)) if is_tensor else \
            self.b.icmp_unsigned("==", self.isa.thread_id_x(self.b), llir.Constant(I32, 0))
        if sem == "release":
            self.isa.atomic_fence(self.b, "release", scope)
        for i in range(len(ptrs)):
            value = vals[i if len(vals) > 1 else 0]
            if not isinstance(value.type, llir.IntType):
                value = self.b.bitcast(value, llir.IntType({"half": 16, "bfloat": 16, "float": 32,
                                                            "double": 64}[str(value.type)]))
            cond = self.b.and_(owner, masks[i if len(masks) > 1 else 0])
            self._guarded(cond, lambda value=value, i=i: self.isa.atomic_write(self.b, value, ptrs[i], scope))

    def lower_assert(self, op):
        conds = self.get(op.operands[0])
        all_true = conds[0]
        for c in conds[1:]:
            all_true = self.b.and_(all_true, c)
        if all_true.type != I1:
            all_true = self.b.icmp_unsigned("!=", all_true, llir.Constant(all_true.type, 0))
        fn = self.b.block.function
        fail = fn.append_basic_block("assert.fail")
        ok = fn.append_basic_block("assert.ok")
        self.b.cbranch(all_true, ok, fail)
        self.b.position_at_end(fail)
        self.isa.assert_fail(self.b, str(op.attrs.get("message", "")), op.loc.file or "", op.loc.line,
                             self.b.block.function.name)
        self.b.unreachable()
        self.b.position_at_end(ok)

    from .reductions import lower_reduce, lower_scan, _combine_region, _shuffle   # noqa: E402
    from .dot import lower_dot   # noqa: E402
    from .misc_ops import lower_gather, lower_histogram, lower_print   # noqa: E402
    from .inline_asm import lower_inline_asm   # noqa: E402
    from .convert import convert_registers   # noqa: E402

    # -- hooks a target's `lowering_mixin` may fill (NVIDIA: cp.async pipelines, ldmatrix operands) --
    def lower_pipelined_for(self, op) -> bool:
        """Lower `op` (an scf.for) the target's own way; False: lower it as a plain loop."""
        return False

    def dot_operand_plan(self, src, dst_type):
        """How the target converts registers laid out by `src` (a layout of `dst_type`'s shape) into
        the dot-operand layout `dst_type` itself; None: the generic conversion through shared memory."""
        return None

    def convert_to_dot_operand(self, values, src, dst_type, how):   # pragma: no cover - only with a plan
        raise NotImplementedError
