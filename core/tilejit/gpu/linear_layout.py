"""Linear layouts: the one representation every TTGIR encoding is lowered to.

A layout maps the hardware index of one element — (register, lane, warp) — to the coordinates of the
tensor element it holds. As in Triton's LinearLayout, the map is linear over GF(2): each bit of the
register, lane and warp index has a *basis* (a coordinate vector), and an element's coordinates are
the XOR of the bases of the set bits. A zero basis means that bit replicates data (two lanes hold
the same element). Shapes are powers of two, so this covers blocked, slice, MMA and dot-operand
layouts exactly, and the lowering needs only one way to compute index math, one reduction
algorithm and one layout conversion, whatever the encodings are.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

Basis = Tuple[int, ...]


def log2_exact(n: int, what: str = "size") -> int:
    """log2 of a power of two; anything else is a compiler error (tensor shapes are powers of two)."""
    from ..errors import CompilationError
    if n < 1 or n & (n - 1):
        raise CompilationError(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


@dataclass(frozen=True)
class LinearLayout:
    """Bases for each register, lane and warp bit; `shape` is the tensor's shape."""
    shape: Tuple[int, ...]
    registers: Tuple[Basis, ...]
    lanes: Tuple[Basis, ...]
    warps: Tuple[Basis, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_registers(self) -> int:
        return 1 << len(self.registers)

    @property
    def num_lanes(self) -> int:
        return 1 << len(self.lanes)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warps)

    @staticmethod
    def _combine(bases, index: int, coords: List[int]) -> None:
        bit = 0
        while index:
            if index & 1:
                for d, b in enumerate(bases[bit]):
                    coords[d] ^= b
            index >>= 1
            bit += 1

    def coords(self, register: int, lane: int, warp: int) -> Tuple[int, ...]:
        """The coordinates of the element that `register` of thread (lane, warp) holds."""
        out = [0] * self.rank
        self._combine(self.registers, register, out)
        self._combine(self.lanes, lane, out)
        self._combine(self.warps, warp, out)
        return tuple(out)

    def register_offsets(self) -> List[Tuple[int, ...]]:
        """The part of each register's coordinates that does not depend on lane and warp (a new list;
        computed once per layout: the lowering asks for it per register of large tensors)."""
        return list(self._register_offsets)

    @functools.cached_property
    def _register_offsets(self) -> Tuple[Tuple[int, ...], ...]:
        return tuple(self.coords(r, 0, 0) for r in range(self.num_registers))

    def thread_elements(self, lane: int, warp: int) -> List[Tuple[int, ...]]:
        """Every element thread (lane, warp) holds, in register order."""
        return [self.coords(r, lane, warp) for r in range(self.num_registers)]

    def all_owners(self) -> Iterator[Tuple[Tuple[int, int, int], Tuple[int, ...]]]:
        """((register, lane, warp), coordinates) for every hardware slot."""
        for w in range(self.num_warps):
            for l in range(self.num_lanes):
                for r in range(self.num_registers):
                    yield (r, l, w), self.coords(r, l, w)

    def contiguous_registers(self, dim: int) -> int:
        """How many consecutive registers hold consecutive elements along `dim` (1, 2, 4, ...)."""
        n = 0
        for b in self.registers:
            want = tuple((1 << n) if d == dim else 0 for d in range(self.rank))
            if b != want:
                break
            n += 1
        return 1 << n

    def lane_dims_mask(self, dim: int) -> int:
        """The lane-index bits whose bases move along `dim` (the partners of a butterfly reduction)."""
        return sum(1 << i for i, b in enumerate(self.lanes) if b[dim] != 0)

    def warp_dims_mask(self, dim: int) -> int:
        return sum(1 << i for i, b in enumerate(self.warps) if b[dim] != 0)

    def _moved(self, shape, move, first_register=()) -> "LinearLayout":
        """The layout on `shape` whose bases are this one's through `move` (`first_register`: bases
        put before the registers')."""
        return LinearLayout(tuple(shape), tuple(first_register) + tuple(map(move, self.registers)),
                            tuple(map(move, self.lanes)), tuple(map(move, self.warps)))

    def permuted(self, order) -> "LinearLayout":
        """The same elements named by coordinates with the dims in `order` (`tl.permute`'s result dim i
        is dim order[i]): each thread holds what it held."""
        def move(b):
            return tuple(b[o] for o in order)
        return self._moved(move(self.shape), move)

    def reshaped(self, shape) -> "LinearLayout":
        """The same elements named by their coordinates in `shape`, row-major (`tl.reshape`). Every dim
        is a power of two, so an element's row-major index is its coordinates' bits one after the
        other, and each basis (one bit of one coordinate) stays one bit of one coordinate."""
        src_bits = [n.bit_length() - 1 for n in self.shape]
        dst_bits = [n.bit_length() - 1 for n in shape]

        def move(b):
            flat = 0
            for c, bits in zip(b, src_bits):
                flat = (flat << bits) | c
            out = []
            for bits in reversed(dst_bits):
                out.append(flat & ((1 << bits) - 1))
                flat >>= bits
            return tuple(reversed(out))
        return self._moved(shape, move)

    def joined(self) -> "LinearLayout":
        """The layout of `tl.join(a, b)` as a thread holds it when a and b both have this layout: a new
        minor dim of size 2, its bit the lowest register bit (a's and b's registers alternate), as
        Triton's join layout: the pair is contiguous in registers, for vector accesses."""
        def grow(b):
            return tuple(b) + (0,)
        return self._moved(self.shape + (2,), grow, first_register=[(0,) * self.rank + (1,)])

    def stacked(self) -> "LinearLayout":
        """The layout of `tl.cat(a, b)` (a then b along dim 0) as a thread holds it when a and b both
        have this layout: dim 0 doubled, its new top bit the highest register bit (a's registers, then
        b's)."""
        top = (self.shape[0],) + (0,) * (self.rank - 1)
        return LinearLayout((2 * self.shape[0],) + tuple(self.shape[1:]), tuple(self.registers) + (top,),
                            tuple(self.lanes), tuple(self.warps))

    def split_minor(self) -> Optional[Tuple[int, "LinearLayout"]]:
        """For `tl.split` of a minor dim of size 2: (the register bit that selects it, the layout of each
        half), or None where that dim is not exactly one register bit (a lane or warp holds it)."""
        minor = (0,) * (self.rank - 1) + (1,)
        if self.shape[-1] != 2 or minor not in self.registers:
            return None
        if any(b[-1] for b in self.lanes + self.warps) or sum(1 for b in self.registers if b[-1]) != 1:
            return None
        bit = self.registers.index(minor)

        def shrink(b):
            return tuple(b[:-1])
        rest = LinearLayout(self.shape, self.registers[:bit] + self.registers[bit + 1:], self.lanes, self.warps)
        return bit, rest._moved(self.shape[:-1], shrink)

    def drop_dim(self, dim: int) -> "LinearLayout":
        """The layout of a reduction's result: `dim` removed. Register bits that only moved along
        `dim` disappear (they were combined in-thread); lane and warp bits along it become zero
        (every lane of the group ends with the same value, i.e. replication)."""
        def strip(b):
            return tuple(v for d, v in enumerate(b) if d != dim)
        regs = tuple(strip(b) for b in self.registers if any(v for d, v in enumerate(b) if d != dim))
        shape = tuple(s for d, s in enumerate(self.shape) if d != dim)
        return LinearLayout(shape, regs, tuple(strip(b) for b in self.lanes),
                            tuple(strip(b) for b in self.warps))


def standard_bases(shape, chunks) -> Tuple[List[List[Basis]], List[Basis]]:
    """Fill a tensor's coordinate bits in the order given by `chunks`.

    `chunks` is a list of (kind, dim, nbits) with kind in register/lane/warp: the next `nbits`
    coordinate bits of `dim` go to that kind. Bits beyond the shape become zero bases for lanes and
    warps (replication) and are dropped for registers. Whatever part of the shape is left uncovered
    is then covered by extra registers, in the order dims were first used (repetitions of the tile).
    Returns ({kind: bases}, order of dims).
    """
    rank = len(shape)
    used = [0] * rank
    limits = [log2_exact(s, "tensor dimension") for s in shape]
    out = {"register": [], "lane": [], "warp": []}
    dim_order: List[int] = []
    for kind, dim, nbits in chunks:
        if dim not in dim_order:
            dim_order.append(dim)
        for _ in range(nbits):
            bit = used[dim]
            used[dim] += 1
            if bit < limits[dim]:
                out[kind].append(tuple((1 << bit) if d == dim else 0 for d in range(rank)))
            elif kind != "register":
                out[kind].append(tuple(0 for _ in range(rank)))
    for dim in dim_order + [d for d in range(rank) if d not in dim_order]:
        while used[dim] < limits[dim]:
            out["register"].append(tuple((1 << used[dim]) if d == dim else 0 for d in range(rank)))
            used[dim] += 1
    return out, dim_order
