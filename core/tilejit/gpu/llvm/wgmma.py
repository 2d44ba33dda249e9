"""`tt.dot` with NVIDIA MMA version 3: `wgmma.mma_async` (sm_90a) on operands in shared memory.

The pipelined loop (`shared_dot.lower_pipelined_for`) copies both operand tiles with `cp.async` into
`WgmmaTile`s (128B-swizzled) and hands the dot a `WgmmaOperand` per operand instead of registers.
Each warpgroup (4 warps) then runs, per k-step of 16, one `m64nNk16` whose A and B are matrix
descriptors (start address, LBO/SBO, swizzle mode) of the block of its 64 rows and of B:

    wgmma.fence; wgmma.mma_async x K/16; wgmma.commit_group; wgmma.wait_group 0

or `wgmma.wait_group 1` for a dot the pipelined loop keeps in flight (`shared_dot`): its results
are then complete only after the next iteration's wait, or the loop exit's `wait_for_wgmma(.., 0)`.

The accumulator lives in the registers of the version-3 layout (`layouts.NvidiaMmaEncoding`), in
the order of the PTX ISA's D fragment: d[4j + {0,1,2,3}] = (r, 8j+c), (r, 8j+c+1), (r+8, 8j+c),
(r+8, 8j+c+1) with r = 16 * warp-in-group + lane / 4, c = 2 * (lane % 4).
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from ..isa import F32, I32
from ..shared_operands import WgmmaTile, descriptor_bits

I64 = llir.IntType(64)
WARPS_PER_GROUP = 4
ROWS_PER_GROUP = 64


@dataclass
class WgmmaOperand:
    """Operand `op_idx` of a wgmma dot: `tile` starting `base_bytes` (int or i32) into shared memory."""
    tile: WgmmaTile
    base_bytes: object
    op_idx: int


def _asm(builder, ret, text: str, constraints: str, args):
    fnty = llir.FunctionType(ret, [a.type for a in args])
    return builder.asm(fnty, text, constraints, args, side_effect=True)


def _descriptor(self, operand: WgmmaOperand, extra_bytes, k: int):
    """The i64 descriptor of the block at K index `k`, `extra_bytes` (i32 or 0) further on."""
    start, _ = operand.tile.block_start(operand.op_idx, 0, k)
    base = operand.base_bytes
    base = llir.Constant(I32, base) if isinstance(base, int) else base
    ptr = self.smem_region_ptr(llir.IntType(8), base)
    addr = self.b.add(self.b.ptrtoint(ptr, I32), llir.Constant(I32, start))
    if not isinstance(extra_bytes, int) or extra_bytes:
        addr = self.b.add(addr, extra_bytes if not isinstance(extra_bytes, int) else llir.Constant(I32, extra_bytes))
    field = self.b.and_(self.b.lshr(addr, llir.Constant(I32, 4)), llir.Constant(I32, 0x3FFF))
    lbo, sbo = operand.tile.descriptor_fields()
    return self.b.or_(self.b.zext(field, I64), llir.Constant(I64, descriptor_bits(0, lbo, sbo)))


def lower_wgmma_dot(self, op, a_op: WgmmaOperand, b_op: WgmmaOperand) -> None:
    a, b, c = op.operands
    elem = str(ir.element_type(a.type))
    if elem not in ("f16", "bf16") or str(ir.element_type(c.type)) != "f32":
        raise CompilationError.at(op.loc, f"wgmma lowering takes f16/bf16 operands and f32 results, not {elem}")
    M, N = c.type.shape
    K = a.type.shape[1]
    c_layout = self.layout(c.type)
    c_at = {off: i for i, off in enumerate(c_layout.register_offsets())}
    try:
        order = [c_at[(dm, 8 * j + dn)] for j in range(N // 8) for dm, dn in ((0, 0), (0, 1), (8, 0), (8, 1))]
    except KeyError:
        raise CompilationError.at(op.loc, "internal: the wgmma accumulator layout lacks a D fragment element") from None
    if len(order) != len(c_at):
        raise CompilationError.at(op.loc, "internal: the wgmma accumulator holds more than one m64 block")
    c_vals = self.get(c)
    acc = [c_vals[r] for r in order]
    n = len(acc)

    # Warpgroup g reads A's rows 64g..64g+63: 64 rows further in a K-major tile, one slab further in
    # an M-major one (a slab is 64 elements of the contiguous dim).
    group = self.b.udiv(self.warp, llir.Constant(I32, WARPS_PER_GROUP))
    _, a_k_major = a_op.tile.block_start(0, 0, 0)
    a_group_bytes = ROWS_PER_GROUP * 128 if a_op.tile.inner == 1 else a_op.tile.slab_bytes
    a_extra = self.b.mul(group, llir.Constant(I32, a_group_bytes))
    _, b_k_major = b_op.tile.block_start(1, 0, 0)

    ret = llir.LiteralStructType([F32] * n)
    regs = ", ".join(f"${i}" for i in range(n))
    kind = "f16" if elem == "f16" else "bf16"
    text = ("{\n.reg .pred p;\n"
            f"setp.ne.b32 p, ${2 * n + 2}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{kind}.{kind} {{{regs}}}, ${n}, ${n + 1}, p, 1, 1, "
            f"{0 if a_k_major else 1}, {0 if b_k_major else 1};\n}}")
    constraints = ",".join(["=f"] * n + ["l", "l"] + [str(i) for i in range(n)] + ["r"])
    scale_d = llir.Constant(I32, 1)   # D = A * B + D: the accumulator is always read
    void = llir.VoidType()
    _asm(self.b, void, "wgmma.fence.sync.aligned;", "~{memory}", [])
    for k0 in range(0, K, 16):
        desc_a = _descriptor(self, a_op, a_extra, k0)
        desc_b = _descriptor(self, b_op, 0, k0)
        res = _asm(self.b, ret, text, constraints, [desc_a, desc_b] + acc + [scale_d])
        acc = [self.b.extract_value(res, i) for i in range(n)]
    _asm(self.b, void, "wgmma.commit_group.sync.aligned;", "~{memory}", [])
    pending = 1 if id(op) in self.wgmma_in_flight else 0
    waited = wait_for_wgmma(self, acc, pending)
    out = list(c_vals)
    for i, r in enumerate(order):
        out[r] = waited[i]
    self.set(op.result, out)


def wait_for_wgmma(self, values, pending: int) -> list:
    """`wgmma.wait_group pending` with `values` (f32 accumulators) passed through it, so that nothing
    reads them before the wait; returns the values to use after it."""
    n = len(values)
    ret = llir.LiteralStructType([F32] * n)
    waited = _asm(self.b, ret, f"wgmma.wait_group.sync.aligned {pending};",
                  ",".join(["=f"] * n + [str(i) for i in range(n)] + ["~{memory}"]), values)
    return [self.b.extract_value(waited, i) for i in range(n)]
