"""The NVIDIA part of the TTGIR -> LLVM lowering, mixed into the core's `FunctionLowering`
(`NvidiaISA.lowering_mixin`): loops marked by `tritongpu-pipeline` become cp.async ring buffers read
with ldmatrix or by wgmma descriptors (`shared_dot.py`, `wgmma.py`), and conversions into mma.sync
operand layouts go through swizzled shared memory and ldmatrix."""
from __future__ import annotations

from . import shared_dot
from .pipeline import NUM_STAGES


class NvidiaLowering:
    """Hooks of `FunctionLowering` (core `gpu/llvm/lowering.py`) that the NVIDIA backend fills."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.wgmma_operands = {}      # dot operands left in shared memory (wgmma.py)
        self.wgmma_in_flight = set()  # ids of wgmma dots that wait down to one group (shared_dot.py)

    def lower_pipelined_for(self, op) -> bool:
        return bool(op.attrs.get(NUM_STAGES)) and shared_dot.lower_pipelined_for(self, op)

    dot_operand_plan = shared_dot.dot_operand_plan
    convert_to_dot_operand = shared_dot.convert_to_dot_operand
