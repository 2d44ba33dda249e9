"""The launch ABI every backend shares: the grid, the runtime signature, and how a scalar argument is
encoded. The NVIDIA, AMD and interpreter launchers and the JIT all take these rules from here, so a
grid or a scalar means the same on every target (pointers: `tilejit.runtime.args`).

- **Grid**: 1 to 3 integers (an int alone is one dimension), each in [0, 2**31 - 1]: program ids are
  i32 on every target. Anything else is a `GridError` naming the kernel (a ValueError and a TypeError).
  A backend adds its hardware limits on top (CUDA's 65535 for y and z: cuLaunchKernel refuses more;
  HIP's 2**32 work-items per dimension).
- **Runtime signature**: the kernel's `{name: type}` without constexprs, in launch order.
- **Scalars**: integers must fit their type (`iN` signed, `uN` unsigned); floats are converted as C
  does (`fp32`: round to nearest even, beyond the range: infinity); `fp16` rounds the Python float to nearest even directly (as `struct`'s 'e' and Triton's launcher),
  `bf16` rounds to float32 first and then to bfloat16, both to nearest even: what torch gives for
  `torch.tensor(value, dtype=torch.bfloat16)` and what Triton gives for a bf16 constant. The same
  `bf16_bits` encodes bf16 constants in the compilers, so a value means the same as an argument and as
  a constant.
"""
from __future__ import annotations

import math
import re
import struct

from tilejit.errors import ArgumentTypeError, ArgumentValueError, GridError

__all__ = ["MAX_GRID_DIM", "normalize_grid", "runtime_signature", "runtime_parameters", "SCALAR_CODES",
           "scalar_code", "bf16_bits", "scalar_value", "int_range"]

MAX_GRID_DIM = 2**31 - 1


def _kernel(kernel) -> str:
    return f"kernel '{kernel}': " if kernel else ""


def normalize_grid(grid, kernel: str | None = None) -> tuple[int, int, int]:
    """`n`, `(x,)`, `(x, y)` or `(x, y, z)` (tuple or list, ints or objects with `__index__`) -> a
    3-tuple of ints in [0, MAX_GRID_DIM]; the one grid check of every launch path."""
    if isinstance(grid, bool) or not isinstance(grid, (tuple, list)) and not hasattr(grid, "__index__"):
        raise GridError(f"{_kernel(kernel)}the grid must be 1 to 3 integers (or a function of the "
                                f"meta-parameters returning them), got {grid!r:.80}")
    dims = (grid,) if not isinstance(grid, (tuple, list)) else grid
    if not 1 <= len(dims) <= 3:
        raise GridError(f"{_kernel(kernel)}the grid must have 1 to 3 dimensions, got {len(dims)}: "
                                 f"{grid!r:.80}")
    out = []
    for d in dims:
        if isinstance(d, bool) or not hasattr(d, "__index__"):
            raise GridError(f"{_kernel(kernel)}grid dimensions must be integers, got {d!r:.40} in "
                                    f"{grid!r:.80}")
        d = d.__index__()
        if not 0 <= d <= MAX_GRID_DIM:
            what = "must not be negative" if d < 0 else f"must be at most 2**31 - 1 = {MAX_GRID_DIM} (program ids are i32)"
            raise GridError(f"{_kernel(kernel)}grid dimensions {what}, got {tuple(dims)!r:.80}")
        out.append(d)
    while len(out) < 3:
        out.append(1)
    return tuple(out)


# --- the runtime signature ----------------------------------------------------------------------

_TENSORDESC = re.compile(r"^tensordesc<\s*(\w+)\s*\[([\d,\s]*)\]\s*(,.*)?>$")


def tensordesc_parts(type_string: str) -> tuple[str, list[int]]:
    """`tensordesc<fp16[64, 64]>` (Triton's signature of a host-side TensorDescriptor argument) ->
    (element type string, block shape)."""
    match = _TENSORDESC.match(type_string)
    if match is None:
        raise TypeError(f"malformed tensor descriptor type {type_string!r} (expected e.g. 'tensordesc<fp16[64, 64]>')")
    block_shape = [int(b) for b in match.group(2).replace(" ", "").split(",") if b]
    if not block_shape:
        raise TypeError(f"tensor descriptor type {type_string!r} has no block shape")
    return match.group(1), block_shape


def tensordesc_padding(type_string: str) -> str:
    """The padding a `tensordesc<...>` signature names: "nan" for `tensordesc<fp32[32, 32],padding=nan>`
    (tilejit's suffix for a host descriptor made with padding="nan"), else "zero"."""
    match = _TENSORDESC.match(type_string)
    extra = (match.group(3) or "") if match else ""
    return "nan" if re.search(r"\bpadding\s*=\s*nan\b", extra) else "zero"


def _descriptor_leaves(name: str, type_string: str) -> dict:
    """A host descriptor travels as its leaves (`TensorDescriptor.__getitem__`): the base pointer, the
    shape (i32 each) and the strides (i64 each); the kernel rebuilds it with make_tensor_descriptor."""
    element, block_shape = tensordesc_parts(type_string)
    rank = len(block_shape)
    leaves = {f"{name}.base": "*" + element}
    leaves.update({f"{name}.shape{i}": "i32" for i in range(rank)})
    leaves.update({f"{name}.stride{i}": "i64" for i in range(rank)})
    return leaves


def runtime_signature(metadata: dict) -> dict:
    """The launcher's parameters `{name: type}`: the kernel's signature without constexprs, in the
    order the compiler recorded (`arg_order`), tuple elements flattened as the compiler names them,
    and each host tensor descriptor as its leaves."""
    signature = metadata.get("signature") or {}
    constants = metadata.get("constants") or {}
    order = metadata.get("arg_order")
    if order is not None and all(name in signature for name in order):
        entries = [(name, signature[name]) for name in order]
    else:
        entries = [(name, ty) for name, ty in signature.items() if ty != "constexpr" and name not in constants]
    out = {}
    for name, ty in entries:
        if isinstance(ty, str) and ty.startswith("tensordesc<"):
            out.update(_descriptor_leaves(name, ty))
        else:
            out[name] = ty
    return out


def runtime_parameters(signature, constants=None) -> tuple[list[str], list[str] | None]:
    """(types, names) of the runtime parameters: from a list of type strings (names unknown) or a
    `{name: type}` dict from which constexpr entries (and names listed in `constants`) are dropped."""
    if isinstance(signature, dict):
        constant_names = {k for k in (constants or {}) if isinstance(k, str)}
        kept = [(name, ty) for name, ty in signature.items() if ty != "constexpr" and name not in constant_names]
        return [ty for _, ty in kept], [name for name, _ in kept]
    types = list(signature)
    if "constexpr" in types:
        raise ValueError("a launcher signature lists runtime parameters only; remove the constexpr entries "
                         "(or pass the {name: type} dict, from which they are dropped)")
    return types, None


# --- scalars ------------------------------------------------------------------------------------

# `struct` code of every scalar type string (Triton's spelling, plus the IR's f16/f32/f64); native
# size. bf16 travels as its 16 bits ('H'); pointers are 'Q'.
SCALAR_CODES = {
    "i1": "?", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
    "u1": "?", "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
    "fp16": "e", "bf16": "H", "fp32": "f", "fp64": "d", "f16": "e", "f32": "f", "f64": "d",
}
POINTER_CODE = "Q"
_FLOAT_TYPES = frozenset({"fp16", "bf16", "fp32", "fp64", "f16", "f32", "f64"})
_NARROW_FLOATS = {"fp16": "<e", "f16": "<e", "fp32": "<f", "f32": "<f"}  # standard mode checks the range


def scalar_code(type_string: str) -> str:
    """The `struct` code of a parameter type (pointers `*T` are 64-bit addresses)."""
    if not isinstance(type_string, str):
        raise TypeError(f"a signature entry must be a type string such as '*fp32' or 'i32', got {type_string!r}")
    if type_string.startswith("*"):
        return POINTER_CODE
    try:
        return SCALAR_CODES[type_string]
    except KeyError:
        raise TypeError(f"tilejit cannot pass a parameter of type {type_string!r} to a kernel; supported: "
                        f"pointers (*T) and {', '.join(sorted(SCALAR_CODES))}") from None


def int_range(type_string: str) -> tuple[int, int]:
    """Inclusive range of an integer parameter type: `iN` signed, `uN` unsigned (what `struct` packs)."""
    if type_string in ("i1", "u1"):
        return 0, 1
    bits = int(type_string[1:])
    if type_string[0] == "u":
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def bf16_bits(value) -> int:
    """The bfloat16 bits of a Python number: rounded to float32, then to bfloat16, both to nearest even
    (as torch); NaN stays a quiet NaN of the same sign. Every bf16 argument and constant uses this."""
    value = float(value)
    try:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
    except OverflowError:  # beyond float32's range: rounds to infinity
        return 0xFF80 if value < 0 else 0x7F80
    if math.isnan(value):
        return ((bits >> 16) | 0x40) & 0xFFFF
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def scalar_value(value, type_string: str, name: str | None = None):
    """`value` as the Python int/float that `struct` packs for `type_string` (bf16: its bits), after
    the checks of the launch ABI. Raises ArgumentTypeError/ArgumentValueError naming the parameter."""
    where = f"argument '{name}'" if name else "argument"
    if type_string in _FLOAT_TYPES:
        if isinstance(value, (str, bytes)) or not _is_number(value):
            raise ArgumentTypeError(f"{where} must be a number ({type_string}), got {type(value).__name__}")
        number = float(value)
        if type_string == "bf16":
            return bf16_bits(number)
        if type_string in _NARROW_FLOATS:
            try:
                struct.pack(_NARROW_FLOATS[type_string], number)
            except OverflowError:  # beyond the format's range: infinity, as a C conversion gives
                return math.copysign(math.inf, number)
        return number
    if type_string not in SCALAR_CODES:
        raise ArgumentTypeError(f"{where}: a parameter of type {type_string!r} cannot be passed by value")
    if not hasattr(value, "__index__") or _is_tensor(value):
        raise ArgumentTypeError(f"{where} must be an integer ({type_string}), got {type(value).__name__}")
    number = value.__index__()
    low, high = int_range(type_string)
    if type_string in ("i1", "u1"):
        return bool(number)
    if not low <= number <= high:
        raise ArgumentValueError(f"{where}: {number} does not fit in {type_string} ([{low}, {high}])")
    return number


def _is_tensor(value) -> bool:
    # A one-element integer tensor has `__index__`, but a tensor is never a scalar argument.
    return hasattr(value, "data_ptr") or hasattr(value, "__array_interface__") and getattr(value, "ndim", 0) > 0


def _is_number(value) -> bool:
    if _is_tensor(value):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
