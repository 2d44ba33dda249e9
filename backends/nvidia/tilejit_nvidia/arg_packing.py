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
import struct

from tilejit.errors import ArgumentError, ArgumentTypeError, ArgumentValueError
from tilejit.runtime.args import DLPACK_CUDA, DLPACK_CUDA_MANAGED, device_pointer
from tilejit.runtime.launch_abi import SCALAR_CODES, bf16_bits, scalar_code, scalar_value

__all__ = ["ArgPacker", "SCALAR_CODES", "bf16_bits", "pointer_of", "struct_code"]

# DLPack device types that are memory of a CUDA device (kDLCUDA, kDLCUDAManaged).
DLPACK_CUDA_DEVICES = (DLPACK_CUDA, DLPACK_CUDA_MANAGED)

# The launch ABI's encoding (`tilejit.runtime.launch_abi`): one table and one bf16 rounding for
# every backend.
struct_code = scalar_code


def pointer_of(arg, name: str | None = None) -> int:
    """Device address of a pointer argument that has no `data_ptr()` (the generated code tries that
    first): the shared reader of `tilejit.runtime.args`, CUDA devices only."""
    return device_pointer(arg, name, DLPACK_CUDA_DEVICES, "CUDA")


def pack_lines(type_strings, indent: str) -> list[str]:
    """Statements that write the arguments `a0, a1, ...` into `buffer` with one `pack_into` call:
    pointers from `data_ptr()` (torch tensors and look-alikes, the common case) or `pointer_of`,
    bf16 through `bf16_bits`, other scalars as they are (`struct` converts and range-checks them)."""
    lines, values = [], []
    for i, type_string in enumerate(type_strings):
        if type_string.startswith("*"):
            lines += [f"{indent}try:", f"{indent}    p{i} = a{i}.data_ptr()",
                      f"{indent}except AttributeError:", f"{indent}    p{i} = pointer_of(a{i})"]
            values.append(f"p{i}")
        elif type_string == "bf16":
            values.append(f"bf16_bits(a{i})")
        else:
            values.append(f"a{i}")
    lines.append(f"{indent}pack_into(buffer, 0{''.join(', ' + v for v in values)})")
    return lines


@functools.lru_cache(maxsize=256)
def _packer_source(type_strings: tuple[str, ...]) -> tuple[str, str]:
    """(struct format, Python source of `pack(a0, a1, ...)`) for one signature; cached per signature."""
    codes = [scalar_code(t) for t in type_strings]
    params = ", ".join(f"a{i}" for i in range(len(codes)))
    lines = [f"def pack({params}):"] + pack_lines(type_strings, "    ")
    return "@" + "".join(codes), "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=256)
def _packer_code(type_strings: tuple[str, ...]):
    """`_packer_source`'s source compiled, once per signature: compiling is most of an ArgPacker's
    construction, and a launcher builds one when it is made and one per launching thread."""
    source = _packer_source(type_strings)[1]
    return compile(source, f"<tilejit cuda argument packer {','.join(type_strings)}>", "exec")


class ArgPacker:
    """Owns the parameter buffer and pointer array of one launcher and fills them per launch.

    `pack(*args)` writes the arguments; `params_address` is the `void **` for cuLaunchKernel.
    Not reentrant: each thread launching has its own packer (the launcher's per-thread state), used
    from packing until cuLaunchKernel has copied the buffer.
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
        self.pack_into = layout.pack_into  # for the launcher's own generated code (`pack_lines`)
        namespace = {"pack_into": layout.pack_into, "buffer": self.buffer, "pointer_of": pointer_of,
                     "bf16_bits": bf16_bits}
        exec(_packer_code(self.type_strings), namespace)  # noqa: S102
        self.pack = namespace["pack"]
        self.source = source

    def pack_checked(self, args, kernel: str) -> None:
        """The slow path after `pack(*args)` raised: every scalar through the launch ABI's conversion
        (a float past fp16's or fp32's range is infinity, as a C conversion and Triton's launcher give;
        `struct` refuses it), then packed; else the error naming the parameter."""
        if len(args) != len(self.type_strings) or any(
                self._check_one(t, a) is not None for t, a in zip(self.type_strings, args)):
            raise self.explain_failure(args, kernel) from None   # not chained to pack's struct error
        converted = [a if t.startswith("*") or t == "bf16" else scalar_value(a, t)
                     for t, a in zip(self.type_strings, args)]
        try:
            self.pack(*converted)
        except Exception:  # noqa: BLE001 - reported as the parameter error below
            raise self.explain_failure(args, kernel) from None

    def explain_failure(self, args, kernel: str) -> Exception:
        """The TypeError/ValueError that names the parameter `pack(*args)` failed on (slow path)."""
        if len(args) != len(self.type_strings):
            names = ", ".join(self.param_names)
            return ArgumentTypeError(f"kernel '{kernel}' takes {len(self.type_strings)} runtime arguments "
                                     f"({names}), got {len(args)}")
        for name, type_string, arg in zip(self.param_names, self.type_strings, args):
            problem = self._check_one(type_string, arg)
            if problem is not None:
                kind, text = problem
                kind = ArgumentValueError if issubclass(kind, ValueError) else ArgumentTypeError
                return kind(f"kernel '{kernel}', parameter '{name}' ({type_string}): {text}")
        return ArgumentTypeError(f"kernel '{kernel}': could not pack the arguments {args!r:.200}")

    @staticmethod
    def _check_one(type_string: str, arg):
        try:
            if type_string.startswith("*"):
                value = arg.data_ptr() if callable(getattr(arg, "data_ptr", None)) else pointer_of(arg)
                struct.pack("@Q", value)
            else:
                struct.pack("@" + SCALAR_CODES[type_string], scalar_value(arg, type_string))
        except ArgumentError as exc:
            return type(exc), str(exc)
        except struct.error as exc:
            # struct says "required argument is not a float/an integer" for a wrong type.
            return (TypeError if "required argument is not" in str(exc) else ValueError), str(exc)
        except (OverflowError, ValueError) as exc:
            return ValueError, str(exc)
        except (TypeError, AttributeError) as exc:
            return TypeError, str(exc)
        return None
