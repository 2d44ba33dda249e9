"""Reductions and scans (methods of `FunctionLowering`).

A reduction along `axis` combines, in this order: the registers of one thread that differ only along
the axis; the lanes whose layout bases move along the axis (butterfly shuffles: afterwards every lane
of the group holds the result, which is the replication a slice layout describes); the warps along
the axis, through shared memory. The combine function is the op's region, lowered inline on scalars.
"""
from __future__ import annotations

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from ..isa import I32
from .scalar_ops import llvm_bits


def _combine_region(self, op, accs, news):
    """Lower the reduce/scan region on scalars: (accumulators, new values) -> combined values."""
    block = op.regions[0].blocks[0]
    for arg, v in zip(block.args, list(accs) + list(news)):
        self.set(arg, [v])
    for inner in block.ops[:-1]:
        self.lower_op(inner)
    return [self.get(v)[0] for v in block.ops[-1].operands]


def _shuffle(self, value, lane_mask):
    """Butterfly-exchange any scalar of up to 64 bits through i32 shuffles."""
    ty = value.type
    bits = llvm_bits(ty)
    as_int = value if isinstance(ty, llir.IntType) else self.b.bitcast(value, llir.IntType(bits))
    if bits == 64:
        lo = self.b.trunc(as_int, I32)
        hi = self.b.trunc(self.b.lshr(as_int, llir.Constant(llir.IntType(64), 32)), I32)
        lo = self.isa.shuffle_xor(self.b, lo, lane_mask, self.lane)
        hi = self.isa.shuffle_xor(self.b, hi, lane_mask, self.lane)
        i64 = llir.IntType(64)
        out = self.b.or_(self.b.zext(lo, i64), self.b.shl(self.b.zext(hi, i64), llir.Constant(i64, 32)))
    else:
        wide = self.b.zext(as_int, I32) if bits < 32 else as_int
        out = self.isa.shuffle_xor(self.b, wide, lane_mask, self.lane)
        out = self.b.trunc(out, llir.IntType(bits)) if bits < 32 else out
    return out if isinstance(ty, llir.IntType) else self.b.bitcast(out, ty)


def _byte_size(ty) -> int:
    return ty.width // 8 if isinstance(ty, llir.IntType) else {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(ty)]


def _regions(types, count):
    """Byte offsets of one region of `count` elements per type, one after another (8-byte aligned),
    and the total size. Operands of a reduce/scan may differ in width (argmax over fp64 keeps i32
    indices): indexing every region in its own element type from `j * count` made them overlap."""
    offsets, total = [], 0
    for ty in types:
        offsets.append(total)
        total += -(-count * max(1, _byte_size(ty)) // 8) * 8
    return offsets, total


def _region_ptr(self, ty, byte_offset, index):
    """Element `index` (i32) of type `ty` in the scratch region that starts at `byte_offset`."""
    base = self.smem_ptr(llir.IntType(8), llir.Constant(I32, byte_offset))
    return self.b.gep(base, [index], source_etype=ty)


def lower_reduce(self, op):
    axis = op.attrs["axis"]
    src_t = op.operands[0].type
    layout = self.layout(src_t)
    inputs = [self.get(v) for v in op.operands]
    for b in list(layout.registers) + list(layout.lanes) + list(layout.warps):
        if b[axis] and any(v for d, v in enumerate(b) if d != axis):
            raise CompilationError.at(op.loc, "reduction over a layout that mixes dimensions is not supported")
    # 1. in-thread: registers whose offsets agree off the axis are combined together. A layout may
    # hold an element in several registers (a zero register basis: the slice layout of an earlier
    # reduction can be replicated so): each element is combined once.
    groups = {}
    seen = set()
    for r, off in enumerate(layout.register_offsets()):
        if tuple(off) in seen:
            continue
        seen.add(tuple(off))
        key = tuple(v for d, v in enumerate(off) if d != axis)
        groups.setdefault(key, []).append([inp[r] for inp in inputs])
    order = list(groups)
    accs = [_combine_tree(self, op, groups[key]) for key in order]
    # 2. across lanes: butterfly over the lane bits that move along the axis.
    for bit, basis in enumerate(layout.lanes):
        if basis[axis]:
            accs = [self._combine_region(op, acc, [self._shuffle(v, 1 << bit) for v in acc]) for acc in accs]
    # 3. across warps: through shared memory, one slot per (register, operand, warp, lane).
    warp_axis_bits = [bit for bit, basis in enumerate(layout.warps) if basis[axis]]
    lane_axis_bits = [bit for bit, basis in enumerate(layout.lanes) if basis[axis]]
    if warp_axis_bits:
        accs = _reduce_across_warps(self, op, accs, warp_axis_bits, layout.num_warps, lane_axis_bits)
    results = op.results
    if isinstance(results[0].type, ir.TensorType):
        out_layout = self.layout(results[0].type)
        expect = {tuple(off) for off in out_layout.register_offsets()}   # replicated registers: once
        if set(order) != expect:
            raise CompilationError.at(op.loc, "internal: reduction result registers do not match the slice layout")
        pos = {key: i for i, key in enumerate(order)}
        for j, r in enumerate(results):
            self.set(r, [accs[pos[tuple(off)]][j] for off in out_layout.register_offsets()])
    else:
        for j, r in enumerate(results):
            self.set(r, [accs[0][j]])


def _combine_tree(self, op, values):
    """Combine a thread's values (in register order) as a balanced tree of neighbour pairs, as Triton
    does: log2(n) dependent combines instead of n - 1 (a row of 512 values a thread was one chain of
    512 dependent adds). The order of the operands is kept, so an associative combine gives what the
    sequential fold gives."""
    while len(values) > 1:
        pairs = [self._combine_region(op, values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        values = pairs + values[len(values) - 1:] if len(values) % 2 else pairs
    return values[0]


def _reduce_across_warps(self, op, accs, warp_bits, num_warps, lane_bits=()):
    """Every thread stores its partials (one slot per warp and lane); then, as Triton, where the lanes
    along the axis are at least as many as the warps along it, each thread reads one warp's partial
    (chosen by its axis lane bits, whose lanes all hold the same partial after the lane butterfly)
    and a butterfly over those lane bits combines the warps: one shared load and log2(warps)
    shuffles. Otherwise each thread reads every warp's partial and combines them in order."""
    ws = self.warp_size
    threads = num_warps * ws
    # One region per (accumulator, operand), each in its operand's own width.
    offsets, nbytes = _regions([v.type for acc in accs for v in acc], threads)
    self.smem_base(nbytes)
    self.isa.barrier(self.b)
    axis_mask = sum(1 << b for b in warp_bits)
    home_warp = self.b.and_(self.warp, llir.Constant(I32, ~axis_mask & (num_warps - 1)))

    def slot_ptr(i, j, ty, warp_value):
        t = self.b.add(self.b.mul(warp_value, llir.Constant(I32, ws)), self.lane)
        return _region_ptr(self, ty, offsets[i * len(accs[0]) + j], t)
    for i, acc in enumerate(accs):
        for j, v in enumerate(acc):
            self.b.store(v, slot_ptr(i, j, v.type, self.warp))
    self.isa.barrier(self.b)
    out = []
    if len(lane_bits) >= len(warp_bits):
        lane_bits = lane_bits[:len(warp_bits)]
        wv = home_warp
        for wb, lb in zip(warp_bits, lane_bits):
            bit = self.b.and_(self.b.lshr(self.lane, llir.Constant(I32, lb)), llir.Constant(I32, 1))
            wv = self.b.or_(wv, self.b.shl(bit, llir.Constant(I32, wb)))
        for i, acc in enumerate(accs):
            total = [self.b.load(slot_ptr(i, j, v.type, wv), typ=v.type) for j, v in enumerate(acc)]
            for lb in lane_bits:
                total = self._combine_region(op, total, [self._shuffle(v, 1 << lb) for v in total])
            out.append(total)
        self.isa.barrier(self.b)
        return out
    for i, acc in enumerate(accs):
        total = None
        for combo in range(1 << len(warp_bits)):
            w = sum(((combo >> n) & 1) << b for n, b in enumerate(warp_bits))
            wv = self.b.or_(home_warp, llir.Constant(I32, w))
            vals = [self.b.load(slot_ptr(i, j, v.type, wv), typ=v.type) for j, v in enumerate(acc)]
            total = vals if total is None else self._combine_region(op, total, vals)
        out.append(total)
    self.isa.barrier(self.b)
    return out


def lower_scan(self, op):
    """Inclusive scan along `axis`. Layouts whose bases along the axis are its powers of two (the
    blocked layouts) scan level by level (`_scan_by_levels`); any other layout takes the general
    path: every element is written to shared memory and each thread folds, for each of its
    elements, the elements before it along the axis, in order (O(n) per element)."""
    axis = op.attrs["axis"]
    reverse = op.attrs.get("reverse", False)
    src_t = op.operands[0].type
    shape = src_t.shape
    layout = self.layout(src_t)
    if any(self.layout(v.type) != layout for v in list(op.operands) + list(op.results)):
        # Each thread scans the elements it holds and keeps the results in the same registers.
        raise CompilationError.at(op.loc, "internal: a scan whose operands and results differ in layout")
    inputs = [self.get(v) for v in op.operands]
    levels = _scan_levels(layout, axis, shape[axis])
    if levels is not None:
        outs = _scan_by_levels(self, op, layout, inputs, levels, reverse)
        for j, res in enumerate(op.results):
            self.set(res, outs[j])
        return
    numel = src_t.numel
    offsets, total = _regions([inp[0].type for inp in inputs], numel)
    self.smem_base(total)
    self.isa.barrier(self.b)
    coords = self.element_coords(layout)

    def index(cs):
        idx = None
        for c, s in zip(cs, shape):
            idx = c if idx is None else self.b.add(self.b.mul(idx, llir.Constant(I32, s)), c)
        return idx

    for j, inp in enumerate(inputs):
        for r, cs in enumerate(coords):
            self.b.store(inp[r], _region_ptr(self, inp[r].type, offsets[j], index(cs)))
    self.isa.barrier(self.b)
    n = shape[axis]
    outs = [[None] * len(coords) for _ in inputs]
    for r, cs in enumerate(coords):
        # Loop over the axis positions 0..n-1 (or n-1..0): fold those at or before this element.
        fn = self.b.block.function
        pre = self.b.block
        head = fn.append_basic_block("scan.head")
        body = fn.append_basic_block("scan.body")
        done = fn.append_basic_block("scan.done")
        start = llir.Constant(I32, (n - 1) if reverse else 0)
        self.b.branch(head)
        self.b.position_at_end(head)
        pos = self.b.phi(I32)
        accs = [self.b.phi(inp[r].type) for inp in inputs]
        first = self.b.phi(llir.IntType(1))
        pos.add_incoming(start, pre)
        first.add_incoming(llir.Constant(llir.IntType(1), 1), pre)
        for a, inp in zip(accs, inputs):
            a.add_incoming(inp[r], pre)
        within = (self.b.icmp_signed(">=", pos, cs[axis]) if reverse else self.b.icmp_signed("<=", pos, cs[axis]))
        self.b.cbranch(within, body, done)
        self.b.position_at_end(body)
        other = list(cs)
        other[axis] = pos
        vals = [self.b.load(_region_ptr(self, inp[r].type, offsets[j], index(other)), typ=inp[r].type)
                for j, inp in enumerate(inputs)]
        combined = self._combine_region(op, accs, vals)
        chosen = [self.b.select(first, v, c) for v, c in zip(vals, combined)]
        latch = self.b.block
        pos.add_incoming(self.b.add(pos, llir.Constant(I32, -1 if reverse else 1)), latch)
        first.add_incoming(llir.Constant(llir.IntType(1), 0), latch)
        for a, c in zip(accs, chosen):
            a.add_incoming(c, latch)
        self.b.branch(head)
        self.b.position_at_end(done)
        for j, a in enumerate(accs):
            outs[j][r] = a
    self.isa.barrier(self.b)
    for j, res in enumerate(op.results):
        self.set(res, outs[j])


def _scan_levels(layout, axis, n):
    """The layout's bits along `axis` in order of weight 1, 2, 4, ..., n/2, each as (kind, bit) with
    kind "reg", "lane" or "warp"; None when some basis mixes the axis with another dimension or the
    axis bases are not exactly those powers of two."""
    found = {}
    for kind, bases in (("reg", layout.registers), ("lane", layout.lanes), ("warp", layout.warps)):
        for bit, basis in enumerate(bases):
            v = basis[axis]
            if not v:
                continue
            if any(x for d, x in enumerate(basis) if d != axis) or v & (v - 1) or v in found:
                return None
            found[v] = (kind, bit)
    weights = [1 << k for k in range(max(n, 1).bit_length() - 1)]
    if sorted(found) != weights or (1 << len(weights)) != n:
        return None
    return [found[w] for w in weights]


def _scan_by_levels(self, op, layout, inputs, levels, reverse):
    """Inclusive scan over aligned blocks that double at each level of `levels`. Every element keeps
    its scan within its block (`prefix`) and the block's total; at a level it meets the partner block
    (the other register, the lane across a shuffle, or the warp through shared memory) and, when its
    own block comes later in scan order, puts the partner's total in front of both. The combine
    function is only ever applied as combine(earlier, later), so it need not be commutative.
    Registers that differ only in bits of levels already done share their block's total: the
    shuffles and shared-memory exchanges carry one total per such class."""
    nregs = layout.num_registers
    prefix = [[inp[r] for inp in inputs] for r in range(nregs)]
    total = [list(p) for p in prefix]
    comb = self._combine_region
    one = llir.Constant(llir.IntType(1), 1)
    done_reg_bits = 0
    for kind, bit in levels:
        if kind == "reg":
            mask = 1 << bit
            for r0 in range(nregs):
                if r0 & mask:
                    continue
                r1 = r0 | mask
                earlier, later = (r1, r0) if reverse else (r0, r1)
                joined = comb(op, total[earlier], total[later])
                prefix[later] = comb(op, total[earlier], prefix[later])
                total[r0] = total[r1] = joined
            done_reg_bits |= mask
            continue
        classes = sorted({r & ~done_reg_bits for r in range(nregs)})
        if kind == "lane":
            got = [[self._shuffle(v, 1 << bit) for v in total[c]] for c in classes]
            mine = self.b.trunc(self.b.lshr(self.lane, llir.Constant(I32, bit)), llir.IntType(1))
        else:
            got = _exchange_across_warps(self, [total[c] for c in classes], bit, layout.num_warps)
            mine = self.b.trunc(self.b.lshr(self.warp, llir.Constant(I32, bit)), llir.IntType(1))
        later = self.b.xor(mine, one) if reverse else mine
        partner = dict(zip(classes, got))
        new_total = {}
        for c in classes:
            after = comb(op, partner[c], total[c])
            before = comb(op, total[c], partner[c])
            new_total[c] = [self.b.select(later, a, b) for a, b in zip(after, before)]
        for r in range(nregs):
            c = r & ~done_reg_bits
            with_partner = comb(op, partner[c], prefix[r])
            prefix[r] = [self.b.select(later, a, b) for a, b in zip(with_partner, prefix[r])]
            total[r] = new_total[c]
    return [[prefix[r][j] for r in range(nregs)] for j in range(len(inputs))]


def _exchange_across_warps(self, values, bit, num_warps):
    """values[r][j] of the thread with the same lane in warp `warp ^ (1 << bit)`, through shared memory."""
    ws = self.warp_size
    types = [v.type for v in values[0]]
    store_types = [llir.IntType(8) if t == llir.IntType(1) else t for t in types]
    offsets, nbytes = _regions(store_types, len(values) * num_warps * ws)
    self.smem_base(nbytes)
    self.isa.barrier(self.b)

    def slot(r, warp_value):
        return self.b.add(self.b.mul(self.b.add(llir.Constant(I32, r * num_warps), warp_value), llir.Constant(I32, ws)),
                          self.lane)
    for r, vals in enumerate(values):
        for j, v in enumerate(vals):
            stored = self.b.zext(v, store_types[j]) if types[j] != store_types[j] else v
            self.b.store(stored, _region_ptr(self, store_types[j], offsets[j], slot(r, self.warp)))
    self.isa.barrier(self.b)
    other = self.b.xor(self.warp, llir.Constant(I32, 1 << bit))
    out = []
    for r in range(len(values)):
        row = []
        for j in range(len(types)):
            v = self.b.load(_region_ptr(self, store_types[j], offsets[j], slot(r, other)), typ=store_types[j])
            row.append(self.b.trunc(v, types[j]) if types[j] != store_types[j] else v)
        out.append(row)
    self.isa.barrier(self.b)
    return out
