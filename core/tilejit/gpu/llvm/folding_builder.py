"""An llvmlite IRBuilder that folds integer constants and reuses identical pure instructions.

The lowering emits the index arithmetic of every tensor op from the layout (thread base, register
offsets, swizzles, addresses) per op, as Triton's lowering does. Triton's C++ builders fold the
constant parts as they go (LLVM's IRBuilder and MLIR's folders); llvmlite's builder appends every
instruction as asked. On the bench attention kernel, 1,250 of 3,930 emitted instructions were
`xor x, 0`, constant shifts and masks, or copies of an instruction already emitted in the same block,
all removed again by LLVM's first InstCombine and EarlyCSE. Emitting them costs the Python that builds
and prints them, LLVM's parser and every pass before that cleanup; folding them here gives LLVM the
same program, smaller (the PTX is the same: tests/gpu/test_folding_builder.py).

Two rules, both local to what the builder sees:
- Integer arithmetic, casts and selects on constants are computed here, and identities (`x + 0`,
  `x * 1`, `x & -1`, `x << 0`, ...) return `x`.
- A pure instruction (integer arithmetic, comparison, cast, select, getelementptr) identical to one
  emitted earlier in the same block, while the builder appends at the block's end, is that earlier
  instruction: it dominates every later point of the block. Float arithmetic is never reused, as its
  callers may add fast-math flags to the result.

And one rule LLVM does not apply itself: a widening of `x + C` that cannot wrap (`sext` of an
`add nsw`, `zext` of an `add nuw`) is the widened `x` plus `C`. A tensor's elements are its thread's
base plus constants; kept apart from the base through a widening to i64, the constants end as
immediate offsets of the loads instead of one 64-bit address computed a load.
"""
from __future__ import annotations

from contextlib import contextmanager

import llvmlite.ir as llir

_BINARY_FOLDS = {
    "add": lambda a, b, w: a + b,
    "sub": lambda a, b, w: a - b,
    "mul": lambda a, b, w: a * b,
    "and": lambda a, b, w: a & b,
    "or": lambda a, b, w: a | b,
    "xor": lambda a, b, w: a ^ b,
    "shl": lambda a, b, w: a << b if b < w else None,        # a shift by >= width is poison: kept
    "lshr": lambda a, b, w: (a & ((1 << w) - 1)) >> b if b < w else None,
    "ashr": lambda a, b, w: _signed(a, w) >> b if b < w else None,
}
_COMMUTATIVE = frozenset(("add", "mul", "and", "or", "xor"))


def _signed(value: int, width: int) -> int:
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def _int_constant(value):
    """The value of a scalar integer constant, else None."""
    if isinstance(value, llir.Constant) and isinstance(value.type, llir.IntType) \
            and isinstance(value.constant, int):
        return value.constant
    return None


def _key(value):
    """A hashable stand-in for an operand: constants by value (each use builds a new Constant
    object), everything else by identity (kept alive by the instruction that uses it)."""
    if isinstance(value, llir.Constant):
        constant = value.constant
        if isinstance(constant, (int, float, bool)) or constant is None:
            return ("c", str(value.type), constant)
    return id(value)


class FoldingBuilder(llir.IRBuilder):
    """`llir.IRBuilder` with integer constant folding and same-block reuse of pure instructions."""

    def __init__(self, block=None):
        super().__init__(block)
        self._emitted: dict = {}
        # id(instruction) -> (instruction, x, C, flags) for each `x + C` built with no-wrap flags
        self._no_wrap_offsets: dict = {}

    def _reuse(self, key, make):
        # Only while appending: an instruction found in the memo then precedes the insertion point.
        block = self._block
        if self._anchor != len(block.instructions):
            return make()
        full = (id(block), key)
        found = self._emitted.get(full)
        if found is None:
            found = self._emitted[full] = make()
        return found

    def _integer_binary(self, op: str, lhs, rhs, name, flags, make):
        if not isinstance(lhs.type, llir.IntType) or lhs.type != rhs.type:
            return make(lhs, rhs, name, flags)
        width = lhs.type.width
        a, b = _int_constant(lhs), _int_constant(rhs)
        if a is not None and b is not None:
            folded = _BINARY_FOLDS[op](a, b & ((1 << width) - 1) if op in ("shl", "lshr", "ashr") else b, width)
            if folded is not None:
                return llir.Constant(lhs.type, _signed(folded, width))
        if b is None and a is not None and op in _COMMUTATIVE:
            lhs, rhs, a, b = rhs, lhs, b, a
        if b is not None:
            b = _signed(b, width)
            if b == 0 and op in ("add", "sub", "or", "xor", "shl", "lshr", "ashr"):
                return lhs
            if (b == 1 and op == "mul") or (b == -1 and op == "and"):
                return lhs
            if b == 0 and op in ("mul", "and"):
                return llir.Constant(lhs.type, 0)
        # No-wrap flags only narrow the result (wrapping is poison), so the folds above hold with them;
        # they are part of the key: the same operands without them are another instruction.
        result = self._reuse((op, tuple(flags), _key(lhs), _key(rhs)), lambda: make(lhs, rhs, name, flags))
        if op == "add" and b is not None and flags and isinstance(result, llir.Instruction):
            self._no_wrap_offsets[id(result)] = (result, lhs, b, frozenset(flags))
        return result

    def _icmp(self, prefix, cmpop, lhs, rhs, name):
        return self._reuse(("icmp", prefix, cmpop, _key(lhs), _key(rhs)),
                           lambda: super(FoldingBuilder, self)._icmp(prefix, cmpop, lhs, rhs, name))

    def _cast(self, op: str, value, typ, name, make):
        offset = self._no_wrap_offsets.get(id(value))
        needed = {"sext": "nsw", "zext": "nuw"}.get(op)
        if offset is not None and offset[0] is value and needed in offset[3] and isinstance(typ, llir.IntType):
            _, x, c, flags = offset
            widened_c = _signed(c, value.type.width) if op == "sext" else c & ((1 << value.type.width) - 1)
            return self.add(self._cast(op, x, typ, "", make), llir.Constant(typ, widened_c),
                            flags=tuple(sorted(flags)))
        constant = _int_constant(value)
        if constant is not None and isinstance(typ, llir.IntType):
            width = value.type.width
            if op == "zext":
                return llir.Constant(typ, _signed(constant & ((1 << width) - 1), typ.width))
            if op == "sext":
                return llir.Constant(typ, _signed(_signed(constant, width), typ.width))
            return llir.Constant(typ, _signed(constant, typ.width))  # trunc
        return self._reuse((op, _key(value), str(typ)), lambda: make(value, typ, name))

    def zext(self, value, typ, name=""):
        return self._cast("zext", value, typ, name, super().zext)

    def sext(self, value, typ, name=""):
        return self._cast("sext", value, typ, name, super().sext)

    def trunc(self, value, typ, name=""):
        return self._cast("trunc", value, typ, name, super().trunc)

    def select(self, cond, lhs, rhs, name="", flags=()):
        chosen = _int_constant(cond)
        if chosen is not None and not flags and isinstance(cond.type, llir.IntType) and cond.type.width == 1:
            return lhs if chosen & 1 else rhs
        if flags:
            return super().select(cond, lhs, rhs, name, flags)
        return self._reuse(("select", _key(cond), _key(lhs), _key(rhs)),
                           lambda: super(FoldingBuilder, self).select(cond, lhs, rhs, name))

    def gep(self, ptr, indices, inbounds=False, name="", source_etype=None):
        key = ("gep", _key(ptr), tuple(_key(i) for i in indices), inbounds,
               None if source_etype is None else str(source_etype))
        return self._reuse(key, lambda: super(FoldingBuilder, self).gep(ptr, indices, inbounds, name,
                                                                        source_etype))


def _integer_method(op: str, method: str):
    """`FoldingBuilder.<method>`: llvmlite's integer op `op`, folded or reused where it can be."""
    def build(self, lhs, rhs, name="", flags=()):
        return self._integer_binary(op, lhs, rhs, name, flags, getattr(super(FoldingBuilder, self), method))
    build.__name__ = build.__qualname__ = method
    return build


for _op in _BINARY_FOLDS:
    _method = _op + "_" if _op in ("and", "or") else _op   # llvmlite's names: and_, or_
    setattr(FoldingBuilder, _method, _integer_method(_op, _method))


@contextmanager
def appending_to(builder: llir.IRBuilder, block: llir.Block):
    """Let `builder` append to the end of `block` for a while, then put it back at its exact
    insertion point: the end of its block if it was there (also when that is `block`, which has
    grown meanwhile), else the same instruction index. llvmlite's `goto_block` returns to the end of
    the previous block instead, and inserts before a terminator rather than after the last
    instruction."""
    old_block, anchor = builder.block, builder._anchor
    at_end = anchor == len(old_block.instructions)
    builder.position_at_end(block)
    try:
        yield
    finally:
        if at_end:
            builder.position_at_end(old_block)
        else:
            builder._block, builder._anchor = old_block, anchor
