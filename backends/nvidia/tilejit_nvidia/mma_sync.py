"""`tt.dot` with an `#ttg.nvidia_mma` result: `mma.sync.m16n8k16` (version 2, and version 3 when B
did not stay in shared memory), or wgmma (`wgmma.py`) when the pipeline left the operands in shared
memory. `NvidiaISA.dot_lowerings` hands `lower_nvidia_dot` to the core's `tt.dot` lowering.

Operands are read by coordinates: a register's offset (its coordinates minus the thread's lane and
warp part) names the element, and the dot-operand layouts guarantee that the A rows and B columns a
thread needs for its C elements are in its own registers.
"""
from __future__ import annotations

import llvmlite.ir as llir

from tilejit import ir
from tilejit.errors import CompilationError
from tilejit.gpu.isa import F32, I32, call_intrinsic


def lower_nvidia_dot(self, op):
    """A `FunctionLowering` method for dots whose result has an NVIDIA MMA layout."""
    enc = op.result.type.encoding
    shared = [self.wgmma_operands.get(id(v)) for v in op.operands[:2]]
    if enc.version_major == 3 and shared[1] is not None:
        from .wgmma import lower_wgmma_dot
        return lower_wgmma_dot(self, op, *shared)   # A from registers when shared[0] is None
    # mma.sync; version 3 without B in shared memory too (its layouts are mma.sync's, by coordinates)
    return _lower_mma(self, op)


def _offsets(self, v):
    return {off: i for i, off in enumerate(self.layout(v.type).register_offsets())}


# Element positions inside one m16n8k16 fragment, relative to the tile's corner.
_A_FRAGMENT = [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
_B_FRAGMENT = [(0, 0), (1, 0), (8, 0), (9, 0)]
_C_FRAGMENT = [(0, 0), (0, 1), (8, 0), (8, 1)]


def pack_pair(builder, x, y, elem: str):
    """Two 16-bit operand elements as one 32-bit MMA register: a <2 x half> for f16 (what the
    mma.sync intrinsic takes), an i32 for bf16 (which travels as i16)."""
    if elem == "f16":
        v = llir.Constant(llir.VectorType(llir.HalfType(), 2), None)
        v = builder.insert_element(v, x, llir.Constant(I32, 0))
        return builder.insert_element(v, y, llir.Constant(I32, 1))
    return builder.or_(builder.zext(x, I32), builder.shl(builder.zext(y, I32), llir.Constant(I32, 16)))


def _lower_mma(self, op):
    a, b, c = op.operands
    elem = str(ir.element_type(a.type))
    if elem not in ("f16", "bf16"):
        raise CompilationError.at(op.loc, f"mma.sync lowering takes f16/bf16 operands, not {elem}")
    lazy_a, lazy_b = self.lazy_operands.get(id(a)), self.lazy_operands.get(id(b))
    a_vals = lazy_a.values if lazy_a is not None else self.get(a)
    b_vals = lazy_b.values if lazy_b is not None else self.get(b)
    c_vals = self.get(c)
    a_at, b_at, c_at = _offsets(self, a), _offsets(self, b), _offsets(self, c)
    a_tiles = sorted({(m, k) for (m, k) in a_at if (m % 16, k % 16) == (0, 0)})
    k_tiles = sorted({k for _, k in a_tiles})
    c_tiles = sorted({(m, n) for (m, n) in c_at if (m % 16, n % 8) == (0, 0)})
    if elem == "f16":
        name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"   # D and C types; A/B are f16
    else:
        name = "llvm.nvvm.mma.m16n8k16.row.col.bf16"
    ret_ty = llir.LiteralStructType([F32] * 4)

    def pack(x, y):
        return pack_pair(self.b, x, y, elem)

    # k-step outermost (as Triton): the A and B fragments of one k-step are read (lazily, with
    # ldmatrix, when the operand is in shared memory), used by every C tile, and then dead, so only
    # one k-step's fragments are live at a time, not the whole K tile's.
    accs = {t: [c_vals[c_at[(t[0] + dm, t[1] + dn)]] for dm, dn in _C_FRAGMENT] for t in c_tiles}
    packed_a, packed_b = {}, {}
    for k0 in k_tiles:
        if lazy_a is not None:
            lazy_a.fetch([r for (m, k), r in a_at.items() if k0 <= k < k0 + 16])
        if lazy_b is not None:
            lazy_b.fetch([r for (k, n), r in b_at.items() if k0 <= k < k0 + 16])
        for (m0, n0) in c_tiles:
            if (m0, k0) not in packed_a:
                av = [a_vals[a_at[(m0 + dm, k0 + dk)]] for dm, dk in _A_FRAGMENT]
                packed_a[(m0, k0)] = [pack(av[2 * i], av[2 * i + 1]) for i in range(4)]
            if (n0, k0) not in packed_b:
                bv = [b_vals[b_at[(k0 + dk, n0 + dn)]] for dk, dn in _B_FRAGMENT]
                packed_b[(n0, k0)] = [pack(bv[2 * i], bv[2 * i + 1]) for i in range(2)]
            res = call_intrinsic(self.b, name, ret_ty, packed_a[(m0, k0)] + packed_b[(n0, k0)] + accs[(m0, n0)])
            accs[(m0, n0)] = [self.b.extract_value(res, i) for i in range(4)]
    out = list(c_vals)
    for (m0, n0), acc in accs.items():
        for (dm, dn), v in zip(_C_FRAGMENT, acc):
            out[c_at[(m0 + dm, n0 + dn)]] = v
    self.set(op.result, out)
