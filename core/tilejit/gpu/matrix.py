"""A matrix instruction declared as data, its result layout, and the generic `tt.dot` lowering for it.

A backend whose GPU has a warp-level matrix unit lists a `MatrixInstruction` in its target
description's `matrix_units`: the tile (m, n, k), the element types, and which lane and register of
one warp hold which element of A (m x k), B (k x n) and the result (m x n), as chunks of a linear
layout (`("register" | "lane", dim, bits)`, filled lowest bits first, as `layouts._build`). Nothing
else is needed: `accelerate-matmul` gives a fitting `tt.dot` a `MatrixLayout` (the instruction's
tile repeated over the CTA's warps and over the registers), and `lower_matrix_dot` finds, from the
linear layouts alone, which registers go into each instruction and emits one call per (C tile,
K step) of `intrinsic(A vector, B vector, C vector) -> C vector`. A backend whose instruction wants
its operands otherwise (packed words, extra modifiers) overrides `MatrixInstruction.emit`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import llvmlite.ir as llir

from ..errors import CompilationError
from .isa import I32, call_intrinsic
from .layouts import DistributedEncoding, _build, _ints
from .linear_layout import LinearLayout, log2_exact
from .target import DotSite, MatrixUnit

Chunks = Tuple[Tuple[str, int, int], ...]


def spread_warps(m_tiles: int, n_tiles: int, num_warps: int) -> Tuple[int, int]:
    """The warps over the instruction tiles, M first; more warps than tiles replicate (every
    backend's matrix units share this split)."""
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if m_tiles // wm >= n_tiles // wn and m_tiles // wm > 1:
            wm *= 2
        elif n_tiles // wn > 1:
            wn *= 2
        else:
            wm *= 2
    return wm, wn


@dataclass(frozen=True)
class MatrixInstruction(MatrixUnit):
    """D (m x n, `accumulator`) = A (m x k) * B (k x n) + C for one warp of `warp_size` lanes.

    `result`, `a`, `b`: chunks of the layout of one instruction tile (dims: result 0 = m, 1 = n;
    A 0 = m, 1 = k; B 0 = k, 1 = n); a lane's registers of A and B are the instruction's operand
    vector in register order, its result registers the result vector. `kind` names the layout in
    the TTGIR text (`#ttg.<kind><{instr = <name>, warpsPerCTA = [..]}>`), `intrinsic` the function
    `emit` calls."""
    name: str
    kind: str
    operand: str
    accumulator: str
    m: int
    n: int
    k: int
    warp_size: int
    result: Chunks
    a: Chunks
    b: Chunks
    intrinsic: str

    # -- accelerate-matmul ---------------------------------------------------------------------
    def layout(self, dot: DotSite):
        M, N, K = dot.shape
        if (dot.rank != 2 or dot.a_elem != self.operand or dot.b_elem != self.operand
                or dot.out_elem != self.accumulator or dot.warp_size != self.warp_size
                or M % self.m or N % self.n or K % self.k):
            return None
        return MatrixLayout(self, spread_warps(M // self.m, N // self.n, dot.num_warps))

    # -- what one instruction reads and writes -------------------------------------------------
    def tile_offsets(self, which: str) -> List[Tuple[int, int]]:
        """Per register of lane 0, its element's offset in the instruction's tile of `which`
        (result, a, b): the order of the instruction's vector."""
        shape = {"result": (self.m, self.n), "a": (self.m, self.k), "b": (self.k, self.n)}[which]
        tile = _build(shape, list(getattr(self, which)))
        return tile.register_offsets()

    # -- lowering ------------------------------------------------------------------------------
    def emit(self, builder: llir.IRBuilder, a: List, b: List, c: List) -> List:
        """One instruction: the lane's A, B and C registers (in `tile_offsets` order) -> D's."""
        op_ty = llir.VectorType(a[0].type, len(a))
        acc_ty = llir.VectorType(c[0].type, len(c))
        d = call_intrinsic(builder, self.intrinsic, acc_ty,
                           [_vector(builder, a, op_ty), _vector(builder, b, op_ty), _vector(builder, c, acc_ty)])
        return [builder.extract_element(d, llir.Constant(I32, i)) for i in range(len(c))]


def _vector(builder, values, ty):
    packed = llir.Constant(ty, None)
    for j, v in enumerate(values):
        packed = builder.insert_element(packed, v, llir.Constant(I32, j))
    return packed


def _warp_chunks(warps_per_cta, m_dim, n_dim):
    # Low warp bits along N: warp = wm * warpsPerCTA[1] + wn.
    return [("warp", n_dim, log2_exact(warps_per_cta[1])), ("warp", m_dim, log2_exact(warps_per_cta[0]))]


@dataclass(frozen=True)
class MatrixLayout(DistributedEncoding):
    """The result of `instr` tiled over the CTA: `warps_per_cta` instruction tiles side by side, the
    rest of the tensor in more registers."""
    instr: MatrixInstruction
    warps_per_cta: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "warps_per_cta", tuple(int(v) for v in self.warps_per_cta))

    @property
    def rank(self) -> int:
        return 2

    def to_linear(self, shape) -> LinearLayout:
        return _build(shape, list(self.instr.result) + _warp_chunks(self.warps_per_cta, 0, 1))

    def operand_linear(self, op_idx: int, shape) -> LinearLayout:
        """Operand `op_idx` (0 = A, shared by the warps along N; 1 = B, shared along M)."""
        wm, wn = (log2_exact(w) for w in self.warps_per_cta)
        if op_idx == 0:
            return _build(shape, list(self.instr.a) + [("warp", None, wn), ("warp", 0, wm)])
        return _build(shape, list(self.instr.b) + [("warp", 1, wn), ("warp", None, wm)])

    def __str__(self) -> str:
        return f"#ttg.{self.instr.kind}<{{instr = {self.instr.name}, warpsPerCTA = {_ints(self.warps_per_cta)}}}>"


def matrix_layout_kinds(instructions) -> Dict[str, object]:
    """The layout kinds to declare (`encoding_kinds`) for a backend's matrix instructions."""
    by_kind: Dict[str, Dict[str, MatrixInstruction]] = {}
    for instr in instructions:
        by_kind.setdefault(instr.kind, {})[instr.name] = instr

    def make(table):
        def build(fields):
            if fields["instr"] not in table:
                raise CompilationError(f"unknown matrix instruction '{fields['instr']}'")
            return MatrixLayout(table[fields["instr"]], fields["warpsPerCTA"])
        return build
    return {kind: make(table) for kind, table in by_kind.items()}


def matrix_dot_plan(instr: MatrixInstruction, a: LinearLayout, b: LinearLayout, c: LinearLayout):
    """[(C registers, [(A registers, B registers) per K step])] for every C tile a thread holds, each
    list in the instruction's vector order. Registers are found by their lane-independent
    coordinates: a tile's origin is a register offset that is a multiple of the tile."""
    a_at, b_at, c_at = ({off: r for r, off in enumerate(x.register_offsets())} for x in (a, b, c))
    res_off, a_off, b_off = (instr.tile_offsets(w) for w in ("result", "a", "b"))
    k_tiles = sorted({k for (m, k) in a_at if m % instr.m == 0 and k % instr.k == 0})
    c_tiles = sorted((m, n) for (m, n) in c_at if m % instr.m == 0 and n % instr.n == 0)
    plan = []
    try:
        for m0, n0 in c_tiles:
            result = [c_at[(m0 + dm, n0 + dn)] for dm, dn in res_off]
            steps = [([a_at[(m0 + dm, k0 + dk)] for dm, dk in a_off], [b_at[(k0 + dk, n0 + dn)] for dk, dn in b_off])
                     for k0 in k_tiles]
            plan.append((result, steps))
    except KeyError as missing:
        raise CompilationError(f"internal: the layouts of a dot do not hold element {missing} that "
                               f"{instr.name} needs") from None
    return plan


def lower_matrix_dot(self, op) -> None:
    """A `FunctionLowering` method: `tt.dot` whose result has a `MatrixLayout`."""
    a, b, c = op.operand("a"), op.operand("b"), op.operand("c")
    instr = op.result.type.encoding.instr
    plan = matrix_dot_plan(instr, self.layout(a.type), self.layout(b.type), self.layout(op.result.type))
    a_vals, b_vals, c_vals = self.get(a), self.get(b), self.get(c)
    out = list(c_vals)
    for result_regs, steps in plan:
        acc = [c_vals[r] for r in result_regs]
        for a_regs, b_regs in steps:
            acc = instr.emit(self.b, [a_vals[r] for r in a_regs], [b_vals[r] for r in b_regs], acc)
        for r, v in zip(result_regs, acc):
            out[r] = v
    self.set(op.result, out)

