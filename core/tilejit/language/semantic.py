"""Type checking, type promotion and IR building for the `tl` language (Triton 3.x's `semantic.py`).

`Semantic` wraps an `ir.Builder`; every method takes and returns language values (`tensor`, Python
numbers, `constexpr`) and raises `TypeError`/`ValueError` with a user-facing message on misuse. The
frontend turns those into a `CompilationError` at the user's line. The memory, dot and reduction
parts live in `semantic_memory.py` (a mixin) to keep each file readable.
"""
from __future__ import annotations

import numbers
import warnings
from typing import List, Optional

from .. import ir
from . import core as tl
from .semantic_memory import MemorySemanticMixin

_ACTIVE: List["Semantic"] = []


def current_semantic(what: str) -> "Semantic":
    """The semantic of the function being compiled; language objects outside a kernel have none."""
    if not _ACTIVE:
        raise RuntimeError(f"{what} can only be used inside a @jit function")
    return _ACTIVE[-1]


class IncompatibleTypeError(TypeError):
    def __init__(self, a, b):
        super().__init__(f"invalid operands of type {a} and {b}")


def _is_number(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, tl.tensor)


def _normalize_int(value: int, ty: tl.dtype) -> int:
    """The Python int stored in an `arith.constant` of type `ty` (wrapped to its width and sign)."""
    bits = ty.int_bitwidth
    if ty.is_bool():
        return 1 if value else 0
    value &= (1 << bits) - 1
    if ty.is_int_signed() and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


class Semantic(MemorySemanticMixin):
    def __init__(self, builder: ir.Builder, codegen=None, options=None):
        self.builder = builder
        self.codegen = codegen
        self.options = options

    # -- activation (so tensor operators work inside Python builtins) -----------------------------
    def __enter__(self):
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        _ACTIVE.pop()

    # -- helpers ----------------------------------------------------------------------------------
    def create(self, name: str, operands, result_ty: tl.dtype, attrs=None) -> tl.tensor:
        value = self.builder.create1(name, [o.handle if isinstance(o, tl.tensor) else o for o in operands],
                                     result_ty.to_ir(), attrs)
        return tl.tensor(value, result_ty)

    def create_op(self, name: str, operands, result_types, attrs=None, regions=()):
        return self.builder.create(name, [o.handle if isinstance(o, tl.tensor) else o for o in operands],
                                   result_types, attrs, regions)

    @staticmethod
    def constant_attr(value, dtype: tl.dtype):
        """The Python value an `arith.constant` of `dtype` stores for `value`."""
        value = tl._unwrap_if_constexpr(value)
        if isinstance(value, tl.tensor) or not isinstance(value, (int, float, bool)) and \
                not hasattr(value, "__float__"):
            raise TypeError(f"a constant must be a Python number, got {type(value).__name__}")
        if dtype.is_floating():
            return float(value)
        if dtype.is_bool():
            return bool(value)
        if dtype.is_int():
            if isinstance(value, float):
                raise TypeError(f"cannot use the float {value} as a constant of type {dtype}")
            return _normalize_int(int(value), dtype)
        raise TypeError(f"cannot create a constant of type {dtype}")

    def scalar_constant(self, value, dtype: tl.dtype) -> tl.tensor:
        return tl.tensor(self.builder.constant(self.constant_attr(value, dtype), dtype.to_ir()), dtype)

    def to_tensor(self, x, check_type: Optional[tl.dtype] = None) -> tl.tensor:
        x = tl._unwrap_if_constexpr(x)
        if isinstance(x, tl.tensor):
            return x
        if isinstance(x, (bool, int, float)):
            return self.scalar_constant(x, self.scalar_type_of(x))
        if hasattr(x, "dtype") and hasattr(x, "item") and getattr(x, "shape", ()) == ():
            return self.to_tensor(x.item())  # NumPy scalars
        raise TypeError(f"cannot convert {x!r} of type {type(x).__name__} to a tensor")

    @staticmethod
    def scalar_type_of(x) -> tl.dtype:
        """The dtype Triton gives a Python literal: int32/uint32/int64/uint64 by range, fp32 or fp64."""
        if isinstance(x, bool):
            return tl.int1
        if isinstance(x, int):
            if -2**31 <= x < 2**31:
                return tl.int32
            if 2**31 <= x < 2**32:
                return tl.uint32
            if -2**63 <= x < 2**63:
                return tl.int64
            if 2**63 <= x < 2**64:
                return tl.uint64
            raise ValueError(f"nonrepresentable integer {x}")
        if isinstance(x, float):
            min_f32, max_f32 = 2**-126, (2 - 2**-23) * 2**127
            a = abs(x)
            return tl.float32 if (a == float("inf") or a == 0.0 or x != x or min_f32 <= a <= max_f32) \
                else tl.float64
        raise TypeError(f"cannot convert {x!r} of type {type(x).__name__} to a tensor")

    # -- promotion ---------------------------------------------------------------------------------
    @staticmethod
    def integer_promote(a: tl.dtype, b: tl.dtype) -> tl.dtype:
        ar, br = a.int_bitwidth, b.int_bitwidth
        a_uns, b_uns = a.is_int_unsigned(), b.is_int_unsigned()
        if a_uns == b_uns:
            return a if ar > br else b
        if a_uns:
            return a if ar >= br else b
        return b if br >= ar else a

    def computation_type(self, a: tl.dtype, a_is_scalar: bool, b: tl.dtype, b_is_scalar: bool,
                         div_or_mod: bool) -> tl.dtype:
        # A Python scalar of a lower or equal kind (bool < int < float) does not take part.
        if a_is_scalar != b_is_scalar:
            scalar_ty, tensor_ty = (a, b) if a_is_scalar else (b, a)
            if scalar_ty.kind() <= tensor_ty.kind():
                if div_or_mod and tensor_ty in (tl.float16, tl.bfloat16):
                    return tl.float32
                return tensor_ty
        if a.is_fp64() or b.is_fp64():
            return tl.float64
        if a.is_fp32() or b.is_fp32():
            return tl.float32
        if a.is_fp16() or b.is_fp16():
            return tl.float32 if div_or_mod else tl.float16
        if a.is_bf16() and b.is_bf16():
            return tl.float32 if div_or_mod else tl.bfloat16
        if a.is_bf16() or b.is_bf16():
            return tl.float32
        if a.is_fp8() and b.is_fp8():
            return a if a == b else tl.float16
        if not a.is_int() or not b.is_int():
            # Triton has no rule for an fp8 tensor with an integer tensor: cast one explicitly.
            raise TypeError(f"unexpected types {a} and {b}: cast one operand explicitly")
        if div_or_mod and a.is_int_unsigned() != b.is_int_unsigned():
            # Triton's wording (its tests match on it).
            raise TypeError(f"Cannot use /, //, or % with {a} and {b} because they have different "
                            "signedness; cast them to the same signedness")
        return self.integer_promote(a, b)

    @staticmethod
    def _check_ptr(a: tl.dtype, b: tl.dtype, allow_ptr_a: bool) -> None:
        if a.is_ptr():
            if not allow_ptr_a:
                raise IncompatibleTypeError(a, b)
            if b.is_ptr() and a != b:
                raise IncompatibleTypeError(a, b)
            if b.is_floating():
                raise IncompatibleTypeError(a, b)

    def binary_operands(self, lhs, rhs, allow_lhs_ptr=False, allow_rhs_ptr=False, arithmetic_check=True,
                        div_or_mod=False):
        lhs, rhs = tl._unwrap_if_constexpr(lhs), tl._unwrap_if_constexpr(rhs)
        lhs_scalar, rhs_scalar = _is_number(lhs), _is_number(rhs)
        lhs_value, rhs_value = lhs, rhs
        lty = self.scalar_type_of(lhs) if lhs_scalar else self.to_tensor(lhs).type.scalar
        rty = self.scalar_type_of(rhs) if rhs_scalar else self.to_tensor(rhs).type.scalar
        if not lhs_scalar:
            lhs = self.to_tensor(lhs)
        if not rhs_scalar:
            rhs = self.to_tensor(rhs)
        self._check_ptr(lty, rty, allow_lhs_ptr)
        self._check_ptr(rty, lty, allow_rhs_ptr)
        if arithmetic_check and not lty.is_ptr() and not rty.is_ptr():
            ret = self.computation_type(lty, lhs_scalar, rty, rhs_scalar, div_or_mod)
            for is_scalar, value in ((lhs_scalar, lhs_value), (rhs_scalar, rhs_value)):
                if is_scalar and ret.is_int():
                    if value < 0 and ret.is_int_unsigned():
                        raise ValueError("cannot perform a binary operation between an unsigned tensor "
                                         "and a negative scalar; cast one of them explicitly")
                    if not ret.is_bool() and not (ret.get_int_min_value() <= value <= ret.get_int_max_value()):
                        raise ValueError(f"scalar {value} is out of range for type {ret}")
            lhs = self.scalar_constant(lhs_value, ret) if lhs_scalar else self.cast(lhs, ret)
            rhs = self.scalar_constant(rhs_value, ret) if rhs_scalar else self.cast(rhs, ret)
        else:
            lhs = self.to_tensor(lhs) if lhs_scalar else lhs
            rhs = self.to_tensor(rhs) if rhs_scalar else rhs
        return self.broadcast_values(lhs, rhs)

    # -- broadcasting --------------------------------------------------------------------------------
    def splat(self, x: tl.tensor, shape) -> tl.tensor:
        return self.create("tt.splat", [x], tl.block_type(x.type, shape))

    def broadcast_values(self, lhs: tl.tensor, rhs: tl.tensor):
        lt, rt = lhs.type, rhs.type
        if lt.is_block() and not rt.is_block():
            return lhs, self.splat(rhs, lt.shape)
        if rt.is_block() and not lt.is_block():
            return self.splat(lhs, rt.shape), rhs
        if not lt.is_block():
            return lhs, rhs
        while len(lhs.type.shape) < len(rhs.type.shape):
            lhs = self.expand_dims(lhs, 0)
        while len(rhs.type.shape) < len(lhs.type.shape):
            rhs = self.expand_dims(rhs, 0)
        shape = []
        for i, (a, b) in enumerate(zip(lhs.type.shape, rhs.type.shape)):
            if a == b or b == 1:
                shape.append(a)
            elif a == 1:
                shape.append(b)
            else:
                raise ValueError(f"cannot broadcast shapes {list(lhs.type.shape)} and "
                                 f"{list(rhs.type.shape)}: incompatible dimensions at index {i}: {a} and {b}")
        return self.broadcast_to(lhs, shape), self.broadcast_to(rhs, shape)

    def broadcast_to(self, x, shape) -> tl.tensor:
        x = self.to_tensor(x)
        shape = [int(tl._unwrap_if_constexpr(s)) for s in shape]
        if not x.type.is_block():
            return self.splat(x, shape) if shape else x
        src = list(x.type.shape)
        if src == shape:
            return x
        if len(src) != len(shape):
            raise ValueError(f"cannot broadcast a tensor of shape {src} to shape {shape}: ranks differ")
        for a, b in zip(src, shape):
            if a != 1 and a != b:
                raise ValueError(f"cannot broadcast a tensor of shape {src} to shape {shape}")
        return self.create("tt.broadcast", [x], tl.block_type(x.type.scalar, shape))

    def broadcast_all(self, *values):
        values = [self.to_tensor(v) for v in values]
        result = values[0]
        for v in values[1:]:
            result, _ = self.broadcast_values(result, v)
        shape = result.type.shape if result.type.is_block() else []
        out = []
        for v in values:
            for _ in range(len(shape) - (len(v.type.shape) if v.type.is_block() else 0)):
                if v.type.is_block():
                    v = self.expand_dims(v, 0)
            out.append(self.broadcast_to(v, shape) if shape else v)
        return out

    def inline_asm_elementwise(self, asm: str, constraints: str, args, dtypes, is_pure: bool, pack: int):
        """`tl.inline_asm_elementwise`: the arguments broadcast to one shape (pointers allowed, no type
        promotion), one result of that shape per dtype; the lowering is `gpu/llvm/inline_asm.py`."""
        if not isinstance(asm, str) or not isinstance(constraints, str):
            raise TypeError("inline_asm_elementwise: asm and constraints must be strings")
        if not isinstance(pack, int) or pack < 1:
            raise ValueError(f"inline_asm_elementwise: pack must be a positive integer, got {pack!r}")
        for dt in dtypes:
            if not isinstance(dt, tl.dtype):
                raise TypeError(f"inline_asm_elementwise: dtype must be a triton dtype, got {dt!r}")
        values = self.broadcast_all(*args) if args else []
        shape = values[0].type.shape if values and values[0].type.is_block() else None
        result_types = [tl.block_type(dt, shape) if shape else dt for dt in dtypes]
        op = self.create_op("tt.elementwise_inline_asm", values, [t.to_ir() for t in result_types],
                            {"asm_string": asm, "constraints": constraints, "pure": bool(is_pure),
                             "packed_element": pack})
        return [tl.tensor(r, t) for r, t in zip(op.results, result_types)]

    # -- arithmetic --------------------------------------------------------------------------------
    def add(self, a, b):
        a, b = self.binary_operands(a, b, True, True)
        self.check_arithmetic_type(a, b)
        if a.type.scalar.is_ptr() and b.type.scalar.is_ptr():
            raise TypeError("cannot add pointers together")
        if b.type.scalar.is_ptr():
            a, b = b, a
        if a.type.scalar.is_ptr():
            if not b.type.scalar.is_int():
                raise TypeError(f"a pointer offset must be an integer, got {b.type.scalar}")
            if (b.type.scalar.is_int_unsigned() or b.type.scalar.is_bool()) and b.type.scalar.int_bitwidth < 64:
                # tt.addptr reads its offset as signed: zero-extend unsigned offsets (as Triton does)
                # so that e.g. a uint32 offset >= 2**31 moves forward (and `p + True` is p + 1: int1
                # is unsigned in Triton).
                b = self.cast(b, tl.int64)
            return self.create("tt.addptr", [a, b], a.type)
        op = "arith.addf" if a.type.scalar.is_floating() else "arith.addi"
        return self.create(op, [a, b], a.type)

    def sub(self, a, b):
        a, b = self.binary_operands(a, b, True, False)
        self.check_arithmetic_type(a, b)
        if a.type.scalar.is_ptr():
            return self.create("tt.addptr", [a, self.minus(b)], a.type)
        op = "arith.subf" if a.type.scalar.is_floating() else "arith.subi"
        return self.create(op, [a, b], a.type)

    def mul(self, a, b):
        a, b = self.binary_operands(a, b)
        self.check_arithmetic_type(a, b)
        op = "arith.mulf" if a.type.scalar.is_floating() else "arith.muli"
        return self.create(op, [a, b], a.type)

    def truediv(self, a, b):
        a, b = self.binary_operands(a, b, False, False, True, True)
        self.check_arithmetic_type(a, b)
        if a.type.scalar.is_int():
            a, b = self.cast(a, tl.float32), self.cast(b, tl.float32)
        return self.create("arith.divf", [a, b], a.type)

    def floordiv(self, a, b):
        a, b = self.binary_operands(a, b, False, False, True, True)
        ty = a.type.scalar
        if not ty.is_int():
            raise TypeError(f"'//' is only defined for integers in tilejit (as in Triton), got {ty}")
        return self.create("arith.divui" if ty.is_int_unsigned() else "arith.divsi", [a, b], a.type)

    def mod(self, a, b):
        a, b = self.binary_operands(a, b, False, False, True, True)
        self.check_arithmetic_type(a, b)
        ty = a.type.scalar
        if ty.is_floating():
            return self.create("arith.remf", [a, b], a.type)
        return self.create("arith.remui" if ty.is_int_unsigned() else "arith.remsi", [a, b], a.type)

    def fdiv(self, a, b, ieee_rounding=False):
        a, b = self.to_tensor(a), self.to_tensor(b)
        self.check_arithmetic_type(a, b)
        if not a.type.scalar.is_floating() or not b.type.scalar.is_floating():
            raise TypeError("fdiv: both operands must be floating point")
        a, b = self.binary_operands(a, b, False, False, True, True)
        return self.create("tt.precise_divf" if ieee_rounding else "arith.divf", [a, b], a.type)

    def pow(self, a, b):
        raise TypeError("operator '**' is not supported on tensors (as in Triton); use "
                        "tl.math.pow / libdevice, or repeated multiplication")

    @staticmethod
    def _operand_type_name(v) -> str:
        return str(v.type.scalar) if isinstance(v, tl.tensor) else type(v).__name__

    def _bitwise_operands(self, a, b, what: str):
        ua, ub = tl._unwrap_if_constexpr(a), tl._unwrap_if_constexpr(b)
        for v in (ua, ub):
            ty = v.type.scalar if isinstance(v, tl.tensor) else None
            if (ty is not None and not ty.is_int()) or isinstance(v, float):
                # "invalid operands of type": Triton's wording (its tests match on it).
                raise TypeError(f"invalid operands of type {self._operand_type_name(ua)} and "
                                f"{self._operand_type_name(ub)}: operator '{what}' needs integer operands")
        a, b = self.binary_operands(a, b)
        ret = self.integer_promote(a.type.scalar, b.type.scalar)
        return self.cast(a, ret), self.cast(b, ret)

    def and_(self, a, b):
        a, b = self._bitwise_operands(a, b, "&")
        return self.create("arith.andi", [a, b], a.type)

    def or_(self, a, b):
        a, b = self._bitwise_operands(a, b, "|")
        return self.create("arith.ori", [a, b], a.type)

    def xor_(self, a, b):
        a, b = self._bitwise_operands(a, b, "^")
        return self.create("arith.xori", [a, b], a.type)

    def shl(self, a, b):
        a, b = self._bitwise_operands(a, b, "<<")
        return self.create("arith.shli", [a, b], a.type)

    def shr(self, a, b):
        """`a >> b` on the promoted type. As Triton (`tensor.__rshift__`/`__rrshift__`), the shift kind
        comes from the signedness of the tensor operand *before* promotion -- the left one, or the
        right one when the left is a Python number -- so `int32 >> uint32` and `int8 >> uint32` shift
        arithmetically although their result is uint32."""
        decider = next((v for v in map(tl._unwrap_if_constexpr, (a, b)) if isinstance(v, tl.tensor)), None)
        a, b = self._bitwise_operands(a, b, ">>")
        ty = decider.type.scalar if decider is not None else a.type.scalar
        arithmetic = ty.is_int_signed() and not ty.is_bool()
        return self.create("arith.shrsi" if arithmetic else "arith.shrui", [a, b], a.type)

    def logical_and(self, a, b):
        a, b = self.to_tensor(a), self.to_tensor(b)
        return self.and_(self.cast(a, tl.int1), self.cast(b, tl.int1))

    def logical_or(self, a, b):
        a, b = self.to_tensor(a), self.to_tensor(b)
        return self.or_(self.cast(a, tl.int1), self.cast(b, tl.int1))

    def minus(self, x):
        x = self.to_tensor(x)
        self.check_arithmetic_type(x)
        ty = x.type.scalar
        if ty.is_ptr():
            raise TypeError(f"cannot negate a pointer ({ty})")
        if ty.is_floating():
            return self.create("arith.negf", [x], x.type)
        return self.sub(self.broadcast_to(self.scalar_constant(0, ty), x.type.shape if x.type.is_block() else []),
                        x)

    def invert(self, x):
        x = self.to_tensor(x)
        ty = x.type.scalar
        if ty.is_ptr() or ty.is_floating():
            raise TypeError(f"operator '~' needs an integer operand, got {ty}")
        ones = self.scalar_constant(-1, ty)
        return self.xor_(x, self.broadcast_to(ones, x.type.shape if x.type.is_block() else []))

    def not_(self, x):
        x = self.to_tensor(x)
        if x.type.scalar.is_bool():
            return self.invert(x)
        return self.equal(x, 0)

    # -- comparisons -----------------------------------------------------------------------------
    def _compare(self, a, b, fpred: str, spred: str, upred: str):
        a, b = self.binary_operands(a, b, True, True)
        self.check_arithmetic_type(a, b)
        ty = a.type.scalar
        result_ty = tl.block_type(tl.int1, a.type.shape) if a.type.is_block() else tl.int1
        if ty.is_floating():
            return self.create("arith.cmpf", [a, b], result_ty, {"predicate": fpred})
        pred = upred if (ty.is_int_unsigned() or ty.is_ptr()) else spred
        return self.create("arith.cmpi", [a, b], result_ty, {"predicate": pred})

    def greater_than(self, a, b): return self._compare(a, b, "ogt", "sgt", "ugt")
    def greater_equal(self, a, b): return self._compare(a, b, "oge", "sge", "uge")
    def less_than(self, a, b): return self._compare(a, b, "olt", "slt", "ult")
    def less_equal(self, a, b): return self._compare(a, b, "ole", "sle", "ule")
    def equal(self, a, b): return self._compare(a, b, "oeq", "eq", "eq")
    def not_equal(self, a, b): return self._compare(a, b, "une", "ne", "ne")

    # -- casts ---------------------------------------------------------------------------------------
    def _retype(self, x: tl.tensor, sca: tl.dtype):
        return tl.block_type(sca, x.type.shape) if x.type.is_block() else sca

    def cast(self, x, dst: tl.dtype, fp_downcast_rounding: Optional[str] = None) -> tl.tensor:
        x = self.to_tensor(x)
        dst = tl._unwrap_if_constexpr(dst)
        if isinstance(dst, tl.block_type):
            dst = dst.scalar
        if not isinstance(dst, tl.dtype):
            raise TypeError(f"cast target must be a tl.dtype, got {dst!r}")
        src = x.type.scalar
        if src == dst:
            return x
        dst_ty = self._retype(x, dst)
        if src.is_fp8e4b15() or dst.is_fp8e4b15():
            return self._cast_fp8e4b15(x, src, dst, fp_downcast_rounding)
        both_float = src.is_floating() and dst.is_floating()
        downcast = both_float and src.primitive_bitwidth > dst.primitive_bitwidth
        if fp_downcast_rounding is not None:
            if fp_downcast_rounding not in ("rtne", "rtz"):
                raise ValueError(f"fp_downcast_rounding must be 'rtne' or 'rtz', got {fp_downcast_rounding!r}")
            if not downcast:
                raise ValueError("fp_downcast_rounding should be set only for truncating fp conversions")
        if both_float and (src.is_fp8() or dst.is_fp8()):
            attrs = {"rounding": fp_downcast_rounding or "rtne"} if downcast else {}
            return self.create("tt.fp_to_fp", [x], dst_ty, attrs)
        if (src.is_fp16() or src.is_bf16()) and not dst.is_fp32():
            # As Triton: a half converts to anything but fp32 (another half, fp64, an integer)
            # through fp32, so each backend only needs half <-> fp32 conversions.
            return self.cast(self.cast(x, tl.float32), dst, fp_downcast_rounding)
        if downcast:
            attrs = {"rounding": fp_downcast_rounding} if fp_downcast_rounding else {}
            return self.create("arith.truncf", [x], dst_ty, attrs)
        if both_float:
            return self.create("arith.extf", [x], dst_ty)
        if src.is_int() and dst.is_int():
            if dst.is_bool():
                return self.not_equal(x, 0)
            if src.int_bitwidth == dst.int_bitwidth:
                return tl.tensor(x.handle, dst_ty)  # IR integers are signless: only the dtype changes
            if src.int_bitwidth > dst.int_bitwidth:
                return self.create("arith.trunci", [x], dst_ty)
            sign_extend = src.is_int_signed() and not src.is_bool()
            return self.create("arith.extsi" if sign_extend else "arith.extui", [x], dst_ty)
        if src.is_floating() and dst.is_int():
            if dst.is_bool():
                return self.not_equal(x, 0.0)
            return self.create("arith.fptosi" if dst.is_int_signed() else "arith.fptoui", [x], dst_ty)
        if src.is_int() and dst.is_floating():
            op = "arith.uitofp" if (src.is_bool() or src.is_int_unsigned()) else "arith.sitofp"
            return self.create(op, [x], dst_ty)
        if src.is_ptr() and dst.is_int():
            as_int = self.create("tt.ptr_to_int", [x], self._retype(x, tl.int64))
            if dst.is_bool():
                return self.not_equal(as_int, 0)
            return self.cast(as_int, dst)
        if src.is_int() and dst.is_ptr():
            return self.create("tt.int_to_ptr", [self.cast(x, tl.int64)], dst_ty)
        if src.is_ptr() and dst.is_ptr():
            return self.create("tt.bitcast", [x], dst_ty)
        raise ValueError(f"cannot cast from {src} to {dst}")

    def _cast_fp8e4b15(self, x, src: tl.dtype, dst: tl.dtype, rounding: Optional[str]) -> tl.tensor:
        """Conversions of float8e4b15, which is i8 in the IR: integer code, so every backend runs it."""
        from . import fp8e4b15
        if rounding is not None and rounding not in ("rtne", "rtz"):
            raise ValueError(f"fp_downcast_rounding must be 'rtne' or 'rtz', got {rounding!r}")
        if src.is_ptr() or dst.is_ptr():
            raise ValueError(f"cannot cast from {src} to {dst}")
        if src.is_fp8e4b15():
            return self.cast(fp8e4b15.to_float16(self, x), dst, rounding)
        return fp8e4b15.from_float32(self, self.cast(x, tl.float32), rounding or "rtne")

    @staticmethod
    def check_arithmetic_type(*values) -> None:
        """float8e4b15 is a storage format (Triton computes on it only after converting it)."""
        for v in values:
            if isinstance(v, tl.tensor) and v.type.scalar.is_fp8e4b15():
                raise TypeError("arithmetic on float8e4b15 is not supported: convert it first, e.g. "
                                "x.to(tl.float16) or x.to(tl.float32)")

    def bitcast(self, x, dst: tl.dtype) -> tl.tensor:
        x = self.to_tensor(x)
        dst = tl._unwrap_if_constexpr(dst)
        src = x.type.scalar
        if src == dst:
            return x
        if src.is_ptr() or dst.is_ptr():
            return self.cast(x, dst)
        if src.primitive_bitwidth != dst.primitive_bitwidth:
            raise ValueError(f"cannot bitcast data-type of size {src.primitive_bitwidth} to data-type of "
                             f"size {dst.primitive_bitwidth}")
        if (src.is_int() or src.is_fp8e4b15()) and (dst.is_int() or dst.is_fp8e4b15()):
            return tl.tensor(x.handle, self._retype(x, dst))  # the same i8 (or iN) in the IR
        return self.create("tt.bitcast", [x], self._retype(x, dst))

    # -- shape manipulation --------------------------------------------------------------------------
    def expand_dims(self, x, axis: int) -> tl.tensor:
        x = self.to_tensor(x)
        shape = list(x.type.shape) if x.type.is_block() else []
        axis = tl._unwrap_if_constexpr(axis)
        if not isinstance(axis, int):
            raise TypeError(f"expand_dims: axis must be a constexpr int, got {axis!r}")
        if axis < 0:
            axis += len(shape) + 1
        if not 0 <= axis <= len(shape):
            raise ValueError(f"expand_dims: axis {axis} is out of range for a tensor of rank {len(shape)}")
        if not x.type.is_block():
            return self.splat(x, [1])
        shape.insert(axis, 1)
        return self.create("tt.expand_dims", [x], tl.block_type(x.type.scalar, shape), {"axis": axis})

    def reshape(self, x, shape, can_reorder=False) -> tl.tensor:
        x = self.to_tensor(x)
        shape = [int(tl._unwrap_if_constexpr(s)) for s in shape]
        numel = 1
        for s in shape:
            numel *= s
        src_numel = x.type.numel if x.type.is_block() else 1
        if numel != src_numel:
            raise ValueError(f"reshape: cannot reshape a tensor of {src_numel} elements to shape {shape}")
        if not x.type.is_block():
            return self.splat(x, shape)
        if list(x.type.shape) == shape:
            return x
        attrs = {"allow_reorder": True} if can_reorder else {}
        return self.create("tt.reshape", [x], tl.block_type(x.type.scalar, shape), attrs)

    def permute(self, x, dims) -> tl.tensor:
        x = self.to_tensor(x)
        if not x.type.is_block():
            raise ValueError("trans/permute need a tensor of rank >= 1")
        rank = len(x.type.shape)
        if dims is None:   # `x.T`: Triton's frontend makes it permute(x, (1, 0)), so 2-D only
            if rank != 2:
                raise ValueError(f"tensor.T needs a 2-D tensor, got rank {rank} (tl.trans(x) swaps the last "
                                 f"two axes of any rank >= 2)")
            dims = [1, 0]
        dims = [int(tl._unwrap_if_constexpr(d)) for d in dims]
        if len(dims) != rank:
            raise ValueError(f"permute dims must have the same length as the input shape, got {rank} and "
                             f"{len(dims)}")
        if sorted(dims) != list(range(rank)):
            raise ValueError(f"permute: dims {dims} are not a permutation of {list(range(rank))}")
        shape = [x.type.shape[d] for d in dims]
        return self.create("tt.trans", [x], tl.block_type(x.type.scalar, shape), {"order": dims})

    def join(self, a, b) -> tl.tensor:
        a, b = self.broadcast_values(self.to_tensor(a), self.to_tensor(b))
        if a.type != b.type:
            raise ValueError(f"join: operands must have the same type, got {a.type} and {b.type}")
        shape = list(a.type.shape) if a.type.is_block() else []
        if not shape:
            a, b = self.expand_dims(a, 0), self.expand_dims(b, 0)
        joined = self.create("tt.join", [a, b], tl.block_type(a.type.scalar, list(a.type.shape) + [2]))
        # Two scalars join into shape [2], as in Triton (the IR joins them as [1] tensors).
        return joined if shape else self.reshape(joined, [2])

    def split(self, x):
        x = self.to_tensor(x)
        if not x.type.is_block() or x.type.shape[-1] != 2:
            raise ValueError(f"split: the last dimension must be 2, got shape "
                             f"{list(x.type.shape) if x.type.is_block() else []}")
        shape = list(x.type.shape[:-1])
        out_ty = tl.block_type(x.type.scalar, shape) if shape else x.type.scalar
        op = self.create_op("tt.split", [x], [out_ty.to_ir(), out_ty.to_ir()])
        return tl.tensor(op.results[0], out_ty), tl.tensor(op.results[1], out_ty)

    def cat(self, a, b, can_reorder=False):
        if not can_reorder:
            raise ValueError("cat: the current implementation may reorder elements; pass can_reorder=True")
        a, b = self.to_tensor(a), self.to_tensor(b)
        if a.type != b.type or not a.type.is_block():
            raise ValueError(f"cat: operands must be tensors of the same type, got {a.type} and {b.type}")
        shape = list(a.type.shape)
        shape[0] *= 2
        return self.create("tt.cat", [a, b], tl.block_type(a.type.scalar, shape))

    def unsplat(self, x):
        x = self.to_tensor(x)
        if not x.type.is_block():
            return x
        if x.type.numel != 1:
            raise ValueError(f"item(): can only convert a single-element tensor to a scalar, got shape "
                             f"{list(x.type.shape)}")
        # Two copies of the element split into two scalars (tt.split of a [2] block), so no new op
        # is needed on any backend.
        pair = self.broadcast_to(self.reshape(x, [1]), [2])
        return self.split(pair)[0]

    def cat_along(self, a, b, dim):
        """Concatenation in order along `dim`, as Triton writes it: join adds a minor axis of 2,
        which is moved in front of `dim` and merged into it."""
        a, b = self.to_tensor(a), self.to_tensor(b)
        shape_a = list(a.type.shape) if a.type.is_block() else []
        shape_b = list(b.type.shape) if b.type.is_block() else []
        if len(shape_a) != len(shape_b) or not shape_a:
            raise ValueError(f"tl.cat: tensors must have the same rank (at least 1), got {shape_a} and {shape_b}")
        if shape_a != shape_b:
            raise ValueError(f"tl.cat requires tensors of the same shape, got {shape_a} and {shape_b}")
        rank = len(shape_a)
        if not isinstance(dim, int) or not -rank <= dim < rank:
            raise ValueError(f"tl.cat: dim must be an integer in [{-rank}, {rank}), got {dim!r}")
        dim %= rank
        joined = self.join(a, b)
        order = list(range(rank))
        order.insert(dim, rank)
        shape = list(shape_a)
        shape[dim] *= 2
        return self.reshape(self.permute(joined, order), shape)

    def subscript(self, x: tl.tensor, slices):
        from .structure import as_python_index
        slices = as_python_index(slices)
        if not isinstance(slices, (tuple, list)):
            slices = [slices]
        # As Triton's `tensor.__getitem__`: index i of the subscript is position i of the result; None
        # inserts a dim there, ':' keeps one and checks nothing, so a ':' past the rank is accepted
        # (Triton's test_reduce indexes a scalar pointer as `Z[None, None, :]`, giving [1, 1]).
        result = x
        for dim, s in enumerate(slices):
            s = tl._unwrap_if_constexpr(s)
            if s is None:
                result = self.expand_dims(result, dim)
            elif isinstance(s, slice) and s.start is None and s.stop is None and s.step is None:
                pass
            else:
                raise ValueError(f"unsupported tensor index {s!r}: only None and ':' are allowed")
        return result

    # -- elementwise builtins ---------------------------------------------------------------------
    def where(self, cond, x, y):
        cond = self.to_tensor(cond)
        if cond.type.scalar != tl.int1:
            # Triton's deprecation warning (its test_compile_errors expects it); the condition is
            # still converted to bool (nonzero)
            message = ("tl.where with a non-boolean condition is deprecated and will error out in a future "
                       f"triton release. Got {cond.type.scalar}")
            loc = self.builder.loc   # the user's line
            if loc is not None and getattr(loc, "file", None) and getattr(loc, "line", None):
                warnings.warn_explicit(message, UserWarning, loc.file, loc.line)
            else:
                warnings.warn(message, stacklevel=2)
        cond = self.cast(cond, tl.int1)
        x, y = self.binary_operands(x, y, True, True)
        cond, x, y = self.broadcast_all(cond, x, y)
        return self.create("arith.select", [cond, x, y], x.type)

    def minmax(self, x, y, is_max: bool, propagate_nan: str = "none"):
        x, y = self.binary_operands(x, y)
        self.check_arithmetic_type(x, y)
        ty = x.type.scalar
        if ty.is_floating():
            nan_all = str(propagate_nan).lower().endswith("all")
            op = ("arith.maximumf" if is_max else "arith.minimumf") if nan_all else \
                ("arith.maxnumf" if is_max else "arith.minnumf")
        elif ty.is_int():
            suffix = "ui" if ty.is_int_unsigned() else "si"
            op = ("arith.max" if is_max else "arith.min") + suffix
        else:
            raise TypeError(f"maximum/minimum are not defined for {ty}")
        return self.create(op, [x, y], x.type)

    def clamp(self, x, lo, hi, propagate_nan: str = "none"):
        x = self.to_tensor(x)
        self.check_arithmetic_type(x)
        if not x.type.scalar.is_floating():
            raise TypeError(f"clamp is only defined for floating point tensors, got {x.type.scalar}")
        lo, hi = self.cast(self.to_tensor(lo), x.type.scalar), self.cast(self.to_tensor(hi), x.type.scalar)
        x, lo, hi = self.broadcast_all(x, lo, hi)
        nan_all = str(propagate_nan).lower().endswith("all")
        return self.create("tt.clampf", [x, lo, hi], x.type, {"propagateNan": "all" if nan_all else "none"})

    def float_unary(self, op: str, x, allowed=("fp32", "fp64"), name: str = None) -> tl.tensor:
        x = self.to_tensor(x)
        self.check_arithmetic_type(x)
        ty = x.type.scalar
        if allowed is not None and ty.name not in allowed:
            raise ValueError(f"{name or op}: Expected dtype {list(allowed)} but got {ty}")  # Triton's wording
        if not ty.is_floating():
            raise TypeError(f"{name or op} needs a floating point operand, got {ty}")
        return self.create(op, [x], x.type)

    def abs(self, x):
        x = self.to_tensor(x)
        ty = x.type.scalar
        # fp8 with a sign bit and IEEE-style NaN/inf (e4b15 is a storage format, but |x| needs no
        # arithmetic): clearing the sign bit is exact, inf included (as Triton does for e4b15). The
        # fnuz types (e4b8, e5b16) take the float path: their 0x80 is NaN, not -0.
        if ty.is_fp8e4b15() or ty.is_fp8e4nv() or ty.is_fp8e5():
            bits = self.bitcast(x, tl.int8)
            return self.bitcast(self.and_(bits, self.scalar_constant(0x7F, tl.int8)), ty)
        if ty.is_floating():
            return self.create("math.absf", [x], x.type)
        if ty.is_int_unsigned() or ty.is_bool():
            return x
        if ty.is_int():
            return self.create("math.absi", [x], x.type)
        raise TypeError(f"abs is not defined for {ty}")

    def fma(self, x, y, z):
        x, y = self.binary_operands(x, y)
        self.check_arithmetic_type(x, y)
        z = self.cast(self.to_tensor(z), x.type.scalar)
        x, y, z = self.broadcast_all(x, y, z)
        if not x.type.scalar.is_floating():
            raise TypeError(f"fma needs floating point operands, got {x.type.scalar}")
        return self.create("math.fma", [x, y, z], x.type)

    def umulhi(self, x, y):
        x, y = self.binary_operands(x, y)
        if not x.type.scalar.is_int():
            raise TypeError(f"umulhi needs integer operands, got {x.type.scalar}")
        return self.create("tt.mulhiui", [x, y], x.type)
