"""Layout conversion inside each warp with lane shuffles (a method of `FunctionLowering`).

When every element a thread needs in the destination layout is held, in the source layout, by a
lane of its own warp, the conversion needs no shared memory and no barrier: each destination
register is one indexed shuffle (`shfl.sync.idx` on NVIDIA, `ds_bpermute` on AMD) of one source
register, each lane reading the lane that holds its element. Triton converts within a warp this
way too. fla's gated state loop converts a 32-element gate vector into the slices of two matrix
layouts every iteration: through shared memory that was a store, a load and two barriers each.

Conditions (else the conversion goes through shared memory):
- for each destination register the source register is the same for every thread (the register
  to shuffle is chosen at compile time), and every thread finds its element in its own warp;
- the source lane is an XOR-linear function of the thread's lane and warp bits (computed with a
  few integer ops), which holds for linear layouts whose replicas are picked consistently;
- elements of at most 32 bits (one shuffle each), and not too many registers (each destination
  register is one shuffle: this is for vectors and small tiles, where it beats the barriers).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Optional, Tuple

import llvmlite.ir as llir

from ..isa import I32
from ..linear_layout import LinearLayout
from ..target import TargetDescription
from .scalar_ops import llvm_bits, llvm_type

# At most this many destination registers a thread: past it, the shared-memory path's vector
# accesses move more per instruction than one shuffle a register.
MAX_SHUFFLES = 16


def _flat(coords, shape) -> int:
    index = 0
    for c, n in zip(coords, shape):
        index = index * n + c
    return index


def shuffle_plan(src: LinearLayout, dst: LinearLayout) -> Optional[List[Tuple[int, List[int]]]]:
    """Per destination register, (source register, source lane of each thread t = lane + warp *
    lanes), or None when the conversion is not a shuffle inside warps (see the module doc)."""
    if (src.num_lanes != dst.num_lanes or src.num_warps != dst.num_warps
            or dst.num_registers > MAX_SHUFFLES or src.num_registers * src.num_lanes * src.num_warps > 8192):
        return None
    shape, lanes = src.shape, src.num_lanes
    # holders[warp][element] = {register: smallest lane holding it}
    holders: List[Dict[int, Dict[int, int]]] = []
    for w in range(src.num_warps):
        table: Dict[int, Dict[int, int]] = {}
        for r in range(src.num_registers):
            for lane in range(lanes):
                table.setdefault(_flat(src.coords(r, lane, w), shape), {}).setdefault(r, lane)
        holders.append(table)
    plan = []
    for j in range(dst.num_registers):
        wanted = [(w, lane, _flat(dst.coords(j, lane, w), shape)) for w in range(dst.num_warps) for lane in range(lanes)]
        common = None
        for w, _, e in wanted:
            regs = set(holders[w].get(e, {}))
            common = regs if common is None else common & regs
            if not common:
                return None
        reg = min(common)
        plan.append((reg, [holders[w][e][reg] for w, _, e in wanted]))
    return plan


def _xor_linear(values: List[int]) -> Optional[Tuple[int, List[int]]]:
    """(c0, [c_b]) with values[t] == c0 ^ XOR of c_b over the set bits b of t, or None."""
    c0 = values[0]
    bits = (len(values) - 1).bit_length()
    cs = [values[1 << b] ^ c0 for b in range(bits)]
    for t, v in enumerate(values):
        x = c0
        for b in range(bits):
            if t >> b & 1:
                x ^= cs[b]
        if x != v:
            return None
    return c0, cs


def convert_by_shuffles(self, src_value, dst_type) -> Optional[list]:
    """The registers of `src_value` in `dst_type`'s layout, moved by lane shuffles; None when the
    conversion does not qualify (the caller goes through shared memory)."""
    elem_ty = llvm_type(src_value.type)
    if (type(self.isa).shuffle_idx is TargetDescription.shuffle_idx or isinstance(elem_ty, llir.PointerType)
            or llvm_bits(elem_ty) > 32):
        return None   # no indexed shuffle on this target, or a pointer or 64-bit element
    src, dst = self.layout(src_value.type), self.layout(dst_type)
    plan = _linear_plan(src, dst)
    if plan is None:
        return None
    bits = llvm_bits(elem_ty)
    values = self.get(src_value)
    out = []
    for reg, (c0, cs) in plan:
        lane = self._in_prologue(("shuffle_lane", src.num_lanes, c0, cs), lambda c0=c0, cs=cs: _source_lane(
            self.b, self._thread_index(src.num_lanes, src.num_warps), c0, cs))
        word = self.isa.shuffle_idx(self.b, _to_i32(self.b, values[reg], bits), lane)
        out.append(_from_i32(self.b, word, values[reg].type, bits))
    return out


@lru_cache(maxsize=256)
def _linear_plan(src: LinearLayout, dst: LinearLayout):
    """`shuffle_plan` with each register's source lanes as (c0, (c_b...)) (`_xor_linear`), or None."""
    plan = shuffle_plan(src, dst)
    if plan is None:
        return None
    linear = [(reg, _xor_linear(lanes)) for reg, lanes in plan]
    return None if any(lin is None for _, lin in linear) else tuple((reg, (c0, tuple(cs))) for reg, (c0, cs) in linear)


def thread_index(self, num_lanes: int, num_warps: int):
    """lane + warp * lanes: the bits the source lanes are a function of."""
    if num_warps == 1:
        return self.lane
    return self.b.or_(self.lane, self.b.shl(self.warp, llir.Constant(I32, (num_lanes - 1).bit_length())))


def _source_lane(b, thread, c0: int, cs: List[int]):
    """c0 ^ XOR of cs[bit] over the set bits of `thread`, in as few ops as the constants allow."""
    lane = llir.Constant(I32, c0)
    for bit, c in enumerate(cs):
        if not c:
            continue
        picked = b.and_(thread, llir.Constant(I32, 1 << bit))
        if c & (c - 1) == 0:   # one bit: move it into place
            shift = c.bit_length() - 1 - bit
            term = (b.shl(picked, llir.Constant(I32, shift)) if shift > 0
                    else b.lshr(picked, llir.Constant(I32, -shift)) if shift < 0 else picked)
        else:
            term = b.select(b.icmp_unsigned("!=", picked, llir.Constant(I32, 0)), llir.Constant(I32, c),
                            llir.Constant(I32, 0))
        lane = b.xor(lane, term)
    return lane


def _to_i32(b, value, bits: int):
    ty = value.type
    if isinstance(ty, llir.IntType):
        return value if bits == 32 else b.zext(value, I32)
    as_int = b.bitcast(value, llir.IntType(bits))
    return as_int if bits == 32 else b.zext(as_int, I32)


def _from_i32(b, word, ty, bits: int):
    narrow = word if bits == 32 else b.trunc(word, llir.IntType(bits))
    return narrow if isinstance(ty, llir.IntType) else b.bitcast(narrow, ty)
