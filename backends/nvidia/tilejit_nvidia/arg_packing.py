"""Turning a kernel's runtime arguments into the `void *kernelParams[]` that cuLaunchKernel reads.

All parameters live in one buffer laid out like a C struct of the parameter types (native
alignment); `kernelParams[i]` points at parameter i inside it and never changes. A launch fills the
buffer with one precompiled `struct.Struct.pack_into` call from a small function generated once
per signature: no per-argument Python objects, and pointers come from `data_ptr()` with no lookup.
The driver copies the parameters during cuLaunchKernel, so the buffer can be refilled right after.
"""
from __future__ import annotations

import ctypes
import functools
import math
import struct

# struct codes of every scalar type string (Triton's spelling); pointers (`*fp32`, ...) are 'Q'.
# bf16 travels as its 16 bits ('H'); fp16 uses struct's IEEE half ('e').
SCALAR_CODES = {
    "i1": "?", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
    "u1": "?", "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
    "fp16": "e", "bf16": "H", "fp32": "f", "f32": "f", "fp64": "d",
}
POINTER_CODE = "Q"

# DLPack device types that are memory of a CUDA device (kDLCUDA, kDLCUDAManaged).
DLPACK_CUDA_DEVICES = (2, 13)


def struct_code(type_string: str) -> str:
    if not isinstance(type_string, str):
        raise TypeError(f"a signature entry must be a type string such as '*fp32' or 'i32', got {type_string!r}")
    if type_string.startswith("*"):
        return POINTER_CODE
    try:
        return SCALAR_CODES[type_string]
    except KeyError:
        raise TypeError(f"the CUDA launcher cannot pass a parameter of type {type_string!r}; "
                        f"supported: pointers (*T) and {', '.join(sorted(SCALAR_CODES))}") from None


def bf16_bits(value) -> int:
    """The bfloat16 bits of a Python number: float32 rounded to nearest even, NaN kept quiet."""
    value = float(value)
    if math.isnan(value):
        return 0x7FC0
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    rounding = 0x7FFF + ((bits >> 16) & 1)
    return ((bits + rounding) >> 16) & 0xFFFF


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


def _dlpack_pointer(obj) -> int:
    """Device address of a DLPack producer, read from its (unversioned) `dltensor` capsule.

    The capsule is not consumed, so dropping it calls the producer's deleter, which frees only the
    descriptor: the memory belongs to `obj`, which the caller still holds.
    """
    capsule = obj.__dlpack__()
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, b"dltensor")
    tensor = _DLTensor.from_address(address)  # DLManagedTensor starts with its DLTensor
    if tensor.device_type not in DLPACK_CUDA_DEVICES:
        raise ValueError(f"its DLPack device type is {tensor.device_type}, not a CUDA device")
    return (tensor.data or 0) + tensor.byte_offset


def pointer_of(arg) -> int:
    """Device address of a pointer argument that has no `data_ptr()` (the generated code tries that first)."""
    if arg is None:
        return 0
    if isinstance(arg, int) and not isinstance(arg, bool):
        return arg
    interface = getattr(arg, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    if hasattr(arg, "__array_interface__"):
        raise ValueError("it is a host (NumPy) array; copy it to the GPU first")
    if hasattr(arg, "__dlpack__"):
        return _dlpack_pointer(arg)
    raise TypeError(f"expected a CUDA tensor, an object with __cuda_array_interface__ or __dlpack__, "
                    f"an int address or None, got {type(arg).__name__}")


@functools.lru_cache(maxsize=256)
def _packer_source(type_strings: tuple[str, ...]) -> tuple[str, str]:
    """(struct format, Python source of `pack(a0, a1, ...)`) for one signature; cached per signature."""
    codes = [struct_code(t) for t in type_strings]
    params = ", ".join(f"a{i}" for i in range(len(codes)))
    lines = [f"def pack({params}):"]
    values = []
    for i, (type_string, code) in enumerate(zip(type_strings, codes)):
        if type_string.startswith("*"):
            # data_ptr() first: torch tensors (and look-alikes) are the common case.
            lines += ["    try:", f"        p{i} = a{i}.data_ptr()",
                      "    except AttributeError:", f"        p{i} = pointer_of(a{i})"]
            values.append(f"p{i}")
        elif type_string == "bf16":
            values.append(f"bf16_bits(a{i})")
        else:
            values.append(f"a{i}")
    lines.append(f"    pack_into(buffer, 0{''.join(', ' + v for v in values)})")
    return "@" + "".join(codes), "\n".join(lines) + "\n"


class ArgPacker:
    """Owns the parameter buffer and pointer array of one launcher and fills them per launch.

    `pack(*args)` writes the arguments; `params_address` is the `void **` for cuLaunchKernel.
    Not reentrant: the launcher holds a lock from `pack` until cuLaunchKernel has copied the buffer.
    """

    def __init__(self, type_strings, param_names=None):
        self.type_strings = tuple(type_strings)
        self.param_names = tuple(param_names) if param_names else tuple(f"arg{i}" for i in range(len(self.type_strings)))
        if len(self.param_names) != len(self.type_strings):
            raise ValueError(f"{len(self.param_names)} parameter names for {len(self.type_strings)} types")
        fmt, source = _packer_source(self.type_strings)
        layout = struct.Struct(fmt)
        # At least one byte so an empty signature still has a valid buffer address.
        self.buffer = ctypes.create_string_buffer(max(layout.size, 1))
        base = ctypes.addressof(self.buffer)
        codes = fmt[1:]
        # offset of field i = size of the fields before it, aligned as field i ('0X' pads to X's alignment).
        offsets = [struct.calcsize("@" + codes[:i] + "0" + codes[i]) for i in range(len(codes))]
        self.pointers = (ctypes.c_void_p * max(len(codes), 1))(*[base + off for off in offsets])
        self.params_address = ctypes.addressof(self.pointers)
        self.offsets = tuple(offsets)
        namespace = {"pack_into": layout.pack_into, "buffer": self.buffer, "pointer_of": pointer_of,
                     "bf16_bits": bf16_bits}
        exec(compile(source, f"<tilejit cuda argument packer {','.join(self.type_strings)}>", "exec"), namespace)
        self.pack = namespace["pack"]
        self.source = source

    def explain_failure(self, args, kernel: str) -> Exception:
        """The TypeError/ValueError that names the parameter `pack(*args)` failed on (slow path)."""
        if len(args) != len(self.type_strings):
            names = ", ".join(self.param_names)
            return TypeError(f"kernel '{kernel}' takes {len(self.type_strings)} runtime arguments ({names}), "
                             f"got {len(args)}")
        for name, type_string, arg in zip(self.param_names, self.type_strings, args):
            problem = self._check_one(type_string, arg)
            if problem is not None:
                kind, text = problem
                return kind(f"kernel '{kernel}', parameter '{name}' ({type_string}): {text}")
        return TypeError(f"kernel '{kernel}': could not pack the arguments {args!r}")

    @staticmethod
    def _check_one(type_string: str, arg):
        try:
            if type_string.startswith("*"):
                value = arg.data_ptr() if hasattr(arg, "data_ptr") else pointer_of(arg)
                struct.pack("@Q", value)
            elif type_string == "bf16":
                bf16_bits(arg)
            else:
                struct.pack("@" + SCALAR_CODES[type_string], arg)
        except struct.error as exc:
            # struct says "required argument is not a float/an integer" for a wrong type.
            return (TypeError if "required argument is not" in str(exc) else ValueError), str(exc)
        except (OverflowError, ValueError) as exc:
            return ValueError, str(exc)
        except (TypeError, AttributeError) as exc:
            return TypeError, str(exc)
        return None
