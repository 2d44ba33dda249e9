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
    bits = ty.width if isinstance(ty, llir.IntType) else {"half": 16, "float": 32, "double": 64}[str(ty)]
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
    # 1. in-thread: registers whose offsets agree off the axis share an accumulator.
    groups = {}
    order = []
    for r, off in enumerate(layout.register_offsets()):
        key = tuple(v for d, v in enumerate(off) if d != axis)
        vals = [inp[r] for inp in inputs]
        if key not in groups:
            groups[key] = vals
            order.append(key)
        else:
            groups[key] = self._combine_region(op, groups[key], vals)
    accs = [groups[key] for key in order]
    # 2. across lanes: butterfly over the lane bits that move along the axis.
    for bit, basis in enumerate(layout.lanes):
        if basis[axis]:
            accs = [self._combine_region(op, acc, [self._shuffle(v, 1 << bit) for v in acc]) for acc in accs]
    # 3. across warps: through shared memory, one slot per (register, operand, warp, lane).
    warp_axis_bits = [bit for bit, basis in enumerate(layout.warps) if basis[axis]]
    if warp_axis_bits:
        accs = _reduce_across_warps(self, op, accs, warp_axis_bits, layout.num_warps)
    results = op.results
    if isinstance(results[0].type, ir.TensorType):
        out_layout = self.layout(results[0].type)
        expect = {tuple(off) for off in out_layout.register_offsets()}
        if len(order) != out_layout.num_registers or set(order) != expect:
            raise CompilationError.at(op.loc, "internal: reduction result registers do not match the slice layout")
        pos = {key: i for i, key in enumerate(order)}
        for j, r in enumerate(results):
            self.set(r, [accs[pos[tuple(off)]][j] for off in out_layout.register_offsets()])
    else:
        for j, r in enumerate(results):
            self.set(r, [accs[0][j]])


def _reduce_across_warps(self, op, accs, warp_bits, num_warps):
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
    """Inclusive scan along `axis`: every element is written to shared memory; each thread then
    folds, for each of its elements, the elements before it along the axis (in order, so the
    combine function need not be commutative). O(n) per element: correct first, fast later."""
    axis = op.attrs["axis"]
    reverse = op.attrs.get("reverse", False)
    src_t = op.operands[0].type
    shape = src_t.shape
    layout = self.layout(src_t)
    if any(self.layout(v.type) != layout for v in list(op.operands) + list(op.results)):
        # Each thread scans the elements it holds and keeps the results in the same registers.
        raise CompilationError.at(op.loc, "internal: a scan whose operands and results differ in layout")
    inputs = [self.get(v) for v in op.operands]
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
