"""fp32 dots at inputPrecision tf32x3, bf16x3, bf16x6 as chains of cheaper dots (Triton's F32DotTC),
before accelerate-matmul so that each partial dot takes a matrix unit where the target has one.

- tf32x3: big = x rounded to tf32 (nearest, ties away: cvt.rna.tf32.f32, here by integer arithmetic),
  small = x - big; acc = small_a @ big_b; acc = big_a @ small_b + acc; NaNs of acc zeroed;
  acc = big_a @ big_b + acc (each a "tf32" dot); result = acc + c.
- bf16x3 / bf16x6: x = hi + mid (+ lo), each part the remainder rounded to nearest even bf16; the
  partial products from the smallest up (bf16x6: mid·mid, lo·hi, hi·lo; both: mid·hi, hi·mid), NaNs
  zeroed, + hi·hi, + c. Products of bf16 values are exact in fp32.
The interpreter computes the same sequence (tilejit_interpreter.numerics.dot_f32); docs/language.md
"fp32 tl.dot: input_precision".
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..ir.types import bf16, f32, i1, i32, with_element

SPLIT_PRECISIONS = ("tf32x3", "bf16x3", "bf16x6")


class _Emitter:
    """Creates ops before `anchor`, in order."""

    def __init__(self, anchor: ir.Operation):
        self.anchor = anchor

    def op(self, name, operands, result_type, attrs=None):
        new = ir.Operation(name, operands, [result_type], attrs or {}, (), self.anchor.loc)
        block = self.anchor.parent
        block.insert(block.ops.index(self.anchor), new)
        return new.results[0]

    def const(self, value, ty):
        return self.op("arith.constant", [], ty, {"value": value})

    def dot(self, a, b, c, precision):
        return self.op("tt.dot", [a, b, c], c.type, {"inputPrecision": precision, "maxNumImpreciseAcc": 0})

    def nan_to_zero(self, x, zero):
        is_nan = self.op("arith.cmpf", [x, x], with_element(x.type, i1), {"predicate": "uno"})
        return self.op("arith.select", [is_nan, zero, x], x.type)

    def round_tf32(self, x):
        """cvt.rna.tf32.f32: add half an ulp of tf32 to the bits and clear the low 13; a NaN is kept
        as it is (inf and overflow to inf come out right from the arithmetic)."""
        ity = with_element(x.type, i32)
        bits = self.op("arith.bitcast", [x], ity)
        bits = self.op("arith.addi", [bits, self.const(0x1000, ity)], ity)
        bits = self.op("arith.andi", [bits, self.const(-0x2000, ity)], ity)   # 0xFFFFE000
        rounded = self.op("arith.bitcast", [bits], x.type)
        is_nan = self.op("arith.cmpf", [x, x], with_element(x.type, i1), {"predicate": "uno"})
        return self.op("arith.select", [is_nan, x, rounded], x.type)

    def split_bf16(self, x, parts):
        out = []
        bty = with_element(x.type, bf16)
        for i in range(parts):
            head = self.op("arith.truncf", [x], bty)
            out.append(head)
            if i != parts - 1:
                x = self.op("arith.subf", [x, self.op("arith.extf", [head], x.type)], x.type)
        return out


def split_f32_dot(op: ir.Operation) -> bool:
    """Rewrite one `tt.dot` if it is an fp32 dot at a split precision; True if rewritten."""
    precision = str(op.attrs.get("inputPrecision", "ieee"))
    a, b, c = op.operands
    if precision not in SPLIT_PRECISIONS or any(ir.element_type(v.type) != f32 for v in (a, b, c)):
        return False
    e = _Emitter(op)
    zero = e.const(0.0, c.type)
    if precision == "tf32x3":
        a_big, b_big = e.round_tf32(a), e.round_tf32(b)
        a_small = e.op("arith.subf", [a, a_big], a.type)
        b_small = e.op("arith.subf", [b, b_big], b.type)
        acc = e.dot(a_small, b_big, zero, "tf32")
        acc = e.dot(a_big, b_small, acc, "tf32")
        acc = e.dot(a_big, b_big, e.nan_to_zero(acc, zero), "tf32")
    else:
        parts = 2 if precision == "bf16x3" else 3
        pa, pb = e.split_bf16(a, parts), e.split_bf16(b, parts)
        pairs = [(1, 1), (2, 0), (0, 2)] if parts == 3 else []
        acc = zero
        for i, j in pairs + [(1, 0), (0, 1)]:
            acc = e.dot(pa[i], pb[j], acc, "ieee")
        acc = e.dot(pa[0], pb[0], e.nan_to_zero(acc, zero), "ieee")
    result = e.op("arith.addf", [acc, c], c.type)
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return True


@dataclass(frozen=True)
class SplitF32Dots:
    """The pass: every fp32 `tt.dot` at tf32x3 / bf16x3 / bf16x6 into its chain of dots."""
    name: str = "tritongpu-split-f32-dots"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            for op in [o for o in func.walk() if o.name == "tt.dot"]:
                split_f32_dot(op)
