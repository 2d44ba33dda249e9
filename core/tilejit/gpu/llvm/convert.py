"""Layout conversion through shared memory, vectorized and padded (a method of `FunctionLowering`).

The tensor is written to shared memory by its source layout and read back by the destination
layout. Two things make that fast:
- the *inner* dim of the shared buffer is the destination's most contiguous dim (the side that reads
  more often: dot operands are read by several warps), so runs of registers that are consecutive
  along it move as one vector access of up to 16 bytes, on both sides when the layouts agree;
- each inner row is padded by 16 bytes, so the rows that the lanes of a warp touch at once start in
  different banks (a 128-byte row would otherwise put every row in the same banks: an 8-way
  conflict for mma fragments) while vector accesses stay aligned.
"""
from __future__ import annotations

import llvmlite.ir as llir

from ..isa import I32
from ..linear_layout import LinearLayout
from .scalar_ops import llvm_bits, llvm_type

I1 = llir.IntType(1)
I8 = llir.IntType(8)
I64 = llir.IntType(64)


def _run_length(layout: LinearLayout, dim: int, max_vec: int) -> int:
    """Registers that can move as one vector along `dim`: consecutive low registers, and every other
    base a multiple of the run along `dim` (so a run starts at an aligned coordinate)."""
    vec = min(layout.contiguous_registers(dim), max_vec)
    while vec > 1:
        low = vec.bit_length() - 1
        others = list(layout.registers[low:]) + list(layout.lanes) + list(layout.warps)
        if all(b[dim] % vec == 0 for b in others):
            return vec
        vec //= 2
    return 1


def _inner_dim(layout: LinearLayout) -> int:
    best, best_len = layout.rank - 1, 1
    for d in reversed(range(layout.rank)):
        n = layout.contiguous_registers(d)
        if n > best_len:
            best, best_len = d, n
    return best


# A conversion whose buffer would pass this many bytes goes through shared memory in rounds (below).
CHUNK_BYTES = 64 * 1024


def _chunk_bits(src: LinearLayout, dst: LinearLayout, shape, bytes_per_element: int, runs=(1, 1)):
    """[(dim, bit), ...]: the top coordinate bits to convert one value of at a time, so that one
    round's buffer fits in CHUNK_BYTES (or is as small as the qualifying bits make it); [] when the
    whole tensor fits.

    A bit qualifies when it is the next one down from the top of its dim and a register basis of
    both layouts: then each thread's registers split by its value, in both layouts alike, and a
    round moves the elements with one value (as Triton converts large tiles in repetitions). Liger's
    fp32 group norm converts a 65536-element block (256 KiB): four rounds of 64 KiB."""
    total = bytes_per_element
    for n in shape:
        total *= n
    # Not a basis inside a vector run (those registers move together in one access).
    unit = ({tuple(b) for b in src.registers[(runs[0] - 1).bit_length():]}
            & {tuple(b) for b in dst.registers[(runs[1] - 1).bit_length():]})
    top = [(n - 1).bit_length() - 1 for n in shape]   # the top bit of each dim: the next candidate
    chosen = []
    while total > CHUNK_BYTES:
        best = None
        for d in range(len(shape)):
            if top[d] <= 0:
                continue
            basis = tuple((1 << top[d]) if e == d else 0 for e in range(len(shape)))
            if basis in unit and (best is None or shape[d] > shape[best]):
                best = d
        if best is None:
            break   # no more bits to cut on: rounds as small as these allow
        chosen.append((best, top[best]))
        top[best] -= 1
        total //= 2
    return chosen


def convert_through_shared(self, src_value, dst_type):
    """The registers of `dst_type`'s layout holding the tensor `src_value` (any two layouts)."""
    src_t = src_value.type
    full_shape = src_t.shape
    rank = len(full_shape)
    src, dst = self.layout(src_t), self.layout(dst_type)
    elem = llvm_type(src_t)
    # Pointers travel as 64-bit integers (a carried pointer tensor may need another layout).
    is_ptr = isinstance(elem, llir.PointerType)
    store_ty = I8 if elem == I1 else I64 if is_ptr else elem
    elem_bytes = max(1, llvm_bits(store_ty) // 8)
    max_vec = max(1, 16 // elem_bytes)
    inner = _inner_dim(dst) if rank else 0
    src_vec = _run_length(src, inner, max_vec) if rank else 1
    dst_vec = _run_length(dst, inner, max_vec) if rank else 1
    chunks = _chunk_bits(src, dst, full_shape, elem_bytes, (src_vec, dst_vec)) if rank else []
    # One round's buffer: each chunk bit halves its dim (the coordinates keep their low bits).
    shape = list(full_shape)
    for d, _ in chunks:
        shape[d] //= 2
    outer = [d for d in range(rank) if d != inner]
    pad = max_vec if rank > 1 and shape[inner] * elem_bytes >= 64 else 0
    pitch = shape[inner] + pad if rank else 1
    rows = 1
    for d in outer:
        rows *= shape[d]
    self.smem_base(rows * pitch * elem_bytes)
    cut = {d for d, _ in chunks}

    def index(coords):
        coords = [self.b.and_(c, llir.Constant(I32, shape[d] - 1)) if d in cut else c
                  for d, c in enumerate(coords)]
        idx = None
        for d in outer:
            idx = coords[d] if idx is None else self.b.add(self.b.mul(idx, llir.Constant(I32, shape[d])), coords[d])
        inner_c = coords[inner] if rank else llir.Constant(I32, 0)
        if idx is None:
            return inner_c
        return self.b.add(self.b.mul(idx, llir.Constant(I32, pitch)), inner_c)

    src_offsets, dst_offsets = src.register_offsets(), dst.register_offsets()

    def in_round(offsets, register, round_):
        """Register `register` (of the layout with these offsets) holds an element of round `round_`."""
        off = offsets[register]
        return all(((off[d] >> bit) & 1) == ((round_ >> i) & 1) for i, (d, bit) in enumerate(chunks))

    values = self.get(src_value)
    self.isa.barrier(self.b)
    src_coords = self.element_coords(src)
    dst_coords = self.element_coords(dst)
    out = [None] * dst.num_registers
    for round_ in range(1 << len(chunks)):
        if round_:
            self.isa.barrier(self.b)   # the last round's reads are done before this round's writes
        _store_round(self, src, values, src_vec, src_coords, index, store_ty, elem, is_ptr, elem_bytes,
                     lambda r, k=round_: in_round(src_offsets, r, k))
        self.isa.barrier(self.b)
        _load_round(self, dst, dst_vec, dst_coords, index, store_ty, elem, is_ptr, elem_bytes, out,
                    lambda r, k=round_: in_round(dst_offsets, r, k))
    self.isa.barrier(self.b)
    return out


def _store_round(self, src, values, vec, src_coords, index, store_ty, elem, is_ptr, elem_bytes, wanted):
    # Replicated registers (zero register bases) would only write the same value twice: skip them.
    written = set()
    offsets = src.register_offsets()
    for r0 in range(0, len(values), vec):
        key = offsets[r0]
        if key in written or not wanted(r0):
            continue
        written.add(key)
        ptr = self.smem_ptr(store_ty, index(src_coords[r0]))
        run = [self.b.zext(v, I8) if elem == I1 else self.b.ptrtoint(v, I64) if is_ptr else v
               for v in values[r0:r0 + vec]]
        if vec == 1:
            self.b.store(run[0], ptr, align=elem_bytes)
            continue
        vty = llir.VectorType(store_ty, vec)
        packed = llir.Constant(vty, None)
        for i, v in enumerate(run):
            packed = self.b.insert_element(packed, v, llir.Constant(I32, i))
        self.b.store(packed, ptr, align=elem_bytes * vec)


def _load_round(self, dst, vec, dst_coords, index, store_ty, elem, is_ptr, elem_bytes, out, wanted):
    for r0 in range(0, dst.num_registers, vec):
        if not wanted(r0):
            continue
        ptr = self.smem_ptr(store_ty, index(dst_coords[r0]))
        if vec == 1:
            loaded = [self.b.load(ptr, typ=store_ty, align=elem_bytes)]
        else:
            vty = llir.VectorType(store_ty, vec)
            whole = self.b.load(ptr, typ=vty, align=elem_bytes * vec)
            loaded = [self.b.extract_element(whole, llir.Constant(I32, i)) for i in range(vec)]
        out[r0:r0 + vec] = [self.b.trunc(v, I1) if elem == I1 else self.b.inttoptr(v, elem) if is_ptr else v
                            for v in loaded]
