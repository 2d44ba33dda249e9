"""The NVIDIA matrix layout `#ttg.nvidia_mma` (Triton's spelling): the accumulator of mma.sync
(version 2) and wgmma (version 3), and where its dot operands live (`operand_linear`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from tilejit.gpu.layouts import DistributedEncoding, _build, _ints
from tilejit.gpu.linear_layout import LinearLayout, log2_exact


@dataclass(frozen=True)
class NvidiaMmaEncoding(DistributedEncoding):
    """The accumulator of `mma.sync.m16n8k16` (version 2.0: per warp a 16x8 tile, 4 values a thread) or
    of `wgmma.mma_async.m64nNk16` (version 3.0, instrShape [16, N, 16]: per warp 16xN, N/2 values).
    A batched (3-D) mma.sync dot has warpsPerCTA [batch, M, N] and instrShape [1, 16, 8], as Triton's."""
    version_major: int
    version_minor: int
    warps_per_cta: Tuple[int, ...]
    instr_shape: Tuple[int, ...] = (16, 8)
    keeps_in_registers = True
    k_width = 2   # operand elements per 32-bit register

    def __post_init__(self):
        object.__setattr__(self, "warps_per_cta", tuple(int(v) for v in self.warps_per_cta))
        object.__setattr__(self, "instr_shape", tuple(int(v) for v in self.instr_shape))

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)   # 3 for a batched (3-D) mma.sync dot: dim 0 is the batch

    def _warp_chunks(self, m_dim, n_dim):
        """The warps of the result (or of operand A with `n_dim` None, B with `m_dim` None: an operand
        is shared by the warps along the other dim). mma.sync numbers its warps along N first;
        wgmma's warpgroups are 4 consecutive warps along M (64 rows), so its warps along M come first
        and the warpgroups along N (8 warps on a 64-row tile, Triton's [4, 2]) after them."""
        along_n = ("warp", n_dim, log2_exact(self.warps_per_cta[-1]))
        along_m = ("warp", m_dim, log2_exact(self.warps_per_cta[-2]))
        chunks = [along_m, along_n] if self.version_major == 3 else [along_n, along_m]
        return chunks + self._batch_warps()

    def _batch_warps(self):
        """A batched dot's warps along the batch (after those along N and M, in every layout of it)."""
        return [("warp", 0, log2_exact(self.warps_per_cta[0]))] if self.rank == 3 else []

    def to_linear(self, shape) -> LinearLayout:
        m, n = self.rank - 2, self.rank - 1
        # c0,c1: row = lane/4, col = 2*(lane%4) + {0,1}; c2,c3: the same 8 rows further down.
        chunks = [("register", n, 1), ("lane", n, 2), ("lane", m, 3), ("register", m, 1)]
        if self.version_major == 3:
            # wgmma m64nNk16 (PTX ISA, "register fragment of the accumulator D"): warp w of a
            # warpgroup owns rows 16w..16w+15, and d[4j..4j+3] is the mma.sync fragment above for
            # columns 8j..8j+7, so the N/8 column blocks come before the warps.
            n_blocks = log2_exact(self.instr_shape[1] // 8, "wgmma instruction N")
            chunks.append(("register", n, n_blocks))
        return _build(shape, chunks + self._warp_chunks(m, n))

    def operand_linear(self, op_idx: int, shape) -> LinearLayout:
        """Operand `op_idx` of a dot with this result layout: the m16n8k16 A (a0..a7) or B (b0..b3)
        fragments, A shared by the warps along N, B by the warps along M (per batch for a 3-D dot)."""
        lead = self.rank - 2
        if op_idx == 0:   # A (M x K)
            m, k = lead, lead + 1
            chunks = [("register", k, 1), ("lane", k, 2), ("lane", m, 3), ("register", m, 1),
                      ("register", k, 1)] + self._warp_chunks(m, None)
        else:             # B (K x N)
            k, n = lead, lead + 1
            chunks = [("register", k, 1), ("lane", k, 2), ("lane", n, 3), ("register", k, 1)]
            if self.version_major == 3 and self.warps_per_cta[-1] > 1:
                # warpgroups split N: each warp's B is its group's N / groups columns, as its result
                chunks.append(("register", n, log2_exact(self.instr_shape[1] // 8, "wgmma instruction N")))
            chunks += self._warp_chunks(None, n)
        return _build(shape, chunks)

    def __str__(self) -> str:
        return (f"#ttg.nvidia_mma<{{versionMajor = {self.version_major}, versionMinor = "
                f"{self.version_minor}, warpsPerCTA = {_ints(self.warps_per_cta)}, instrShape = "
                f"{_ints(self.instr_shape)}}}>")


# The layouts this backend adds to the TTGIR text (`CUDABackend.encoding_kinds`, a dialect context).
ENCODING_KINDS = {
    "nvidia_mma": lambda f: NvidiaMmaEncoding(f["versionMajor"], f["versionMinor"], f["warpsPerCTA"],
                                              f.get("instrShape", [16, 8])),
}
