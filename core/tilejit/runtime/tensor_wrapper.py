"""`triton.reinterpret` and `TensorWrapper`: view a tensor's memory as another element type.

A `TensorWrapper` keeps the base tensor and a `tl.dtype`; the kernel argument reader
(`tilejit.runtime.args`) takes its `dtype` as the pointer's element type (a `tl.dtype` name such as
`fp8e4nv` is already Triton's spelling) and its `data_ptr()` as the address, exactly as Triton's
launcher does, so `reinterpret(x_uint8, tl.float8e4nv)` passes an fp8 pointer.
"""
from __future__ import annotations

# Triton's canonical type names (`triton.runtime.jit.type_canonicalisation_dict`): dtype name ->
# the type string of a kernel signature.
type_canonicalisation_dict = {
    "bool": "i1", "int1": "i1", "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv", "float8e5": "fp8e5",
    "float8_e5m2": "fp8e5", "float8e4b15": "fp8e4b15", "float8e4b8": "fp8e4b8", "float8_e4m3fnuz": "fp8e4b8",
    "float8e5b16": "fp8e5b16", "float8_e5m2fnuz": "fp8e5b16", "half": "fp16", "float16": "fp16",
    "bfloat16": "bf16", "float": "fp32", "float32": "fp32", "double": "fp64", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int": "i32", "int32": "i32", "int64": "i64", "uint8": "u8",
    "uint16": "u16", "uint32": "u32", "uint64": "u64", "void": "void",
}
for _v in list(type_canonicalisation_dict.values()):
    type_canonicalisation_dict[_v] = _v


class TensorWrapper:
    """A tensor (`base`) whose elements a kernel sees as `dtype` (a `tl.dtype`)."""

    def __init__(self, base, dtype):
        self.dtype = dtype
        self.base = base
        self.data = getattr(base, "data", None)
        self.device = getattr(base, "device", None)
        self.shape = base.shape

    def data_ptr(self):
        if hasattr(self.base, "data_ptr"):
            return self.base.data_ptr()
        return self.base.__array_interface__["data"][0]

    def stride(self, *args):
        return self.base.stride(*args)

    def element_size(self):
        return self.base.element_size()

    def numel(self):
        return self.base.numel() if hasattr(self.base, "numel") else self.base.size

    @property
    def nbytes(self):
        return self.base.nbytes

    def __len__(self):
        return len(self.base)

    def __str__(self):
        return f"TensorWrapper[{self.dtype}]({self.base})"

    def cpu(self):
        return TensorWrapper(self.base.cpu(), self.dtype)

    def copy_(self, other):
        self.base.copy_(other.base if isinstance(other, TensorWrapper) else other)

    def clone(self):
        return TensorWrapper(self.base.clone(), self.dtype)

    def to(self, device):
        return TensorWrapper(self.base.to(device), self.dtype)

    def new_empty(self, sizes):
        return TensorWrapper(self.base.new_empty(sizes), self.dtype)


def reinterpret(tensor, dtype):
    """`tensor`'s memory seen as `dtype` by kernels; reinterpreting a wrapper back to its base's own
    dtype returns the base (Triton's rule)."""
    if isinstance(tensor, TensorWrapper):
        if dtype == tensor.base.dtype:
            return tensor.base
        return TensorWrapper(tensor.base, dtype)
    if hasattr(tensor, "data_ptr") or hasattr(tensor, "__array_interface__"):
        return TensorWrapper(tensor, dtype)
    raise TypeError(f"cannot reinterpret a {type(tensor).__name__}: expected a tensor or array")
