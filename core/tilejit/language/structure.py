"""Compile-time structures of Triton 3.x's `tl`: `tl.tuple` (a tuple of language values, with its
`tuple_type`) and `tl.slice` (what `a:b:c` means inside a kernel).

Both are plain Python objects the frontend handles at compile time: a `tl.tuple` is a subclass of
Python's tuple, so everything the frontend does with tuples (unpacking, indexing, passing to and
returning from `@jit` functions, loop-carried tuples) applies to it unchanged.
"""
from __future__ import annotations

import builtins

from .core import constexpr, tensor, _unwrap_if_constexpr


def _type_of(value):
    """The language type of one element: a tensor's type, a nested tuple's type, else a constexpr's."""
    value_raw = _unwrap_if_constexpr(value)
    if isinstance(value_raw, tensor):
        return value_raw.type
    if isinstance(value_raw, builtins.tuple):
        return tuple_type([_type_of(v) for v in value_raw], getattr(value_raw, "fields", None))
    if hasattr(value_raw, "type") and not isinstance(value_raw, type):
        return value_raw.type  # tensor descriptors, block pointers
    return constexpr(value_raw).type


class tuple_type:
    """The type of a `tl.tuple`: its element types and (for named tuples) the field names."""

    def __init__(self, types, fields=None, _semantic=None):
        types, fields = _unwrap_if_constexpr(types), _unwrap_if_constexpr(fields)
        self.types = [_unwrap_if_constexpr(t) for t in types]
        self.fields = list(fields) if fields else [""] * len(self.types)
        if len(self.fields) != len(self.types):
            raise ValueError(f"tuple_type: {len(self.types)} types but {len(self.fields)} field names")

    def __iter__(self):
        return iter(self.types)

    def __len__(self):
        return len(self.types)

    def __getitem__(self, index):
        return self.types[_unwrap_if_constexpr(index)]

    def __eq__(self, other):
        return isinstance(other, tuple_type) and self.types == other.types and self.fields == other.fields

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("tuple_type", builtins.tuple(str(t) for t in self.types), builtins.tuple(self.fields)))

    def __repr__(self):
        return "tuple_type[" + ", ".join(str(t) for t in self.types) + "]"

    __str__ = __repr__

    def is_block(self): return False
    def is_ptr(self): return False
    def is_const(self): return False


class slice:
    """`start:stop:step` in a kernel (Triton 3.x's `tl.slice`). Each bound is a compile-time value or None;
    `as_python_slice()` gives the equivalent Python slice."""

    def __init__(self, start=None, stop=None, step=None, _semantic=None):
        self.start = _unwrap_if_constexpr(start)
        self.stop = _unwrap_if_constexpr(stop)
        self.step = _unwrap_if_constexpr(step)
        for name, bound in (("start", self.start), ("stop", self.stop), ("step", self.step)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise TypeError(f"tl.slice {name} must be a compile-time int or None, got {bound!r}")

    def as_python_slice(self) -> builtins.slice:
        return builtins.slice(self.start, self.stop, self.step)

    def __eq__(self, other):
        if isinstance(other, builtins.slice):
            other = slice(other.start, other.stop, other.step)
        return isinstance(other, slice) and (self.start, self.stop, self.step) == \
            (other.start, other.stop, other.step)

    def __hash__(self):
        return hash(("slice", self.start, self.stop, self.step))

    def __repr__(self):
        return f"slice({self.start!r}, {self.stop!r}, {self.step!r})"


def as_python_index(index):
    """A subscript as Python understands it: `tl.slice` -> `slice`, recursively inside tuples."""
    index = _unwrap_if_constexpr(index)
    if isinstance(index, slice):
        return index.as_python_slice()
    if isinstance(index, builtins.tuple):
        return builtins.tuple(as_python_index(i) for i in index)
    return index


class tuple(builtins.tuple):
    """`tl.tuple(values)`: a tuple of tensors and compile-time values (Triton 3.x). Indexing with an int
    gives an element, with a slice a `tl.tuple`; `+` concatenates; `.type` is its `tuple_type`."""

    def __new__(cls, args=(), type=None, _semantic=None):
        args = _unwrap_if_constexpr(args)
        if isinstance(args, tensor):
            raise TypeError("tl.tuple expects an iterable of values, got a tensor")
        values = builtins.list(args)
        self = builtins.tuple.__new__(cls, values)
        if type is not None and len(_unwrap_if_constexpr(type)) != len(values):
            raise ValueError(f"tl.tuple: type has {len(type)} elements but {len(values)} values were given")
        return self

    def __init__(self, args=(), type=None, _semantic=None):
        type = _unwrap_if_constexpr(type)
        self.fields = builtins.list(type.fields) if isinstance(type, tuple_type) else None

    @property
    def type(self) -> tuple_type:
        return tuple_type([_type_of(v) for v in self], self.fields)

    def __getitem__(self, index):
        index = as_python_index(index)
        if isinstance(index, builtins.slice):
            return tuple(builtins.tuple.__getitem__(self, index))
        if isinstance(index, tensor):
            raise TypeError("a tl.tuple can only be indexed with compile-time constants")
        return builtins.tuple.__getitem__(self, index)

    def __add__(self, other):
        return tuple(builtins.list(self) + builtins.list(_unwrap_if_constexpr(other)))

    def __radd__(self, other):
        return tuple(builtins.list(_unwrap_if_constexpr(other)) + builtins.list(self))

    def __repr__(self):
        return "tl.tuple(" + ", ".join(repr(v) for v in self) + ")"


# The frontend calls these like builtins (with `_semantic=`).
tuple.__tilejit_builtin__ = True
tuple_type.__tilejit_builtin__ = True
slice.__tilejit_builtin__ = True
