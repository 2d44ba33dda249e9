"""mma.sync operands through swizzled shared memory (methods of `FunctionLowering`).

- `convert_to_dot_operand`: a `ttg.convert_layout` into an mma.sync operand layout writes the tile
  swizzled (vector stores along its contiguous dim) and reads the fragments with `ldmatrix`.
- `lower_pipelined_for`: an `scf.for` marked by `tritongpu-pipeline` keeps a ring of buffers per
  pipelined load; the prologue starts the copies of the first S-1 iterations (S = `num_stages`) with
  `cp.async`, and iteration i waits for its own group (`cp.async.wait_group S-2`) and passes a
  barrier. The copies of iteration i+S-1 start from the *lookahead* address values (the loads'
  address slice lowered S-1 iterations ahead). An mma.sync loop whose operands fit
  `EAGER_OPERAND_REGISTERS` keeps S-1 buffers, as Triton: it reads its buffers whole into
  registers, passes a second barrier and refills them. Any other keeps S: it starts the copies
  right after the first barrier, into the buffer iteration i-1 read, and its dots read each
  k-step's fragments right before their mma.sync. The body reads its buffer with `ldmatrix` (a
  tile that reaches its dot through elementwise ops is read back with plain shared loads in the
  load's own layout, each thread the vectors it copied, and converted after them). When both operands of a
  version-3 (wgmma) dot are pipelined, their buffers are `WgmmaTile`s (1024-byte aligned, 128B
  swizzle) and the dot reads them through descriptors (`wgmma.py`) instead of ldmatrix.

  A wgmma dot that only accumulates into a loop-carried value (`acc = tl.dot(a, b, acc)`) stays in
  flight across the back edge, as in Triton: after the last such dot of the body, one
  `wgmma.wait_group n` (n of them) leaves this iteration's groups running and waits for the previous
  iteration's, and the copies of iteration i+S-1, which overwrite the buffer iteration i-1 read,
  start only after that wait and a barrier (every warpgroup is past it).
  The loop's exit waits for the last group. No `fence.proxy.async` is put between cp.async and
  wgmma: Triton's fence insertion fences only register-to-shared stores before an async-proxy read,
  and the fence (MEMBAR.ALL.CTA in SASS) would also wait for the copies still in flight.
"""
from __future__ import annotations

import llvmlite.ir as llir

from tilejit import ir
from tilejit.errors import CompilationError
from tilejit.gpu.isa import I32
from tilejit.gpu.llvm.convert import I64, _run_length
from tilejit.gpu.llvm.lowering import SCRATCH_END
from tilejit.gpu.llvm.scalar_ops import llvm_bits, llvm_type

from .mma_sync import f64_form
from .pipeline import REWRITE_SLOTS, copy_vector, element_bytes, loop_pipeline, wgmma_copy, wgmma_k_dim
from .shared_operands import ATOM_BYTES, CHUNK_BYTES, IntArith, SwizzledTile, operand_tile, plan_ldmatrix

I1 = llir.IntType(1)


class LLVMArith:
    """The `Arith` of `shared_operands` on LLVM values; Python ints stay constants (folded here, so
    the address code has no multiplications by 0 or 1)."""

    def __init__(self, builder):
        self.b = builder

    def const(self, v):
        return int(v)

    def value(self, x):
        return llir.Constant(I32, x) if isinstance(x, int) else x

    def _binary(self, a, b, fold, emit):
        if isinstance(a, int) and isinstance(b, int):
            return fold(a, b)
        return emit(self.value(a), self.value(b))

    def add(self, a, b):
        if a == 0 and isinstance(a, int):
            return b
        if b == 0 and isinstance(b, int):
            return a
        return self._binary(a, b, lambda x, y: x + y, self.b.add)

    def mul(self, a, b):
        if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
            return 0
        if isinstance(b, int) and b == 1:
            return a
        if isinstance(a, int) and a == 1:
            return b
        if isinstance(b, int) and b & (b - 1) == 0 and not isinstance(a, int):
            return self.b.shl(a, llir.Constant(I32, b.bit_length() - 1))
        return self._binary(a, b, lambda x, y: x * y, self.b.mul)

    def xor(self, a, b):
        if isinstance(b, int) and b == 0:
            return a
        if isinstance(a, int) and a == 0:
            return b
        return self._binary(a, b, lambda x, y: x ^ y, self.b.xor)

    def udiv(self, a, b):
        if isinstance(b, int) and b == 1:
            return a
        if isinstance(b, int) and b & (b - 1) == 0 and not isinstance(a, int):
            return self.b.lshr(a, llir.Constant(I32, b.bit_length() - 1))
        return self._binary(a, b, lambda x, y: x // y, self.b.udiv)

    def urem(self, a, b):
        if isinstance(b, int) and b == 1:
            return 0
        if isinstance(b, int) and b & (b - 1) == 0 and not isinstance(a, int):
            return self.b.and_(a, llir.Constant(I32, b - 1))
        return self._binary(a, b, lambda x, y: x % y, self.b.urem)


def _split_pair(self, word, elem_ty):
    """The two 16-bit elements of an ldmatrix register (low half first)."""
    if isinstance(elem_ty, llir.HalfType):
        pair = self.b.bitcast(word, llir.VectorType(elem_ty, 2))
        return [self.b.extract_element(pair, llir.Constant(I32, i)) for i in range(2)]
    lo = self.b.trunc(word, elem_ty)
    hi = self.b.trunc(self.b.lshr(word, llir.Constant(I32, 16)), elem_ty)
    return [lo, hi]


class LazyDotOperand:
    """An mma.sync operand in a swizzled shared tile whose `ldmatrix` reads are emitted on demand:
    the dot asks for the registers of one k-step at a time (`fetch`), so each fragment is read just
    before the mma.sync instructions that use it and dies after them. Read all at once, before the
    dot, every fragment of the K tile stays live across the whole dot (matmul's 128x128x64 tile
    needed 176 registers a thread, so one CTA fitted on an SM instead of two)."""

    def __init__(self, lowering, tile: SwizzledTile, plan, dst_type, base_elems, span=None):
        self.lowering, self.tile, self.plan = lowering, tile, plan
        self.dst_type, self.base_elems = dst_type, base_elems
        self.span = span   # the shared bytes the tile lies in (`FunctionLowering.shared_spans`)
        layout = lowering.layout(dst_type)
        self.values = [None] * layout.num_registers
        self._group_of = {}
        for g, group in enumerate(plan.groups):
            for job in group.jobs:
                for reg in job.registers:
                    self._group_of[reg] = g
        self._emitted = set()
        self._warp_part = None

    def fetch(self, registers):
        """Emit (once) the ldmatrix groups that fill `registers`; returns the values of all registers
        read so far (None for those not read yet)."""
        low = self.lowering
        for reg in registers:
            g = self._group_of.get(reg)
            if g is None:
                raise CompilationError("internal: an ldmatrix plan does not cover a dot operand register")
            if g in self._emitted:
                continue
            self._emitted.add(g)
            if self._warp_part is None:
                layout = low.layout(self.dst_type)
                self._warp_part = [low._bit_combination(layout.warps, low.warp, d) for d in range(2)]
            _read_group(low, self.tile, self.plan, self.plan.groups[g], llvm_type(self.dst_type),
                        self.base_elems, self._warp_part, self.values, self.span)
        return self.values

    def all_values(self):
        return self.fetch(range(len(self.values)))


class PlainDotOperand:
    """An mma.sync operand in a swizzled shared tile read with plain shared loads, register by register
    on demand (`fetch`, as `LazyDotOperand`): 64-bit elements, which ldmatrix does not take. Two
    registers that sit next to each other in the tile for every thread, the first at an even offset,
    are one 16-byte vector load."""

    def __init__(self, lowering, tile: SwizzledTile, dst_type, base_elems, span=None):
        self.lowering, self.tile, self.dst_type, self.base_elems = lowering, tile, dst_type, base_elems
        self.span = span
        self.layout = lowering.layout(dst_type)
        self.values = [None] * self.layout.num_registers
        offsets = _tile_offsets(self.layout, tile, range(self.layout.num_registers))   # [W, L, R]
        self._pairs = {r for r in range(0, self.layout.num_registers - 1)
                       if (offsets[..., r + 1] - offsets[..., r] == 1).all() and not (offsets[..., r] % 2).any()}
        self._coords = None

    def fetch(self, registers):
        low = self.lowering
        if self._coords is None:
            self._coords = low.element_coords(self.layout)
        a = LLVMArith(low.b)
        elem_ty = llvm_type(self.dst_type)
        for r in sorted(set(registers)):
            if self.values[r] is not None:
                continue
            ptr = low.smem_region_ptr(elem_ty, a.value(a.add(self.base_elems, self.tile.offset(a, self._coords[r]))),
                                      self.span)
            if r in self._pairs and self.values[r + 1] is None:
                pair = low.b.load(ptr, typ=llir.VectorType(elem_ty, 2), align=2 * self.tile.elem_bytes)
                self.values[r], self.values[r + 1] = (low.b.extract_element(pair, llir.Constant(I32, i))
                                                      for i in (0, 1))
            else:
                self.values[r] = low.b.load(ptr, typ=elem_ty, align=self.tile.elem_bytes)
        return self.values

    def all_values(self):
        return self.fetch(range(len(self.values)))


def _read_group(self, tile, plan, group, elem_ty, base_elems, warp_part, out, span=None):
    a = LLVMArith(self.b)
    coords = plan.lane_coords(a, group, self.lane, warp_part)
    index = a.value(a.add(base_elems, tile.offset(a, coords)))
    ptr = self.smem_region_ptr(elem_ty, index, span)
    words = self.isa.load_matrix(self.b, ptr, len(group.jobs), plan.trans)
    for job, word in zip(group.jobs, words):
        for reg, v in zip(job.registers, _split_pair(self, word, elem_ty)):
            out[reg] = v


def read_dot_operand(self, tile: SwizzledTile, plan, dst_type, base_elems, span=None):
    """The registers of `dst_type` (an mma.sync operand layout) read from the tile that starts
    `base_elems` 16-bit elements into shared memory (an int, or an i32 value)."""
    return LazyDotOperand(self, tile, plan, dst_type, base_elems, span).all_values()


def _feeds_only_dots(value) -> bool:
    """Whether every use of `value` is as operand A or B of a `tt.dot` (which can read it lazily)."""
    return bool(value.uses) and all(user.name == "tt.dot" and index in (0, 1) for user, index in value.uses)


def dot_operand_plan(self, src, dst_type):
    """(tile, plan) for converting registers laid out by `src` into the mma.sync operand `dst_type`
    through a swizzled tile, or None when ldmatrix cannot be used (then the generic conversion runs)."""
    from tilejit.gpu.layouts import DotOperandEncoding

    from .layouts import NvidiaMmaEncoding
    enc = dst_type.encoding
    if (not isinstance(enc, DotOperandEncoding) or not isinstance(enc.parent, NvidiaMmaEncoding)
            or dst_type.rank != 2 or not self.isa.supports_async_copy):
        return None
    elem_ty = llvm_type(dst_type)
    if not (isinstance(elem_ty, llir.HalfType) or (isinstance(elem_ty, llir.IntType) and elem_ty.width == 16)):
        return None
    runs = [_run_length(src, d, 8) for d in range(2)]
    inner = 1 if runs[1] >= runs[0] else 0
    tile = SwizzledTile(tuple(dst_type.shape), inner)
    plan = plan_ldmatrix(self.layout(dst_type), enc.op_idx, inner) if tile.fits() else None
    return (tile, plan, runs[inner]) if plan is not None else None


def write_tile(self, values, layout, vec, elem_ty, pointer_of, elem_bytes: int = 2) -> None:
    """Store the registers `values` of `layout` into a shared tile, `vec` at a time (one vector store
    of `elem_bytes`-byte elements), register r0's run at `pointer_of(r0)`; registers a thread holds
    twice (a replicated layout) are written once."""
    written, offsets = set(), layout.register_offsets()
    for r0 in range(0, len(values), vec):
        if offsets[r0] in written:
            continue
        written.add(offsets[r0])
        ptr = pointer_of(r0)
        if vec == 1:
            self.b.store(values[r0], ptr, align=elem_bytes)
            continue
        packed = llir.Constant(llir.VectorType(elem_ty, vec), None)
        for i in range(vec):
            packed = self.b.insert_element(packed, values[r0 + i], llir.Constant(I32, i))
        self.b.store(packed, ptr, align=elem_bytes * vec)


def store_plan(self, layout, tile):
    """How to write the registers of `layout` (16-bit) into `tile` with sm_90's stmatrix: the ldmatrix
    plan of a layout whose 8x8 blocks are the mma fragments (an mma accumulator, an A operand), as
    if it were operand A (each thread's register pairs along dim 1); None where there is no stmatrix
    or the layout is not one (the tile is then written with vector stores, `write_tile`)."""
    if not self.isa.supports_store_matrix or not tile.fits():
        return None
    return plan_ldmatrix(layout, 0, tile.inner, warps_along_k=True)


def store_matrices(self, tile, plan, layout, values, elem_ty, base_elems, span=None) -> None:
    """Write `values` (the registers of `layout`, which `plan` was made for by `store_plan`) into the
    tile that starts `base_elems` 16-bit elements into shared memory, four 8x8 matrices a stmatrix
    (Triton's local_alloc of an mma result): a quarter of the stores of 32-bit vector ones."""
    from .mma_sync import pack_pair
    a = LLVMArith(self.b)
    warp_part = [self._bit_combination(layout.warps, self.warp, d) for d in range(2)]
    elem = "f16" if isinstance(elem_ty, llir.HalfType) else "b16"
    for group in plan.groups:
        coords = plan.lane_coords(a, group, self.lane, warp_part)
        ptr = self.smem_region_ptr(elem_ty, a.value(a.add(base_elems, tile.offset(a, coords))), span)
        words = [pack_pair(self.b, values[job.registers[0]], values[job.registers[1]], elem) for job in group.jobs]
        if elem == "f16":   # a <2 x half>
            words = [self.b.bitcast(w, I32) for w in words]
        self.isa.store_matrix(self.b, ptr, words, plan.trans)


def convert_to_dot_operand(self, values, src, dst_type, how):
    """Registers `values` laid out by `src` -> swizzled shared tile (stmatrix, or vector stores) ->
    ldmatrix."""
    tile, plan, vec = how
    elem_ty = llvm_type(dst_type)
    self.smem_base(tile.nbytes)
    a = LLVMArith(self.b)
    self.isa.barrier(self.b)
    stores = store_plan(self, src, tile)
    if stores is not None:
        store_matrices(self, tile, stores, src, values, elem_ty, self.scratch_offset // 2,
                       (self.scratch_offset, SCRATCH_END))
    else:
        coords = self.element_coords(src)
        write_tile(self, values, src, vec, elem_ty,
                   lambda r0: self.smem_ptr(elem_ty, a.value(tile.offset(a, coords[r0]))))
    self.isa.barrier(self.b)
    out = read_dot_operand(self, tile, plan, dst_type, self.scratch_offset // 2, (self.scratch_offset, SCRATCH_END))
    self.isa.barrier(self.b)
    return out


# ------------------------------------------------------------------------------------- pipelining

class _Buffer:
    """The ring of `stages` swizzled tiles of one pipelined load."""

    def __init__(self, self_, load, convert, base_bytes, stages, wgmma=False, rewritten=False):
        self.load, self.convert = load, convert
        res_t = load.results[0].type
        inner, self.vec = copy_vector(self_.analysis, load)
        self.elem_bytes = element_bytes(load)
        self.wgmma = wgmma
        # an fp8 operand copied along its non-K dim, which each iteration rewrites K-major for wgmma
        # (`stage_transposed`)
        self.rewritten = rewritten
        # No dot-operand conversion of its own: the tile is read back in the load's layout, each
        # thread the vectors it copied (`read_back`), and computed on before its conversion.
        self.read_back = convert is None
        enc = None if self.read_back else convert.results[0].type.encoding
        if self.read_back and wgmma:   # its dots read it through descriptors (`_dot_views`)
            inner, self.vec = wgmma_copy(self_.analysis, load, 0)
            self.tile, self.plan = operand_tile(tuple(res_t.shape), inner, self.elem_bytes), None
        elif self.read_back:
            self.tile, self.plan = SwizzledTile(tuple(res_t.shape), inner, self.elem_bytes), None
        elif wgmma:   # read by wgmma's descriptors: a swizzled `WgmmaTile`, no ldmatrix plan
            inner, self.vec = wgmma_copy(self_.analysis, load, enc.op_idx)
            k_major = inner == wgmma_k_dim(enc.op_idx)
            self.tile, self.plan = operand_tile(tuple(res_t.shape), inner, self.elem_bytes, k_major), None
        else:
            if self.elem_bytes == 8 and enc.op_idx == 0 and inner == 1 and f64_form(self_.isa.arch) == "f64_sm90":
                # fp64 A for sm_90's m16n8k16: kept M-contiguous (one 8-byte cp.async an element, as
                # Triton), so that no two doubles a lane reads are neighbours. Two K-neighbours were
                # read as one 16-byte load and then moved apart into the instruction's A tuple
                # (rows g and g + 8 at each k): 32 moves a k-step on the 32x32 warp tile.
                inner, self.vec = 0, 1
            self.tile = SwizzledTile(tuple(res_t.shape), inner, self.elem_bytes)
            # 64-bit operands have no ldmatrix: the dot reads them with plain loads (`PlainDotOperand`)
            self.plan = (plan_ldmatrix(self_.layout(convert.results[0].type), enc.op_idx, inner)
                         if self.elem_bytes == 2 else None)
        if ((self.plan is None and not wgmma and not rewritten and self.elem_bytes != 8 and not self.read_back)
                or self.vec * self.elem_bytes < 4):
            raise CompilationError.at(load.loc, "internal: a load marked for pipelining cannot be pipelined")
        self.base_bytes = base_bytes
        self.nbytes = self.tile.nbytes * stages
        # The registers that start a copy, and their offsets from the first one's when those are the
        # same for every thread (see `_constant_tile_deltas`), for every stage's copies alike.
        layout = self_.layout(load.operands[0].type)
        self.copy_registers = list(range(0, len(layout.register_offsets()), self.vec))
        self.copy_deltas = _constant_tile_deltas(layout, self.tile, self.copy_registers)

    def stage_base(self, a, stage):
        """Element offset (in elements of the load's type) of the buffer of `stage` (int or i32)."""
        eb = self.elem_bytes
        return a.add(self.base_bytes // eb, a.mul(stage, self.tile.nbytes // eb))

    def vector_offsets(self, a, stage, coords):
        """`offset_of(r0)`: the element offset in the buffer of `stage` of the vector that starts at
        register r0 of the load's layout (`coords`), where its copy writes it and its read-back reads
        it. With constant deltas one offset is computed and the others are a constant away
        (immediate address offsets)."""
        base = self.stage_base(a, stage)
        first = []

        def offset_of(r0):
            if self.copy_deltas is None:
                return a.add(base, self.tile.offset(a, coords[r0]))
            if not first:
                first.append(a.add(base, self.tile.offset(a, coords[self.copy_registers[0]])))
            return a.add(first[0], self.copy_deltas[r0])
        return offset_of


def _dot_views(load) -> list:
    """[(convert, transposed)] when every use of a read-back load is a conversion to an mma.sync or
    wgmma dot operand, directly or through one `tt.trans` whose uses all are (fla's `b_v`, A of one
    dot and `tl.trans(b_v)` B of another; `tl.dot(b_k, tl.trans(b_k))`), else []."""
    from tilejit.gpu.layouts import DotOperandEncoding

    from .layouts import NvidiaMmaEncoding

    def is_mma_operand(op):
        enc = op.results[0].type.encoding if op.name == "ttg.convert_layout" else None
        return (isinstance(enc, DotOperandEncoding) and isinstance(enc.parent, NvidiaMmaEncoding)
                and op.parent is load.parent)
    views = []
    for user, _ in load.results[0].uses:
        if user.name == "tt.trans" and user.parent is load.parent and user.results[0].uses:
            inner = [u for u, _ in user.results[0].uses]
            if not all(is_mma_operand(u) for u in inner):
                return []
            views += [(u, True) for u in inner]
        elif is_mma_operand(user):
            views.append((user, False))
        else:
            return []
    return views


def _ldmatrix_views(self, buf, load_views) -> dict:
    """{id(convert): (tile, plan)} reading each view of a read-back 16-bit tile in place with
    ldmatrix (the transposed ones through the transposed tile), when every view is an mma.sync
    operand that ldmatrix can fill; else {} (the tile is read back and converted)."""
    from .layouts import NvidiaMmaEncoding
    if buf.wgmma or buf.elem_bytes != 2 or not buf.tile.fits():
        return {}
    found = {}
    for view, transposed in load_views:
        enc = view.results[0].type.encoding
        if not isinstance(enc.parent, NvidiaMmaEncoding) or enc.parent.version_major != 2:
            return {}
        tile = buf.tile.transposed() if transposed else buf.tile
        plan = plan_ldmatrix(self.layout(view.results[0].type), enc.op_idx, tile.inner)
        if plan is None:
            return {}
        found[id(view)] = (tile, plan)
    return found


def _wgmma_converts(self, pipe, rewritten=None):
    """{id(convert): transposed} of the pipelined converts whose results a version-3 (wgmma) dot
    reads from shared memory through descriptors: B when it is pipelined, feeds only dots and fits
    the 128B-swizzled tile; A too when the same holds for it (else the dot reads A from registers),
    also where B is computed in the loop and staged by its dot (`NvidiaLowering._stageable`), or is
    an fp8 tile the loop rewrites K-major (`pipeline.transposed_for_wgmma`; the ids of those go
    into the set `rewritten`, when the dot's A is read through descriptors too).
    A read-back load whose every use is such a conversion (`_dot_views`) is read through descriptors
    by each of them, transposed or not."""
    from .layouts import NvidiaMmaEncoding
    by_result = {id(conv.results[0]): (load, conv, False) for load, conv in zip(pipe.loads, pipe.converts)
                 if conv is not None}
    for load, conv in zip(pipe.loads, pipe.converts):
        if conv is None and element_bytes(load) == 2:
            by_result.update((id(view.results[0]), (load, view, transposed)) for view, transposed in _dot_views(load))

    def fitting(value):
        found = by_result.get(id(value))
        if found is None or not _feeds_only_dots(found[1].results[0]):
            return None
        load, conv, _ = found
        return found if wgmma_copy(self.analysis, load, conv.results[0].type.encoding.op_idx) else None

    chosen = {}
    for op in pipe.loop.regions[0].blocks[0].ops:
        enc = op.results[0].type.encoding if op.name == "tt.dot" else None
        if not isinstance(enc, NvidiaMmaEncoding) or enc.version_major != 3:
            continue
        b_found = fitting(op.operands[1])
        b_rewritten = b_found is None and _rewritten_for_wgmma(pipe, op.operands[1])
        if b_found is None and not b_rewritten and not _staged_by_the_dot(self, op.operands[1]):
            continue
        a_found = fitting(op.operands[0])
        a_rewritten = a_found is None and _rewritten_for_wgmma(pipe, op.operands[0])
        if a_found is None and not a_rewritten and str(ir.element_type(op.operands[0].type)) not in ("f16", "bf16"):
            continue   # fp8 / tf32: wgmma takes A from registers only for 16-bit types here
        if rewritten is not None:
            rewritten.update(id(v.owner) for v, r in ((op.operands[0], a_rewritten), (op.operands[1], b_rewritten)) if r)
        for found in (b_found, a_found):
            if found is not None:
                chosen[id(found[1])] = found[2]
    return chosen


def _rewritten_for_wgmma(pipe, operand) -> bool:
    """Whether dot operand `operand` converts a pipelined fp8 load the loop rewrites K-major (marked
    by the pipeline pass, `pipeline.REWRITTEN`) and is that dot's alone."""
    from .pipeline import REWRITTEN
    convert = operand.owner
    return (any(conv is convert for conv in pipe.converts) and len(operand.uses) == 1 and _feeds_only_dots(operand)
            and bool(convert.operands[0].owner.attrs.get(REWRITTEN)))


def _staged_by_the_dot(self, operand) -> bool:
    convert = operand.owner
    return getattr(convert, "name", None) == "ttg.convert_layout" and self._stageable(convert)


def _async_wgmma_dots(body, wgmma_converts) -> dict:
    """{id(dot): carried index} of the wgmma dots that may stay in flight across iterations: both
    operands read from pipelined wgmma tiles, the accumulator is the carried value k, and the
    result's only use is the yield that carries it to k again."""
    yield_op = body.ops[-1]
    found = {}
    for op in body.ops:
        if op.name != "tt.dot" or any(id(v.owner) not in wgmma_converts for v in op.operands[:2]):
            continue
        uses = op.results[0].uses
        if len(uses) != 1 or uses[0][0] is not yield_op:
            continue
        k = uses[0][1]
        if op.operands[2] is body.args[k + 1]:
            found[id(op)] = k
    return found


def _tile_offsets(layout, tile, registers):
    """The element offsets in `tile` of `registers` of `layout` for every thread, a NumPy array
    [warp, lane, register]: a layout's coordinates are the XOR of a register part, a lane part and a
    warp part, so the tile's offset function runs once on arrays (one Python evaluation per element
    was 1,900 calls a compile)."""
    import numpy as np
    regs = np.array([layout.coords(r, 0, 0) for r in registers], np.int64)            # [R, rank]
    lanes = np.array([layout.coords(0, lane, 0) for lane in range(layout.num_lanes)], np.int64)
    warps = np.array([layout.coords(0, 0, warp) for warp in range(layout.num_warps)], np.int64)
    coords = warps[:, None, None, :] ^ lanes[None, :, None, :] ^ regs[None, None, :, :]  # [W, L, R, rank]
    return tile.offset(IntArith(), tuple(coords[..., d] for d in range(layout.rank)))


def _constant_tile_deltas(layout, tile, registers):
    """{register: element offset in `tile` minus that of `registers[0]`} when that difference is the
    same for every lane and warp (then the copies' shared addresses are one register plus constants),
    else None."""
    offsets = _tile_offsets(layout, tile, registers)
    deltas = offsets - offsets[..., :1]
    if not (deltas == deltas[:1, :1]).all():
        return None
    return {r: int(d) for r, d in zip(registers, deltas[0, 0])}


def _issue_copies(self, pipe, buffers, stage, valid, span, skip=frozenset()):
    """Lower the address slice (bound to the iteration to fetch) and start the cp.async of each
    pipelined load into its buffer of `stage` (the buffers lie in the bytes `span`); one commit
    group per iteration. Returns the values of the prefetched loads (`pipe.prefetched`), loaded
    into registers where `valid`.

    The slice ops that only advance the loop's values (the pointers' `+= BLOCK_K`) are lowered
    after the copies: emitted before them, each advanced pointer lives beside the one its copy
    reads, and ptxas moved every such pair through a third register each iteration (a 128x256 fp8
    tile's loop: 24 moves for its 12 copies)."""
    a = LLVMArith(self.b)
    first = pipe.copy_operand_ops
    after = _reading_prefetched(pipe, first)   # a gather's address, from indices loaded just before
    for sop in first:
        if id(sop) not in after:
            self.lower_op(sop)
    fetched = []
    for load in pipe.prefetched:
        self.lower_load(load, valid)
        fetched.append(self.get(load.results[0]))
    for sop in first:
        if id(sop) in after:
            self.lower_op(sop)
    for buf in buffers:
        load = buf.load
        ptr_v = load.operands[0]
        layout = self.layout(ptr_v.type)
        ptrs = self.get(ptr_v)
        masks = self.get(load.operands[1]) if len(load.operands) > 1 else None
        elem_ty = llvm_type(load.results[0].type)
        nbytes = buf.vec * buf.elem_bytes
        offset_of = buf.vector_offsets(a, stage, self.element_coords(layout))
        replicated = any(not any(b) for b in list(layout.lanes) + list(layout.warps))
        owner = self.is_owner(layout) if replicated else None
        offsets = layout.register_offsets()
        seen = set()
        for r0 in buf.copy_registers:
            if offsets[r0] in seen:
                continue
            seen.add(offsets[r0])
            pred = valid if masks is None else self.b.and_(valid, masks[r0])
            dst = self.smem_region_ptr(elem_ty, a.value(offset_of(r0)), span)
            copy = lambda dst=dst, src=ptrs[r0], pred=pred: self.isa.async_copy(self.b, dst, src, nbytes, pred)  # noqa
            if owner is None:
                copy()
            else:
                self._guarded(owner, copy)
    self.isa.async_commit(self.b)
    lowered = {id(op) for op in first}
    for sop in pipe.slice_ops:
        if id(sop) not in lowered and id(sop) not in skip:
            self.lower_op(sop)
    return fetched


def _reading_prefetched(pipe, ops) -> set:
    """Ids of `ops` (in body order) that read a prefetched load's value, directly or through each
    other: they are lowered after the lookahead's loads of that iteration."""
    reading = {id(op) for op in pipe.prefetched}
    for op in ops:
        if any(isinstance(v.owner, ir.Operation) and id(v.owner) in reading for v in op.operands):
            reading.add(id(op))
    return reading - {id(op) for op in pipe.prefetched}


class _Lookahead:
    """The values the copies of iterations ahead read: the body's slice arguments, advanced one
    iteration at a time.

    With `offsets`, a pointer tile that every iteration moves by one amount for all its elements
    (`LoopPipeline.uniform_advances`) is kept as its pointers before the loop plus one byte offset:
    each copy's address is then a fresh sum that dies at the copy, as in Triton's loops (where
    LLVM's loop strength reduction makes it). Advancing the pointers themselves keeps each old
    pointer live beside the new one while cp.async reads it, and ptxas moves every pointer through
    another register pair each iteration: on an H200, Triton's fp8 test matmul (K-major, 4096^3)
    with `max_num_imprecise_acc=32` 471 -> 524 TFLOP/s at 128x256x128, 509 -> 608-624 at
    128x128x64, the default accumulation 990 -> 1028-1037 at 128x128x64 (Triton 1044), the rest
    within 1%. The sums hold a second register pair a copy until they are used, though: where
    the kernel asks for two CTAs an SM (a 128-register cap at 8 warps), the bench matmul's
    128x128x64 fp16 tile went from 108 registers to the cap and from 1.04-1.07x Triton to 1.01x,
    so there the pointers advance."""

    def __init__(self, lowering, pipe, inits, offsets: bool):
        self.lowering, self.b = lowering, lowering.b
        self.uniform = pipe.uniform_advances if offsets else {}
        body = pipe.loop.regions[0].blocks[0]
        self.advance_ops = {id(body.ops[-1].operands[k].owner) for k in self.uniform
                            if len(body.ops[-1].operands[k].uses) == 1}   # only the yield reads it
        self.bases = {k: inits[k] for k in self.uniform}
        self.elem_bytes = {k: _pointee_bytes(body.args[k + 1].type) for k in self.uniform}
        self.start = {k: ([llir.Constant(I64, 0)] if k in self.uniform else inits[k]) for k in pipe.slice_args}
        self.yield_op = body.ops[-1]

    def values(self, look):
        """The slice arguments' values for `look` (the lookahead's carried values)."""
        out = {}
        for k, vals in look.items():
            if k in self.uniform:
                out[k] = [self.b.gep(base, [vals[0]], source_etype=llir.IntType(8)) for base in self.bases[k]]
            else:
                out[k] = vals
        return out

    def advanced(self, look):
        """The carried values of the next iteration, once the slice has been lowered for `look`."""
        out = {}
        for k, vals in look.items():
            if k in self.uniform:
                step = self.lowering.get(self.uniform[k])[0]
                step = self.b.sext(step, I64) if step.type.width < 64 else step
                out[k] = [self.b.add(vals[0], self.b.mul(step, llir.Constant(I64, self.elem_bytes[k])))]
            else:
                out[k] = self.lowering.get(self.yield_op.operands[k])
        return out


def _is_wide(value) -> bool:
    """A 64-bit value (an i64, an f64): two 32-bit registers."""
    t = value.type
    return (isinstance(t, llir.IntType) and t.width == 64) or isinstance(t, llir.DoubleType)


def _pointee_bytes(tile_type) -> int:
    return max(1, llvm_bits(llvm_type(ir.element_type(tile_type).pointee)) // 8)


def _converted_on_read(load):
    """The `ttg.convert_layout` users of a read-back load when every use is one of them and they all
    convert into the same type (a dot-operand one only for a tile that is not 16-bit, which ldmatrix
    does not read): the tile is then read back in that layout, the conversion through shared memory
    saved (gla's fp32 gate tile, loaded in its own 16-byte vectors, wanted in the layout of the bf16
    k tile it scales, or in that tile's operand layout: `pipeline._read_operands_from_buffers`).
    Else []."""
    from tilejit.gpu.layouts import DotOperandEncoding
    users = [user for user, _ in load.results[0].uses]
    if not users or any(u.name != "ttg.convert_layout" or u.parent is not load.parent for u in users):
        return []
    wanted = users[0].results[0].type
    if isinstance(wanted.encoding, DotOperandEncoding) and element_bytes(load) == 2:
        return []   # 16-bit operands are read with ldmatrix (`_Buffer.plan`)
    if any(u.results[0].type != wanted for u in users):
        return []
    return users


def _read_in_layout(self, buf, stage, result_type, span):
    """The registers of `result_type`'s layout read from the buffer of `stage` of a read-back load:
    runs of registers along the tile's contiguous dim as one vector (within one 16-byte chunk)."""
    a = LLVMArith(self.b)
    layout = self.layout(result_type)
    coords = self.element_coords(layout)
    elem_ty = llvm_type(result_type)
    run = _run_length(layout, buf.tile.inner, CHUNK_BYTES // buf.elem_bytes)
    base = buf.stage_base(a, stage)
    values = [None] * len(layout.register_offsets())
    for r0 in range(0, len(values), run):
        ptr = self.smem_region_ptr(elem_ty, a.value(a.add(base, buf.tile.offset(a, coords[r0]))), span)
        if run == 1:
            values[r0] = self.b.load(ptr, typ=elem_ty, align=buf.elem_bytes)
            continue
        vector = self.b.load(ptr, typ=llir.VectorType(elem_ty, run), align=run * buf.elem_bytes)
        for i in range(run):
            values[r0 + i] = self.b.extract_element(vector, llir.Constant(I32, i))
    return values


def _read_back(self, buf, stage, span):
    """The registers of a pipelined load that has no dot-operand conversion of its own, read from its
    buffer of `stage` in the load's layout: every thread reads the vectors it copied."""
    a = LLVMArith(self.b)
    layout = self.layout(buf.load.results[0].type)
    offset_of = buf.vector_offsets(a, stage, self.element_coords(layout))
    elem_ty = llvm_type(buf.load.results[0].type)
    values = [None] * len(layout.register_offsets())
    for r0 in buf.copy_registers:
        ptr = self.smem_region_ptr(elem_ty, a.value(offset_of(r0)), span)
        vector = self.b.load(ptr, typ=llir.VectorType(elem_ty, buf.vec), align=buf.vec * buf.elem_bytes)
        for i in range(buf.vec):
            values[r0 + i] = self.b.extract_element(vector, llir.Constant(I32, i))
    return values


def _next_stage(self, stage, stages):
    plus = self.b.add(stage, llir.Constant(I32, 1))
    wrap = self.b.icmp_unsigned("==", plus, llir.Constant(I32, stages))
    return self.b.select(wrap, llir.Constant(I32, 0), plus)


# 32-bit registers a thread may hold of its dot operands read up front (fla's one-warp 32x64 and
# 64x32 bf16 operands: 64)
EAGER_OPERAND_REGISTERS = 64


def _eager_operand_registers(self, pipe) -> int:
    """Registers a thread holds of the dot operands the loop's pipelined tiles are converted into,
    when every fragment is read at once."""
    total = 0
    for load, convert in zip(pipe.loads, pipe.converts):
        for target in ([convert] if convert is not None else [v for v, _ in _dot_views(load)]):
            t = target.results[0].type
            total += self.layout(t).num_registers * element_bytes(load) // 4
    return total


def lower_pipelined_for(self, op, pipe=None) -> bool:
    """Lower a loop marked by `tritongpu-pipeline`; False when it is not pipelinable after all."""
    pipe = pipe or loop_pipeline(op)
    if pipe is None or not self.isa.supports_async_copy:
        return False
    S = pipe.stages
    body = op.regions[0].blocks[0]
    region_start = self.scratch_offset
    rewritten = set()   # ids of the fp8 operand converts read from a K-major rewrite of their buffer
    wgmma = _wgmma_converts(self, pipe, rewritten)
    if any(element_bytes(load) not in (2, 8) and conv is not None and id(conv) not in wgmma
           and id(conv) not in rewritten for load, conv in zip(pipe.loads, pipe.converts)):
        return False   # an fp8 / fp32 tile only wgmma's descriptors could read: the loop runs unpipelined
    # mma.sync loops keep S-1 buffers, as Triton: iteration i reads its tiles into registers, then
    # refills the same buffers with iteration i+S-1's copies, which stay S-1 iterations ahead of the
    # reads. wgmma reads its operands from shared memory while it runs (through descriptors), so
    # those loops keep S: iteration i refills the buffers iteration i-1 read. One buffer less is a
    # tile of shared memory less a CTA: fla's one-warp state loops (two 4 KiB tiles, S = 4) fit 8
    # CTAs on an SM instead of 6.
    #
    # Not where the fragments a thread would read up front pass EAGER_OPERAND_REGISTERS: there the
    # dots read each k-step's fragments right before its mma.sync (a 128x128x64 sm_80 matmul tile
    # at 8 warps would hold 96 registers of operands), which needs the S-th buffer. Nor for fp64
    # operands, which each thread reads element by element (no ldmatrix): held up front, their
    # per-element shared addresses stay live too (bench/gpu.py's fp64 64x64x16 tile at 4 warps:
    # 209 registers against 168, 2 CTAs an SM instead of 3, 0.78x Triton against 0.88-0.91x).
    descriptors = bool(wgmma) or bool(rewritten)   # wgmma reads shared memory while it runs
    eager = (not descriptors and all(element_bytes(load) != 8 for load in pipe.loads)
             and _eager_operand_registers(self, pipe) <= EAGER_OPERAND_REGISTERS)
    ring_stages = S - 1 if eager else S
    # wgmma's swizzle atoms must start 1024-byte aligned (the descriptors' base offset is 0).
    align = ATOM_BYTES if descriptors else 128
    buffers, offset = [], (region_start + align - 1) // align * align
    # id(view convert) -> (buffer, tile, ldmatrix plan or None for wgmma): a read-back tile its dots
    # read in place, the transposed views through the transposed tile
    views = {}
    for load, convert in zip(pipe.loads, pipe.converts):
        load_views = _dot_views(load) if convert is None else []
        chosen = [(v, t) for v, t in load_views if id(v) in wgmma]
        buf = _Buffer(self, load, convert, offset, ring_stages, wgmma=id(convert) in wgmma or bool(chosen),
                      rewritten=id(convert) in rewritten)
        buf.in_place = bool(chosen) and len(chosen) == len(load_views)   # no thread reads it back
        views.update((id(v), (buf, buf.tile.transposed() if t else buf.tile, None)) for v, t in chosen)
        read_by_ldmatrix = _ldmatrix_views(self, buf, load_views)
        if read_by_ldmatrix:
            buf.in_place = True
            views.update((key, (buf, tile, plan)) for key, (tile, plan) in read_by_ldmatrix.items())
        buffers.append(buf)
        offset += (buf.nbytes + align - 1) // align * align
    # The K-major rewrites of fp8 operands copied along M or N (`stage_transposed`): one tile each,
    # or two that the iterations take in turn, so that a dot reading one stays in flight while the
    # next iteration writes the other (`pipeline.REWRITE_SLOTS`).
    rewrite_slots = int(op.attrs.get(REWRITE_SLOTS, 1))
    for buf in buffers:
        if buf.rewritten:
            buf.rewrite_base, buf.rewrite_bytes = offset, buf.tile.nbytes
            offset += (rewrite_slots * buf.tile.nbytes + align - 1) // align * align
    glob = self.smem_base(offset - region_start)
    if descriptors:
        glob.align = max(glob.align or 0, ATOM_BYTES)
    self.pipelined_mma = True
    self.scratch_offset = offset   # scratch users inside the loop go after the ring buffers
    ring = (region_start, offset)  # the bytes of the ring buffers
    lb, ub, step = (self.get(v)[0] for v in op.operands[:3])
    inits = [self.get(v) for v in op.operand_group("inits")]
    convert_of = {id(buf.convert): buf for buf in buffers if not buf.read_back}
    read_back_of = {id(buf.load): buf for buf in buffers if buf.read_back}

    def bind(iv, args):
        self.set(body.args[0], [iv])
        for k, vals in args.items():
            self.set(body.args[k + 1], vals)

    # prologue: iterations 0 .. S-2
    threads = self.num_warps * self.warp_size
    # the registers of the values the loop carries besides pointers (its accumulators): pointer
    # tiles are carried per copy, not per element, or not at all (`pipe.dead_carries`)
    accumulators = sum(2 if _is_wide(v) else 1 for k, vals in enumerate(inits) if k not in pipe.dead_carries
                       for v in vals if not isinstance(v.type, llir.PointerType))
    self.pipelined_carried_registers = max(self.pipelined_carried_registers, accumulators)
    two_ctas = self.isa.asks_two_ctas(threads, offset, True, accumulators)
    lookahead = _Lookahead(self, pipe, inits, offsets=not two_ctas)
    look = lookahead.start
    iv = lb
    ahead_values = []   # per prologue iteration, the prefetched loads' values
    for s in range(S - 1):
        bind(iv, lookahead.values(look))
        ahead_values.append(_issue_copies(self, pipe, buffers, s, self.b.icmp_signed("<", iv, ub), ring,
                                          lookahead.advance_ops))
        look = lookahead.advanced(look)
        iv = self.b.add(iv, step)
    pre, header, body_bb, exit_bb, iv_phi, carried = self.open_loop("pipe", lb, inits)
    look_phis = {}
    for k, vals in look.items():
        look_phis[k] = [self.b.phi(v.type) for v in vals]
        for p, v in zip(look_phis[k], vals):
            p.add_incoming(v, pre)
    # queue[j][n]: the values of prefetched load n for iteration i + j (j < S - 1)
    queue = [[[self.b.phi(v.type) for v in vals] for vals in per_load] for per_load in ahead_values]
    for slots, per_load in zip(queue, ahead_values):
        for phis, vals in zip(slots, per_load):
            for p, v in zip(phis, vals):
                p.add_incoming(v, pre)
    read_stage = self.b.phi(I32, name="read_stage")
    read_stage.add_incoming(llir.Constant(I32, 0), pre)
    write_stage = self.b.phi(I32, name="write_stage")
    write_stage.add_incoming(llir.Constant(I32, (S - 1) % ring_stages), pre)
    # which of two rewrite slots this iteration writes (and its dots read)
    slot = self.b.phi(I32, name="rewrite_slot") if rewrite_slots == 2 and rewritten else None
    if slot is not None:
        slot.add_incoming(llir.Constant(I32, 0), pre)
    self.b.cbranch(self.b.icmp_signed("<", iv_phi, ub), body_bb, exit_bb)

    self.b.position_at_end(body_bb)
    self.isa.async_wait(self.b, S - 2)   # this iteration's tiles have landed (for this thread) ...
    self.isa.barrier(self.b)             # ... for every thread (and, with S buffers, the oldest is free)
    ahead = self.b.add(iv_phi, self.b.mul(step, llir.Constant(step.type, S - 1)))
    in_flight = _async_wgmma_dots(body, {**wgmma, **dict.fromkeys(rewritten, False)} if slot is not None else wgmma)

    fetched_ahead = []   # the prefetched loads' values for iteration i+S-1

    def bind_this_iteration():
        bind(iv_phi, {k: carried[k] for k in range(len(carried))})
        for load, phis in zip(pipe.prefetched, queue[0]):   # (S >= 2: queue has S - 1 slots)
            self.set(load.results[0], list(phis))

    def copies_ahead(stage):
        """Start iteration i+S-1's copies into `stage` (the address slice lowered for that
        iteration, the body's arguments bound to its values), then bind this iteration's again."""
        bind(ahead, lookahead.values(look_phis))
        fetched_ahead[:] = _issue_copies(self, pipe, buffers, stage, self.b.icmp_signed("<", ahead, ub), ring,
                                         lookahead.advance_ops)
        following = lookahead.advanced(look_phis)
        bind_this_iteration()
        return following

    if not in_flight and not eager:
        next_look = copies_ahead(write_stage)
    self.wgmma_in_flight = list(in_flight)   # in the body's order: the last one waits for all
    bind_this_iteration()
    a = LLVMArith(self.b)
    in_place = {id(buf.load) for buf in buffers if buf.read_back and buf.in_place}
    read_done = set()   # ids of ops whose results a read of the ring buffers produced

    def read_buffers(inner) -> bool:
        """Lower `inner` if it reads a ring buffer (a read-back load, an operand conversion or view
        of a pipelined tile); False for every other op."""
        if id(inner) in read_back_of:
            buf = read_back_of[id(inner)]
            converts = [] if buf.wgmma else _converted_on_read(inner)
            if converts:
                values = _read_in_layout(self, buf, read_stage, converts[0].results[0].type, ring)
                for conv in converts:
                    self.set(conv.results[0], values)
                    read_done.add(id(conv))
            elif id(inner) not in in_place:
                self.set(inner.results[0], _read_back(self, buf, read_stage, ring))
            return True
        buf = convert_of.get(id(inner))
        buf, tile, plan = views.get(id(inner), (buf, buf and buf.tile, buf and buf.plan))
        if buf is None:
            return False
        if buf.rewritten:
            from .wgmma import stage_transposed
            base = a.value(a.mul(buf.stage_base(a, read_stage), buf.elem_bytes))
            dst = buf.rewrite_base if slot is None else a.add(buf.rewrite_base, a.mul(slot, buf.rewrite_bytes))
            self.wgmma_operands[id(inner.results[0])] = stage_transposed(
                self, buf.tile, base, ring, dst, inner.results[0].type.encoding.op_idx)
            return True
        if buf.wgmma:
            from .wgmma import WgmmaOperand
            self.wgmma_operands[id(inner.results[0])] = WgmmaOperand(
                tile, a.value(a.mul(buf.stage_base(a, read_stage), buf.elem_bytes)),
                inner.results[0].type.encoding.op_idx)
            return True
        result = inner.results[0]
        base = buf.stage_base(a, read_stage)
        operand = (LazyDotOperand(self, tile, plan, result.type, base, ring) if plan is not None
                   else PlainDotOperand(self, tile, result.type, base, ring))
        if _feeds_only_dots(result) and not eager:
            self.lazy_operands[id(result)] = operand   # the dot reads it k-step by k-step
        else:
            self.set(result, operand.all_values())
        return True

    def passed_over(inner) -> bool:
        """Ops the body's lowering leaves out: done already, the address slice only the copies use,
        the `tl.trans` of a tile every use reads transposed in place."""
        return (id(inner) in read_done or (id(inner) in pipe.main_skip and id(inner) not in read_back_of)
                or (inner.name == "tt.trans" and id(inner.operands[0].owner) in in_place))

    if eager:
        # every read of this iteration's buffers, then the barrier after which they are refilled
        for inner in body.ops[:-1]:
            if not passed_over(inner) and read_buffers(inner):
                read_done.add(id(inner))
        self.isa.barrier(self.b)
        next_look = copies_ahead(read_stage)
    for inner in body.ops[:-1]:
        if not passed_over(inner) and not read_buffers(inner):
            self.lower_op(inner)
    self.wgmma_in_flight = []
    yielded = [carried[k] if k in pipe.dead_carries else self.get(v) for k, v in enumerate(body.ops[-1].operands)]
    if in_flight:
        # Every warpgroup has waited for its previous group: the buffer it read may be refilled.
        self.isa.barrier(self.b)
        next_look = copies_ahead(write_stage)
    next_read, next_write = _next_stage(self, read_stage, ring_stages), _next_stage(self, write_stage, ring_stages)
    latch = self.b.block
    iv_phi.add_incoming(self.b.add(iv_phi, step), latch)
    for phis, vals in zip(carried, yielded):
        for p, v in zip(phis, vals):
            p.add_incoming(v, latch)
    for k, phis in look_phis.items():
        for p, v in zip(phis, next_look[k]):
            p.add_incoming(v, latch)
    for j, slots in enumerate(queue):   # iteration i+1's queue: this one's shifted by one
        following = queue[j + 1] if j + 1 < len(queue) else fetched_ahead
        for phis, vals in zip(slots, following):
            for p, v in zip(phis, vals):
                p.add_incoming(v, latch)
    read_stage.add_incoming(next_read, latch)
    write_stage.add_incoming(next_write, latch)
    if slot is not None:
        slot.add_incoming(self.b.xor(slot, llir.Constant(I32, 1)), latch)
    self.b.branch(header)

    self.b.position_at_end(exit_bb)
    results = [list(phis) for phis in carried]
    if in_flight:
        from .wgmma import wait_for_wgmma_all
        carried_in_flight = sorted(set(in_flight.values()))
        for k, vals in zip(carried_in_flight, wait_for_wgmma_all(self, [results[k] for k in carried_in_flight], 0)):
            results[k] = vals
    self.isa.async_wait(self.b, 0)   # no copy may land in memory that scratch users reuse
    self.isa.barrier(self.b)
    self.scratch_offset = region_start
    for r, vals in zip(op.results, results):
        self.set(r, vals)
    return True

