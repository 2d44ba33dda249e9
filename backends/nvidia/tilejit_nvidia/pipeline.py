"""`tritongpu-pipeline` (NVIDIA, sm_80+): software pipelining of the loads that feed mma.sync and
wgmma dots; the NVIDIA backend appends it to the core's TTGIR passes in `add_stages`.

A load is pipelined when it is a 16-bit 2-D `tt.load` in an `scf.for` body whose only user is a
`ttg.convert_layout` to an mma.sync dot-operand layout that `ldmatrix` can produce (or an fp8 / fp32
operand of a wgmma dot, read K-major by descriptors: no ldmatrix; or a 16-bit tile that reaches
such conversions through elementwise ops only, read back in its own layout), its `other` is
zero (or absent: `cp.async` zero-fills), its rows are vectors of at least 4 bytes, and its address
and mask are computed from the induction variable, loop-carried values advanced by pure ops, and
values defined before the loop (the *address slice*). The pass only marks: the load gets
`ttg.pipelined = true`, the loop `ttg.num_stages = S`. The lowering (`shared_dot.py`) then copies
the tiles of iterations i+1 .. i+S-1 into a ring of S swizzled shared-memory buffers with `cp.async`
while iteration i reads its tile with `ldmatrix` (Triton's multi-buffering, as in its
`tritongpu-pipeline` with `num_stages`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import List, Optional, Set

from tilejit import ir
from tilejit.gpu.axis_info import AxisAnalysis, vector_width
from tilejit.gpu.layouts import DotOperandEncoding
from tilejit.gpu.operand_hoist import hoist_operand_conversion, operand_conversions

from .layouts import NvidiaMmaEncoding
from .shared_operands import SwizzledTile, WgmmaTile, operand_tile, plan_ldmatrix

_WGMMA_ONLY_TYPES = {"f8E4M3FN": 1, "f8E5M2": 1, "f32": 4}   # element bytes

PIPELINED = "ttg.pipelined"
# A small load (a scalar or a vector) of a pipelined loop, loaded num_stages - 1 iterations ahead
# into registers, along with the tiles' copies (`shared_dot.lower_pipelined_for`).
PREFETCHED = "ttg.prefetched"
NUM_STAGES = "ttg.num_stages"
# 2 on a loop whose fp8 operand rewrites (`transposed_for_wgmma`) fit twice: the iterations write the
# two tiles in turn, so that each dot may stay in flight while the next iteration rewrites.
REWRITE_SLOTS = "ttg.rewrite_slots"
# On a pipelined fp8 operand load its dot reads from a K-major rewrite of its buffer
# (`transposed_for_wgmma`): decided here, where the shared memory is budgeted, and read by the lowering.
REWRITTEN = "ttg.rewritten_k_major"
# Of the target's shared memory (`TargetDescription.shared_memory`: 227 KiB a CTA on H100, 163 KiB on
# A100), this much is left to the scratch that reductions and conversions use inside the loop; the
# ring buffers of one loop may take the rest.
SCRATCH_RESERVE = 32 * 1024

_SIDE_EFFECTS = ("tt.load", "tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.atomic_load", "tt.atomic_store",
                 "tt.dot", "tt.print", "tt.assert",
                 "tt.call", "gpu.barrier", "tt.return", "scf.yield", "scf.condition")


@dataclass
class LoopPipeline:
    """What the lowering needs to pipeline one marked loop."""
    loop: ir.Operation
    stages: int
    loads: List[ir.Operation]
    converts: List[ir.Operation]
    slice_ops: List[ir.Operation]          # body ops computing the loads' operands, in body order
    slice_args: List[int]                  # iter-arg indices (into the loop results) the slice reads
    main_skip: Set[int] = field(default_factory=set)   # ids of body ops the normal pass leaves out
    prefetched: List[ir.Operation] = field(default_factory=list)   # loads kept ahead in registers
    # Iter args only the address slice reads and nobody reads after the loop: the lookahead carries
    # them, so the normal pass does not advance them (no second set of pointers in registers).
    dead_carries: Set[int] = field(default_factory=set)

    @cached_property
    def copy_operand_ops(self) -> List[ir.Operation]:
        """The slice ops the loads' own operands (addresses, masks) read within one iteration, in
        body order; the other slice ops only compute the next iteration's values (the pointers'
        advances)."""
        chosen = {id(op) for op in self.slice_ops}
        needed, work = set(), [v for op in self.loads + self.prefetched for v in op.operands]
        while work:
            owner = work.pop().owner
            if isinstance(owner, ir.Operation) and id(owner) in chosen and id(owner) not in needed:
                needed.add(id(owner))
                work.extend(owner.operands)
        return [op for op in self.slice_ops if id(op) in needed]

    @cached_property
    def uniform_advances(self) -> dict:
        """{iter-arg index: the advance} of the slice's pointer tiles that every iteration moves by
        one amount for all their elements (`a_ptrs += BLOCK_K * stride_ak`: a `tt.addptr` of the
        argument and a splat). The lookahead then keeps such a tile as its pointers before the loop
        plus one byte offset (`shared_dot.lower_pipelined_for`)."""
        body = self.loop.regions[0].blocks[0]
        yield_op = body.ops[-1]
        found = {}
        for k in self.slice_args:
            arg = body.args[k + 1]
            step = yield_op.operands[k].owner
            if (isinstance(arg.type, ir.TensorType) and isinstance(step, ir.Operation)
                    and step.name == "tt.addptr" and step.operands[0] is arg
                    and _is_splat(step.operands[1])):
                found[k] = step.operands[1]
        return found


def _is_splat(v: ir.Value) -> bool:
    """A tile with one value in every element: a `tt.splat`, or a constant holding one value."""
    owner = v.owner
    if not isinstance(owner, ir.Operation):
        return False
    if owner.name == "tt.splat":
        return True
    value = owner.attrs.get("value") if owner.name == "arith.constant" else None
    if isinstance(value, ir.DenseAttr):
        return len(set(value.values)) == 1
    return isinstance(value, (int, float))


def _is_zero_constant(v: ir.Value) -> bool:
    owner = v.owner
    if not isinstance(owner, ir.Operation) or owner.name != "arith.constant":
        return False
    value = owner.attrs.get("value")
    if isinstance(value, ir.DenseAttr):
        return all(float(x) == 0.0 for x in value.values)
    return isinstance(value, (int, float)) and float(value) == 0.0


def _dot_operand_convert(load: ir.Operation) -> Optional[ir.Operation]:
    uses = load.results[0].uses
    if len(uses) != 1:
        return None
    user = uses[0][0]
    enc = user.results[0].type.encoding if user.name == "ttg.convert_layout" else None
    if (user.parent is not load.parent or not isinstance(enc, DotOperandEncoding)
            or not isinstance(enc.parent, NvidiaMmaEncoding)):
        return None
    return user


def _buffer_convert(load: ir.Operation) -> Optional[ir.Operation]:
    """The dot-operand conversion the lowering reads a pipelined load's buffer for (ldmatrix, or
    wgmma's descriptors); None for a tile read back in a layout: its own, or that of the conversions
    it has (an fp32 tile in an mma.sync operand layout: `_read_in_layout`)."""
    convert = _dot_operand_convert(load)
    if convert is not None and element_bytes(load) == 4 and convert.results[0].type.encoding.parent.version_major == 2:
        return None
    return convert


def feeds_dot_through_elementwise(load: ir.Operation) -> bool:
    """Whether the load's tile flows, through elementwise ops, transpositions and layout conversions
    in the loop body (fla's `b_v * exp2(g_last - g)[:, None]`, a dequantisation's
    `.to(tl.float16) * scale`, a tile that is both `b_v` and `tl.trans(b_v)` of two dots), into a
    conversion to an mma.sync dot operand. Other users may read it too (fla's delta rule stores
    `v - w h` and multiplies it into k^T's dot). Such a load is pipelined and read back from its
    buffer in its own layout, as Triton pipelines every load whose value reaches a dot."""
    seen, work, found = set(), [load.results[0]], False
    while work:
        value = work.pop()
        for user, _ in value.uses:
            if id(user) in seen:
                continue
            seen.add(id(user))
            if not user.results or not isinstance(user.results[0].type, ir.TensorType):
                continue
            enc = user.results[0].type.encoding
            if user.name == "ttg.convert_layout" and isinstance(enc, DotOperandEncoding):
                found = found or (isinstance(enc.parent, NvidiaMmaEncoding) and user.parent is load.parent)
                continue
            if user.parent is load.parent and not user.regions and (
                    ir.op_info(user.name).elementwise or user.name in ("ttg.convert_layout", "tt.trans")):
                work.extend(user.results)
    return found


_ELEMENT_BYTES = {**_WGMMA_ONLY_TYPES, "f64": 8}   # 2 for every other pipelined type (f16, bf16)


def element_bytes(load: ir.Operation) -> int:
    return _ELEMENT_BYTES.get(str(ir.element_type(load.results[0].type)), 2)


def copy_vector(analysis: AxisAnalysis, load: ir.Operation):
    """(inner dim, elements per cp.async) of a load's pointer layout: the dim its registers run along
    in memory-contiguous vectors of at most 16 bytes; (None, 1) when no vector of >= 4 bytes exists."""
    from tilejit.gpu.llvm.convert import _run_length
    ptr = load.operands[0]
    mask = load.operand("mask")
    layout = ptr.type.encoding.to_linear(ptr.type.shape)
    best = (None, 1)
    for dim in range(2):
        vec = min(vector_width(analysis, ptr, dim, mask), 16 // element_bytes(load))
        vec = _run_length(layout, dim, vec) if vec > 1 else 1
        if vec > best[1]:
            best = (dim, vec)
    return best


def pipelinable_load(analysis: AxisAnalysis, load: ir.Operation, num_warps: int) -> bool:
    if load.name != "tt.load" or len(load.operands) > 3 or load.attrs.get("is_volatile"):
        return False
    ptr, res = load.operands[0], load.results[0].type
    if not isinstance(ptr.type, ir.TensorType) or ir.is_block_ptr(ptr.type) or res.rank != 2:
        return False
    elem = str(ir.element_type(res))
    if (elem not in ("f16", "bf16", "f64") and elem not in _WGMMA_ONLY_TYPES) or ptr.type.encoding is None:
        return False
    if len(load.operands) == 3 and not _is_zero_constant(load.operands[2]):
        return False
    convert = _dot_operand_convert(load)
    inner, vec = copy_vector(analysis, load)
    if convert is None:   # read back in its own layout, then computed on (`feeds_dot_through_elementwise`)
        # 16- and 32-bit tiles (gla's fp32 gate tile scales k before its dot, as Triton pipelines it)
        eb = element_bytes(load)
        return (elem in ("f16", "bf16", "f32") and inner is not None and vec * eb >= 4
                and SwizzledTile(tuple(res.shape), inner, eb).fits() and feeds_dot_through_elementwise(load))
    enc = convert.results[0].type.encoding
    if elem == "f32" and enc.parent.version_major == 2:   # read straight into its layout (`_reads_into`)
        return inner is not None and SwizzledTile(tuple(res.shape), inner, 4).fits()
    if elem in _WGMMA_ONLY_TYPES:   # only for wgmma's descriptors: a K-major 128B-swizzled tile
        return enc.parent.version_major == 3 and (wgmma_copy(analysis, load, enc.op_idx) is not None
                                                  or fp8_transposed_copy(analysis, load, enc.op_idx, num_warps))
    if elem == "f64":   # DMMA's operands: 16-byte copies in, plain shared loads out (no ldmatrix)
        return inner is not None and vec == 2 and SwizzledTile(tuple(res.shape), inner, 8).fits()
    if inner is None or vec < 2 or not SwizzledTile(tuple(res.shape), inner).fits():
        return False
    return plan_ldmatrix(enc.to_linear(res.shape), enc.op_idx, inner) is not None


def wgmma_k_dim(op_idx: int) -> int:
    """The K dim of dot operand `op_idx` (A: M x K, B: K x N)."""
    return 1 if op_idx == 0 else 0


def wgmma_copy(analysis: AxisAnalysis, load: ir.Operation, op_idx: int):
    """(contiguous dim of the shared tile, elements per cp.async) of a load that operand `op_idx` of a
    wgmma dot reads through descriptors, or None when its tile cannot be one.

    16-bit tiles keep the load's contiguous dim (wgmma transposes them itself). fp8 and tf32 are read
    K-major only: a load contiguous along K copies vectors; a 32-bit load contiguous along M or N
    (fp32 B of a row-major [K, N] matrix, the common case) copies each element with its own 4-byte
    cp.async into the K-major tile, transposing on the way, as Triton does on sm_90."""
    eb = element_bytes(load)
    shape = tuple(load.results[0].type.shape)
    inner, vec = copy_vector(analysis, load)
    k_dim = wgmma_k_dim(op_idx)
    if eb == 2 or (inner == k_dim and vec * eb >= 4):
        fits = inner is not None and operand_tile(shape, inner, eb, k_major=inner == k_dim) is not None
        return (inner, vec) if fits else None
    if eb == 4 and WgmmaTile(shape, k_dim, eb).fits():
        return k_dim, 1
    return None


def fp8_transposed_copy(analysis: AxisAnalysis, load: ir.Operation, op_idx: int, num_warps: int) -> bool:
    """Whether an fp8 operand load that runs along its non-K dim (B of a row-major [K, N] matrix, A of
    a column-major [M, K] one: wgmma reads fp8 K-major only, and `cp.async` cannot transpose 1-byte
    elements) is copied as it is into its ring buffer and rewritten K-major for each iteration's
    wgmma (`shared_operands.ByteTranspose`, on A's transposed view)."""
    from .shared_operands import ByteTranspose
    if element_bytes(load) != 1:
        return False
    inner, vec = copy_vector(analysis, load)
    shape = tuple(load.results[0].type.shape)
    k_major_view = shape if op_idx == 1 else shape[::-1]   # [K, non-K]
    return inner == 1 - wgmma_k_dim(op_idx) and vec >= 4 and ByteTranspose(k_major_view, num_warps).fits()


def transposed_for_wgmma(analysis: AxisAnalysis, load: ir.Operation, num_warps: int) -> bool:
    """Whether a pipelinable load is an fp8 wgmma operand its dot reads from a K-major rewrite of its
    buffer (`fp8_transposed_copy`), not from the buffer itself."""
    convert = _dot_operand_convert(load)
    if convert is None or element_bytes(load) != 1:
        return False
    op_idx = convert.results[0].type.encoding.op_idx
    return wgmma_copy(analysis, load, op_idx) is None and fp8_transposed_copy(analysis, load, op_idx, num_warps)


def _address_slice(loop: ir.Operation, loads, through=()):
    """(slice ops in body order, iter-arg indices) or None when an address depends on anything but
    pure ops, the induction variable, self-advancing iter args and values from before the loop. An
    address may also read the loads of `through` (prefetched loads: the lookahead loads them before
    it computes the addresses that read them), whose own addresses join the slice."""
    body = loop.regions[0].blocks[0]
    in_body = {id(op) for op in body.ops}
    through_ids = {id(op) for op in through}
    load_ids = {id(op) for op in loads} - through_ids
    yield_op = body.ops[-1]
    chosen, args, reached = set(), set(), set()
    work = [v for op in loads for v in op.operands]
    while work:
        v = work.pop()
        if isinstance(v, ir.BlockArgument):
            if v.block is body and v.index >= 1 and (v.index - 1) not in args:
                args.add(v.index - 1)
                work.append(yield_op.operands[v.index - 1])
            continue
        op = v.owner
        if not isinstance(op, ir.Operation) or id(op) not in in_body or id(op) in chosen:
            continue
        if id(op) in through_ids:
            if id(op) not in reached:
                reached.add(id(op))
                work.extend(op.operands)
            continue
        if id(op) in load_ids or op.regions or op.name in _SIDE_EFFECTS or op.name.startswith("scf."):
            return None
        chosen.add(id(op))
        work.extend(op.operands)
    return [op for op in body.ops if id(op) in chosen], sorted(args)


def _index_loads(loop: ir.Operation, load: ir.Operation, candidates) -> Optional[List[ir.Operation]]:
    """The loads of `candidates` (prefetchable loads) that `load`'s address reads, when its address
    slice is pure given them (a gather `x[idx[:, None], cols]` whose `idx` is loaded in the same
    iteration, as Liger's MoE weight gradients read their tokens); None when it is not."""
    if _address_slice(loop, [load], candidates) is None:
        return None
    body = loop.regions[0].blocks[0]
    ids = {id(op) for op in candidates}
    found, seen, work = [], set(), list(load.operands)
    while work:
        v = work.pop()
        op = v.owner if isinstance(v.owner, ir.Operation) else None
        if op is None or op.parent is not body or id(op) in seen:
            continue
        seen.add(id(op))
        if id(op) in ids:
            found.append(op)
        else:
            work.extend(op.operands)
    return found


def _main_skip(body: ir.Block, loads, slice_ops, dead=frozenset()) -> Set[int]:
    """The loads, and slice ops whose results only feed skipped ops or the yields of dead carries
    (left out of the normal pass: the lookahead computes them)."""
    skip = {id(op) for op in loads}
    candidates = {id(op) for op in slice_ops}
    yield_op = body.ops[-1]
    for op in reversed(body.ops):
        if id(op) in candidates and all(id(user) in skip or (user is yield_op and idx in dead)
                                        for r in op.results for user, idx in r.uses):
            skip.add(id(op))
    return skip


def _dead_carries(loop: ir.Operation, args, loads, slice_ops) -> Set[int]:
    """Start from every slice arg unused after the loop; drop those read by an op the normal pass
    keeps, until the set is stable."""
    body = loop.regions[0].blocks[0]
    yield_op = body.ops[-1]
    dead = {k for k in args if not loop.results[k].uses}
    while True:
        skip = _main_skip(body, loads, slice_ops, frozenset(dead))
        keep = {k for k in dead
                if all(id(user) in skip or (user is yield_op and idx == k) for user, idx in body.args[k + 1].uses)}
        if keep == dead:
            return dead
        dead = keep


def loop_pipeline(loop: ir.Operation) -> Optional[LoopPipeline]:
    """The pipelining plan of a loop the pass marked (None when unmarked)."""
    stages = loop.attrs.get(NUM_STAGES)
    if not stages:
        return None
    body = loop.regions[0].blocks[0]
    loads = [op for op in body.ops if op.name == "tt.load" and op.attrs.get(PIPELINED)]
    prefetched = [op for op in body.ops if op.name == "tt.load" and op.attrs.get(PREFETCHED)]
    found = _address_slice(loop, loads + prefetched, through=prefetched)
    if not loads or found is None:
        return None
    slice_ops, args = found
    converts = [_buffer_convert(op) for op in loads]
    dead = _dead_carries(loop, args, loads + prefetched, slice_ops)
    return LoopPipeline(loop, int(stages), loads, converts, slice_ops, args,
                        _main_skip(body, loads + prefetched, slice_ops, frozenset(dead)), prefetched=prefetched,
                        dead_carries=dead)


# A prefetched load keeps num_stages - 1 copies of its value in registers: at most this many elements
# (fla's gate vector `b_gk_last`, 32 or 64 floats, and its scalar `b_g_last`)
PREFETCH_ELEMENTS = 128


def _pointer_root(v: ir.Value):
    """The kernel argument a pointer is computed from by pointer arithmetic, broadcasts and loop-carried
    advances, or None when it comes from anything else (a pointer loaded from memory)."""
    while True:
        if isinstance(v, ir.BlockArgument):
            owner = v.block.parent.parent if v.block.parent is not None else None
            if owner is not None and owner.name == "tt.func":
                return v   # an argument of the kernel
            if owner is None or owner.name != "scf.for" or v.index == 0:
                return None
            v = owner.operand_group("inits")[v.index - 1]
        elif isinstance(v.owner, ir.Operation) and v.owner.name in ir.POINTER_PASSTHROUGH:
            v = v.owner.operands[0]
        else:
            return None


def _prefetchable_loads(loop: ir.Operation, pipelined, index_loads=()) -> List[ir.Operation]:
    """The scalar and vector loads of a pipelined loop that may be loaded num_stages - 1 iterations
    early, as Triton's pipeliner copies every load that reaches a dot (fla's `b_gk_last`, which scales
    the state and the k tile): each took a full round trip to memory every iteration. Not a load from
    memory the loop writes (through the same kernel argument: arguments are taken not to alias, as
    Triton's pipeliner takes them), nor in a loop with atomics or a store through a pointer of unknown
    origin."""
    body = loop.regions[0].blocks[0]
    written = set()
    for op in loop.walk():
        if op.name.startswith("tt.atomic") or op.name in ("tt.call", "tt.elementwise_inline_asm") \
                or "descriptor_store" in op.name:
            return []   # writes memory the loads cannot be told apart from
        if op.name == "tt.store":
            root = _pointer_root(op.operands[0])
            if root is None:
                return []
            written.add(id(root))
    chosen, pipelined_ids = [], {id(op) for op in pipelined}
    for op in body.ops:
        if op.name != "tt.load" or id(op) in pipelined_ids or op.attrs.get(PIPELINED) or op.attrs.get("is_volatile") \
                or not op.results[0].uses:
            continue
        t = op.results[0].type
        if ir.is_block_ptr(op.operands[0].type) or (isinstance(t, ir.TensorType) and (t.rank > 1 or t.numel > PREFETCH_ELEMENTS)):
            continue
        root = _pointer_root(op.operands[0])
        if root is None or id(root) in written:
            continue
        if _address_slice(loop, list(pipelined) + chosen + [op], index_loads) is not None:
            chosen.append(op)
    return chosen


def pipeline_loops(func: ir.Operation, num_stages: int, shared_memory: int, num_warps: int = 4) -> None:
    """Mark the loads of every loop that can be pipelined with `num_stages` buffers (>= 2; a loop's
    own `tl.range(num_stages=)`, the attribute `tt.num_stages`, wins), as many as fit in
    `shared_memory` bytes less the scratch reserve."""
    analysis = None  # made for the first loop that loads: most kernels have none
    budget = shared_memory - SCRATCH_RESERVE
    for loop in [op for op in func.walk() if op.name == "scf.for"]:
        stages = loop.attrs.get("tt.num_stages")
        stages = num_stages if stages is None else int(stages)
        if stages < 2:
            continue
        body = loop.regions[0].blocks[0]
        if analysis is None:
            if not any(op.name == "tt.load" for op in body.ops):
                continue
            analysis = AxisAnalysis(func)
        loads = [op for op in body.ops if op.name == "tt.load" and pipelinable_load(analysis, op, num_warps)]
        # A load whose address reads small loads of the iteration (a gather's row indices) is
        # pipelined when those can be prefetched: the lookahead loads them first.
        indices = _prefetchable_loads(loop, [op for op in loads if _address_slice(loop, [op]) is not None])
        # Drop loads whose address slice is not pipelinable, one at a time, until the rest is.
        while loads and _address_slice(loop, loads, indices) is None:
            loads = [op for op in loads if _index_loads(loop, op, indices) is not None]
        if not loads:
            continue
        needed = {id(i) for op in loads for i in _index_loads(loop, op, indices)}
        per_stage = sum(op.results[0].type.numel * element_bytes(op) for op in loads)
        # the K-major rewrites of fp8 operand tiles lie beside the ring buffers
        to_rewrite = [op for op in loads if transposed_for_wgmma(analysis, op, num_warps)]
        rewritten = sum(op.results[0].type.numel for op in to_rewrite)
        while stages > 2 and per_stage * stages + rewritten > budget:
            stages -= 1
        if per_stage * stages + rewritten > budget:
            continue
        prefetched = _prefetchable_loads(loop, loads, [op for op in indices if id(op) in needed])
        if not needed <= {id(op) for op in prefetched}:   # an index load that cannot run ahead after all
            continue
        _read_operands_from_buffers(analysis, body, loads)
        for op in loads:
            op.attrs[PIPELINED] = True
        for op in to_rewrite:
            op.attrs[REWRITTEN] = True
        for op in prefetched:
            op.attrs[PREFETCHED] = True
        loop.attrs[NUM_STAGES] = stages
        if rewritten and per_stage * stages + 2 * rewritten <= budget:
            loop.attrs[REWRITE_SLOTS] = 2


def _reads_into(analysis: AxisAnalysis, load: ir.Operation, enc) -> bool:
    """Whether a pipelined load's buffer can be read straight into `enc`, an mma.sync operand layout:
    16-bit tiles with ldmatrix, fp32 tiles with plain shared loads (`_read_in_layout`)."""
    if not (isinstance(enc, DotOperandEncoding) and isinstance(enc.parent, NvidiaMmaEncoding)
            and enc.parent.version_major == 2):
        return False
    res = load.results[0].type
    inner, vec = copy_vector(analysis, load)
    if element_bytes(load) == 4:
        return inner is not None
    return (element_bytes(load) == 2 and inner is not None and vec >= 2
            and plan_ldmatrix(enc.to_linear(res.shape), enc.op_idx, inner) is not None)


def _read_operands_from_buffers(analysis: AxisAnalysis, body: ir.Block, loads) -> None:
    """A tf32 mma.sync operand computed in the loop from pipelined tiles (gla's
    `b_q * exp2(b_g - b_gn[None, :]) * scale` into `tl.dot(b_qg, b_kg)`) is computed in the operand
    layout instead, its tiles read from their buffers straight into it (`operand_hoist`): a 32-bit
    tile has no ldmatrix, and its conversion went element by element through shared memory every
    iteration (gla's `intra_sub_inter` 30.4 -> 20.1 us on an H100, Triton 21.7).

    Not for 16-bit operands: their conversion is vector stores and ldmatrix, and computing the
    chain in the operand layout made fla's bf16 state recurrences slower on the H100 (retention's
    `chunk_fwd_kernel_h` 57.8 -> 65.5 us, gla's `chunk_bwd_kernel_dh` 47.5 -> 64.7), though it has
    fewer barriers: the gate tiles are then read one element at a time, and the products are
    rounded to bf16 one by one instead of in pairs.

    Nor where the operand layout holds more elements a thread than the chain's own (an A operand
    shared by the warps along N): each warp would compute the whole chain again."""
    chosen = {id(op) for op in loads}
    for conv in operand_conversions(body):
        src_t, dst_t = conv.operands[0].type, conv.results[0].type
        enc = dst_t.encoding
        if (isinstance(enc.parent, NvidiaMmaEncoding) and enc.parent.version_major == 2
                and str(ir.element_type(dst_t)) == "f32"
                and enc.to_linear(dst_t.shape).num_registers <= src_t.encoding.to_linear(src_t.shape).num_registers):
            hoist_operand_conversion(conv, lambda load, e: id(load) in chosen and _reads_into(analysis, load, e))


@dataclass(frozen=True)
class Pipeline:
    """The pass: multi-buffer the loads that feed matrix-unit dots with `num_stages` buffers (a loop's
    `tl.range(num_stages=)` wins), as many as fit in `shared_memory` bytes."""
    num_stages: int
    shared_memory: int
    num_warps: int = 4
    name: str = "tritongpu-pipeline"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            pipeline_loops(func, self.num_stages, self.shared_memory, self.num_warps)
