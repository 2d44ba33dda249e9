"""TTGIR encodings: how a tensor's elements are spread over the registers, lanes and warps of a CTA.

Spelled and printed as in Triton's TTGIR (`#ttg.blocked<{sizePerThread = [4], ...}>`), inline in
tensor types, and parsed back (`ENCODING_KINDS`, through a dialect context: `ir/dialect.py`). Every distributed
encoding answers `to_linear(shape)`: a `LinearLayout` that says, for (register, lane, warp), which
element a thread holds. The lowering computes index math from it and tests check it is a bijection
(or the replication the layout promises).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Tuple

from ..errors import CompilationError
from .linear_layout import LinearLayout, log2_exact, standard_bases


def _ints(values) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


class DistributedEncoding:
    """An encoding that places every element in some thread's registers."""
    is_encoding = True   # printed and parsed as an attribute value too (ir/printer.py)
    # A matrix unit's result layout worth keeping: the values computed from the dot stay in it
    # (propagate-dot-layouts; leaving it costs a trip through shared memory) and a dot chained to
    # this one borrows its warps.
    keeps_in_registers = False

    def to_linear(self, shape) -> LinearLayout:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def rank(self) -> int:  # pragma: no cover
        raise NotImplementedError


def _build(shape, chunks) -> LinearLayout:
    """A LinearLayout from chunks (see `standard_bases`); dim None in a chunk means zero bases."""
    rank = len(shape)
    real = []
    zeros = {"register": 0, "lane": 0, "warp": 0}
    pending = []
    for kind, dim, nbits in chunks:
        if dim is None:
            pending.append((kind, nbits, len(real)))
        else:
            real.append((kind, dim, nbits))
    out, _ = standard_bases(shape, real)
    # Zero (replicating) bases are placed at their position among their kind's bases.
    for kind, nbits, position in pending:
        count_before = sum(n for k, d, n in real[:position] if k == kind)
        at = min(count_before, len(out[kind])) + zeros[kind]
        for i in range(nbits):
            out[kind].insert(at + i, tuple(0 for _ in range(rank)))
        zeros[kind] += nbits
    return LinearLayout(tuple(shape), tuple(out["register"]), tuple(out["lane"]), tuple(out["warp"]))


@dataclass(frozen=True)
class BlockedEncoding(DistributedEncoding):
    size_per_thread: Tuple[int, ...]
    threads_per_warp: Tuple[int, ...]
    warps_per_cta: Tuple[int, ...]
    order: Tuple[int, ...]  # fastest-varying dim first

    def __post_init__(self):
        for name in ("size_per_thread", "threads_per_warp", "warps_per_cta", "order"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        if not (len(self.size_per_thread) == len(self.threads_per_warp) == len(self.warps_per_cta)
                == len(self.order)):
            raise CompilationError(f"blocked layout fields disagree on the rank: {self}")

    @property
    def rank(self) -> int:
        return len(self.order)

    def to_linear(self, shape) -> LinearLayout:
        chunks = []
        for kind, sizes in (("register", self.size_per_thread), ("lane", self.threads_per_warp),
                            ("warp", self.warps_per_cta)):
            for d in self.order:
                chunks.append((kind, d, log2_exact(sizes[d], "layout size")))
        return _build(shape, chunks)

    def __str__(self) -> str:
        return (f"#ttg.blocked<{{sizePerThread = {_ints(self.size_per_thread)}, threadsPerWarp = "
                f"{_ints(self.threads_per_warp)}, warpsPerCTA = {_ints(self.warps_per_cta)}, "
                f"order = {_ints(self.order)}}}>")


def transposed_blocked(res: BlockedEncoding, order) -> BlockedEncoding:
    """The layout of `x` such that `tt.trans(x, order)` in layout `res` is the same registers (result
    dim i is source dim order[i])."""
    def back(values):
        out = [0] * len(order)
        for i, o in enumerate(order):
            out[o] = values[i]
        return out
    return BlockedEncoding(back(res.size_per_thread), back(res.threads_per_warp), back(res.warps_per_cta),
                           [order[d] for d in res.order])


@dataclass(frozen=True)
class SliceEncoding(DistributedEncoding):
    """The parent layout with dimension `dim` removed: the layout of a reduction along `dim`."""
    dim: int
    parent: DistributedEncoding

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    def to_linear(self, shape) -> LinearLayout:
        parent_shape = list(shape)
        parent_shape.insert(self.dim, 1)
        return self.parent.to_linear(tuple(parent_shape)).drop_dim(self.dim)

    def __str__(self) -> str:
        return f"#ttg.slice<{{dim = {self.dim}, parent = {self.parent}}}>"


@dataclass(frozen=True)
class DotOperandEncoding(DistributedEncoding):
    """Operand `op_idx` (0 = A, 1 = B) of a dot whose result has layout `parent`."""
    op_idx: int
    parent: DistributedEncoding
    k_width: int = 0

    @property
    def rank(self) -> int:
        return self.parent.rank

    def to_linear(self, shape) -> LinearLayout:
        if isinstance(self.parent, BlockedEncoding):
            return self._fma_operand(shape)
        if hasattr(self.parent, "operand_linear"):   # a matrix layout says where its operands live
            return self.parent.operand_linear(self.op_idx, shape)
        raise CompilationError(f"no dot operand layout for parent {self.parent}")

    def _fma_operand(self, shape) -> LinearLayout:
        """FMA dot: each thread holds whole K rows/columns for the M/N elements it owns in C (any
        leading batch dims are placed as in C)."""
        rank = len(shape)
        k_dim = rank - 1 if self.op_idx == 0 else rank - 2
        c_shape = list(shape)
        c_shape[k_dim] = 1     # C's layout, with the dim this operand lacks (N for A, M for B) of size 1
        parent = self.parent.to_linear(tuple(c_shape))
        k_regs = [tuple((1 << b) if d == k_dim else 0 for d in range(rank))
                  for b in range(log2_exact(shape[k_dim]))]
        return LinearLayout(tuple(shape), tuple(parent.registers) + tuple(k_regs), parent.lanes, parent.warps)

    def __str__(self) -> str:
        return f"#ttg.dot_op<{{opIdx = {self.op_idx}, parent = {self.parent}, kWidth = {self.k_width}}}>"


@dataclass(frozen=True)
class SharedEncoding:
    """A tensor in shared memory (swizzled as Triton's `#ttg.swizzled_shared`)."""
    is_encoding = True
    vec: int
    per_phase: int
    max_phase: int
    order: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "order", tuple(int(v) for v in self.order))

    def __str__(self) -> str:
        return (f"#ttg.shared<{{vec = {self.vec}, perPhase = {self.per_phase}, maxPhase = "
                f"{self.max_phase}, order = {_ints(self.order)}}}>")


# ---------------------------------------------------------------------------------------- parsing

_TOKEN = re.compile(r"\s*(#ttg\.[a-z_]+<|[A-Za-z_][A-Za-z0-9_]*|-?\d+|[{}\[\]=,>])")


class _EncodingParser:
    def __init__(self, text: str, kinds: dict):
        self.kinds = kinds
        self.tokens: List[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                raise CompilationError(f"cannot parse layout '{text}' at '{text[pos:pos + 20]}'")
            self.tokens.append(m.group(1))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0

    def next(self) -> str:
        if self.i >= len(self.tokens):
            raise CompilationError("unexpected end of a layout")
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise CompilationError(f"layout: expected '{tok}', found '{got}'")

    def value(self):
        tok = self.next()
        if tok.startswith("#ttg."):
            return self.encoding(tok)
        if tok == "[":
            items = []
            if self.tokens[self.i] == "]":
                self.i += 1
                return items
            while True:
                items.append(self.value())
                tok = self.next()
                if tok == "]":
                    return items
                if tok != ",":
                    raise CompilationError(f"layout: expected ',' or ']', found '{tok}'")
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tok):   # a name (a matrix instruction's)
            return tok
        raise CompilationError(f"layout: unexpected '{tok}'")

    def encoding(self, head: str):
        kind = head[len("#ttg."):-1]
        self.expect("{")
        fields = {}
        while True:
            key = self.next()
            self.expect("=")
            fields[key] = self.value()
            tok = self.next()
            if tok == "}":
                break
            if tok != ",":
                raise CompilationError(f"layout: expected ',' or '}}', found '{tok}'")
        self.expect(">")
        if kind not in self.kinds:
            raise CompilationError(f"unknown layout #ttg.{kind}")
        try:
            return self.kinds[kind](fields)
        except KeyError as exc:
            raise CompilationError(f"layout #ttg.{kind} lacks the field {exc}") from None


# The layouts core defines: kind -> fn(fields) -> encoding. A dialect context (ir/dialect.py) adds
# the kinds the backends define (NVIDIA's and AMD's matrix layouts) beside these.
ENCODING_KINDS = {
    "blocked": lambda f: BlockedEncoding(f["sizePerThread"], f["threadsPerWarp"], f["warpsPerCTA"], f["order"]),
    "slice": lambda f: SliceEncoding(f["dim"], f["parent"]),
    "dot_op": lambda f: DotOperandEncoding(f["opIdx"], f["parent"], f.get("kWidth", 0)),
    "shared": lambda f: SharedEncoding(f["vec"], f["perPhase"], f["maxPhase"], f["order"]),
}


def parse_encoding(text: str, kinds: dict = ENCODING_KINDS):
    """The `#ttg.<kind><{...}>` layout in `text`; `kinds` says how to build each kind."""
    p = _EncodingParser(text, kinds)
    enc = p.encoding(p.next())
    if p.i != len(p.tokens):
        raise CompilationError(f"unexpected text after the layout '{text}'")
    return enc
