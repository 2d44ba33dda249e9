"""The per-target table the shared lowering consults: everything that differs between NVPTX and AMDGPU.

A backend implements `TargetISA` (`tilejit_nvidia/isa.py`, `tilejit_amd/isa.py`); the lowering in
`gpu/llvm/` calls only these methods, so a new GPU target is a new table, not a new lowering.
"""
from __future__ import annotations

import abc
from typing import Optional, Tuple

import llvmlite.ir as llir

from ..errors import CompilationError

F32 = llir.FloatType()
F64 = llir.DoubleType()
I32 = llir.IntType(32)


def declare(module: llir.Module, name: str, ret, args) -> llir.Function:
    """Get or declare the function `name` in `module`."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return llir.Function(module, llir.FunctionType(ret, list(args)), name)


def add_string_attribute(func: llir.Function, key: str, value: str) -> None:
    """llvmlite only accepts its list of known attributes; target attributes are `"key"="value"`
    strings, which LLVM's parser accepts, so they are added to the underlying set directly."""
    set.add(func.attributes, f'"{key}"="{value}"')


def call_intrinsic(builder: llir.IRBuilder, name: str, ret, args):
    fn = declare(builder.module, name, ret, [a.type for a in args])
    return builder.call(fn, list(args))


class TargetISA(abc.ABC):
    """Triple, kernel marking, special registers, synchronization and math for one GPU target."""

    triple: str = ""
    data_layout: str = ""
    shared_address_space: int = 3
    global_address_space: int = 1

    def __init__(self, arch, warp_size: int):
        self.arch = arch
        self.warp_size = warp_size

    # -- kernels -------------------------------------------------------------------------------
    @abc.abstractmethod
    def mark_kernel(self, func: llir.Function, threads_per_block: int) -> None:
        """Make `func` a kernel entry point for `threads_per_block` threads."""

    def finish_kernel(self, func: llir.Function, threads_per_block: int, shared_bytes: int,
                      pipelined_mma: bool) -> None:
        """Called once the kernel is lowered (its shared memory is known): targets may add
        occupancy hints. `pipelined_mma`: the kernel has a cp.async-pipelined mma.sync loop."""

    # -- special registers ---------------------------------------------------------------------
    @abc.abstractmethod
    def thread_id_x(self, builder: llir.IRBuilder):
        """The thread's index in the CTA (i32)."""

    @abc.abstractmethod
    def program_id(self, builder: llir.IRBuilder, axis: int):
        """The CTA's index along `axis` (i32)."""

    @abc.abstractmethod
    def num_programs(self, builder: llir.IRBuilder, axis: int):
        """The grid's size along `axis` (i32)."""

    # -- synchronization and communication -----------------------------------------------------
    @abc.abstractmethod
    def barrier(self, builder: llir.IRBuilder) -> None:
        """All threads of the CTA wait here; shared memory written before is visible after."""

    @abc.abstractmethod
    def shuffle_xor(self, builder: llir.IRBuilder, value_i32, lane_mask: int, lane_id):
        """The i32 that lane `lane_id ^ lane_mask` holds (a butterfly exchange within a warp)."""

    # -- asynchronous copies and matrix loads (optional; NVIDIA sm_80+) --------------------------
    def warp_uniform(self, builder: llir.IRBuilder, value):
        """`value`, known by the compiler to be the same in every lane of a warp (the warp index):
        targets that can say so return it through an op the assembler sees as warp-uniform."""
        return value

    @property
    def supports_async_copy(self) -> bool:
        """Whether `async_copy`, `async_commit`, `async_wait` and `load_matrix` exist on this target."""
        return False

    def async_copy(self, builder: llir.IRBuilder, dst_shared, src_global, nbytes: int, pred) -> None:
        """Copy `nbytes` (4, 8 or 16) global -> shared without registers when `pred` (i1) is true;
        write zeros (and read nothing) when it is false."""
        raise CompilationError(f"{self.describe()} has no asynchronous copies")

    def async_commit(self, builder: llir.IRBuilder) -> None:
        raise CompilationError(f"{self.describe()} has no asynchronous copies")

    def async_wait(self, builder: llir.IRBuilder, pending: int) -> None:
        """Wait until at most `pending` committed groups of this thread's copies are in flight."""
        raise CompilationError(f"{self.describe()} has no asynchronous copies")

    def load_matrix(self, builder: llir.IRBuilder, ptr_shared, count: int, trans: bool):
        """`count` (1, 2, 4) 8x8 16-bit matrices from shared memory; one i32 per matrix per lane."""
        raise CompilationError(f"{self.describe()} has no matrix loads")

    def trap(self, builder: llir.IRBuilder) -> None:
        call_intrinsic(builder, "llvm.trap", llir.VoidType(), [])

    def assert_fail(self, builder: llir.IRBuilder, message: str, file: str, line: int, function: str) -> None:
        """A failed `tl.device_assert`: report where (when the target can print), then stop the kernel."""
        self.trap(builder)

    # -- math ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def math_symbol(self, op_name: str, type_) -> Optional[Tuple[str, str]]:
        """How to compute `op_name` (e.g. `math.exp`) for the LLVM float type `type_`:
        ("intrinsic", "llvm.exp2.f32"), ("libcall", "__nv_expf"), or None when the core's
        portable expansion (built from other math ops) must be used."""

    def describe(self) -> str:
        return f"{type(self).__name__}({self.arch})"


def type_suffix(type_) -> str:
    if isinstance(type_, llir.DoubleType):
        return "f64"
    if isinstance(type_, llir.HalfType):
        return "f16"
    if isinstance(type_, llir.FloatType):
        return "f32"
    if str(type_) == "bfloat":
        return "bf16"
    raise CompilationError(f"no math functions for LLVM type {type_}")
