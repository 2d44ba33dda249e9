"""`tt.dot` (a method of `FunctionLowering`): the target's own lowering for its matrix layouts
(`TargetDescription.dot_lowerings`), the generic one for declared matrix instructions (matrix.py),
else FMA for any layout.

They read operands by coordinates: a register's offset (its coordinates minus the thread's lane and
warp part) names the element, and the dot-operand layouts guarantee that the A rows and B columns a
thread needs for its C elements are in its own registers.
"""
from __future__ import annotations


from ... import ir
from ...errors import CompilationError
from ..isa import call_intrinsic
from ..matrix import MatrixLayout, lower_matrix_dot
from .scalar_ops import to_compute


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
    out = []
    for r, off in enumerate(self.layout(out_t).register_offsets()):
        batch, (m, n) = tuple(off[:-2]), off[-2:]
        acc = to_compute(self.b, c_vals[r], out_t)
        for k in range(K):
            try:
                x, y = a_vals[a_at[batch + (m, k)]], b_vals[b_at[batch + (k, n)]]
            except KeyError:
                raise CompilationError.at(op.loc, "internal: dot operand layout does not hold the needed elements") from None
            if is_int:
                acc = self.b.add(acc, self.b.mul(self.b.sext(x, acc.type) if x.type != acc.type else x,
                                                 self.b.sext(y, acc.type) if y.type != acc.type else y))
                continue
            x, y = to_compute(self.b, x, a.type), to_compute(self.b, y, b.type)
            if _width(x.type) > _width(acc.type):
                # fp8 operands decode to f32; with an f16 accumulator they narrow back exactly (every
                # fp8 value is an f16 value). Wider operands than the accumulator never reach here:
                # the language gives fp64 operands an fp64 accumulator.
                if max(ir.element_type(a.type).width, ir.element_type(b.type).width) > _width(acc.type):
                    raise CompilationError.at(op.loc, f"tt.dot: {ir.element_type(a.type)} operands need an "
                                                      f"accumulator at least as wide, got {acc.type}")
                x, y = self.b.fptrunc(x, acc.type), self.b.fptrunc(y, acc.type)
            elif x.type != acc.type:
                x, y = self.b.fpext(x, acc.type), self.b.fpext(y, acc.type)
            acc = call_intrinsic(self.b, f"llvm.fma.{_suffix(acc.type)}", acc.type, [x, y, acc])
        from .scalar_ops import from_compute
        out.append(from_compute(self.b, acc, out_t))
    self.set(op.result, out)


def _width(t):
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}.get(str(t), 0)


def _suffix(t):
    return {"float": "f32", "double": "f64", "half": "f16"}[str(t)]
