"""AMD matrix cores for `tt.dot` (the AMD backend's policy; the core only asks `AmdISA.matrix_units`): the MFMA (CDNA) and WMMA (RDNA3/4) instructions tilejit uses, and
the TTGIR encodings of their accumulator and operands.

Which lane holds which element comes from AMD's ISA documents (CDNA3 ISA, "Matrix fused multiply-add
(MFMA)"; RDNA3/RDNA4 ISA, "WMMA"; the AMD matrix instruction calculator), written here as linear
layouts (see `linear_layout.py`), with `M`/`N`/`K` the instruction's tile and `g = wave / N` lane
groups:

- MFMA (wave64), one block: A[m][k] sits in lane `m + M*(k // kw)`, element `k % kw`; B[k][n] in lane
  `n + N*(k // kw)`, element `k % kw` (`kw` = k_width, elements a lane gives: 4 for f16/bf16, 8 for
  i8 on gfx942); D[m][n] in lane `n + N*((m // 4) % g)`, register `m % 4 + 4*(m // (4*g))`.
- WMMA v1 (gfx11, wave32): lane `l` holds row `l % 16` of A (all 16 k, lanes 16-31 repeat lanes
  0-15), column `l % 16` of B likewise; D[m][n] in lane `n + 16*(m % 2)`, register `m // 2`.
- WMMA v2 (gfx12, wave32): A[m][k] in lane `m + 16*(k // 8)`, element `k % 8` (B likewise);
  D[m][n] in lane `n + 16*(m // 8)`, register `m % 8`.

The encodings print as Triton's `#ttg.amd_mfma<...>` / `#ttg.amd_wmma<...>` (with the operands'
`kWidth` kept on the parent, since the instruction depends on it) and parse back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from tilejit.gpu.layouts import DistributedEncoding, _build, _ints
from tilejit.gpu.linear_layout import LinearLayout, log2_exact
from tilejit.gpu.matrix import spread_warps
from tilejit.gpu.target import DotSite, MatrixUnit

CDNA = ("gfx90a", "gfx942", "gfx950")
CDNA3_UP = ("gfx942", "gfx950")


@dataclass(frozen=True)
class MatrixInstr:
    """One matrix-core instruction: D(MxN) = A(MxK) * B(KxN) + C for one wave."""
    kind: str          # "mfma", "wmma1" (gfx11) or "wmma2" (gfx12)
    operand: str       # IR element type of A and B: f16, bf16, i8
    m: int
    n: int
    k: int
    k_width: int       # A/B elements one lane supplies
    intrinsic: str     # LLVM intrinsic (WMMA names get their overload suffix in `llvm_name`)
    archs: Tuple[str, ...]

    @property
    def wave_size(self) -> int:
        return 64 if self.kind == "mfma" else 32

    @property
    def accumulator(self) -> str:
        return "i32" if self.operand == "i8" else "f32"

    @property
    def result_registers(self) -> int:
        return self.m * self.n // self.wave_size

    def result_offset(self, r: int) -> Tuple[int, int]:
        """(row, col) inside the instruction's tile of result register `r` in lane 0 (ISA tables)."""
        if self.kind == "mfma":
            groups = self.wave_size // self.n
            return (r % 4 + 4 * groups * (r // 4), 0)
        if self.kind == "wmma1":
            return (2 * r, 0)
        return (r, 0)


INSTRUCTIONS = (
    MatrixInstr("mfma", "f16", 32, 32, 8, 4, "llvm.amdgcn.mfma.f32.32x32x8f16", CDNA),
    MatrixInstr("mfma", "f16", 16, 16, 16, 4, "llvm.amdgcn.mfma.f32.16x16x16f16", CDNA),
    MatrixInstr("mfma", "bf16", 32, 32, 8, 4, "llvm.amdgcn.mfma.f32.32x32x8bf16.1k", CDNA),
    MatrixInstr("mfma", "bf16", 16, 16, 16, 4, "llvm.amdgcn.mfma.f32.16x16x16bf16.1k", CDNA),
    # LLVM 22 selects the i8 MFMA of each generation only on that generation (32x32x8i8 packs 4
    # bytes in an i32 on gfx90a; gfx942 replaced it by 32x32x16 with 8 bytes in an i64).
    MatrixInstr("mfma", "i8", 32, 32, 16, 8, "llvm.amdgcn.mfma.i32.32x32x16.i8", CDNA3_UP),
    MatrixInstr("mfma", "i8", 16, 16, 32, 8, "llvm.amdgcn.mfma.i32.16x16x32.i8", CDNA3_UP),
    MatrixInstr("mfma", "i8", 32, 32, 8, 4, "llvm.amdgcn.mfma.i32.32x32x8i8", ("gfx90a",)),
    MatrixInstr("mfma", "i8", 16, 16, 16, 4, "llvm.amdgcn.mfma.i32.16x16x16i8", ("gfx90a",)),
    MatrixInstr("wmma1", "f16", 16, 16, 16, 16, "llvm.amdgcn.wmma.f32.16x16x16.f16", ("gfx1100",)),
    MatrixInstr("wmma1", "bf16", 16, 16, 16, 16, "llvm.amdgcn.wmma.f32.16x16x16.bf16", ("gfx1100",)),
    MatrixInstr("wmma2", "f16", 16, 16, 16, 8, "llvm.amdgcn.wmma.f32.16x16x16.f16", ("gfx1201",)),
    MatrixInstr("wmma2", "bf16", 16, 16, 16, 8, "llvm.amdgcn.wmma.f32.16x16x16.bf16", ("gfx1201",)),
)


def _warp_chunks(warps_per_cta, m_dim, n_dim):
    # Low warp bits along N, as NvidiaMmaEncoding: warp = wm * warpsPerCTA[1] + wn.
    return [("warp", n_dim, log2_exact(warps_per_cta[1])), ("warp", m_dim, log2_exact(warps_per_cta[0]))]


class AmdMatrixEncoding(DistributedEncoding):
    """Shared by MFMA and WMMA (subclasses give `kind`, `tile`, `warps_per_cta`, `k_width` and the
    chunks of their accumulator and operand layouts)."""

    @property
    def rank(self) -> int:
        return 2

    def instruction(self, operand: str) -> MatrixInstr:
        from tilejit.errors import CompilationError
        for instr in INSTRUCTIONS:
            if (instr.kind, instr.operand, instr.m, instr.n, instr.k_width) == \
                    (self.kind, operand, self.tile[0], self.tile[1], self.k_width):
                return instr
        raise CompilationError(f"no AMD matrix instruction for {operand} operands with layout {self}")

    def to_linear(self, shape) -> LinearLayout:
        return _build(shape, self.accumulator_chunks() + _warp_chunks(self.warps_per_cta, 0, 1))

    def operand_linear(self, op_idx: int, shape) -> LinearLayout:
        """The layout of operand `op_idx` (0 = A, M x K; 1 = B, K x N) of a dot with this result layout."""
        wm, wn = (log2_exact(w) for w in self.warps_per_cta)
        k_dim, mn_dim = (1, 0) if op_idx == 0 else (0, 1)
        chunks = self.operand_chunks(k_dim, mn_dim)
        if op_idx == 0:   # A is shared by the warps along N
            chunks += [("warp", None, wn), ("warp", 0, wm)]
        else:             # B is shared by the warps along M
            chunks += [("warp", 1, wn), ("warp", None, wm)]
        return _build(shape, chunks)


@dataclass(frozen=True)
class AmdMfmaEncoding(AmdMatrixEncoding):
    """The result of a single-block MFMA of tile `instr_shape` (32x32 or 16x16), wave64."""
    version_major: int
    version_minor: int
    warps_per_cta: Tuple[int, ...]
    instr_shape: Tuple[int, ...]
    k_width: int = 4
    kind = "mfma"

    def __post_init__(self):
        object.__setattr__(self, "warps_per_cta", tuple(int(v) for v in self.warps_per_cta))
        object.__setattr__(self, "instr_shape", tuple(int(v) for v in self.instr_shape))

    @property
    def tile(self):
        return self.instr_shape

    def accumulator_chunks(self):
        m, n = self.instr_shape
        groups = log2_exact(64 // n)
        return [("register", 0, 2), ("lane", 1, log2_exact(n)), ("lane", 0, groups),
                ("register", 0, log2_exact(m) - 2 - groups)]

    def operand_chunks(self, k_dim, mn_dim):
        mn = self.instr_shape[0 if mn_dim == 0 else 1]
        return [("register", k_dim, log2_exact(self.k_width)), ("lane", mn_dim, log2_exact(mn)),
                ("lane", k_dim, log2_exact(64 // mn))]

    def __str__(self) -> str:
        return (f"#ttg.amd_mfma<{{versionMajor = {self.version_major}, versionMinor = {self.version_minor}, "
                f"warpsPerCTA = {_ints(self.warps_per_cta)}, instrShape = {_ints(self.instr_shape)}, "
                f"kWidth = {self.k_width}}}>")


@dataclass(frozen=True)
class AmdWmmaEncoding(AmdMatrixEncoding):
    """The result of a 16x16x16 WMMA, wave32: version 1 = RDNA3 (gfx11), 2 = RDNA4 (gfx12)."""
    version: int
    warps_per_cta: Tuple[int, ...]
    k_width: int = 16

    def __post_init__(self):
        object.__setattr__(self, "warps_per_cta", tuple(int(v) for v in self.warps_per_cta))

    @property
    def kind(self) -> str:
        return f"wmma{self.version}"

    tile = (16, 16)

    def accumulator_chunks(self):
        if self.version == 1:   # rows interleaved between the two half-waves
            return [("lane", 1, 4), ("lane", 0, 1), ("register", 0, 3)]
        return [("register", 0, 3), ("lane", 1, 4), ("lane", 0, 1)]

    def operand_chunks(self, k_dim, mn_dim):
        if self.version == 1:   # a lane holds all 16 k; the upper half-wave repeats the lower one
            return [("register", k_dim, 4), ("lane", mn_dim, 4), ("lane", None, 1)]
        return [("register", k_dim, 3), ("lane", mn_dim, 4), ("lane", k_dim, 1)]

    def __str__(self) -> str:
        return (f"#ttg.amd_wmma<{{version = {self.version}, warpsPerCTA = {_ints(self.warps_per_cta)}, "
                f"kWidth = {self.k_width}}}>")


# The layouts this module adds to the TTGIR text form (`AmdISA.encoding_kinds`, a dialect context).
ENCODING_KINDS = {
    "amd_mfma": lambda f: AmdMfmaEncoding(f["versionMajor"], f["versionMinor"], f["warpsPerCTA"], f["instrShape"],
                                          f.get("kWidth", 4)),
    "amd_wmma": lambda f: AmdWmmaEncoding(f["version"], f["warpsPerCTA"], f.get("kWidth", 16)),
}


# OCP fp8 operands (mixed too) run on the f16 instructions, upcast exactly (every e4m3/e5m2 value is
# an f16 value), as Triton 3.9 does on gfx942 (v_mfma_f32_16x16x16_f16 for an e4m3 dot); the
# lowering (`matrix_core_dot`) converts the registers.
FP8_AS_F16 = ("f8E4M3FN", "f8E5M2")


def instruction_operand(elem: str) -> str:
    """The operand type of the instruction that multiplies `elem` operands."""
    return "f16" if elem in FP8_AS_F16 else elem


def select_matrix_core(arch: str, warp_size: int, num_warps: int, a_elem: str, b_elem: str,
                       out_elem: str, shape) -> Optional[AmdMatrixEncoding]:
    """The MFMA/WMMA result layout for a 2-D dot on `arch`, or None when the FMA dot must be used
    (fp32/fp64 inputs, mixed operand types other than two fp8 formats, an accumulator other than
    f32/i32, shapes that are not multiples of an instruction tile)."""
    if a_elem != b_elem and not (a_elem in FP8_AS_F16 and b_elem in FP8_AS_F16):
        return None
    a_elem = instruction_operand(a_elem)
    if len(shape) != 3:
        return None
    M, N, K = shape
    for instr in INSTRUCTIONS:   # larger tiles first
        if (arch not in instr.archs or instr.operand != a_elem or instr.accumulator != out_elem
                or instr.wave_size != warp_size or M % instr.m or N % instr.n or K % instr.k):
            continue
        wm, wn = spread_warps(M // instr.m, N // instr.n, num_warps)
        if instr.kind == "mfma":
            return AmdMfmaEncoding(3 if arch in CDNA3_UP else 2, 0, (wm, wn), (instr.m, instr.n), instr.k_width)
        return AmdWmmaEncoding(1 if instr.kind == "wmma1" else 2, (wm, wn), instr.k_width)
    return None


class AmdMatrixCores(MatrixUnit):
    """The MFMA/WMMA instructions of one gfx arch, as a matrix unit for `accelerate-matmul`."""
    name = "amd-matrix-cores"

    def __init__(self, arch: str):
        self.arch = arch

    def layout(self, dot: DotSite):
        return select_matrix_core(self.arch, dot.warp_size, dot.num_warps, dot.a_elem, dot.b_elem, dot.out_elem,
                                  dot.shape if dot.rank == 2 else ())
