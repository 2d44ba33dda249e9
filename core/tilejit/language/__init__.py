"""`tilejit.language` (import as `tl`): the Triton 3.x `triton.language` API.

`standard.py` (functions written in `tl` itself), `math.py` and `random.py` are written alongside;
they are imported when present. The reductions, scans and `zeros`-style helpers live only in
`standard.py`, written in `tl` as Triton writes them; `functions.py` holds the builtins.
"""
from __future__ import annotations

import importlib

from . import core, semantic, target_info
from .core import (TRITON_MAX_TENSOR_NUMEL, const, constexpr_type, TENSOR_MEMBER_FUNCTIONS, block_type, builtin, constexpr, dtype, is_builtin, pointer_type,
                   tensor, tensor_descriptor, tensor_descriptor_type, ty_to_str, void, int1, int8,
                   int16, int32, int64, uint8, uint16, uint32, uint64, float8e5, float8e5b16, float8e4nv,
                   float8e4b8, float8e4b15, float16, bfloat16, float32, float64, pi32_t,
                   _unwrap_if_constexpr, _constexpr_to_value)
from .functions import *  # noqa: F401,F403
from .functions import __all__ as _function_names
from .structure import slice, tuple, tuple_type  # noqa: A004  (Triton's names shadow the builtins here)

__all__ = [
    "core", "semantic", "TENSOR_MEMBER_FUNCTIONS", "block_type", "builtin", "constexpr", "dtype", "is_builtin",
    "pointer_type", "str_to_ty", "tensor", "tensor_descriptor", "tensor_descriptor_type", "ty_to_str", "void",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float8e5",
    "float8e5b16", "float8e4nv", "float8e4b8", "float8e4b15", "float16", "bfloat16", "float32", "float64",
    "pi32_t", "TRITON_MAX_TENSOR_NUMEL", "const", "constexpr_type", "slice", "tuple", "tuple_type",
    "target_info",
] + list(_function_names)


def _optional_module(name: str):
    """Import a sibling module that another engineer may still be writing; a missing one is skipped,
    but an existing module that fails to import is a real error and is raised."""
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{name}":
            return None
        raise


math = _optional_module("math")
random = _optional_module("random")
standard = _optional_module("standard")
for _module in (standard, random):
    if _module is not None:
        for _name in getattr(_module, "__all__", [n for n in vars(_module) if not n.startswith("_")]):
            globals()[_name] = getattr(_module, _name)
            if _name not in __all__:
                __all__.append(_name)
if math is not None:
    __all__.append("math")
if random is not None:
    __all__.append("random")

# `tl.dot_scaled` (microscaling formats), written in `tl` (scaled_dot.py).
from .scaled_dot import dot_scaled  # noqa: E402
__all__.append("dot_scaled")

# `tl.atomic_poll`, written in `tl` (polling.py).
from .polling import atomic_poll  # noqa: E402,F401
__all__.append("atomic_poll")

# `tl.extra.libdevice`, `tl.extra.cuda.libdevice`, `tl.extra.hip.libdevice` (Triton 3.x).
from . import extra  # noqa: E402,F401
__all__.append("extra")


def str_to_ty(name, c=None):
    """Triton 3.x's `tl.str_to_ty(name, c)`: a signature entry as a language type. Besides `core`'s
    scalar and pointer spellings it takes a (named) tuple of entries and `tensordesc<fp16[64, 64]>`;
    `c` (Triton's constexpr value for the entry) is accepted and unused."""
    import builtins

    if isinstance(name, builtins.tuple):
        return tuple_type([str_to_ty(entry, c) for entry in name], getattr(type(name), "_fields", None))
    if isinstance(name, str) and name.startswith("tensordesc"):
        from ..frontend.source import parse_tensordesc

        element, block_shape = parse_tensordesc(name)
        return tensor_descriptor_type(block_type(element, block_shape))
    return core.str_to_ty(name)
