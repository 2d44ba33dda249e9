"""Normalising kernel arguments: which type string and which address an argument has.

A kernel accepts torch tensors, NumPy arrays, objects with `__cuda_array_interface__`, DLPack
producers, objects with `data_ptr()` and `dtype`, and Python scalars. This module turns each into
Triton's type strings (`*fp32`, `i32`, `fp32`, ...) and into a data address, without importing torch
(a tensor is recognised by its attributes and by `type(arg).__module__`).

Every function takes an optional `name` (the kernel's parameter) so that a wrong argument produces a
`TypeError`/`ValueError` that tells the user which parameter it was.

This module is the one reader of pointers for every backend: `data_ptr()` first (as Triton: it works for
tensors that require grad, `nn.Parameter` and non-leaf tensors, where torch's
`__cuda_array_interface__` raises), then `__cuda_array_interface__`, `__array_interface__`, DLPack.
Attributes are tested in that order everywhere, so a torch tensor never reaches the interfaces.
"""
from __future__ import annotations

import ctypes
import sys

from tilejit.errors import ArgumentTypeError, ArgumentValueError

# Element type names (as torch, NumPy, ml_dtypes and DLPack spell them) -> Triton's type strings.
_ELEMENT_TYPE_BY_NAME = {
    "bool": "i1",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "half": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64",
    "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
    "float8_e4m3b11fnuz": "fp8e4b15",
}
# Names that are already Triton's element spelling (e.g. a `tl.dtype` or a reinterpreted tensor).
_TRITON_ELEMENT_TYPES = frozenset({
    "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
    "fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16", "fp8e4b15",
})

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1

# DLPack device types (dlpack.h `DLDeviceType`) that tilejit distinguishes.
DLPACK_CPU, DLPACK_CUDA, DLPACK_CUDA_HOST, DLPACK_ROCM, DLPACK_CUDA_MANAGED = 1, 2, 3, 10, 13
# DLPack type codes (dlpack.h `DLDataTypeCode`).
_DLPACK_INT, _DLPACK_UINT, _DLPACK_FLOAT, _DLPACK_BFLOAT, _DLPACK_BOOL = 0, 1, 2, 4, 6

# Memoised per dtype object (torch / NumPy dtypes are hashable): keeps the launch path cheap.
_element_type_by_dtype: dict = {}


def _where(name: str | None) -> str:
    return f"argument '{name}'" if name else "argument"


class IntegerArgumentOverflow(ValueError, OverflowError):
    """An integer argument that fits no 64-bit type: an OverflowError as in Triton (its tests expect
    one), and a ValueError like tilejit's other argument errors."""


def int_type_string(value: int, name: str | None = None) -> str:
    """Triton's rule: i32 if it fits in int32, i64 if in int64, u64 above; an error beyond."""
    if INT32_MIN <= value <= INT32_MAX:
        return "i32"
    if INT64_MIN <= value <= INT64_MAX:
        return "i64"
    if 0 <= value <= UINT64_MAX:
        return "u64"
    raise IntegerArgumentOverflow(f"{_where(name)}: integer {value} does not fit in 64 bits")


def _is_numpy_scalar(arg) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(arg, numpy.generic)


def is_tensor_like(arg) -> bool:
    """True for anything that is passed to a kernel as a pointer (tensor, array, DLPack producer)."""
    if arg is None or isinstance(arg, (bool, int, float, str, bytes)) or _is_numpy_scalar(arg):
        return False
    return (hasattr(arg, "data_ptr") or hasattr(arg, "__cuda_array_interface__")
            or hasattr(arg, "__array_interface__") or hasattr(arg, "__dlpack__"))


def element_type_of_dtype(dtype, name: str | None = None) -> str:
    """Map a dtype object (torch, NumPy, `tl.dtype`, or a name string) to Triton's element spelling."""
    try:
        cached = _element_type_by_dtype.get(dtype)
    except TypeError:  # an unhashable dtype object: just compute it
        cached = None
    if cached is not None:
        return cached
    if isinstance(dtype, str):
        text = dtype
    elif isinstance(getattr(dtype, "name", None), str):  # NumPy dtypes and tl.dtype
        text = dtype.name
    else:
        text = str(dtype)  # torch spells its dtypes "torch.float32"
    text = text.rsplit(".", 1)[-1]
    if text in _TRITON_ELEMENT_TYPES:
        element = text
    elif text in _ELEMENT_TYPE_BY_NAME:
        element = _ELEMENT_TYPE_BY_NAME[text]
    else:
        raise TypeError(f"{_where(name)}: element type {dtype!r} is not supported by tilejit kernels "
                        f"(supported: {', '.join(sorted(_ELEMENT_TYPE_BY_NAME))})")
    try:
        _element_type_by_dtype[dtype] = element
    except TypeError:
        pass
    return element


def _numpy_dtype_from_typestr(typestr: str, name: str | None):
    import numpy

    try:
        return numpy.dtype(typestr)
    except TypeError as exc:
        raise TypeError(f"{_where(name)}: unknown array typestr {typestr!r}") from exc


# --- DLPack -------------------------------------------------------------------------------------
# The capsule holds a `DLManagedTensor*`; its first member is a `DLTensor`. We read it without
# consuming the capsule (its name stays "dltensor"), so the capsule's destructor still frees it.

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _read_dlpack(arg, name: str | None) -> tuple[int, str, int]:
    """(data address, element type, DLPack device type) of a DLPack producer."""
    try:
        capsule = arg.__dlpack__()
        address = _capsule_get_pointer(capsule, b"dltensor")
    except (TypeError, ValueError, RuntimeError, BufferError) as exc:
        raise TypeError(f"{_where(name)}: could not export it through DLPack: {exc}") from exc
    tensor = _DLTensor.from_address(address)
    dtype = tensor.dtype
    if dtype.lanes != 1:
        raise TypeError(f"{_where(name)}: vector DLPack element types (lanes={dtype.lanes}) are not supported")
    bits = dtype.bits
    if dtype.code == _DLPACK_BOOL or (dtype.code == _DLPACK_UINT and bits == 1):
        element = "i1"
    elif dtype.code == _DLPACK_INT and bits in (8, 16, 32, 64):
        element = f"i{bits}"
    elif dtype.code == _DLPACK_UINT and bits in (8, 16, 32, 64):
        element = f"u{bits}"
    elif dtype.code == _DLPACK_FLOAT and bits in (16, 32, 64):
        element = f"fp{bits}"
    elif dtype.code == _DLPACK_BFLOAT and bits == 16:
        element = "bf16"
    else:
        raise TypeError(f"{_where(name)}: DLPack element type (code={dtype.code}, bits={bits}) "
                        "is not supported")
    address = (tensor.data or 0) + tensor.byte_offset
    device_type = int(tensor.device.device_type)
    # The capsule owns the struct we just read: release it only now.
    del capsule, tensor
    return address, element, device_type


# --- public helpers -----------------------------------------------------------------------------

def dtype_of(arg, name: str | None = None) -> str:
    """Triton's type string of a kernel argument: `*fp32` for a tensor, `i32`/`i64`/`u64`/`i1`/`fp32`
    for a Python scalar, `constexpr` for None. Raises TypeError/ValueError naming `name`."""
    if arg is None:
        return "constexpr"
    if isinstance(arg, bool) or (_is_numpy_scalar(arg) and type(arg).__name__ == "bool"):
        return "i1"
    if isinstance(arg, int):
        return int_type_string(arg, name)
    if isinstance(arg, float):
        return "fp32"
    if _is_numpy_scalar(arg):
        kind = arg.dtype.kind
        if kind in "iu":
            return int_type_string(int(arg), name)
        if kind == "f":
            return "fp32"
        raise TypeError(f"{_where(name)}: NumPy scalar of type {arg.dtype} is not a valid kernel argument")
    dtype = getattr(arg, "dtype", None)
    if dtype is not None and (hasattr(arg, "data_ptr") or hasattr(arg, "__array_interface__")):
        return "*" + element_type_of_dtype(dtype, name)
    interface = getattr(arg, "__cuda_array_interface__", None)
    if interface is not None:
        return "*" + element_type_of_dtype(_numpy_dtype_from_typestr(interface["typestr"], name), name)
    if hasattr(arg, "__dlpack__"):
        return "*" + _read_dlpack(arg, name)[1]
    raise TypeError(f"{_where(name)}: unsupported kernel argument of type {type(arg).__name__}; expected "
                    "a tensor/array (torch, NumPy, __cuda_array_interface__, DLPack, or an object with "
                    "data_ptr() and dtype), an int, a float, a bool or None")


def data_ptr_of(arg, name: str | None = None) -> int:
    """The device (or host) address of a tensor-like argument's first element."""
    data_ptr = getattr(arg, "data_ptr", None)
    if data_ptr is not None and callable(data_ptr):
        return int(data_ptr())
    interface = getattr(arg, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0] or 0)
    interface = getattr(arg, "__array_interface__", None)
    if interface is not None and not _is_numpy_scalar(arg):
        return int(interface["data"][0] or 0)
    if hasattr(arg, "__dlpack__"):
        return _read_dlpack(arg, name)[0]
    raise TypeError(f"{_where(name)}: a {type(arg).__name__} has no data pointer; expected a tensor or array")


def device_pointer(arg, name: str | None = None, dlpack_devices=(DLPACK_CUDA, DLPACK_CUDA_MANAGED),
                   device: str = "GPU") -> int:
    """The device address a GPU launcher passes for a pointer parameter: 0 for None, an int as it is,
    else the argument's data pointer. A host array is refused, and so is a DLPack producer whose device
    type is not in `dlpack_devices`. (The launchers' generated code calls `data_ptr()` inline first and
    comes here for everything else.)"""
    if arg is None:
        return 0
    if isinstance(arg, bool):
        raise ArgumentTypeError(f"{_where(name)} is a pointer; got a bool")
    if isinstance(arg, int):
        return arg
    data_ptr = getattr(arg, "data_ptr", None)
    if data_ptr is not None and callable(data_ptr):
        return int(data_ptr())
    interface = getattr(arg, "__cuda_array_interface__", None)
    if isinstance(interface, dict) and "data" in interface:
        return int(interface["data"][0] or 0)
    if hasattr(arg, "__array_interface__"):
        raise ArgumentValueError(f"{_where(name)} is a host array ({type(arg).__name__}), not {device} memory; "
                                 f"copy it to the {device} first")
    if hasattr(arg, "__dlpack__"):
        address, _, device_type = _read_dlpack(arg, name)
        if device_type not in dlpack_devices:
            raise ArgumentValueError(f"{_where(name)}: its DLPack device type is {device_type}, not a {device} "
                                     "device")
        return address
    raise ArgumentTypeError(f"{_where(name)} is a pointer; got {type(arg).__name__}, which has no {device} "
                            "address (pass a tensor, an object with __cuda_array_interface__, __dlpack__ or "
                            "data_ptr(), an int address or None)")


def device_kind_of(arg) -> str:
    """Coarse device of a tensor-like argument: 'cpu', 'cuda', 'hip' or 'unknown' (used for messages
    and to memoise target selection; the backends' drivers make the real decision)."""
    device = getattr(arg, "device", None)
    if device is not None:
        kind = getattr(device, "type", device)
        if isinstance(kind, str):
            return kind.split(":", 1)[0]
    if hasattr(arg, "__cuda_array_interface__"):
        return "cuda"
    if hasattr(arg, "__array_interface__"):
        return "cpu"
    dlpack_device = getattr(arg, "__dlpack_device__", None)
    if dlpack_device is not None:
        device_type = dlpack_device()[0]
        return {DLPACK_CPU: "cpu", DLPACK_CUDA_HOST: "cpu", DLPACK_CUDA: "cuda",
                DLPACK_ROCM: "hip"}.get(int(device_type), "unknown")
    return "unknown"


# --- per-type readers for the launch path -------------------------------------------------------
# The JIT asks for (type string, address, device) of every tensor argument on every launch. Which
# attributes to read depends only on the argument's Python type, so that decision is made once per type.

# dtype object -> "*<element>": the same string object every launch, so its hash is computed once.
_pointer_type_by_dtype: dict = {}


def _pointer_type(dtype, name) -> str:
    try:
        return _pointer_type_by_dtype[dtype]
    except KeyError:
        pointer_type = _pointer_type_by_dtype[dtype] = "*" + element_type_of_dtype(dtype, name)
        return pointer_type
    except TypeError:  # an unhashable dtype object
        return "*" + element_type_of_dtype(dtype, name)


def _read_numpy(arg, name):
    return _pointer_type(arg.dtype, name), arg.__array_interface__["data"][0] or 0


def _read_data_ptr(arg, name):
    return _pointer_type(arg.dtype, name), arg.data_ptr()


def _read_generic(arg, name):
    return dtype_of(arg, name), data_ptr_of(arg, name)


_reader_by_type: dict = {}


def tensor_reader(arg):
    """A function `(arg, name) -> (type string, address)` for arguments of `type(arg)`, or None when
    that type is not tensor-like (a scalar, or something the caller must reject)."""
    kind = type(arg)
    try:
        return _reader_by_type[kind]
    except KeyError:
        pass
    if not is_tensor_like(arg):
        reader = None
    elif kind.__module__ == "numpy" and kind.__name__ == "ndarray":
        reader = _read_numpy
    elif callable(getattr(arg, "data_ptr", None)) and hasattr(arg, "dtype"):
        reader = _read_data_ptr
    else:
        reader = _read_generic
    _reader_by_type[kind] = reader
    return reader


# --- annotated scalar parameters ----------------------------------------------------------------
# A parameter annotated with a scalar type (`n: int`, `eps: float`, `n: tl.int64`, `"i32"`) takes a
# scalar: Triton's launcher packs it as that type and so rejects a tensor. As Triton 3.9's JITFunction
# (KernelParam.annotation_type), the annotation is the parameter's type in the kernel's signature: a
# number passed for it is converted to that type at launch (`val: tl.float16` gets an fp16 argument).

# Triton's `type_canonicalisation_dict` (triton/_utils.py) for the scalar types, in tilejit's spelling
# (bool is i1). The names are matched exactly: `torch.float16`, `Tensor`, `np.int32` are not types.
_ANNOTATION_TYPES = {
    "bool": "i1", "int1": "i1", "uint1": "i1", "i1": "i1", "u1": "i1",
    "half": "fp16", "float16": "fp16", "fp16": "fp16", "bfloat16": "bf16", "bf16": "bf16",
    "float": "fp32", "float32": "fp32", "fp32": "fp32", "double": "fp64", "float64": "fp64", "fp64": "fp64",
    "int8": "i8", "int16": "i16", "int": "i32", "int32": "i32", "int64": "i64",
    "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64",
}


def annotation_type_string(annotation) -> str | None:
    """The scalar type a parameter annotation gives the kernel's signature ("i8" for `tl.int8`,
    "tl.int8", "int8" or "i8"; "i32" for `int`, "fp32" for `float`, "i1" for `bool`), as Triton's
    `_normalize_ty` + `annotation_type`; None for anything else (pointers, tensors, constexpr, fp8:
    those keep the type of the value passed)."""
    if not isinstance(annotation, (str, type)) and not hasattr(annotation, "primitive_bitwidth"):
        return None   # not a tl.dtype
    text = _annotation_text(annotation)
    if text is None:
        return None
    if text.startswith("tl."):
        text = text[3:]
    return _ANNOTATION_TYPES.get(text.replace("_t", ""))


def _annotation_text(annotation) -> str | None:
    """An annotation as text: a string as written, a class's name, a dtype's `name`; None for a
    pointer type or anything without a name."""
    if isinstance(annotation, str):
        return annotation.strip()
    if isinstance(annotation, type):
        return annotation.__name__
    is_ptr = getattr(annotation, "is_ptr", None)
    if callable(is_ptr) and is_ptr():
        return None
    text = getattr(annotation, "name", None)
    return text if isinstance(text, str) else None


def _annotation_name(annotation) -> str | None:
    text = _annotation_text(annotation)
    return text.rsplit(".", 1)[-1].lower() if text is not None else None


def annotation_kind(annotation) -> str | None:
    """'int' or 'float' for a parameter annotated with a scalar type (`int`, `bool`, `float`,
    `tl.int32`, `tl.float16`, "i64", "fp32", ...), None for anything else (unannotated, pointers,
    tensors, constexpr)."""
    text = _annotation_name(annotation)
    if text is None or text.startswith("*"):
        return None
    if text in ("int", "bool") or text in _TRITON_ELEMENT_TYPES and text[0] in "iu" \
            or text.startswith(("int", "uint")) and text.lstrip("uint").isdigit():
        return "int"
    if text == "float" or text in _TRITON_ELEMENT_TYPES and text[0] in "fb" \
            or text in _ELEMENT_TYPE_BY_NAME and _ELEMENT_TYPE_BY_NAME[text][0] in "fb":
        return "float"
    return None


def check_annotated_scalar(value, kind: str, annotation, name: str, kernel: str) -> None:
    """ArgumentTypeError naming the parameter when `value` cannot be passed for a scalar annotation."""
    if value is None or type(value).__name__ == "MockArg":
        return
    text = annotation if isinstance(annotation, str) else _annotation_name(annotation)
    if is_tensor_like(value) and not _is_numpy_scalar(value):
        raise ArgumentTypeError(f"kernel '{kernel}': parameter '{name}' is annotated as a scalar ({text}) but "
                                f"was given a {type(value).__name__}; pass a Python number (a one-element "
                                "tensor: `.item()`), or drop the annotation to pass a pointer")
    if kind == "int" and (isinstance(value, float) or _is_numpy_scalar(value) and value.dtype.kind == "f"):
        raise ArgumentTypeError(f"kernel '{kernel}': parameter '{name}' is annotated as an integer ({text}) "
                                f"but was given the float {value!r}")
