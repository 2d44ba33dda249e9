"""Helpers for the compile-time values the frontend handles: tensors, constexprs, tuples of them."""
from __future__ import annotations

import numbers
import types
from typing import Any, List, Tuple

from ..language import core as tl
from ..language.structure import tuple as tl_tuple


def is_tensor(v) -> bool:
    return isinstance(v, (tl.tensor, tl.tensor_descriptor))


def is_jit_function(v) -> bool:
    """A `@jit` function, recognised by the attributes the frontend uses (no import of the runtime)."""
    return hasattr(v, "arg_names") and hasattr(v, "src") and hasattr(v, "params") and hasattr(v, "fn")


def wrap(v):
    """Store Python values as `constexpr` (numbers, strings, None, dtypes); keep the rest as is."""
    if isinstance(v, (tl.constexpr, tl.tensor, tl.tensor_descriptor, tuple, list)):
        return v
    if v is None or isinstance(v, (numbers.Number, str, tl.dtype, slice)):
        return tl.constexpr(v)
    return v


def unwrap(v):
    return v.value if isinstance(v, tl.constexpr) else v


def tuple_fields(value):
    """The field names of a named tuple (a Python `NamedTuple` or a `tl.tuple` built from one), else None."""
    fields = getattr(value, "fields", None) if isinstance(value, tl_tuple) else getattr(value, "_fields", None)
    return tuple(fields) if fields and isinstance(value, tuple) else None


def named_tuple(values, fields):
    """A `tl.tuple` of `values` whose elements are also reachable by name (`t.x`), as Triton 3.x
    represents a `NamedTuple` inside a kernel. Without fields: a plain tuple."""
    if not fields:
        return tuple(values)
    result = tl_tuple(values)
    result.fields = list(fields)
    return result


def is_named_tuple_class(fn) -> bool:
    """A `NamedTuple` / `collections.namedtuple` class (called inside a kernel it builds a named tuple)."""
    return isinstance(fn, type) and issubclass(fn, tuple) and isinstance(getattr(fn, "_fields", None), tuple)


def flatten(value) -> Tuple[List[Any], Any]:
    """Leaves of a (nested) tuple and a description to rebuild it: `rebuild(tree, leaves)`. The
    description of a tuple is `("tuple", [(leaf count, sub-description), ...], field names or None)`,
    so named tuples keep their names across calls, returns and loops."""
    if isinstance(value, tuple):
        leaves, trees = [], []
        for item in value:
            item_leaves, tree = flatten(item)
            leaves.extend(item_leaves)
            trees.append((len(item_leaves), tree))
        return leaves, ("tuple", trees, tuple_fields(value))
    return [value], "leaf"


def rebuild(tree, leaves: List[Any]):
    if tree == "leaf":
        return leaves[0]
    items, pos = [], 0
    for count, sub in tree[1]:
        items.append(rebuild(sub, leaves[pos:pos + count]))
        pos += count
    return named_tuple(items, tree[2] if len(tree) > 2 else None)


def type_key(v) -> str:
    """A short, stable description of a value's specialization, used to name generated functions."""
    v = unwrap(v)
    if isinstance(v, tl.tensor):
        return str(v.type)
    if isinstance(v, tl.tensor_descriptor):
        return str(v.type.name)
    if isinstance(v, (tuple, list)):
        fields = tuple_fields(v)  # a named tuple's callee differs from a plain tuple's (`t.x` is valid)
        return (f"nt[{','.join(fields)}]" if fields else "") + "(" + ",".join(type_key(x) for x in v) + ")"
    if isinstance(v, types.FunctionType) or is_jit_function(v):
        return f"fn:{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', getattr(v, '__name__', '?'))}"
    if isinstance(v, tl.dtype):
        return str(v)
    return f"c{v!r}"
