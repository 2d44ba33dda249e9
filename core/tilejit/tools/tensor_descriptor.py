"""`triton.tools.tensor_descriptor.TensorDescriptor`: a host-side description of a tile view of a
tensor (base, shape, strides, block shape, padding), as Triton 3.x defines it.

Inside a kernel, `tl.make_tensor_descriptor(base, shape, strides, block_shape)` builds the same view
and `desc.load([i, j])` / `desc.store([i, j], x)` use it on every backend. Passing a host-side
`TensorDescriptor` object as a kernel argument is not supported yet (docs/language.md): pass the
tensor, its shape and strides, and build the descriptor in the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List


@dataclass
class TensorDescriptor:
    base: Any
    shape: List[int]
    strides: List[int]
    block_shape: List[int]
    padding: str = "zero"

    def __post_init__(self):
        rank = len(self.shape)
        if not (len(self.strides) == rank and len(self.block_shape) == rank):
            raise ValueError(f"TensorDescriptor: shape {list(self.shape)}, strides {list(self.strides)} and "
                             f"block_shape {list(self.block_shape)} must have the same length")
        if rank == 0 or rank > 5:
            raise ValueError(f"TensorDescriptor: rank must be 1 to 5, got {rank}")
        if int(self.strides[-1]) != 1:
            raise ValueError(f"TensorDescriptor: the last dimension must be contiguous (stride 1), got strides "
                             f"{list(self.strides)}")
        element_bytes = _element_size(self.base)
        for stride in self.strides[:-1]:
            if (int(stride) * element_bytes) % 16:
                raise ValueError(f"TensorDescriptor: strides must be 16-byte aligned, got strides "
                                 f"{list(self.strides)} with {element_bytes}-byte elements")
        if int(self.block_shape[-1]) * element_bytes < 16:
            raise ValueError(f"TensorDescriptor: the last block dimension must span at least 16 bytes, got "
                             f"{self.block_shape[-1]} elements of {element_bytes} bytes")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"TensorDescriptor: padding must be 'zero' or 'nan', got {self.padding!r}")

    @staticmethod
    def from_tensor(tensor: Any, block_shape: List[int], padding: str = "zero") -> "TensorDescriptor":
        """The descriptor of the whole of `tensor` (torch tensor or NumPy array), tiled by `block_shape`."""
        return TensorDescriptor(tensor, list(tensor.shape), _strides(tensor), list(block_shape), padding)


def _element_size(tensor) -> int:
    if hasattr(tensor, "element_size"):
        return int(tensor.element_size())
    return int(tensor.dtype.itemsize)


def _strides(tensor) -> list:
    if callable(getattr(tensor, "stride", None)):
        return list(tensor.stride())
    return [s // tensor.dtype.itemsize for s in tensor.strides]  # NumPy strides are in bytes
