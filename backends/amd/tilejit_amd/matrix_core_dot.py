"""`tt.dot` on AMD matrix cores: MFMA (CDNA) and WMMA (RDNA3/4), see `matrix_cores.py`.

The work is split in two so that the data movement can be checked without a GPU:
- `matrix_core_plan` decides, from the three linear layouts alone, which registers of A, B and C go
  into each instruction, in the order the instruction reads them (pure Python, simulated by
  `tests/amd/test_amd_matrix_cores.py` against a model of the instruction's lane semantics);
- `lower_amd_dot` emits one intrinsic call per (C tile, K step) of that plan.
Registers are found by their lane-independent coordinates (`register_offsets`), as in the core's
`gpu/llvm/dot.py`. `AmdISA.dot_lowerings` hands `lower_amd_dot` to the core's `tt.dot` lowering.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import llvmlite.ir as llir

from tilejit import ir
from tilejit.errors import CompilationError
from tilejit.gpu.isa import F32, I32, call_intrinsic
from tilejit.gpu.linear_layout import LinearLayout
from tilejit.gpu.llvm.scalar_ops import to_compute

from .matrix_cores import FP8_AS_F16, MatrixInstr, instruction_operand

Step = Tuple[List[int], List[int]]   # (A registers, B registers) read by one instruction


def _index(layout: LinearLayout) -> Dict[tuple, int]:
    return {off: r for r, off in enumerate(layout.register_offsets())}


def matrix_core_plan(instr: MatrixInstr, a: LinearLayout, b: LinearLayout, c: LinearLayout
                     ) -> List[Tuple[List[int], List[Step]]]:
    """[(C registers in the instruction's result order, [K steps])] for every C tile a thread holds.

    A tile's origin is a register offset that is a multiple of the instruction's shape; inside it,
    element j of a lane's A operand is A[m0][k0 + j] and element j of B is B[k0 + j][n0] (the lane's
    own part of the coordinates comes from the lane bits, shared by all three layouts)."""
    a_at, b_at, c_at = _index(a), _index(b), _index(c)
    k_tiles = sorted({k for (m, k) in a_at if m % instr.m == 0 and k % instr.k == 0})
    c_tiles = sorted((m, n) for (m, n) in c_at if m % instr.m == 0 and n % instr.n == 0)
    plan = []
    try:
        for m0, n0 in c_tiles:
            result = [c_at[(m0 + dm, n0 + dn)] for dm, dn in map(instr.result_offset, range(instr.result_registers))]
            steps = [([a_at[(m0, k0 + j)] for j in range(instr.k_width)],
                      [b_at[(k0 + j, n0)] for j in range(instr.k_width)]) for k0 in k_tiles]
            plan.append((result, steps))
    except KeyError as missing:
        raise CompilationError(f"internal: the matrix-core layouts do not hold element {missing} "
                               f"that {instr.intrinsic} needs") from None
    return plan


def _operand_type(instr: MatrixInstr):
    if instr.operand == "f16":
        return llir.VectorType(llir.HalfType(), instr.k_width)
    if instr.operand == "bf16":   # bf16 travels as i16 bits, as LLVM's intrinsics declare it
        return llir.VectorType(llir.IntType(16), instr.k_width)
    return llir.IntType(8 * instr.k_width)   # i8: 4 or 8 bytes packed in one integer


def _accumulator_type(instr: MatrixInstr):
    return llir.VectorType(F32 if instr.accumulator == "f32" else I32, instr.result_registers)


def _pack(builder, values, ty):
    if isinstance(ty, llir.IntType):   # bytes, lowest k in the lowest byte
        vec = llir.VectorType(llir.IntType(8), len(values))
        return builder.bitcast(_pack(builder, values, vec), ty)
    packed = llir.Constant(ty, None)
    for j, v in enumerate(values):
        packed = builder.insert_element(packed, v, llir.Constant(I32, j))
    return packed


def _intrinsic_name(instr: MatrixInstr, op_ty, acc_ty) -> str:
    if instr.kind == "mfma":
        return instr.intrinsic
    # WMMA intrinsics are overloaded on the accumulator and operand vector types.
    def suffix(t):
        elem = t.element
        name = "f16" if isinstance(elem, llir.HalfType) else ("f32" if elem == F32 else f"i{elem.width}")
        return f"v{t.count}{name}"
    return f"{instr.intrinsic}.{suffix(acc_ty)}.{suffix(op_ty)}"


def _as_f16(self, v):
    """The registers of dot operand `v`; fp8 ones upcast to f16 (exact), each once."""
    vals = self.get(v)
    elem = ir.element_type(v.type)
    if str(elem) not in FP8_AS_F16:
        return vals
    return [self.b.fptrunc(to_compute(self.b, x, v.type), llir.HalfType()) for x in vals]


def lower_amd_dot(self, op):
    """A `FunctionLowering` method: `tt.dot` whose result has an AMD MFMA/WMMA layout."""
    a, b, c = op.operands
    enc = op.result.type.encoding
    instr = enc.instruction(instruction_operand(str(ir.element_type(a.type))))
    if self.isa.arch not in instr.archs:
        raise CompilationError.at(op.loc, f"{instr.intrinsic} does not exist on {self.isa.arch}")
    plan = matrix_core_plan(instr, self.layout(a.type), self.layout(b.type), self.layout(op.result.type))
    a_vals, b_vals, c_vals = _as_f16(self, a), _as_f16(self, b), self.get(c)
    op_ty, acc_ty = _operand_type(instr), _accumulator_type(instr)
    name = _intrinsic_name(instr, op_ty, acc_ty)
    # MFMA's last three operands (cbsz, abid, blgp) broadcast between blocks: unused, zero.
    modifiers = [llir.Constant(I32, 0)] * 3 if instr.kind == "mfma" else []
    out = list(c_vals)
    for result_regs, steps in plan:
        acc = _pack(self.b, [c_vals[r] for r in result_regs], acc_ty)
        for a_regs, b_regs in steps:
            a_op = _pack(self.b, [a_vals[r] for r in a_regs], op_ty)
            b_op = _pack(self.b, [b_vals[r] for r in b_regs], op_ty)
            acc = call_intrinsic(self.b, name, acc_ty, [a_op, b_op, acc] + modifiers)
        for i, r in enumerate(result_regs):
            out[r] = self.b.extract_element(acc, llir.Constant(I32, i))
    self.set(op.result, out)
