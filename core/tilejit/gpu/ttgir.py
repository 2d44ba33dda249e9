"""TTIR -> TTGIR: give every tensor a layout (encoding), as Triton's ConvertTritonToTritonGPU,
Coalesce, AccelerateMatmul and RemoveLayoutConversions passes do together.

The passes, in order: each is a pass of its own (a `name` and an `apply(module)`), run by the
`PassManager`, which verifies and dumps the IR after each (`TILEJIT_DUMP_DIR`); what one pass
passes to the next is in the IR (`layout_passes.py`):
0. `triton-combine-dot-add` (`combine_dot_add.py`): `dot(a, b, 0) + d` becomes `dot(a, b, d)`, as
   Triton's combine patterns (the matrix unit accumulates in place; a loop's wgmma stays in flight).
   `tritongpu-split-f32-dots` (`f32_dot_split.py`): fp32 dots at tf32x3 / bf16x3 / bf16x6 become
   Triton's chains of tf32 / bf16 dots (F32DotTC).
   `tritongpu-rewrite-tensor-pointers` (`tensor_pointers.py`): block pointers and tensor descriptors
   become tensors of pointers with masks.
   `tritongpu-transpose-loads` (`transpose_loads.py`): `tl.trans(tl.load(...))` feeding a dot loads
   through transposed pointers instead, so the dot (and the pipeline) sees the load directly.
1. `tritongpu-coalesce-anchors`: the axis analysis gives each global load, store and atomic its own
   blocked layout (its most contiguous dim first, `sizePerThread` = the proven vector width), so each
   access is 128-bit where its data allows (attention's K, read transposed, runs along dim 0 while V
   runs along dim 1); the widest access of each rank also gives the default layout of that rank.
   A load with no contiguity in any dim (a gather) gets no layout of its own: it takes its users'.
2. `tritongpu-accelerate-matmul`: each `tt.dot` gets the result layout of the first of the target's
   `matrix_units` (`target.py`; the backend's policy, e.g. wgmma then mma.sync on sm_90) that
   accepts it, else the blocked layout (FMA dot); loop-carried accumulators keep that layout across
   iterations.
   Then the dot layouts flow forward (`tritongpu-propagate-dot-layouts`, as Triton's
   RemoveLayoutConversions): elementwise ops, reductions, expand_dims/broadcast and loop-carried
   values fed by a dot result whose layout `keeps_in_registers` keep it (or its slice), so
   attention's softmax runs on the accumulator registers instead of converting every tile through
   shared memory.
3. `tritongpu-assign-layouts`: a backward walk gives each value the layout its users want
   (expand_dims wants a slice of its result's layout, broadcast the same layout, elementwise ops
   propagate), so index tensors are born in the right layout; then a forward walk writes the
   encodings into the types and inserts `ttg.convert_layout` wherever a use still disagrees
   (reduction results are slices, dot operands are dot-operand layouts).
4. `tritongpu-rematerialize-indices` (`rematerialize.py`): conversions of cheap index arithmetic
   become a second computation in the wanted layout.
5. `tritongpu-hoist-conversions` (`hoist.py`): loop-invariant conversions leave their loops.
6. `cse`: identical conversions (one value converted into the same layout where each of two users
   asked for it: fla's b_v as operand B of two dots) become one, so each is lowered once.
A backend builds its list from `ttgir_passes(cfg)` in `add_stages` and may add its own (NVIDIA:
`tritongpu-pipeline`, multi-buffered cp.async for the loads that feed its dots).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from .. import ir
from ..errors import CompilationError
from ..passes.base import PassManager
from ..passes.cse import CSE
from .combine_dot_add import CombineDotAdd
from .f32_dot_split import SplitF32Dots
from .layout_passes import AccelerateMatmul, AssignLayouts, CoalesceAnchors, PropagateDotLayouts, default_blocked
from .hoist import hoist_invariant_conversions
from .rematerialize import rematerialize_indices
from .target import TargetDescription
from .tensor_pointers import rewrite_tensor_pointers
from .transpose_loads import transpose_loads

__all__ = ["GPUConfig", "check_num_warps", "make_ttgir", "ttgir_passes", "default_blocked"]

# The TTGIR dumps are numbered from here, after the TTIR passes' (00-input, 01-..).
FIRST_DUMP_INDEX = 50


@dataclass(frozen=True)
class GPUConfig:
    """One compilation's view of the target: its description (`target.py`) and the CTA's warps."""
    num_warps: int
    target: TargetDescription

    @property
    def warp_size(self) -> int:
        return self.target.warp_size


@dataclass(frozen=True)
class RewriteTensorPointers:
    name: str = "tritongpu-rewrite-tensor-pointers"

    def apply(self, module: ir.Module) -> None:
        rewrite_tensor_pointers(module)


@dataclass(frozen=True)
class TransposeLoads:
    name: str = "tritongpu-transpose-loads"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            transpose_loads(func)


@dataclass(frozen=True)
class RematerializeIndices:
    name: str = "tritongpu-rematerialize-indices"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            rematerialize_indices(func)


@dataclass(frozen=True)
class HoistConversions:
    name: str = "tritongpu-hoist-conversions"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            hoist_invariant_conversions(func)


def ttgir_passes(cfg: GPUConfig) -> List:
    """The target-neutral TTGIR passes, in order; a backend adds its own in `add_stages`."""
    return [CombineDotAdd(), SplitF32Dots(), RewriteTensorPointers(), TransposeLoads(), CoalesceAnchors(cfg), AccelerateMatmul(cfg), PropagateDotLayouts(cfg),
            AssignLayouts(cfg), RematerializeIndices(), HoistConversions(), CSE()]


def check_num_warps(num_warps: int, target: TargetDescription) -> None:
    """num_warps is a power of two and the CTA fits the target (1024 threads)."""
    if num_warps < 1 or num_warps & (num_warps - 1) or num_warps > target.max_num_warps:
        raise CompilationError(f"option num_warps={num_warps} is invalid for {target.describe()}: it must be a "
                               f"power of two no larger than {target.max_num_warps}")


def make_ttgir(module: ir.Module, cfg: GPUConfig, passes=None) -> ir.Module:
    """Run the TTGIR passes (`ttgir_passes(cfg)` unless given) on `module` in place and return it."""
    check_num_warps(cfg.num_warps, cfg.target)
    if cfg.warp_size & (cfg.warp_size - 1):
        raise CompilationError(f"the warp size must be a power of two, got {cfg.warp_size}")
    PassManager(ttgir_passes(cfg) if passes is None else passes, dump_ext="ttgir",
                first_index=FIRST_DUMP_INDEX).run(module)
    ir.verify(module)
    return module
