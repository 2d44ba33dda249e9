"""Dot operands in shared memory: the swizzled tile layout and the `ldmatrix` plan that reads it.

A 16-bit operand tile (A: M x K, B: K x N) is stored row by row along its memory-contiguous dim
(`inner`), in 16-byte chunks. Chunk `c` of row `r` is stored at chunk `c ^ ((r // per_phase) %
max_phase)` (Triton's `#ttg.swizzled_shared` with vec = 8): the 8 rows one `ldmatrix` matrix reads,
and the rows a warp's 16-byte `cp.async` writes touch, then fall in 8 different 16-byte bank groups,
so neither side has bank conflicts.

`ldmatrix.x4` gives each lane one 32-bit register per 8x8 matrix; in (nonK, K) terms lane `l`
receives elements (nonK = l / 4, K = 2 * (l % 4) + {0, 1}) of each matrix, which is exactly the
mma.sync m16n8k16 fragment of A (a0..a7) and B (b0..b3). When the tile is stored with K
contiguous the plain form is used; when the non-K dim is contiguous, `.trans`.

Everything here computes with an `Arith` (Python ints in tests, LLVM values in the lowering), so the
same address code that is emitted is checked by a simulation of `ldmatrix` in the tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from tilejit.gpu.linear_layout import LinearLayout

CHUNK_BYTES = 16


class IntArith:
    """Address arithmetic on Python ints (used by the tests' simulation)."""

    def const(self, v):
        return v

    def add(self, a, b):
        return a + b

    def mul(self, a, b):
        return a * b

    def xor(self, a, b):
        return a ^ b

    def udiv(self, a, b):
        return a // b

    def urem(self, a, b):
        return a % b


@dataclass(frozen=True)
class _Tile:
    """A [d0, d1] tile of `elem_bytes`-byte elements whose contiguous dimension is `inner`."""
    shape: Tuple[int, int]
    inner: int
    elem_bytes: int = 2

    @property
    def width(self) -> int:
        return self.shape[self.inner]

    @property
    def rows(self) -> int:
        return self.shape[1 - self.inner]

    def transposed(self):
        """The same bytes seen as the transposed tile (`tl.trans` of what it holds): dims swapped,
        the contiguous dim with them, every element at the same offset."""
        return type(self)(self.shape[::-1], 1 - self.inner, self.elem_bytes)


@dataclass(frozen=True)
class SwizzledTile(_Tile):
    """A [d0, d1] tile of `elem_bytes`-byte elements stored along `inner` with an XOR swizzle."""

    @property
    def vec(self) -> int:
        return CHUNK_BYTES // self.elem_bytes

    @property
    def per_phase(self) -> int:
        return max(1, 128 // (self.width * self.elem_bytes))

    @property
    def max_phase(self) -> int:
        return max(1, min(self.width // self.vec, 8 // self.per_phase))

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.elem_bytes

    def fits(self) -> bool:
        """Whole 16-byte chunks per row (what the swizzle and ldmatrix need)."""
        return self.width % self.vec == 0 and self.width >= self.vec

    def offset(self, a, coords):
        """Element offset of logical `coords` (two Arith values) inside the tile."""
        row, col = coords[1 - self.inner], coords[self.inner]
        vec, per_phase, max_phase = self.vec, self.per_phase, self.max_phase
        chunk = a.udiv(col, a.const(vec))
        within = a.urem(col, a.const(vec))
        phase = a.urem(a.udiv(row, a.const(per_phase)), a.const(max_phase)) if max_phase > 1 else a.const(0)
        phys = a.xor(chunk, phase) if max_phase > 1 else chunk
        return a.add(a.add(a.mul(row, a.const(self.width)), a.mul(phys, a.const(vec))), within)


@dataclass(frozen=True)
class MatrixJob:
    """One 8x8 matrix of an operand: its corner in register-offset coordinates (nonK, K) and the two
    registers (of the dot-operand layout) that receive its two halves."""
    non_k: int
    k: int
    registers: Tuple[int, int]


@dataclass(frozen=True)
class MatrixGroup:
    """Up to 4 jobs served by one ldmatrix: the job of lane slot `s` (lanes 8s..8s+7) has its corner
    at `base + (s & 1) * step0 + (s >> 1) * step1` (steps in (nonK, K))."""
    jobs: Tuple[MatrixJob, ...]
    step0: Tuple[int, int]
    step1: Tuple[int, int]


@dataclass(frozen=True)
class LdmatrixPlan:
    op_idx: int
    trans: bool
    groups: Tuple[MatrixGroup, ...]

    @property
    def k_dim(self) -> int:
        return 1 if self.op_idx == 0 else 0

    def lane_coords(self, a, group: MatrixGroup, lane, warp_part):
        """Logical coordinates (d0, d1) of the 8 contiguous elements lane `lane` points `ldmatrix` at
        for `group` (`warp_part`: the warp's coordinate offsets, per dim, as Arith values)."""
        slot = a.udiv(lane, a.const(8))
        row = a.urem(lane, a.const(8))
        bit0 = a.urem(slot, a.const(2))
        bit1 = a.udiv(slot, a.const(2))
        base = group.jobs[0]
        non_k = a.add(a.const(base.non_k), a.add(a.mul(bit0, a.const(group.step0[0])),
                                                 a.mul(bit1, a.const(group.step1[0]))))
        k = a.add(a.const(base.k), a.add(a.mul(bit0, a.const(group.step0[1])), a.mul(bit1, a.const(group.step1[1]))))
        if self.trans:
            k = a.add(k, row)
        else:
            non_k = a.add(non_k, row)
        coords = [None, None]
        coords[self.k_dim], coords[1 - self.k_dim] = k, non_k
        return [a.add(coords[d], warp_part[d]) for d in range(2)]


def _basis(rank: int, dim: int, value: int):
    return tuple(value if d == dim else 0 for d in range(rank))


def plan_ldmatrix(layout: LinearLayout, op_idx: int, inner: int, warps_along_k: bool = False) -> Optional[LdmatrixPlan]:
    """How to fill the registers of dot-operand layout `layout` (mma.sync m16n8k16, operand `op_idx`)
    with ldmatrix from a tile stored along `inner`; None when the layout is not the fragment layout
    ldmatrix produces (then the generic conversion is used). `warps_along_k`: the plan of a layout
    whose warps may also split dim "K" (an mma result written with stmatrix, which is no operand)."""
    if layout.rank != 2:
        return None
    k_dim = 1 if op_idx == 0 else 0
    nk_dim = 1 - k_dim
    want_lanes = (_basis(2, k_dim, 2), _basis(2, k_dim, 4), _basis(2, nk_dim, 1), _basis(2, nk_dim, 2),
                  _basis(2, nk_dim, 4))
    if tuple(layout.lanes) != want_lanes or not layout.registers or layout.registers[0] != _basis(2, k_dim, 1):
        return None
    if not warps_along_k and any(b[k_dim] for b in layout.warps):
        return None
    by_corner = {}
    for r, off in enumerate(layout.register_offsets()):
        corner = (off[nk_dim], off[k_dim] & ~1)
        if corner[0] % 8 or corner[1] % 8:
            return None
        by_corner.setdefault(corner, [None, None])[off[k_dim] & 1] = r
    if any(None in regs for regs in by_corner.values()):
        return None
    jobs = {c: MatrixJob(c[0], c[1], tuple(regs)) for c, regs in by_corner.items()}
    return LdmatrixPlan(op_idx, inner != k_dim, _group_jobs(jobs, k_first=op_idx == 1))


def _group_jobs(jobs, k_first: bool = False) -> Tuple[MatrixGroup, ...]:
    """Greedy: from the lowest corner c, the next nonK corner (dn) and the next K corner (dk = 8);
    {c, c+dn, c+dk, c+dn+dk} when all are there (x4), else four corners along K (x4), else a pair
    (x2), else one (x1).

    The x4's destination registers come out in its corners' order, and mma.sync takes each operand
    in consecutive registers: A's four as (m0 k0, m8 k0, m0 k8, m8 k8), nonK first; B's two of an
    n8 tile as (k0, k8), so for B (`k_first`) the order is {c, c+dk, c+dn, c+dn+dk}. In the other
    order ptxas moves every B pair into place before its mma (fla's delta-rule state loop at 2
    warps: 246 register moves an iteration)."""
    left = dict(jobs)
    groups = []
    while left:
        nk, k = min(left, key=lambda c: (c[1], c[0]))
        later = sorted(c[0] for c in left if c[1] == k and c[0] > nk)
        dn = (later[0] - nk, 0) if later else None
        dk = (0, 8)
        add = lambda d: (nk + d[0], k + d[1])  # noqa: E731, B023
        if dn and all(c in left for c in (add(dn), add(dk), (nk + dn[0], k + 8))):
            if k_first:
                corners, step0, step1 = [(nk, k), add(dk), add(dn), (nk + dn[0], k + 8)], dk, dn
            else:
                corners, step0, step1 = [(nk, k), add(dn), add(dk), (nk + dn[0], k + 8)], dn, dk
        elif all(c in left for c in ((nk, k + 8), (nk, k + 16), (nk, k + 24))):   # one nonK tile: along K
            corners, step0, step1 = [(nk, k), (nk, k + 8), (nk, k + 16), (nk, k + 24)], dk, (0, 16)
        elif add(dk) in left:
            corners, step0, step1 = [(nk, k), add(dk)], dk, (0, 0)
        elif dn:
            corners, step0, step1 = [(nk, k), add(dn)], dn, (0, 0)
        else:
            corners, step0, step1 = [(nk, k)], (0, 0), (0, 0)
        groups.append(MatrixGroup(tuple(left.pop(c) for c in corners), step0, step1))
    return tuple(groups)


# ------------------------------------------------------------------------ wgmma (sm_90) operands

SWIZZLE_BYTES = 128           # wgmma's 128-byte swizzle: 8 rows of 128 bytes form one 1024-byte atom
ATOM_BYTES = 8 * SWIZZLE_BYTES


@dataclass(frozen=True)
class WgmmaTile(_Tile):
    """A [d0, d1] operand tile (16-bit; fp8 and fp32 too, K-major) in the canonical swizzled layout
    that wgmma's matrix descriptors read (PTX ISA, "Shared Memory Matrix Layout"; CUTLASS's
    Swizzle<3,4,3> for the 128-byte swizzle): the contiguous dim `inner` is cut into slabs of
    `swizzle` bytes (128: 64 16-bit elements); slab s holds every row, row r at byte
    s * rows * swizzle + r * swizzle, and 16-byte chunk c of a row is stored at chunk c ^ (r % 8).
    With the tile 1024-byte aligned, that is the XOR of address bits [4:6] with [7:9] that the
    hardware undoes, so a descriptor only names where a 64 x 8 (or 8 x 64) block starts, the stride
    between 8-row groups (SBO) and between slabs (LBO).

    The 64- and 32-byte swizzles (`swizzle` 64, 32: Swizzle<2,4,3>, <1,4,3>) XOR fewer address bits,
    the chunk with (r // 2) % 4 or (r // 4) % 2; tilejit uses them for K-major fp8 tiles whose K is
    64 or 32 bytes (`operand_tile`), as Triton does."""
    swizzle: int = SWIZZLE_BYTES

    def transposed(self):
        return WgmmaTile(self.shape[::-1], 1 - self.inner, self.elem_bytes, self.swizzle)

    @property
    def slab_elems(self) -> int:
        return self.swizzle // self.elem_bytes

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.elem_bytes

    @property
    def slab_bytes(self) -> int:
        return self.rows * self.swizzle

    def fits(self) -> bool:
        """Whole slabs along the contiguous dim and 8-row groups across it; 1-, 2- and 4-byte
        elements (fp8 and tf32 tiles must also be K-major: the callers check it)."""
        return self.elem_bytes in (1, 2, 4) and self.width % self.slab_elems == 0 and self.rows % 8 == 0

    def offset(self, a, coords):
        """Element offset of logical `coords` (two Arith values) inside the tile."""
        row, col = coords[1 - self.inner], coords[self.inner]
        slab_elems, vec = self.slab_elems, CHUNK_BYTES // self.elem_bytes
        chunks = self.swizzle // CHUNK_BYTES   # 16-byte chunks a row: the phases of the XOR
        slab = a.udiv(col, a.const(slab_elems))
        in_slab = a.urem(col, a.const(slab_elems))
        unswizzled = a.udiv(in_slab, a.const(vec))
        chunk = a.xor(unswizzled, a.urem(a.udiv(row, a.const(8 // chunks)), a.const(chunks)))
        start = a.add(a.mul(slab, a.const(self.rows * slab_elems)), a.mul(row, a.const(slab_elems)))
        return a.add(start, a.add(a.mul(chunk, a.const(vec)), a.urem(in_slab, a.const(vec))))

    def block_start(self, op_idx: int, non_k: int, k: int):
        """(byte offset in the tile, K-major?) of the block a wgmma reads for operand `op_idx`
        (0: A, M x K; 1: B, K x N) from non-K index `non_k` (a multiple of 64 when the non-K dim is
        contiguous, of 8 otherwise) and K index `k` (a multiple of the instruction's K: 32 bytes)."""
        k_dim = 1 if op_idx == 0 else 0
        k_major = self.inner == k_dim
        along, across = (k, non_k) if k_major else (non_k, k)
        slab, within = divmod(along, self.slab_elems)
        return slab * self.slab_bytes + across * self.swizzle + within * self.elem_bytes, k_major

    def descriptor_fields(self):
        """(LBO, SBO) in bytes: slab stride (the MN-major leading offset; K-major swizzled layouts
        ignore it) and the stride between 8-row groups."""
        return self.slab_bytes, 8 * self.swizzle


def operand_tile(shape, inner: int, elem_bytes: int, k_major: bool = False) -> Optional[WgmmaTile]:
    """The `WgmmaTile` a wgmma operand of `shape` contiguous along `inner` is kept in: the 128-byte
    swizzle where whole slabs fit; for a K-major one (fp8 always is) the 64- or 32-byte one where
    its K is 64 or 32 bytes (Triton's BLOCK_K = 64 fp8 tiles, and BLOCK_K = 32 or 16 f16/bf16 ones
    read along K, as Liger's MoE backward A tiles); None when none fits. A K-major tile's bytes are
    the same for every element size, and a k-step reads 32 of them (k16 of 16-bit types, k32 of
    fp8), so the narrower swizzles serve 16-bit tiles as they do fp8 ones."""
    for swizzle in (128, 64, 32) if elem_bytes == 1 or k_major else (128,):
        tile = WgmmaTile(tuple(shape), inner, elem_bytes, swizzle)
        if tile.fits():
            return tile
    return None


def staging_dims(shape) -> Tuple[int, ...]:
    """The dims a 16-bit 2-D tile of `shape` can be contiguous along in a `WgmmaTile` (whole 128-byte
    slabs): where a register operand of wgmma can be staged (`wgmma.staged_tile`)."""
    if len(shape) != 2:
        return ()
    return tuple(d for d in (0, 1) if WgmmaTile(tuple(shape), d).fits())


_SWIZZLE_MODES = {128: 1, 64: 2, 32: 3}


def descriptor_bits(start_address: int, lbo: int, sbo: int, swizzle: int = SWIZZLE_BYTES) -> int:
    """A wgmma matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address, LBO and SBO
    in 16-byte units in bits 0-13, 16-29, 32-45; base offset 0 (1024-byte aligned atoms); the
    swizzle mode in bits 62-63 (1: 128B, 2: 64B, 3: 32B)."""
    return (((start_address & 0x3FFFF) >> 4) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32
            | _SWIZZLE_MODES[swizzle] << 62)


# ------------------------------------------------------------------------ fp8 B tiles turned K-major

@dataclass(frozen=True)
class ByteTranspose:
    """Rewrite an N-major fp8 B tile ([K, N], N contiguous: the `SwizzledTile` a row-major B's
    `cp.async` fills) as the K-major `WgmmaTile` fp8 wgmma reads (the PTX ISA allows the transpose
    bits for 16-bit types only; `cp.async` moves 4 bytes at least, so the copies cannot do it, as
    they do for tf32). Triton does the same on sm_90: the pipelined tile is read into registers and
    stored again K-major (`local_load`, `local_alloc`).

    Each thread moves 4 x 4-byte blocks: four 32-bit reads, one per K row (4 bytes of N), a byte
    transpose in registers (`prmt`), four 32-bit writes, one per N row of the K-major tile (4 bytes
    of K). Where K is whole 128 bytes, in round `rnd` lane `l` of warp `w` moves block (K block
    l + 32 ua, N block (l + s) % S + S v), the warp's combination j = w + num_warps * rnd naming
    (ua, v, s), S the N blocks of a 32-wide group. With whole 128-byte rows on both sides (K and N
    multiples of 128) every read and every write of a warp then touches 32 different banks: a
    lane's read bank is (N chunk ^ K row % 8, N word % 4), its write bank (K chunk ^ N row % 8,
    K word % 4), and both run over all 32 pairs as the lane does (`tests/gpu/test_shared_operands.py`
    simulates it). A shorter K (64 or 32 bytes, the narrower swizzles) numbers the blocks K first
    across the threads instead."""
    shape: Tuple[int, int]
    num_warps: int

    @property
    def src(self) -> SwizzledTile:
        return SwizzledTile(self.shape, 1, 1)

    @property
    def dst(self) -> Optional[WgmmaTile]:
        return operand_tile(self.shape, 0, 1)

    @property
    def _k_blocks(self) -> int:
        return self.shape[0] // 4

    @property
    def _n_blocks(self) -> int:
        return self.shape[1] // 4

    @property
    def _diagonal(self) -> bool:
        nb = self._n_blocks
        return self._k_blocks % 32 == 0 and (nb % 32 == 0 or 32 % nb == 0)

    @property
    def _group(self) -> int:
        return min(self._n_blocks, 32)

    @property
    def _per_round(self) -> int:
        """Blocks all threads move in one round."""
        return 32 * self.num_warps

    def fits(self) -> bool:
        """Both tiles fit and the threads share the blocks evenly."""
        blocks = self._k_blocks * self._n_blocks
        return (self.shape[0] % 4 == 0 and self.src.fits() and self.dst is not None
                and blocks % self._per_round == 0)

    @property
    def rounds(self) -> int:
        return self._k_blocks * self._n_blocks // self._per_round

    def block(self, a, lane, warp, rnd: int):
        """(k0, n0) of the block thread (`lane`, `warp`) moves in round `rnd` (Arith values)."""
        if not self._diagonal:
            g = a.add(a.add(lane, a.mul(warp, a.const(32))), a.const(self._per_round * rnd))
            k_block, n_block = a.urem(g, a.const(self._k_blocks)), a.udiv(g, a.const(self._k_blocks))
            return a.mul(k_block, a.const(4)), a.mul(n_block, a.const(4))
        group, groups = self._group, max(1, self._n_blocks // 32)
        j = a.add(warp, a.const(self.num_warps * rnd))
        s = a.urem(j, a.const(group))
        rest = a.udiv(j, a.const(group))
        v, ua = a.urem(rest, a.const(groups)), a.udiv(rest, a.const(groups))
        k_block = a.add(lane, a.mul(ua, a.const(32)))
        n_block = a.add(a.urem(a.add(lane, s), a.const(group)), a.mul(v, a.const(group)))
        return a.mul(k_block, a.const(4)), a.mul(n_block, a.const(4))

    def reads(self, a, k0, n0):
        """The byte offsets in `src` of the four words a block's thread reads (K rows k0 .. k0+3)."""
        return [self.src.offset(a, (a.add(k0, a.const(i)), n0)) for i in range(4)]

    def writes(self, a, k0, n0):
        """The byte offsets in `dst` of the four words it writes (N rows n0 .. n0+3)."""
        return [self.dst.offset(a, (k0, a.add(n0, a.const(j)))) for j in range(4)]


# `prmt.b32` selectors of the 4x4 byte transpose: word j of the result holds byte j of each input
# word, in order (pairs interleaved first, then the pairs' halves joined).
PRMT_INTERLEAVE = (0x5140, 0x7362)   # (a0 b0 a1 b1), (a2 b2 a3 b3)
PRMT_JOIN = (0x5410, 0x7632)         # (a0 a1 b0 b1), (a2 a3 b2 b3)


def prmt(a: int, b: int, selector: int) -> int:
    """PTX `prmt.b32` (default mode) on Python ints: result byte i is byte (selector nibble i) of
    the eight bytes b:a."""
    both = (b << 32) | a
    return sum(((both >> (8 * ((selector >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))


def transpose_words(words, permute=prmt):
    """The 4x4 byte transpose of four 32-bit words with `permute` (`prmt` semantics)."""
    w0, w1, w2, w3 = words
    lo01, hi01 = (permute(w0, w1, s) for s in PRMT_INTERLEAVE)
    lo23, hi23 = (permute(w2, w3, s) for s in PRMT_INTERLEAVE)
    return [permute(lo01, lo23, PRMT_JOIN[0]), permute(lo01, lo23, PRMT_JOIN[1]),
            permute(hi01, hi23, PRMT_JOIN[0]), permute(hi01, hi23, PRMT_JOIN[1])]
