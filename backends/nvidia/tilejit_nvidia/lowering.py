"""The NVIDIA part of the TTGIR -> LLVM lowering, mixed into the core's `FunctionLowering`
(`NvidiaISA.lowering_mixin`): loops marked by `tritongpu-pipeline` become cp.async ring buffers read
with ldmatrix or by wgmma descriptors (`shared_dot.py`, `wgmma.py`), conversions into mma.sync
operand layouts go through swizzled shared memory and ldmatrix, and register operands of wgmma dots
(outside loops; in a loop, a B computed there) are staged into shared memory where they are computed
(`wgmma.stage_operand`)."""
from __future__ import annotations

from tilejit import ir

from . import shared_dot
from .barriers import drop_unneeded_barriers
from .matrix_units import computed_in, in_loop, untransposed
from .pipeline import NUM_STAGES


class NvidiaLowering:
    """Hooks of `FunctionLowering` (core `gpu/llvm/lowering.py`) that the NVIDIA backend fills."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.wgmma_operands = {}      # dot operands left in shared memory (wgmma.py)
        self.wgmma_in_flight = []     # ids of the wgmma dots a pipelined loop keeps in flight, in order (shared_dot.py)
        self.wgmma_unwaited = []      # those of them lowered this iteration, not yet waited for (wgmma.py)
        self.staged_operands = {}     # wgmma operands staged from registers (wgmma.stage_operand)
        self.staged_regions = []      # [scratch offset before it, dots still to read it, its start] per staged tile
        self.staged_sources = {}      # id(value) -> (its WgmmaTile, its region)
        self._stageable_memo = {}     # id(convert) -> whether it is staged

    def lower(self):
        fn = super().lower()
        drop_unneeded_barriers(fn, self.shared_spans)
        return fn

    def lower_pipelined_for(self, op) -> bool:
        return bool(op.attrs.get(NUM_STAGES)) and shared_dot.lower_pipelined_for(self, op)

    def lower_op(self, op):
        super().lower_op(op)
        # A tile that becomes an operand of wgmma dots is staged into shared memory as soon as it is
        # computed (as Triton's local_alloc right after the load), so that its registers die there
        # instead of living until the dot (fla's b_q and b_k across the scaling of dq and dk).
        for result in op.results:
            for user, _ in result.uses:
                if user.name == "ttg.convert_layout" and user.parent is op.parent:
                    self._stage(user)

    def lower_convert(self, op):
        if not self._stage(op):
            super().lower_convert(op)

    def _stage(self, convert) -> bool:
        """Stage `convert`'s source for its wgmma dots (`wgmma.stage_operand`), once; False when it
        is not such a conversion. A source staged already for other conversions (fla's b_do, A of
        two dots of different N; b_v, A of one dot and, transposed, B of another) is read from the
        same tile, its region kept until all their dots are done."""
        from .wgmma import WgmmaOperand, stage_operand
        if id(convert.result) in self.staged_operands:
            return True
        if not self._stageable(convert):
            return False
        value, transposed = untransposed(convert.operands[0], convert.parent)
        readers = len(convert.result.uses)
        inner = _required_inner(convert, transposed)
        staged = self.staged_sources.get(id(value))
        if (staged is not None and any(region is staged[1] for region in self.staged_regions)
                and inner in (None, staged[0].inner)):
            staged[1][1] += readers
        else:
            staged = stage_operand(self, value, readers, inner)
            self.staged_sources[id(value)] = staged
        tile = staged[0].transposed() if transposed else staged[0]
        self.staged_operands[id(convert.result)] = WgmmaOperand(tile, staged[1][2], convert.result.type.encoding.op_idx)
        return True

    def unstage(self, value, operand) -> None:
        """Convert a staged operand into its registers after all (its dot runs on mma.sync)."""
        from .wgmma import release_staged
        super().lower_convert(value.owner)
        release_staged(self, operand)

    def _stageable(self, convert) -> bool:
        # asked for every conversion twice (where its source is computed, where it stands) and for
        # B again from each A: decided once
        known = self._stageable_memo.get(id(convert))
        if known is None:
            known = self._stageable_memo[id(convert)] = self._decide_stageable(convert)
        return known

    def _decide_stageable(self, convert) -> bool:
        """A conversion into operand B of version-3 (wgmma) dots of its block, all its uses such, whose
        source fits a wgmma tile; or into operand A of such dots whose B is staged, when the
        conversion is not a permutation of each thread's registers (attention's P stays in them).
        In a loop, only B, and only when computed there (`matrix_units.computed_in`)."""
        from tilejit.gpu.layouts import DotOperandEncoding

        from .layouts import NvidiaMmaEncoding
        from .wgmma import staged_tile
        enc = convert.result.type.encoding
        if not (isinstance(enc, DotOperandEncoding) and isinstance(enc.parent, NvidiaMmaEncoding)
                and enc.parent.version_major == 3):
            return False
        if in_loop(convert) and not (enc.op_idx == 1 and computed_in(convert.operands[0], convert.parent)):
            # In a loop, only a B computed in registers there is staged (every iteration, as Triton:
            # fla's delta-rule state, 244 registers on mma.sync, 182 on wgmma with A by descriptor).
            # Loaded tiles the pipeline did not leave in shared memory keep the register paths
            # (mma.sync, or wgmma with the A fragment): staged every iteration, bench/gpu.py's
            # 3000x2000x1500 matmul (A's rows unaligned) spilled 88 bytes, and without any alignment
            # hint (compile_speed.py's matmul) 226 instead of 88.
            return False
        uses = convert.result.uses
        if not uses or not all(user.name == "tt.dot" and index == enc.op_idx and user.parent is convert.parent
                               and user.result.type.encoding == enc.parent for user, index in uses):
            return False
        value, transposed = untransposed(convert.operands[0], convert.parent)
        inner = _required_inner(convert, transposed)
        if staged_tile(self, convert.operands[0] if inner is None else value, inner) is None:
            return False
        if enc.op_idx == 1:
            return True
        src, dst = self.layout(convert.operands[0].type), self.layout(convert.result.type)
        if src.lanes == dst.lanes and src.warps == dst.warps and not _fp8(convert):
            return False   # (an fp8 A is read from shared memory: this lowering has no register form)
        b_converts = [user.operands[1].owner for user, _ in uses]
        return all(getattr(b, "name", None) == "ttg.convert_layout" and self._stageable(b) for b in b_converts)

    dot_operand_plan = shared_dot.dot_operand_plan
    convert_to_dot_operand = shared_dot.convert_to_dot_operand


def _fp8(convert) -> bool:
    from .matrix_units import FP8
    return str(ir.element_type(convert.result.type)) in FP8


def _required_inner(convert, transposed: bool):
    """The contiguous dim the staged tile of an operand must have (of the tile its `tl.trans` reads
    when `transposed`): K for fp8, which wgmma reads K-major only, and for a B whose dots'
    warpgroups split N into column blocks narrower than a 128-byte slab
    (`matrix_units.Wgmma._warps`); else None (any)."""
    enc = convert.result.type.encoding
    if _fp8(convert):
        k_dim = 1 if enc.op_idx == 0 else 0
        return 1 - k_dim if transposed else k_dim
    warps_n = enc.parent.warps_per_cta[1]
    if enc.op_idx != 1 or warps_n == 1 or (convert.result.type.shape[1] // warps_n) % 64 == 0:
        return None
    return 1 if transposed else 0
