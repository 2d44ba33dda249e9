"""`tt.dot` with NVIDIA MMA version 3: `wgmma.mma_async` (sm_90a) with B in shared memory: f16/bf16
(m64nNk16), and fp8 (m64nNk32, e4m3/e5m2) and tf32 (m64nNk8) with both operands K-major there.

The pipelined loop (`shared_dot.lower_pipelined_for`) copies B's tile (and A's, when A is loaded in
the loop too) with `cp.async` into `WgmmaTile`s (swizzled) and hands the dot a `WgmmaOperand`
instead of registers. Outside loops the dot's B (and A, unless it comes from a matrix result) is
written into a `WgmmaTile` of the scratch where it is computed (`stage_operand`), as Triton's
`local_alloc`; in a loop, a B computed in registers there is (fla's delta-rule state), every
iteration, the dot waiting for its group before the tile's region is given back. Each warpgroup
(4 warps) then runs, per m64 block of its rows (M may hold several: block r of warpgroup g starts
at row 16 * num_warps * r + 64 g; on a 64-row tile at 8 warps the warpgroups split N instead, each
its own column block of B) and per k-step of 16, one
`m64nNk16` whose B is a matrix descriptor (start address, LBO/SBO, swizzle mode) and whose A is
one too, or four registers of the A fragment (attention's P, which never leaves registers):

    wgmma.fence; wgmma.mma_async x K/16; wgmma.commit_group; wgmma.wait_group 0

or, for the n dots a pipelined loop keeps in flight (`shared_dot`), one `wgmma.wait_group n` after
the last of them: their results are then complete only after the next iteration's wait, or the
loop exit's `wait_for_wgmma(.., 0)`.

The accumulator lives in the registers of the version-3 layout (`tilejit_nvidia/layouts.py`), in
the order of the PTX ISA's D fragment: d[4j + {0,1,2,3}] = (r, 8j+c), (r, 8j+c+1), (r+8, 8j+c),
(r+8, 8j+c+1) with r = 16 * warp-in-group + lane / 4, c = 2 * (lane % 4).
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as llir

from tilejit import ir
from tilejit.errors import CompilationError
from tilejit.gpu.isa import F32, I32

from .inline_ptx import inline_ptx as _asm
from .mma_sync import H2, pack_halves, unpack_halves
from .shared_operands import WgmmaTile, descriptor_bits, staging_dims

I64 = llir.IntType(64)
# The PTX names of the operand types that only the K-major, A-in-shared-memory forms take.
_KINDS = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2", "f32": "tf32"}
WARPS_PER_GROUP = 4
ROWS_PER_GROUP = 64


@dataclass
class WgmmaOperand:
    """Operand `op_idx` of a wgmma dot: `tile` starting `base_bytes` (int or i32) into shared memory."""
    tile: WgmmaTile
    base_bytes: object
    op_idx: int


def _descriptors(self, operand: WgmmaOperand, extra_bytes, ks) -> list:
    """The i64 descriptor of the block at each K index in `ks`, `extra_bytes` (i32 or 0) further on.

    Only the first is built from the address; the others add their blocks' distance (a multiple of
    16 bytes) to its 14-bit start field. That field cannot carry into the next one: it holds
    address / 16 of a shared-memory address below 256 KiB. One 64-bit add per wgmma, as Triton does."""
    first, _ = operand.tile.block_start(operand.op_idx, 0, ks[0])
    base = operand.base_bytes
    base = llir.Constant(I32, base) if isinstance(base, int) else base
    ptr = self.smem_region_ptr(llir.IntType(8), base)
    addr = self.b.add(self.b.ptrtoint(ptr, I32), llir.Constant(I32, first))
    if not isinstance(extra_bytes, int) or extra_bytes:
        addr = self.b.add(addr, extra_bytes if not isinstance(extra_bytes, int) else llir.Constant(I32, extra_bytes))
    field = self.b.and_(self.b.lshr(addr, llir.Constant(I32, 4)), llir.Constant(I32, 0x3FFF))
    lbo, sbo = operand.tile.descriptor_fields()
    descriptor = self.b.or_(self.b.zext(field, I64), llir.Constant(I64, descriptor_bits(0, lbo, sbo, operand.tile.swizzle)))
    out = [descriptor]
    for k in ks[1:]:
        start, _ = operand.tile.block_start(operand.op_idx, 0, k)
        distance = start - first
        if distance % 16 or distance < 0:
            raise CompilationError(f"internal: wgmma k-block {k} is {distance} bytes from the first")
        out.append(self.b.add(descriptor, llir.Constant(I64, distance >> 4)))
    return out


def _a_fragments(self, a, a_vals, row0: int, ks) -> list:
    """A from registers: per k-step, the four .b32 registers of wgmma's A fragment for the 64-row
    block starting at `row0` (per warp the mma.sync m16n8k16 A fragment, which the version-3 dot
    operand layout holds in the same places)."""
    from .mma_sync import _A_FRAGMENT, pack_pair
    a_at = {off: i for i, off in enumerate(self.layout(a.type).register_offsets())}
    elem = str(ir.element_type(a.type))
    out = []
    for k0 in ks:
        try:
            vals = [a_vals[a_at[(row0 + dm, k0 + dk)]] for dm, dk in _A_FRAGMENT]
        except KeyError:
            raise CompilationError("internal: the wgmma A operand layout lacks an A fragment element") from None
        words = [pack_pair(self.b, lo, hi, elem) for lo, hi in zip(vals[0::2], vals[1::2])]
        out.append([w if w.type == I32 else self.b.bitcast(w, I32) for w in words])
    return out


def lower_wgmma_dot(self, op, a_op, b_op: WgmmaOperand) -> None:
    """One warpgroup's wgmmas for `op`: per m64 block of its rows and per k-step of 16, an
    `m64nNk16` with B (and A, when `a_op` is given) read through descriptors, else A from registers."""
    a, b, c = op.operands
    elem, acc_elem = str(ir.element_type(a.type)), str(ir.element_type(c.type))
    b_elem = str(ir.element_type(b.type))
    wide = elem in ("f16", "bf16")   # 16-bit forms: A may come from registers, operands transposed
    if not (wide and acc_elem in ("f32", elem) or elem in _KINDS and b_elem in _KINDS and acc_elem == "f32"):
        raise CompilationError.at(op.loc, f"wgmma lowering takes f16/bf16 (f32 or f16 results), fp8 or tf32 "
                                          f"(f32 results) operands, not {elem} -> {acc_elem}")
    if not wide and a_op is None:
        raise CompilationError.at(op.loc, f"internal: a {elem} wgmma needs A in shared memory")
    # An f16 accumulator (out_dtype=tl.float16) packs D's elements in pairs, in the same order, into
    # .f16x2 registers (N/4 per m64 block instead of N/2).
    f16_acc = acc_elem == "f16"
    M, N = c.type.shape
    K = a.type.shape[1]
    # Warpgroup g = warp / 4 computes rows (g % groups_m) * 64 of each m-block and, when the groups
    # split N (a 64-row tile at 8 warps), columns (g / groups_m) * N_g of N_g = N / warps along N.
    warps_m, warps_n = op.result.type.encoding.warps_per_cta
    groups_m = warps_m // WARPS_PER_GROUP
    N = N // warps_n
    rows_per_rep = 16 * warps_m     # every warpgroup's m64 block along M, side by side
    c_layout = self.layout(c.type)
    c_at = {off: i for i, off in enumerate(c_layout.register_offsets())}
    blocks = []   # (first row of this warp's block in register offsets, accumulator registers in D order)
    try:
        for row0 in range(0, M, rows_per_rep):
            blocks.append((row0, [c_at[(row0 + dm, 8 * j + dn)] for j in range(N // 8)
                                  for dm, dn in ((0, 0), (0, 1), (8, 0), (8, 1))]))
    except KeyError:
        raise CompilationError.at(op.loc, "internal: the wgmma accumulator layout lacks a D fragment element") from None
    if sum(len(order) for _, order in blocks) != len(c_at):
        raise CompilationError.at(op.loc, "internal: the wgmma accumulator holds registers outside its m64 blocks")
    c_vals = self.get(c)
    a_kind, b_kind = (elem, b_elem) if wide else (_KINDS[elem], _KINDS[b_elem])
    k_step = 16 if wide else 32 // a_op.tile.elem_bytes   # 32 bytes of K per instruction
    ks = list(range(0, K, k_step))
    b_first, b_k_major = b_op.tile.block_start(1, 0, 0)
    group = self.b.udiv(self.warp, llir.Constant(I32, WARPS_PER_GROUP))
    b_extra = 0
    if warps_n > 1:
        # Warpgroup column block n: N_g rows further in a K-major B tile, N_g / 64 slabs further in
        # an N-major one (`matrix_units.Wgmma._warps` asks for whole slabs there).
        if not b_k_major and N % b_op.tile.slab_elems:
            raise CompilationError.at(op.loc, "internal: a wgmma warpgroup's B columns start inside a swizzle slab")
        b_group_bytes = b_op.tile.block_start(1, N, 0)[0] - b_first
        n_group = self.b.udiv(group, llir.Constant(I32, groups_m))
        b_extra = self.b.mul(n_group, llir.Constant(I32, b_group_bytes))
    b_descs = _descriptors(self, b_op, b_extra, ks)
    if a_op is not None:
        # Warpgroup g reads A's rows 64g..64g+63 of each block: 64 rows further in a K-major tile,
        # one slab further in an M-major one (a slab is 64 elements of the contiguous dim).
        _, a_k_major = a_op.tile.block_start(0, 0, 0)
        a_group_bytes = ROWS_PER_GROUP * a_op.tile.swizzle if a_op.tile.inner == 1 else a_op.tile.slab_bytes
        m_group = self.b.urem(group, llir.Constant(I32, groups_m)) if warps_n > 1 else group
        a_group_extra = self.b.mul(m_group, llir.Constant(I32, a_group_bytes))
    else:
        a_lazy = self.lazy_operands.get(id(a))
        a_vals = a_lazy.all_values() if a_lazy is not None else self.get(a)

    n = len(blocks[0][1]) // (2 if f16_acc else 1)
    reg, reg_type = ("r", I32) if f16_acc else ("f", F32)
    ret = llir.LiteralStructType([reg_type] * n)
    regs = ", ".join(f"${i}" for i in range(n))
    scale_d = llir.Constant(I32, 1)   # D = A * B + D: the accumulator is always read
    if a_op is not None:
        # imm-trans-a/b exist for the 16-bit forms only; the others read K-major tiles
        trans = f", {0 if a_k_major else 1}, {0 if b_k_major else 1}" if wide else ""
        operands = f"${n}, ${n + 1}, p, 1, 1{trans}"
        scale_at = 2 * n + 2   # after the outputs, the two descriptors and the tied accumulators
        constraints = ",".join([f"={reg}"] * n + ["l", "l"] + [str(i) for i in range(n)] + ["r"])
    else:
        operands = f"{{${n}, ${n + 1}, ${n + 2}, ${n + 3}}}, ${n + 4}, p, 1, 1, {0 if b_k_major else 1}"
        scale_at = 2 * n + 5   # after the outputs, four A registers, B's descriptor, the accumulators
        constraints = ",".join([f"={reg}"] * n + ["r"] * 4 + ["l"] + [str(i) for i in range(n)] + ["r"])
    text = ("{\n.reg .pred p;\n"
            f"setp.ne.b32 p, ${scale_at}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{N}k{k_step}.{acc_elem}.{a_kind}.{b_kind} {{{regs}}}, {operands};\n}}")
    void = llir.VoidType()
    _asm(self.b, void, "wgmma.fence.sync.aligned;", "~{memory}", [])
    # fp8 products are summed in the tensor cores with fewer mantissa bits than fp32. With
    # `max_num_imprecise_acc` below K, every that many products of K go into a fresh accumulator
    # (scale-d 0), which is waited for and added to the fp32 one (`add.f32`), as Triton does on sm_90.
    imprecise = int(op.attrs.get("maxNumImpreciseAcc", 0) or 0)
    chunk = imprecise if elem.startswith("f8") and 0 < imprecise <= K else 0
    results = []
    for rep, (row0, order) in enumerate(blocks):
        acc = [c_vals[r] for r in order]
        if f16_acc:
            acc = [self.b.bitcast(w, I32) for w in pack_halves(self.b, acc)]
        if a_op is not None:
            extra = self.b.add(a_group_extra, llir.Constant(I32, rep * groups_m * a_group_bytes))
            a_parts = [[d] for d in _descriptors(self, a_op, extra, ks)]
        else:
            a_parts = _a_fragments(self, a, a_vals, row0, ks)
        if chunk:
            acc = _accumulate_in_chunks(self, ret, text, constraints, a_parts, b_descs, acc, k_step, chunk)
            results.append(acc)
            continue
        for a_part, desc_b in zip(a_parts, b_descs):
            res = _asm(self.b, ret, text, constraints, a_part + [desc_b] + acc + [scale_d])
            acc = [self.b.extract_value(res, i) for i in range(n)]
        if f16_acc:
            acc = unpack_halves(self.b, [self.b.bitcast(w, H2) for w in acc])
        results.append(acc)
    _asm(self.b, void, "wgmma.commit_group.sync.aligned;", "~{memory}", [])
    positions = [r for _, order in blocks for r in order]
    values = [v for acc in results for v in acc]
    if id(op) not in self.wgmma_in_flight:
        _set_accumulators(self, op, c_vals, positions, wait_for_wgmma(self, values, 0))
        return
    # In flight across the loop's back edge (`shared_dot`): as Triton, the body's in-flight dots
    # commit their groups back to back, and after the last one a single `wgmma.wait_group n` (n
    # dots) leaves this iteration's groups running and waits for the previous iteration's, whose
    # buffers the copies that follow refill. Waiting down to one group after each dot instead kept
    # only one group queued while the warps issued the next copies (Liger's MoE dX, two dots).
    self.wgmma_unwaited.append((op, c_vals, positions, values))
    if id(op) != self.wgmma_in_flight[-1]:
        # read by nothing but the loop's yield, which the last dot's wait rebinds before it
        _set_accumulators(self, op, c_vals, positions, values)
        return
    waited = wait_for_wgmma_all(self, [d[3] for d in self.wgmma_unwaited], len(self.wgmma_in_flight))
    for (dot, c, pos, _), vals in zip(self.wgmma_unwaited, waited):
        _set_accumulators(self, dot, c, pos, vals)
    self.wgmma_unwaited = []


def _set_accumulators(self, op, c_vals, positions, values) -> None:
    out = list(c_vals)
    for i, r in enumerate(positions):
        out[r] = values[i]
    self.set(op.result, out)


def _accumulate_in_chunks(self, ret, text, constraints, a_parts, b_descs, acc, k_step: int, chunk: int) -> list:
    """`acc` + A * B, with the products summed `chunk` elements of K at a time in a zeroed
    accumulator (scale-d 0, its tied inputs undefined) and each partial sum added to `acc` in fp32.

    As Triton's sm_90 lowering, the adds follow their wgmmas directly, with no wait of their own: all
    the dot's wgmmas form one group, committed and waited for after the last (`lower_wgmma_dot`),
    and ptxas orders each add after the wgmma it reads (`WARPGROUP.DEPBAR`), running the next partial
    sum's wgmma into other registers meanwhile. A `wgmma.wait_group 0` after every partial sum kept
    the tensor core idle during the adds: 0.81x Triton's TFLOP/s at 128x128x64, partial sums of 32."""
    n = len(acc)
    fresh = [llir.Constant(acc[0].type, llir.Undefined)] * n
    partial, summed = None, 0
    for i, (a_part, desc_b) in enumerate(zip(a_parts, b_descs)):
        start = partial is None
        res = _asm(self.b, ret, text, constraints,
                   a_part + [desc_b] + (fresh if start else partial) + [llir.Constant(I32, 0 if start else 1)])
        partial = [self.b.extract_value(res, j) for j in range(n)]
        summed += k_step
        if summed >= chunk or i == len(a_parts) - 1:
            acc = [self.b.fadd(x, y) for x, y in zip(acc, partial)]
            if self.scalar.fp_fusion:   # as every float add under enable_fp_fusion (Triton's too)
                for add in acc:
                    add.flags.append("contract")
            partial, summed = None, 0
    return acc


def wait_for_wgmma(self, values, pending: int) -> list:
    """`wgmma.wait_group pending` with `values` (f32 or f16 accumulators) passed through it, so that
    nothing reads them before the wait; returns the values to use after it."""
    halves = bool(values) and isinstance(values[0].type, llir.HalfType)
    if halves:
        values = [self.b.bitcast(w, I32) for w in pack_halves(self.b, values)]
    n = len(values)
    reg, reg_type = ("r", I32) if halves else ("f", F32)
    ret = llir.LiteralStructType([reg_type] * n)
    waited = _asm(self.b, ret, f"wgmma.wait_group.sync.aligned {pending};",
                  ",".join([f"={reg}"] * n + [str(i) for i in range(n)] + ["~{memory}"]), values)
    out = [self.b.extract_value(waited, i) for i in range(n)]
    return unpack_halves(self.b, [self.b.bitcast(w, H2) for w in out]) if halves else out


def wait_for_wgmma_all(self, value_lists, pending: int) -> list:
    """`wait_for_wgmma` of several accumulators at once: one wait for the f32 ones, one for the
    f16 ones (each passes one register type through); returns the lists to use after it."""
    out = [None] * len(value_lists)
    for halves in (False, True):
        picked = [i for i, vals in enumerate(value_lists) if isinstance(vals[0].type, llir.HalfType) == halves]
        if picked:
            waited = wait_for_wgmma(self, [v for i in picked for v in value_lists[i]], pending)
            for i in picked:
                out[i], waited = waited[:len(value_lists[i])], waited[len(value_lists[i]):]
    return out


# ------------------------------------------------------------------------ operands staged by the dot

def staged_tile(self, value: ir.Value, inner=None):
    """The `WgmmaTile` `value` (2-D) is staged into: contiguous along `inner` when given (a B whose
    dot's warpgroups split N needs it K-major; fp8, which wgmma reads K-major only, always gives
    it), else along the dim its registers run along longest, among those whose length is whole
    128-byte slabs; None when none fits."""
    from tilejit.gpu.llvm.convert import _run_length

    from .matrix_units import FP8
    from .shared_operands import operand_tile
    t = value.type
    if t.rank == 2 and str(ir.element_type(t)) in FP8:
        return operand_tile(tuple(t.shape), inner, 1) if inner is not None else None
    if t.rank != 2 or str(ir.element_type(t)) not in ("f16", "bf16"):
        return None
    layout = self.layout_read(value)   # (asked before `value` is lowered too: then its type's)
    fitting = [d for d in staging_dims(t.shape) if inner is None or d == inner]
    if not fitting:
        return None
    inner = max(fitting, key=lambda d: _run_length(layout, d, 8))
    return WgmmaTile(tuple(t.shape), inner)


def stage_operand(self, value: ir.Value, readers: int, inner=None):
    """Write `value`'s registers into a `WgmmaTile` (1024-byte aligned) reserved at the scratch,
    visible to wgmma's async proxy (`fence.proxy.async`) and to every warp (barrier); returns the
    tile and its region. The region stays reserved (later scratch users start above it) until its
    `readers` dots have read it (`release_staged`)."""
    from tilejit.gpu.llvm.convert import _run_length
    from tilejit.gpu.llvm.scalar_ops import llvm_type

    from .shared_dot import LLVMArith, store_matrices, store_plan, write_tile
    from .shared_operands import ATOM_BYTES
    tile = staged_tile(self, value, inner)
    values, layout = self.registers_of(value)   # a renamed tile is written from where it stands
    eb = tile.elem_bytes
    vec = _run_length(layout, tile.inner, 16 // eb)
    start = -(-self.scratch_offset // ATOM_BYTES) * ATOM_BYTES
    glob = self.smem_base(start - self.scratch_offset + tile.nbytes)
    glob.align = max(glob.align or 0, ATOM_BYTES)
    region = [self.scratch_offset, readers, start]
    self.staged_regions.append(region)
    self.scratch_offset = start + tile.nbytes
    elem_ty = llvm_type(value.type)
    a = LLVMArith(self.b)
    self.isa.barrier(self.b)   # the scratch's previous user is done with it
    stores = store_plan(self, layout, tile) if eb == 2 else None   # stmatrix moves 16-bit elements
    if stores is not None:
        store_matrices(self, tile, stores, layout, values, elem_ty, start // 2)
    else:
        coords = self.element_coords(layout)
        write_tile(self, values, layout, vec, elem_ty,
                   lambda r0: self.smem_region_ptr(elem_ty, a.value(a.add(start // eb, tile.offset(a, coords[r0])))),
                   eb)
    _publish_staged(self)
    return tile, region


def _publish_staged(self) -> None:
    """Make the generic-proxy stores of a staged tile visible to wgmma (the async proxy) and to every
    warp."""
    _asm(self.b, llir.VoidType(), "fence.proxy.async.shared::cta;", "~{memory}", [])
    self.isa.barrier(self.b)


def stage_transposed(self, src_tile, src_base: object, span, dst_base: object, op_idx: int = 1):
    """Rewrite the fp8 tile `src_tile` of operand `op_idx`, stored along its non-K dim (B N-major,
    A M-major), at byte `src_base` (an int or i32; in the bytes `span`, a pipeline's ring buffer)
    K-major into the `WgmmaTile` at byte `dst_base` (1024-byte aligned; the loop's rewrite slot)
    with `shared_operands.ByteTranspose` (on A's transposed view: 4 x 4 bytes a thread, `prmt` in
    between); returns the operand. The loop's barrier after its copies have landed comes first:
    by then every warpgroup's wgmmas that read the slot before are done."""
    from .shared_dot import LLVMArith
    from .shared_operands import ByteTranspose, transpose_words
    if op_idx == 0:   # A [M, K] stored along M is A^T [K, M] stored along M: B's case
        src_tile = src_tile.transposed()
    plan = ByteTranspose(tuple(src_tile.shape), self.num_warps)
    a, i8 = LLVMArith(self.b), llir.IntType(8)

    def permute(x, y, selector):
        return _asm(self.b, I32, f"prmt.b32 $0, $1, $2, {selector:#x};", "=r,r,r", [x, y])
    for rnd in range(plan.rounds):
        k0, n0 = plan.block(a, self.lane, self.warp, rnd)
        words = [self.b.load(self.smem_region_ptr(i8, a.value(a.add(src_base, off)), span), typ=I32, align=4)
                 for off in plan.reads(a, k0, n0)]
        for off, word in zip(plan.writes(a, k0, n0), transpose_words(words, permute)):
            self.b.store(word, self.smem_region_ptr(i8, a.value(a.add(dst_base, off))), align=4)
    _publish_staged(self)
    return WgmmaOperand(plan.dst if op_idx == 1 else plan.dst.transposed(), dst_base, op_idx)


def release_staged(self, operand: WgmmaOperand) -> None:
    """One reader of a staged tile is done (its wgmma waited). The scratch shrinks back over the
    regions on top whose readers are all done, after a barrier (the other warpgroups' wgmmas)."""
    region = next(r for r in self.staged_regions if r[2] == operand.base_bytes)
    region[1] -= 1
    freed = False
    while self.staged_regions and self.staged_regions[-1][1] == 0:
        self.scratch_offset = self.staged_regions.pop()[0]
        freed = True
    if freed:
        self.isa.barrier(self.b)
