"""TTIR types, spelled as Triton/MLIR print them.

Integers are signless (`i32`): signedness belongs to the operation (`arith.divsi` vs `arith.divui`)
and to the language-level dtype, exactly as in MLIR. Types are immutable and hashable so they can be
compared with `==` and used as dictionary keys.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple


class Type:
    """Base of every IR type."""

    def __str__(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True)
class IntType(Type):
    width: int

    def __str__(self) -> str:
        return f"i{self.width}"


# Float formats: name -> (total bits, exponent bits, mantissa bits)
FLOAT_FORMATS = {
    "f8E4M3FN": (8, 4, 3),
    "f8E5M2": (8, 5, 2),
    "f8E4M3FNUZ": (8, 4, 3),
    "f8E5M2FNUZ": (8, 5, 2),
    "f16": (16, 5, 10),
    "bf16": (16, 8, 7),
    "f32": (32, 8, 23),
    "f64": (64, 11, 52),
}


@dataclass(frozen=True)
class FloatType(Type):
    name: str

    def __post_init__(self):
        if self.name not in FLOAT_FORMATS:
            raise ValueError(f"unknown float type {self.name!r}")

    @property
    def width(self) -> int:
        return FLOAT_FORMATS[self.name][0]

    @property
    def exponent_bits(self) -> int:
        return FLOAT_FORMATS[self.name][1]

    @property
    def mantissa_bits(self) -> int:
        return FLOAT_FORMATS[self.name][2]

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class PointerType(Type):
    pointee: Type
    address_space: int = 1

    def __str__(self) -> str:
        if self.address_space == 1:
            return f"!tt.ptr<{self.pointee}>"
        return f"!tt.ptr<{self.pointee}, {self.address_space}>"


@dataclass(frozen=True)
class TensorType(Type):
    shape: Tuple[int, ...]
    element: Type
    # Layout of the tensor across threads; only set in TTGIR. Must be hashable and printable.
    encoding: Any = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = "".join(f"{s}x" for s in self.shape)
        enc = f", {self.encoding}" if self.encoding is not None else ""
        return f"tensor<{dims}{self.element}{enc}>"


@dataclass(frozen=True)
class TensorDescType(Type):
    block: TensorType

    def __str__(self) -> str:
        return f"!tt.tensordesc<{self.block}>"


@dataclass(frozen=True)
class FunctionType(Type):
    inputs: Tuple[Type, ...]
    results: Tuple[Type, ...]

    def __str__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        outs = ", ".join(str(t) for t in self.results)
        return f"({ins}) -> ({outs})"


# Shared singletons for the common scalar types.
i1 = IntType(1)
i8 = IntType(8)
i16 = IntType(16)
i32 = IntType(32)
i64 = IntType(64)
f16 = FloatType("f16")
bf16 = FloatType("bf16")
f32 = FloatType("f32")
f64 = FloatType("f64")


def element_type(t: Type) -> Type:
    """The scalar type of a tensor, or the type itself for a scalar."""
    return t.element if isinstance(t, TensorType) else t


def shape_of(t: Type) -> Tuple[int, ...]:
    """The shape of a tensor type; () for scalars."""
    return t.shape if isinstance(t, TensorType) else ()


def with_element(t: Type, elem: Type) -> Type:
    """`t` with its scalar type replaced: tensor<4xi32> + f32 -> tensor<4xf32>."""
    if isinstance(t, TensorType):
        return TensorType(t.shape, elem, t.encoding)
    return elem


def with_shape(t: Type, shape, encoding=None) -> Type:
    """A tensor of `t`'s element type and the given shape (a scalar when shape is empty)."""
    elem = element_type(t)
    return TensorType(tuple(shape), elem, encoding) if len(shape) else elem


def is_int(t: Type) -> bool:
    return isinstance(element_type(t), IntType)


def is_float(t: Type) -> bool:
    return isinstance(element_type(t), FloatType)


def is_ptr(t: Type) -> bool:
    return isinstance(element_type(t), PointerType)


def is_tensor(t: Type) -> bool:
    return isinstance(t, TensorType)


def is_block_ptr(t: Type) -> bool:
    return isinstance(t, PointerType) and isinstance(t.pointee, TensorType)
