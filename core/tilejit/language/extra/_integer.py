"""libdevice's integer functions (bit counts, bit reversal, high halves of products, averages),
written with shifts, masks and selects."""
from __future__ import annotations

from ...runtime.jit import jit
from .. import core
from ._common import expect


@jit
def _unsigned(x):
    return x.to(core.uint64, bitcast=True) if x.dtype.primitive_bitwidth == 64 else x.to(core.uint32, bitcast=True)


@jit
def clz(arg0):
    """Number of leading zero bits (int32 result; 32 or 64 for 0)."""
    expect("clz", "int32 int64 uint32 uint64", arg0)
    u = _unsigned(arg0)
    n = core.full(arg0.shape, 0, core.int32)
    if arg0.dtype.primitive_bitwidth == 64:
        c = (u >> 32) == 0
        n = core.where(c, n + 32, n)
        u = core.where(c, u << 32, u)
        top: core.constexpr = 64
    else:
        top: core.constexpr = 32
    for shift in core.static_range(5):
        width: core.constexpr = 16 >> shift
        c = (u >> (top - width)) == 0
        n = core.where(c, n + width, n)
        u = core.where(c, u << width, u)
    return core.where(u == 0, n + 1, n)


@jit
def popc(arg0):
    """Number of set bits (int32 result)."""
    expect("popc", "int32 int64 uint32 uint64", arg0)
    v = _unsigned(arg0)
    if arg0.dtype.primitive_bitwidth == 64:
        v = v - ((v >> 1) & 0x5555555555555555)
        v = (v & 0x3333333333333333) + ((v >> 2) & 0x3333333333333333)
        v = (v + (v >> 4)) & 0x0F0F0F0F0F0F0F0F
        out = ((v * 0x0101010101010101) >> 56).to(core.int32)
    else:
        v = v - ((v >> 1) & 0x55555555)
        v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
        v = (v + (v >> 4)) & 0x0F0F0F0F
        out = ((v * 0x01010101) >> 24).to(core.int32)
    return out


@jit
def brev(arg0):
    """The bits of arg0 in reverse order."""
    expect("brev", "int32 int64 uint32 uint64", arg0)
    v = _unsigned(arg0)
    if arg0.dtype.primitive_bitwidth == 64:
        v = ((v >> 1) & 0x5555555555555555) | ((v & 0x5555555555555555) << 1)
        v = ((v >> 2) & 0x3333333333333333) | ((v & 0x3333333333333333) << 2)
        v = ((v >> 4) & 0x0F0F0F0F0F0F0F0F) | ((v & 0x0F0F0F0F0F0F0F0F) << 4)
        v = ((v >> 8) & 0x00FF00FF00FF00FF) | ((v & 0x00FF00FF00FF00FF) << 8)
        v = ((v >> 16) & 0x0000FFFF0000FFFF) | ((v & 0x0000FFFF0000FFFF) << 16)
        v = (v >> 32) | (v << 32)
    else:
        v = ((v >> 1) & 0x55555555) | ((v & 0x55555555) << 1)
        v = ((v >> 2) & 0x33333333) | ((v & 0x33333333) << 2)
        v = ((v >> 4) & 0x0F0F0F0F) | ((v & 0x0F0F0F0F) << 4)
        v = ((v >> 8) & 0x00FF00FF) | ((v & 0x00FF00FF) << 8)
        v = (v >> 16) | (v << 16)
    return v.to(arg0.dtype, bitcast=True)


@jit
def ffs(arg0):
    """1 + the index of the least significant set bit; 0 for 0 (int32 result)."""
    expect("ffs", "int32 int64", arg0)
    u = _unsigned(arg0)
    lowest = u & (0 - u)
    return core.where(u == 0, 0, popc(lowest - 1) + 1)


@jit
def byte_perm(arg0, arg1, arg2):
    """Bytes picked from the 8-byte value {arg1:arg0} by the selector nibbles of arg2 (__byte_perm)."""
    expect("byte_perm", "int32", arg0, arg1, arg2)
    v = (arg1.to(core.uint32, bitcast=True).to(core.uint64) << 32) | arg0.to(core.uint32, bitcast=True).to(core.uint64)
    s = arg2.to(core.uint32, bitcast=True).to(core.uint64)
    out = core.full(v.shape, 0, core.uint64)
    for i in core.static_range(4):
        selector = (s >> (4 * i)) & 7
        out = out | (((v >> (8 * selector)) & 0xFF) << (8 * i))
    return out.to(core.uint32).to(core.int32, bitcast=True)


@jit
def mulhi(arg0, arg1):
    """The high half of the full product (signed or unsigned by the operand type)."""
    expect("mulhi", "int32 uint32 int64 uint64", arg0, arg1)
    if arg0.dtype == core.int32:
        out = ((arg0.to(core.int64) * arg1.to(core.int64)) >> 32).to(core.int32)
    elif arg0.dtype == core.int64:
        hi = core.umulhi(arg0.to(core.uint64, bitcast=True), arg1.to(core.uint64, bitcast=True))
        hi = hi.to(core.int64, bitcast=True)
        # signed high half from the unsigned one: subtract the other operand where one is negative
        out = hi - core.where(arg0 < 0, arg1, 0) - core.where(arg1 < 0, arg0, 0)
    else:
        out = core.umulhi(arg0, arg1)
    return out


@jit
def mul24(arg0, arg1):
    """Low 32 bits of the product of the low 24 bits of each operand (sign-extended for int32)."""
    expect("mul24", "int32 uint32", arg0, arg1)
    if arg0.dtype == core.int32:
        out = ((arg0 << 8) >> 8) * ((arg1 << 8) >> 8)
    else:
        out = (arg0 & 0xFFFFFF) * (arg1 & 0xFFFFFF)
    return out


@jit
def sad(arg0, arg1, arg2):
    """|arg0 - arg1| + arg2 (wrapping to 32 bits)."""
    expect("sad", "int32 uint32", arg0, arg1)
    d = arg0.to(core.int64) - arg1.to(core.int64)
    d = core.where(d < 0, -d, d)
    return (d + arg2.to(core.uint32, bitcast=True).to(core.int64)).to(arg0.dtype)


@jit
def hadd(arg0, arg1):
    """(arg0 + arg1) >> 1 without overflow."""
    expect("hadd", "int32 uint32", arg0, arg1)
    return ((arg0.to(core.int64) + arg1.to(core.int64)) >> 1).to(arg0.dtype)


@jit
def rhadd(arg0, arg1):
    """(arg0 + arg1 + 1) >> 1 without overflow."""
    expect("rhadd", "int32 uint32", arg0, arg1)
    return ((arg0.to(core.int64) + arg1.to(core.int64) + 1) >> 1).to(arg0.dtype)
