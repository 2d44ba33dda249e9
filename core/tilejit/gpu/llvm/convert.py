"""Layout conversion through shared memory, vectorized and padded (a method of `FunctionLowering`).

The tensor is written to shared memory by its source layout and read back by the destination
layout. Two things make that fast:
- the *inner* dim of the shared buffer is the destination's most contiguous dim (the side that reads
  more often: dot operands are read by several warps), so runs of registers that are consecutive
  along it move as one vector access of up to 16 bytes, on both sides when the layouts agree;
- each inner row is padded, so the rows that the lanes of a warp touch at once start in different
  banks (a 128-byte row would otherwise put every row in the same banks: an 8-way conflict for mma
  fragments) while vector accesses stay aligned. The padding is the one whose accesses, simulated
  for a warp on both sides, take the fewest shared-memory wavefronts (`_padding`): 16 bytes suits
  16-byte accesses, but an mma accumulator's 8-byte pairs, four lanes to a row, need rows 32
  bytes apart.
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


# A conversion whose buffer would pass this many bytes, and the shared memory the kernel already
# holds, goes through shared memory in rounds (below).
CHUNK_BYTES = 64 * 1024
BANKS, BANK_BYTES = 32, 4


def _wavefronts(addresses, access_bytes: int) -> int:
    """Shared-memory wavefronts of warp accesses: `addresses` [accesses, 32 lanes] in bytes, each
    lane reading or writing `access_bytes`. The hardware serves a 16-byte access a quarter-warp at a
    time and an 8-byte one a half-warp at a time; within such a phase each bank serves one 4-byte
    word a wavefront (lanes on the same word share it)."""
    import numpy as np
    words_per_lane = max(1, access_bytes // BANK_BYTES)
    lanes_per_phase = addresses.shape[1] // words_per_lane
    words = addresses // BANK_BYTES
    words = (words[:, :, None] + np.arange(words_per_lane)).reshape(-1, lanes_per_phase * words_per_lane)
    words = np.sort(words, axis=1)
    distinct = np.ones(words.shape, bool)
    distinct[:, 1:] = words[:, 1:] != words[:, :-1]
    per_bank = np.zeros((words.shape[0], BANKS), np.int64)
    np.add.at(per_bank, (np.repeat(np.arange(words.shape[0]), words.shape[1]), (words % BANKS).ravel()),
              distinct.ravel())
    return int(per_bank.max(axis=1).sum())


def _warp_coords(layout: LinearLayout, vec: int):
    """Per dim, [vector accesses, lanes] coordinates of warp 0's accesses of `vec` registers each
    (the other warps' addresses differ by a constant, which shifts every lane's bank alike)."""
    import numpy as np
    starts = range(0, layout.num_registers, vec)
    regs = np.array([layout.coords(r, 0, 0) for r in starts], np.int64)                 # [G, rank]
    lanes = np.array([layout.coords(0, lane, 0) for lane in range(layout.num_lanes)], np.int64)
    coords = regs[:, None, :] ^ lanes[None, :, :]                                         # [G, L, rank]
    return [coords[..., d] for d in range(layout.rank)]


def _padding(src, dst, src_vec, dst_vec, shape, inner, outer, elem_bytes, default):
    """Elements to pad each inner row by: the candidate (multiples of the widest vector, up to 128
    bytes) whose two sides' accesses take the fewest wavefronts; `default` on a tie."""
    if len(src.lanes) != 5 or len(dst.lanes) != 5:
        return default   # not 32-lane warps: nothing to simulate against
    sides = [(_warp_coords(layout, vec), vec * elem_bytes) for layout, vec in ((src, src_vec), (dst, dst_vec))]
    # A warp access of k words a lane takes at least k wavefronts (32 banks serve 32 words).
    ideal = sum(coords[0].shape[0] * max(1, access // BANK_BYTES) for coords, access in sides)

    def cost(pad):
        pitch = shape[inner] + pad

        def address(coords):
            row = 0
            for d in outer:
                row = row * shape[d] + (coords[d] & (shape[d] - 1))
            return (row * pitch + (coords[inner] & (shape[inner] - 1))) * elem_bytes
        return sum(_wavefronts(address(coords), access) for coords, access in sides)
    best, best_cost = default, cost(default)
    unit = max(src_vec, dst_vec)
    for pad in [0] + [unit << k for k in range(8)]:
        if best_cost == ideal:
            break
        if pad != default and pad * elem_bytes <= 128:
            pad_cost = cost(pad)
            if pad_cost < best_cost:
                best, best_cost = pad, pad_cost
    return best


def _chunk_bits(src: LinearLayout, dst: LinearLayout, shape, bytes_per_element: int, runs=(1, 1),
                limit: int = CHUNK_BYTES):
    """[(dim, bit), ...]: the top coordinate bits to convert one value of at a time, so that one
    round's buffer fits in `limit` bytes (or is as small as the qualifying bits make it); [] when the
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
    while total > limit:
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


def _shared_within_occupancy(self, layout: LinearLayout, bits: int) -> int:
    """Shared memory a CTA may take without lowering the occupancy its registers allow at best.

    The values being converted alone hold this many 32-bit registers a thread, and a thread needs
    some more (indices, addresses; registers come 8 a thread at a time), which bounds the CTAs an SM
    can run; each of them may then have its share of the SM's shared memory. 0 where the target
    does not say how many registers an SM has."""
    registers_per_sm = self.isa.registers_per_sm
    if not registers_per_sm:
        return 0
    values = -(-len(set(layout.register_offsets())) * bits // 32)
    per_thread = (values + 8) // 8 * 8
    return self.isa.shared_memory_per_cta(registers_per_sm // (self.num_warps * self.warp_size * per_thread))


def convert_registers(self, values, src: LinearLayout, dst_type, dst: LinearLayout | None = None):
    """The registers of `dst_type`'s layout (or of `dst`, a layout of its shape) holding the tensor
    whose registers `values` are laid out by `src` (a layout of `dst_type`'s shape)."""
    full_shape = dst_type.shape
    rank = len(full_shape)
    dst = dst if dst is not None else self.layout(dst_type)
    elem = llvm_type(dst_type)
    # Pointers travel as 64-bit integers (a carried pointer tensor may need another layout).
    is_ptr = isinstance(elem, llir.PointerType)
    store_ty = I8 if elem == I1 else I64 if is_ptr else elem
    elem_bytes = max(1, llvm_bits(store_ty) // 8)
    max_vec = max(1, 16 // elem_bytes)
    inner = _inner_dim(dst) if rank else 0
    src_vec = _run_length(src, inner, max_vec) if rank else 1
    dst_vec = _run_length(dst, inner, max_vec) if rank else 1
    outer = [d for d in range(rank) if d != inner]

    def plan(limit):
        """(chunk bits, one round's shape, row pitch, buffer bytes) for rounds of at most
        `limit` bytes before padding."""
        chunks = _chunk_bits(src, dst, full_shape, elem_bytes, (src_vec, dst_vec), limit) if rank else []
        # One round's buffer: each chunk bit halves its dim (the coordinates keep their low bits).
        shape = list(full_shape)
        for d, _ in chunks:
            shape[d] //= 2
        pad = max_vec if rank > 1 and shape[inner] * elem_bytes >= 64 else 0
        if rank > 1:
            pad = _padding(src, dst, src_vec, dst_vec, shape, inner, outer, elem_bytes, pad)
        pitch = shape[inner] + pad if rank else 1
        rows = 1
        for d in outer:
            rows *= shape[d]
        return chunks, shape, pitch, rows * pitch * elem_bytes

    # Rounds only where the buffer would pass both CHUNK_BYTES and the shared memory the kernel holds
    # already (a matmul's epilogue reuses its pipeline's buffers: 128x256 fp32 in one round, as Triton),
    # or the shared memory it may take without losing occupancy: fewer rounds, fewer barriers.
    limit = max(CHUNK_BYTES, self.smem_bytes - self.scratch_offset)
    chunks, shape, pitch, nbytes = plan(limit)
    room = _shared_within_occupancy(self, src, llvm_bits(store_ty)) - self.scratch_offset
    wider = room
    while chunks and wider > limit:
        candidate = plan(wider)
        if candidate[3] <= room:   # padding included
            chunks, shape, pitch, nbytes = candidate
            break
        wider //= 2
    self.smem_base(nbytes)
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
