"""The kernarg segment of an AMDGPU kernel: where each argument goes, and packing the bytes.

The layout is read from the code object's own metadata (`amdhsa.kernels[i].args`: offset, size and
value kind of every argument), so it is right whatever the lowering or LLVM decided about padding.

Hidden arguments (code object v5) are filled the way the HIP runtime fills them for
`hipModuleLaunchKernel`: block counts, group sizes, remainders, grid dimensions, dynamic LDS size;
zero for the global offsets and for the runtime's own pointers (printf/hostcall buffers, heap, queue),
which the host cannot know. The HIP runtime copies only the explicit arguments from the buffer we pass
(at their metadata offsets) and writes every hidden argument itself at dispatch, whichever of
`kernelParams` or `extra` is used; filling them here keeps the buffer a faithful image of the segment
the GPU will read (useful to check and to launch through HSA directly), and costs nothing.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from tilejit.errors import ArgumentTypeError
from tilejit.runtime.args import DLPACK_ROCM, device_pointer as _device_pointer
from tilejit.runtime.launch_abi import SCALAR_CODES, normalize_grid, scalar_value

from tilejit_amd.elf import KernelArg, KernelInfo, parse_kernel_metadata

_TYPE_ALIASES = {"int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                 "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "f16": "fp16",
                 "f32": "fp32", "f64": "fp64", "float16": "fp16", "float32": "fp32", "float64": "fp64",
                 "bfloat16": "bf16", "B": "i1"}

# hidden argument kind -> value as a function of (grid, block, dynamic_lds). Others are zero.
_HIDDEN_VALUES = {
    "hidden_block_count_x": lambda g, b, lds: g[0],
    "hidden_block_count_y": lambda g, b, lds: g[1],
    "hidden_block_count_z": lambda g, b, lds: g[2],
    "hidden_group_size_x": lambda g, b, lds: b[0],
    "hidden_group_size_y": lambda g, b, lds: b[1],
    "hidden_group_size_z": lambda g, b, lds: b[2],
    # hipModuleLaunchKernel's grid counts whole blocks, so no block is partial.
    "hidden_remainder_x": lambda g, b, lds: 0,
    "hidden_remainder_y": lambda g, b, lds: 0,
    "hidden_remainder_z": lambda g, b, lds: 0,
    # HIP always dispatches a 3-dimensional NDRange.
    "hidden_grid_dims": lambda g, b, lds: 3,
    "hidden_dynamic_lds_size": lambda g, b, lds: lds,
}


class KernelArgumentError(ArgumentTypeError):
    """A launch argument (or signature) that cannot be passed to the kernel parameter it is bound to.
    Values out of range are `tilejit.errors.ArgumentValueError`, as on every backend."""


def normalize_type(type_string: str) -> str:
    text = str(type_string).strip()
    if text.startswith("*"):
        return "*" + normalize_type(text[1:].lstrip("k"))  # "*kfp32" is Triton's const pointer
    return _TYPE_ALIASES.get(text, text)


def scalar_size(type_string: str) -> int | None:
    """Bytes a kernel parameter of this type occupies, or None for an unknown type."""
    kind = normalize_type(type_string)
    if kind.startswith("*"):
        return 8
    code = SCALAR_CODES.get(kind)
    return struct.calcsize("<" + code) if code is not None else None


def device_pointer(value, param: str) -> int:
    """The device address of a pointer argument (the shared reader of `tilejit.runtime.args`): an int
    address, None, `data_ptr()`, `__cuda_array_interface__` or a ROCm DLPack producer."""
    return _device_pointer(value, param, (DLPACK_ROCM,), "ROCm GPU")


def encode_scalar(value, type_string: str, param: str) -> bytes:
    """Little-endian bytes of `value` as a kernel parameter of type `type_string` (the launch ABI's
    encoding, `tilejit.runtime.launch_abi`)."""
    kind = normalize_type(type_string)
    if kind.startswith("*"):
        return struct.pack("<Q", device_pointer(value, param) & 0xFFFF_FFFF_FFFF_FFFF)
    code = SCALAR_CODES.get(kind)
    if code is None:
        raise KernelArgumentError(f"parameter '{param}' has type '{type_string}', which the AMD launcher "
                                  "cannot pass by value")
    return struct.pack("<" + code, scalar_value(value, kind, param))


@dataclass(frozen=True)
class ExplicitSlot:
    name: str
    type: str
    offset: int
    size: int


def _block3(block) -> tuple[int, int, int]:
    items = tuple(int(v) for v in block)
    if not 1 <= len(items) <= 3 or any(v < 1 for v in items):
        raise ValueError(f"block must be 1 to 3 positive ints, got {block!r}")
    return items + (1,) * (3 - len(items))


@dataclass(frozen=True)
class KernargLayout:
    """Where each kernel argument lives in the kernarg segment of one kernel."""
    kernel: str
    explicit: tuple[ExplicitSlot, ...]
    hidden: tuple[KernelArg, ...]
    size: int
    align: int

    @classmethod
    def from_metadata(cls, kernel_md, signature=None) -> "KernargLayout":
        """Build the layout from a `KernelInfo` (or its raw metadata map).

        `signature`: the kernel's parameter types, `{name: type}` (constexpr entries are skipped, as
        they are not kernel parameters) or a list of types; None takes the types from the metadata
        (pointer for global_buffer, signed integer of the argument's size for by_value).
        """
        info = kernel_md if isinstance(kernel_md, KernelInfo) else _kernel_info_from_map(kernel_md)
        explicit_md = info.explicit_args
        if signature is None:
            names = [arg.name or f"arg{i}" for i, arg in enumerate(explicit_md)]
            types = [_type_from_metadata(arg, info.name) for arg in explicit_md]
        elif isinstance(signature, dict):
            pairs = [(str(name), str(ty)) for name, ty in signature.items() if str(ty) != "constexpr"]
            names, types = [p[0] for p in pairs], [p[1] for p in pairs]
        else:
            types = [str(ty) for ty in signature if str(ty) != "constexpr"]
            names = [f"arg{i}" for i in range(len(types))]
        if len(types) != len(explicit_md):
            raise KernelArgumentError(
                f"kernel '{info.name}' takes {len(explicit_md)} arguments in its code object, but its "
                f"signature lists {len(types)} ({', '.join(names) or 'none'})")
        slots = []
        for name, ty, arg in zip(names, types, explicit_md):
            want = scalar_size(ty)
            if want is None:
                raise KernelArgumentError(f"kernel '{info.name}': parameter '{name}' has type '{ty}', "
                                          "which the AMD launcher cannot pass")
            if want != arg.size:
                raise KernelArgumentError(
                    f"kernel '{info.name}': parameter '{name}' of type {ty} takes {want} bytes, but the "
                    f"code object gives it {arg.size} (argument kind {arg.value_kind})")
            slots.append(ExplicitSlot(name, ty, arg.offset, arg.size))
        size = max([info.kernarg_segment_size] + [a.offset + a.size for a in info.args])
        return cls(info.name, tuple(slots), info.hidden_args, size, max(info.kernarg_segment_align, 1))

    @property
    def explicit_size(self) -> int:
        """Bytes up to the end of the last explicit argument."""
        return max((slot.offset + slot.size for slot in self.explicit), default=0)

    def pack(self, args, grid=(1, 1, 1), block=(1, 1, 1), dynamic_lds: int = 0) -> bytes:
        """The kernarg segment for one launch: explicit `args` in order, then the hidden arguments."""
        args = tuple(args)
        if len(args) != len(self.explicit):
            names = ", ".join(slot.name for slot in self.explicit) or "none"
            raise KernelArgumentError(f"kernel '{self.kernel}' takes {len(self.explicit)} arguments "
                                      f"({names}); got {len(args)}")
        grid3, block3 = normalize_grid(grid, self.kernel), _block3(block)
        buffer = bytearray(self.size)
        for slot, value in zip(self.explicit, args):
            buffer[slot.offset:slot.offset + slot.size] = encode_scalar(value, slot.type, slot.name)
        for arg in self.hidden:
            compute = _HIDDEN_VALUES.get(arg.value_kind)
            if compute is None:
                continue  # runtime-owned pointers (printf, hostcall, heap, queue...) and hidden_none
            value = compute(grid3, block3, int(dynamic_lds))
            buffer[arg.offset:arg.offset + arg.size] = int(value).to_bytes(arg.size, "little")
        return bytes(buffer)


def _type_from_metadata(arg: KernelArg, kernel: str) -> str:
    if arg.value_kind in ("global_buffer", "dynamic_shared_pointer"):
        return "*i8"
    if arg.value_kind == "by_value" and arg.size in (1, 2, 4, 8):
        return {1: "i8", 2: "i16", 4: "i32", 8: "i64"}[arg.size]
    raise KernelArgumentError(f"kernel '{kernel}': argument {arg.name!r} of kind {arg.value_kind} and "
                              f"size {arg.size} has no default type; pass the signature")


def _kernel_info_from_map(kernel_md) -> KernelInfo:
    if not isinstance(kernel_md, dict):
        raise KernelArgumentError(f"expected kernel metadata (KernelInfo or map), got {type(kernel_md).__name__}")
    return parse_kernel_metadata(kernel_md)
