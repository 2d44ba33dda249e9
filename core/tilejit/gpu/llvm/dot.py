"""`tt.dot` (a method of `FunctionLowering`): the target's own lowering for its matrix layouts
(`TargetDescription.dot_lowerings`), the generic one for declared matrix instructions (matrix.py),
else FMA for any layout.

They read operands by coordinates: a register's offset (its coordinates minus the thread's lane and
warp part) names the element, and the dot-operand layouts guarantee that the A rows and B columns a
thread needs for its C elements are in its own registers.
"""
from __future__ import annotations

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from ..isa import F32, call_intrinsic
from ..matrix import MatrixLayout, lower_matrix_dot
from .scalar_ops import from_compute, to_compute

F16 = llir.HalfType()


def lower_dot(self, op):
    enc = op.result.type.encoding
    lowerings = self.isa.dot_lowerings
    for cls in type(enc).__mro__:   # the target's own matrix layouts lower through its own function
        if cls in lowerings:
            return lowerings[cls](self, op)
    if isinstance(enc, MatrixLayout):   # a matrix instruction the target declared as data
        return lower_matrix_dot(self, op)
    return _lower_fma(self, op)


def _offsets(self, v):
    return {off: i for i, off in enumerate(self.layout(v.type).register_offsets())}


def _lower_fma(self, op):
    a, b, c = op.operands
    K = a.type.shape[-1]
    a_vals, b_vals, c_vals = self.get(a), self.get(b), self.get(c)
    a_at, b_at = _offsets(self, a), _offsets(self, b)
    out_t = op.result.type
    is_int = isinstance(ir.element_type(out_t), ir.IntType)
    # An f16 accumulator sums its products in f32 and is rounded to f16 once per k-step of the
    # target's matrix instructions (or once at the end): the numerics of Triton's mma dots with
    # out_dtype=float16. An f16 FMA per product would round K times and lose ~log2(K) bits.
    f16_step = None
    if str(ir.element_type(out_t)) == "f16":
        f16_step = min(K, self.isa.f16_accumulator_k_step(ir.element_type(a.type).width) or K)
    # Each operand register is decoded (bf16/fp8 -> f32) and widened once, before its first use, not
    # once per product: an fp8 decode is ~20 instructions, and LLVM's codegen time grows with them.
    decoded_a, decoded_b = {}, {}
    out = []
    for r, off in enumerate(self.layout(out_t).register_offsets()):
        batch, (m, n) = tuple(off[:-2]), off[-2:]
        acc = to_compute(self.b, c_vals[r], out_t, self.isa)
        if f16_step:
            acc = self.b.fpext(acc, F32)
        for k in range(K):
            if f16_step and k and k % f16_step == 0:
                acc = self.b.fpext(self.b.fptrunc(acc, F16), F32)
            try:
                x, y = a_vals[a_at[batch + (m, k)]], b_vals[b_at[batch + (k, n)]]
            except KeyError:
                raise CompilationError.at(op.loc, "internal: dot operand layout does not hold the needed elements") from None
            if is_int:
                acc = self.b.add(acc, self.b.mul(self.b.sext(x, acc.type) if x.type != acc.type else x,
                                                 self.b.sext(y, acc.type) if y.type != acc.type else y))
                continue
            x = _widened(self, op, decoded_a, a_at[batch + (m, k)], x, a.type, acc.type)
            y = _widened(self, op, decoded_b, b_at[batch + (k, n)], y, b.type, acc.type)
            acc = call_intrinsic(self.b, f"llvm.fma.{_suffix(acc.type)}", acc.type, [x, y, acc])
        if f16_step:
            acc = self.b.fptrunc(acc, F16)
        out.append(from_compute(self.b, acc, out_t))
    self.set(op.result, out)


def _widened(self, op, cache, index, value, operand_type, acc_type):
    """Operand register `index` as an `acc_type` value, computed at its first use."""
    got = cache.get(index)
    if got is None:
        got = to_compute(self.b, value, operand_type, self.isa)
        if _width(got.type) > _width(acc_type):   # the language gives fp64 operands an fp64 accumulator
            raise CompilationError.at(op.loc, f"tt.dot: {ir.element_type(operand_type)} operands need an "
                                              f"accumulator at least as wide, got {acc_type}")
        if got.type != acc_type:
            got = self.b.fpext(got, acc_type)
        cache[index] = got
    return got


def _width(t):
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}.get(str(t), 0)


def _suffix(t):
    return {"float": "f32", "double": "f64", "half": "f16"}[str(t)]
