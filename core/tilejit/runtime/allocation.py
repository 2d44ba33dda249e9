"""`triton.set_allocator`: the function that gives kernels global scratch memory.

Triton's device-side tensor descriptors (and some lowerings) need a per-launch global buffer; the
user supplies an allocator `fn(size: int, alignment: int, stream) -> tensor` once per program (or per
context: the value is a `ContextVar`, as in Triton). A backend that needs scratch calls
`allocate_scratch(size, alignment, stream)`; with no allocator set that is a RuntimeError that says
how to set one. The interpreter needs none: its descriptors are views of host memory.
"""
from __future__ import annotations

from contextvars import ContextVar


class NullAllocator:
    """The default: no scratch memory can be obtained."""

    def __call__(self, size: int, alignment: int, stream):
        raise RuntimeError("Kernels that require additional global memory must call triton.set_allocator "
                           "(tilejit.set_allocator) with a function (size, alignment, stream) -> tensor")


_NULL = NullAllocator()
_allocator: ContextVar = ContextVar("tilejit_allocator", default=_NULL)


def set_allocator(allocator) -> None:
    """Install `allocator(size, alignment, stream) -> tensor` for kernels that need global scratch
    memory; None restores the default (which raises when scratch is needed)."""
    if allocator is not None and not callable(allocator):
        raise TypeError(f"set_allocator: expected a callable (size, alignment, stream) -> tensor, got "
                        f"{type(allocator).__name__}")
    _allocator.set(_NULL if allocator is None else allocator)


def get_allocator():
    return _allocator.get()


def allocate_scratch(size: int, alignment: int, stream=None):
    """A buffer of at least `size` bytes from the user's allocator (what a backend calls)."""
    return _allocator.get()(size, alignment, stream)
