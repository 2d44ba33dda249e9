"""The target description: what a GPU backend tells the core about its GPU, as one object.

A backend subclasses `TargetDescription` (`tilejit_nvidia/isa.py`, `tilejit_amd/isa.py`) and hands an
instance to the core's passes and lowering; the core asks only this object, so a new GPU is a new
description, not a change to the core. Most of it is data:

- `warp_size`, `shared_memory` (bytes a CTA may use on this arch), `registers_per_sm`,
  `supports_async_copy` (global -> shared copies without registers exist), `max_num_warps`,
  `inline_asm_problem`;
- `matrix_units`: the matrix instructions `tt.dot` may use, best first (`MatrixUnit`): each says, for
  one dot, which result layout it gives (its register layout is a linear layout, `linear_layout.py`);
  `accelerate-matmul` takes the first that accepts the dot, else the FMA dot;
- `encoding_kinds`: the layouts the backend adds to the TTGIR text (a dialect context, ir/dialect.py);
- `dot_lowerings`: per layout class of a dot's result, the function that lowers that `tt.dot` to LLVM;
  `lowering_mixin`: the target's own hooks in the lowering (pipelined loops, shared-memory operands).

The rest are hooks, for what cannot be data: the triple, kernel marking, special registers,
barriers, shuffles, async copies, matrix loads, global loads / stores / atomics with their
qualifiers (cache hints, memory semantics, scopes), math symbols, printf.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import llvmlite.ir as llir

from .. import ir
from ..errors import CompilationError
from .isa import call_intrinsic

# Triton's memory semantics -> LLVM's atomic orderings.
LLVM_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}


@dataclass(frozen=True)
class DotSite:
    """What a matrix unit is told about one `tt.dot` (2-D or batched): its shape, element types, the
    input precision, the CTA's warps, and `chained_warps()`: the warp arrangement a dot chained to this one asks for."""
    op: ir.Operation
    shape: Tuple[int, int, int]    # M, N, K
    rank: int
    a_elem: str
    b_elem: str
    out_elem: str
    num_warps: int
    warp_size: int
    chained_warps: Callable[[], Optional[Tuple[int, int]]]
    # The dot's `inputPrecision` (fp32 operands: "tf32", "ieee", ...); a unit that computes fp32
    # products at reduced precision takes only the precisions it implements.
    input_precision: str = "ieee"


class MatrixUnit(abc.ABC):
    """A matrix instruction (or family) that `tt.dot` may use; declared by a backend (with a `name`
    for messages). `MatrixInstruction` (matrix.py) is one declared entirely as data."""

    @abc.abstractmethod
    def layout(self, dot: DotSite):
        """The result layout this unit gives `dot`, or None when it cannot compute it."""


class TargetDescription(abc.ABC):
    """One GPU target: data (class attributes and properties) and hooks (methods)."""

    triple: str = ""
    data_layout: str = ""
    shared_address_space: int = 3
    global_address_space: int = 1

    def __init__(self, arch, warp_size: int):
        self.arch = arch
        self.warp_size = warp_size

    # -- data ----------------------------------------------------------------------------------
    @property
    def max_num_warps(self) -> int:
        """The most warps a CTA may have (1024 threads)."""
        return 1024 // self.warp_size

    @property
    def shared_memory(self) -> int:
        """Bytes of shared memory one CTA may use on this arch."""
        return 48 * 1024

    @property
    def registers_per_sm(self) -> Optional[int]:
        """32-bit registers one SM (compute unit) shares among its CTAs' threads, for occupancy
        estimates; None: unknown, and the core then keeps every estimate conservative."""
        return None

    def shared_memory_per_cta(self, ctas_per_sm: int) -> int:
        """Bytes of shared memory each of `ctas_per_sm` CTAs may use while that many run on one SM."""
        return self.shared_memory // max(1, ctas_per_sm)

    @property
    def supports_async_copy(self) -> bool:
        """Whether `async_copy`, `async_commit`, `async_wait` and `load_matrix` exist on this target."""
        return False

    @property
    def inline_asm_problem(self) -> Optional[str]:
        """Why `tl.inline_asm_elementwise` cannot be compiled for this target, or None when it can
        (the user's assembly goes to LLVM as an inline-asm call)."""
        return None

    @property
    def matrix_units(self) -> Tuple[MatrixUnit, ...]:
        """The matrix instructions `tt.dot` may use, best first; () = every dot is an FMA dot."""
        return ()

    def f16_accumulator_k_step(self, operand_bits: int) -> Optional[int]:
        """How many products of a dot with an f16 accumulator (`out_dtype=tl.float16`) and operands of
        `operand_bits` are summed in f32 before the accumulator is rounded to f16 again, as this
        target's matrix instructions do with such dots (an FMA dot follows it, so it gives their
        numerics); None: the whole K, rounded once (matrix units that accumulate in f32)."""
        return None

    @property
    def encoding_kinds(self) -> Dict[str, Callable[[dict], object]]:
        """Layouts this target adds to the TTGIR text: kind -> fn(fields) -> encoding."""
        return {}

    @property
    def dot_lowerings(self) -> Dict[type, Callable]:
        """Layout class of a dot's result -> fn(lowering, op) that lowers the dot (else FMA)."""
        return {}

    @property
    def lowering_mixin(self) -> Optional[type]:
        """A class mixed into the core's `FunctionLowering` to fill its hooks (`lower_pipelined_for`,
        `dot_operand_plan`, `convert_to_dot_operand`); None: the core's defaults."""
        return None

    # -- kernels -------------------------------------------------------------------------------
    @abc.abstractmethod
    def mark_kernel(self, func: llir.Function, threads_per_block: int) -> None:
        """Make `func` a kernel entry point for `threads_per_block` threads."""

    def finish_kernel(self, func: llir.Function, threads_per_block: int, shared_bytes: int,
                      pipelined_mma: bool, carried_registers: int = 0) -> None:
        """Called once the kernel is lowered (its shared memory is known): targets may add
        occupancy hints. `pipelined_mma`: the kernel has a pipelined matrix-unit loop;
        `carried_registers`: the 32-bit registers a thread carries through it (its accumulators)."""

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

    def user_barrier(self, builder: llir.IRBuilder) -> None:
        """`tl.debug_barrier()`: a barrier the target must keep as written (it may also order global
        memory); the lowering's own barriers (`barrier`) only fence its shared-memory uses."""
        self.barrier(builder)

    @abc.abstractmethod
    def shuffle_xor(self, builder: llir.IRBuilder, value_i32, lane_mask: int, lane_id):
        """The i32 that lane `lane_id ^ lane_mask` holds (a butterfly exchange within a warp)."""

    # -- asynchronous copies and matrix loads (where `supports_async_copy`) -------------------------------
    def warp_uniform(self, builder: llir.IRBuilder, value):
        """`value`, known by the compiler to be the same in every lane of a warp (the warp index):
        targets that can say so return it through an op the assembler sees as warp-uniform."""
        return value

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

    # -- global memory: loads, stores and atomics with their qualifiers ----------------------------
    # The core calls these for every `tt.load`, `tt.store`, `tt.atomic_rmw` and `tt.atomic_cas` on
    # global memory. The defaults are plain LLVM instructions (which drop Triton's cache hints); a
    # target overrides them to spell the hints, memory semantics and scopes in its own ISA.
    # `sem`: "relaxed", "acquire", "release", "acq_rel"; `scope`: "cta", "gpu", "sys".
    def global_load(self, builder: llir.IRBuilder, ptr, ty, align: int, cache: str = "none",
                    evict: str = "normal", volatile: bool = False):
        """Load `ty` (a scalar or a vector) from `ptr`. `cache`: Triton's load cache modifier
        ("none", "ca", "cg", "cs", "cv"); `evict`: "normal", "evict_first", "evict_last"."""
        return builder.load(ptr, typ=ty, align=align)

    def global_store(self, builder: llir.IRBuilder, value, ptr, align: int, cache: str = "none",
                     evict: str = "normal") -> None:
        """Store `value` (a scalar or a vector) to `ptr`; `cache`: "none", "wb", "cg", "cs", "wt"."""
        builder.store(value, ptr, align=align)

    def predicated_global_load(self, builder: llir.IRBuilder, ptr, ty, align: int, pred, other, cache: str = "none",
                               evict: str = "normal", volatile: bool = False):
        """`ty` from `ptr` where the i1 `pred` holds, else `other`, by a predicated load instruction;
        None when the target has none (the lowering branches around `global_load` then)."""
        return None

    def predicated_global_store(self, builder: llir.IRBuilder, value, ptr, align: int, pred, cache: str = "none",
                                evict: str = "normal") -> bool:
        """Store `value` to `ptr` where the i1 `pred` holds, by a predicated store instruction; False
        when the target has none (the lowering branches around `global_store` then)."""
        return False

    def atomic_rmw(self, builder: llir.IRBuilder, kind: str, ptr, value, sem: str, scope: str, elem: str):
        """`*ptr = kind(*ptr, value)` atomically; returns the old value. `kind` is LLVM's atomicrmw
        name (add, fadd, max, umax, min, umin, and, or, xor, xchg), `elem` the IR element type
        ("i32", "f16", "bf16", ...). None: this target has no such atomic for `elem` (a bf16 or fp8
        add: the value is integer bits), and the core builds it from a compare-and-swap loop."""
        if elem not in ("f16", "f32", "f64") and not elem.startswith("i"):
            return None
        return builder.atomic_rmw(kind, ptr, value, self.atomic_ordering(sem, scope))

    def atomic_ordering(self, sem: str, scope: str) -> str:
        """The ordering operand of the default atomics' `atomicrmw` / `cmpxchg` for Triton's `sem`
        and `scope` (a target with sync scopes puts one in front: AMDGPU's `syncscope("agent")`)."""
        return LLVM_ORDERING[sem]

    def vector_atomic_width(self, kind: str, elem: str) -> int:
        """Consecutive elements one atomic instruction of this target may update (`kind` and `elem`
        as in `atomic_rmw`); 1: no vector atomics, the core issues one atomic per element."""
        return 1

    # Whether `vector_atomic_rmw` takes a predicate (`pred`) itself; if not, the core branches
    # around the call and passes none.
    predicated_vector_atomics = False

    def vector_atomic_rmw(self, builder: llir.IRBuilder, kind: str, ptr, values, sem: str, scope: str, elem: str,
                          pred=None):
        """`atomic_rmw` of `len(values)` consecutive elements from `ptr` (aligned to their size) in
        one instruction, where the i1 `pred` holds (None: always); returns their old values
        (undefined where `pred` fails), or None where the target has no such instruction (the
        core asks only within `vector_atomic_width`)."""
        return None

    def atomic_cas(self, builder: llir.IRBuilder, ptr, cmp, value, sem: str, scope: str):
        """Compare-and-swap of integers: `*ptr = value` where `*ptr == cmp`; returns the old value."""
        pair = builder.cmpxchg(ptr, cmp, value, self.atomic_ordering(sem, scope), "monotonic")
        return builder.extract_value(pair, 0)

    def atomic_read(self, builder: llir.IRBuilder, ptr, ty, sem: str, scope: str):
        """An atomic load of the integer type `ty` (what a compare-and-swap that writes back the
        value it compares with amounts to). `sem` "acquire" is a relaxed load and an acquire fence,
        so it also acquires for the relaxed reads this thread made before it."""
        value = builder.load_atomic(ptr, "monotonic", max(1, ty.width // 8), typ=ty)
        if sem == "acquire":
            builder.fence("acquire")
        return value

    def atomic_write(self, builder: llir.IRBuilder, value, ptr, scope: str) -> None:
        """A relaxed atomic store of the integer `value` (tl.atomic_store; release semantics come
        from an `atomic_fence` before it)."""
        # llvmlite's store_atomic wants a typed pointer; the instruction itself is fine with ours.
        builder._insert(llir.instructions.StoreAtomicInstr(builder.block, value, ptr, "monotonic",
                                                           max(1, value.type.width // 8)))

    def atomic_fence(self, builder: llir.IRBuilder, sem: str, scope: str) -> None:
        """A memory fence: "acquire" after relaxed atomic reads, "release" before relaxed atomic writes."""
        builder.fence(sem)

    def trap(self, builder: llir.IRBuilder) -> None:
        call_intrinsic(builder, "llvm.trap", llir.VoidType(), [])

    def assert_fail(self, builder: llir.IRBuilder, message: str, file: str, line: int, function: str) -> None:
        """A failed `tl.device_assert`: report where (when the target can print), then stop the kernel."""
        self.trap(builder)

    # -- math ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def math_symbol(self, op_name: str, type_):
        """How to compute `op_name` (e.g. `math.exp`) for the LLVM float type `type_`:
        ("intrinsic", "llvm.exp2.f32"), ("libcall", "__nv_expf"), ("emit", fn) where
        `fn(builder, args)` builds the value itself, or None when the core's portable expansion
        (built from other math ops) must be used. `arith.divf` is asked too: None keeps LLVM's
        IEEE `fdiv`."""

    def encode_float(self, builder: llir.IRBuilder, value, name: str, rounding: str):
        """The f32 `value` as the storage bits (an integer) of format `name` ("bf16", an fp8 name),
        rounded by `rounding` ("rtne" or "rtz"), by the target's own conversion instruction; None
        keeps the portable integer rounding of `llvm/float_formats.py` (same values; a NaN may come
        out as another NaN code)."""
        return None

    def decode_float(self, builder: llir.IRBuilder, value, name: str):
        """The storage bits `value` (an integer) of format `name` ("bf16", an fp8 name) as an f32, by
        the target's own conversion instruction; None keeps the portable decoding of
        `llvm/float_formats.py` (the same value: decoding is exact)."""
        return None

    def storage_float_arith(self, builder: llir.IRBuilder, op_name: str, args, name: str, contract: bool):
        """`arith.addf` / `subf` / `mulf` of two values of storage format `name` (their bits, as
        integers) by the target's own instruction, the result's bits; None computes in f32 and rounds
        (`encode_float`). `contract`: the op may fuse with its neighbours (fp_fusion)."""
        return None

    def describe(self) -> str:
        return f"{type(self).__name__}({self.arch})"
