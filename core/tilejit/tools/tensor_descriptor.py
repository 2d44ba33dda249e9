"""`triton.tools.tensor_descriptor.TensorDescriptor`: a host-side description of a tile view of a
tensor (base, shape, strides, block shape, padding), as Triton 3.x defines it.

Passed as a kernel argument, it is a `tl.tensor_descriptor` in the kernel: `desc.load([i, j])`,
`desc.store([i, j], x)`, `desc.shape`, `desc.strides`, `desc.block_shape`, on every backend. Its
signature is Triton's `tensordesc<fp16[64, 64]>`; at launch it travels as its leaves (base pointer,
shape as i32, strides as i64, the order `desc[k]` gives) and the kernel rebuilds it with
`tl.make_tensor_descriptor`; `padding="nan"` makes its out-of-bounds loads NaN (part of the signature).
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
    round_f32_to_tf32: bool = False  # Triton 3.9's TMA rounding option: accepted only as False

    # The JIT recognises the type by this flag (no import of this module on the launch path).
    __tilejit_tensor_descriptor__ = True

    def __getitem__(self, k: int):
        """The launch leaves: 0 is the base, then the shape, then the strides."""
        rank = len(self.shape)
        if k == 0:
            return self.base
        if k <= rank:
            return int(self.shape[k - 1])
        return int(self.strides[k - 1 - rank])

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
        for i, size in enumerate(self.block_shape):  # Triton's host-side rules for the block
            if isinstance(size, bool) or not isinstance(size, int) or size < 1 or size & (size - 1):
                raise ValueError(f"TensorDescriptor: block_shape element {i} must be a power of 2, got {size!r}")
        if any(int(d) <= 0 for d in self.shape):
            raise ValueError(f"TensorDescriptor: shape must be positive, got {list(self.shape)}")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"TensorDescriptor: padding must be 'zero' or 'nan', got {self.padding!r}")
        if self.round_f32_to_tf32:
            raise ValueError("TensorDescriptor: round_f32_to_tf32=True is not supported by tilejit")

    @staticmethod
    def from_tensor(tensor: Any, block_shape: List[int], padding: str = "zero",
                    round_f32_to_tf32: bool = False) -> "TensorDescriptor":
        """The descriptor of the whole of `tensor` (torch tensor or NumPy array), tiled by `block_shape`."""
        return TensorDescriptor(tensor, list(tensor.shape), _strides(tensor), list(block_shape), padding,
                                round_f32_to_tf32)


def _element_size(tensor) -> int:
    if hasattr(tensor, "element_size"):
        return int(tensor.element_size())
    return int(tensor.dtype.itemsize)


def _strides(tensor) -> list:
    if callable(getattr(tensor, "stride", None)):
        return list(tensor.stride())
    return [s // tensor.dtype.itemsize for s in tensor.strides]  # NumPy strides are in bytes
