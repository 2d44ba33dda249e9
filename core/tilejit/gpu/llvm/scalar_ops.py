"""Elementwise ops on one scalar LLVM value each: arith, math, casts.

The lowering maps these over the registers a thread holds. Math goes through the target's table
(`TargetDescription.math_symbol`); where a target has no instruction or library call, a portable expansion
from simpler ops is used (written once here for every target).
"""
from __future__ import annotations

import math

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from ..isa import F32, call_intrinsic, declare
from .float_formats import decode_to_f32, encode_from_f32, f32_to_f16_toward_zero

_INT_BINARY = {
    "arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul", "arith.divsi": "sdiv",
    "arith.divui": "udiv", "arith.remsi": "srem", "arith.remui": "urem", "arith.shli": "shl",
    "arith.shrsi": "ashr", "arith.shrui": "lshr", "arith.andi": "and_", "arith.ori": "or_",
    "arith.xori": "xor",
}
_FLOAT_BINARY = {"arith.addf": "fadd", "arith.subf": "fsub", "arith.mulf": "fmul", "arith.divf": "fdiv",
                 "tt.precise_divf": "fdiv"}
_CONTRACTABLE = ("arith.addf", "arith.subf", "arith.mulf")
_INT_MINMAX = {"arith.maxsi": ">", "arith.minsi": "<", "arith.maxui": ">", "arith.minui": "<"}
_CMPI = {"eq": ("==", True), "ne": ("!=", True), "slt": ("<", True), "sle": ("<=", True),
         "sgt": (">", True), "sge": (">=", True), "ult": ("<", False), "ule": ("<=", False),
         "ugt": (">", False), "uge": (">=", False)}
_CMPF = {"oeq": "==", "one": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=", "ord": "ord",
         "ueq": "==", "une": "!=", "ult": "<", "ule": "<=", "ugt": ">", "uge": ">=", "uno": "uno"}


def llvm_type(t, isa=None):
    """The LLVM type of one element of IR type `t` (bf16 and fp8 are kept as integers of their width)."""
    t = ir.element_type(t)
    if isinstance(t, ir.IntType):
        return llir.IntType(t.width)
    if isinstance(t, ir.FloatType):
        if t.name == "f16":
            return llir.HalfType()
        if t.name == "f32":
            return F32
        if t.name == "f64":
            return llir.DoubleType()
        return llir.IntType(t.width)   # bf16 / fp8: storage only; arithmetic goes through f32
    if isinstance(t, ir.PointerType):
        return llir.PointerType(addrspace=t.address_space)
    raise CompilationError(f"the GPU lowering cannot represent type {t}")


def is_storage_float(t) -> bool:
    e = ir.element_type(t)
    return isinstance(e, ir.FloatType) and e.name not in ("f16", "f32", "f64")


def to_compute(b, v, t, isa=None):
    """Value of IR element type `t` in a type LLVM computes with (bf16 and fp8 -> f32; by the
    target's conversion instruction where `isa` has one, `TargetDescription.decode_float`)."""
    if is_storage_float(t):
        name = ir.element_type(t).name
        native = isa.decode_float(b, v, name) if isa is not None else None
        return native if native is not None else decode_to_f32(b, v, name)
    return v


def from_compute(b, v, t, rounding: str = "rtne", isa=None):
    """The inverse of `to_compute`: an f32 (or wider) result stored as bf16/fp8 bits (by the target's
    conversion instruction where `isa` has one, `TargetDescription.encode_float`)."""
    if is_storage_float(t):
        if str(v.type) == "double":
            v = b.fptrunc(v, F32)
        elif str(v.type) == "half":
            v = b.fpext(v, F32)
        name = ir.element_type(t).name
        native = isa.encode_float(b, v, name, rounding) if isa is not None else None
        return native if native is not None else encode_from_f32(b, v, name, rounding)
    return v


class ScalarLowering:
    """Lowers one elementwise op applied to scalar LLVM values."""

    def __init__(self, isa, fp_fusion: bool = True):
        self.isa = isa
        # `enable_fp_fusion` (as Triton): float add/sub/mul may contract into fma.
        self.fp_fusion = fp_fusion

    def math(self, b, name: str, args):
        ty = args[0].type
        how = self.isa.math_symbol(name, ty)
        if how is not None:
            kind, symbol = how
            if kind == "intrinsic":
                return call_intrinsic(b, symbol, ty, args)
            if kind == "emit":   # the target builds it (e.g. NVIDIA's approximate exp and division)
                return symbol(b, list(args))
            fn = declare(b.module, symbol, ty, [a.type for a in args])
            return b.call(fn, list(args))
        if isinstance(ty, llir.HalfType):   # compute half math in f32
            wide = [b.fpext(a, F32) for a in args]
            return b.fptrunc(self.math(b, name, wide), ty)
        return self._expand(b, name, args)

    def _const(self, ty, v):
        return llir.Constant(ty, v)

    def _expand(self, b, name, args):
        """Portable expansions for targets without a library (AMDGPU), from exp/log/sqrt."""
        x = args[0]
        ty = x.type
        one = self._const(ty, 1.0)
        if name == "math.exp":
            return self.math(b, "math.exp2", [b.fmul(x, self._const(ty, 1.0 / math.log(2.0)))])
        if name == "math.log":
            return b.fmul(self.math(b, "math.log2", [x]), self._const(ty, math.log(2.0)))
        if name == "math.log10":
            return b.fmul(self.math(b, "math.log2", [x]), self._const(ty, math.log10(2.0)))
        if name == "math.rsqrt":
            return b.fdiv(one, self.math(b, "math.sqrt", [x]))
        if name == "math.expm1":
            # exp(x) - 1 loses digits near 0: use x + x^2/2 + x^3/6 there.
            big = b.fsub(self.math(b, "math.exp", [x]), one)
            x2 = b.fmul(x, x)
            small = b.fadd(x, b.fmul(x2, b.fadd(self._const(ty, 0.5), b.fmul(x, self._const(ty, 1.0 / 6)))))
            near0 = b.fcmp_ordered("<", self.math(b, "math.absf", [x]), self._const(ty, 1e-2))
            return b.select(near0, small, big)
        if name == "math.log1p":
            # log(1 + x) * x / ((1 + x) - 1) corrects the rounding of 1 + x (Goldberg).
            u = b.fadd(one, x)
            d = b.fsub(u, one)
            exact = b.fcmp_ordered("==", d, self._const(ty, 0.0))
            return b.select(exact, x, b.fdiv(b.fmul(self.math(b, "math.log", [u]), x), d))
        if name in ("math.tanh", "math.sinh", "math.cosh"):
            ex = self.math(b, "math.exp", [x])
            emx = self.math(b, "math.exp", [b.fneg(x)])
            if name == "math.sinh":
                return b.fmul(b.fsub(ex, emx), self._const(ty, 0.5))
            if name == "math.cosh":
                return b.fmul(b.fadd(ex, emx), self._const(ty, 0.5))
            # tanh = 1 - 2 / (exp(2|x|) + 1), sign restored; exact at the extremes.
            ax = self.math(b, "math.absf", [x])
            e2 = self.math(b, "math.exp", [b.fmul(ax, self._const(ty, 2.0))])
            t = b.fsub(one, b.fdiv(self._const(ty, 2.0), b.fadd(e2, one)))
            return self.math(b, "math.copysign", [t, x])
        if name == "math.tan":
            return b.fdiv(self.math(b, "math.sin", [x]), self.math(b, "math.cos", [x]))
        if name == "math.powf":
            return self.math(b, "math.exp2", [b.fmul(args[1], self.math(b, "math.log2", [x]))])
        if name == "math.cbrt":
            r = self.math(b, "math.exp2", [b.fmul(self.math(b, "math.log2", [self.math(b, "math.absf", [x])]),
                                                  self._const(ty, 1.0 / 3))])
            return self.math(b, "math.copysign", [r, x])
        if name == "math.erf":
            return self._erf(b, x)
        if name in ("math.atan", "math.asin", "math.acos", "math.atan2"):
            return self._inverse_trig(b, name, args)
        if name == "arith.remf":
            return b.frem(x, args[1])
        raise CompilationError(f"{name} is not available for {ty} on {self.isa.describe()}")

    def _erf(self, b, x):
        # Abramowitz & Stegun 7.1.26 refined (max abs error 1.2e-7), odd symmetry.
        ty = x.type
        c = lambda v: self._const(ty, v)
        ax = self.math(b, "math.absf", [x])
        t = b.fdiv(c(1.0), b.fadd(c(1.0), b.fmul(c(0.5), ax)))
        coeffs = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                  0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277]
        poly = c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            poly = b.fadd(c(k), b.fmul(t, poly))
        y = b.fmul(t, self.math(b, "math.exp", [b.fadd(b.fneg(b.fmul(ax, ax)), poly)]))
        return self.math(b, "math.copysign", [b.fsub(c(1.0), y), x])

    def _atan_reduced(self, b, x):
        """atan on all reals: reduce |x| > 1 through pi/2 - atan(1/x), then a minimax polynomial."""
        ty = x.type
        c = lambda v: self._const(ty, v)
        ax = self.math(b, "math.absf", [x])
        big = b.fcmp_ordered(">", ax, c(1.0))
        z = b.select(big, b.fdiv(c(1.0), ax), ax)
        z2 = b.fmul(z, z)
        coeffs = [0.99997726, -0.33262347, 0.19354346, -0.11643287, 0.05265332, -0.01172120]
        poly = c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            poly = b.fadd(c(k), b.fmul(z2, poly))
        r = b.fmul(z, poly)
        r = b.select(big, b.fsub(c(math.pi / 2), r), r)
        return self.math(b, "math.copysign", [r, x])

    def _inverse_trig(self, b, name, args):
        x = args[0]
        ty = x.type
        c = lambda v: self._const(ty, v)
        if name == "math.atan":
            return self._atan_reduced(b, x)
        if name in ("math.asin", "math.acos"):
            root = self.math(b, "math.sqrt", [b.fsub(c(1.0), b.fmul(x, x))])
            asin = self._atan2(b, x, root)
            return asin if name == "math.asin" else b.fsub(c(math.pi / 2), asin)
        return self._atan2(b, x, args[1])

    def _atan2(self, b, y, x):
        ty = y.type
        c = lambda v: self._const(ty, v)
        base = self._atan_reduced(b, b.fdiv(y, x))
        neg_x = b.fcmp_ordered("<", x, c(0.0))
        shift = self.math(b, "math.copysign", [c(math.pi), y])
        return b.select(neg_x, b.fadd(base, shift), base)

    # ---------------------------------------------------------------------------------------------
    def lower(self, b: llir.IRBuilder, op: ir.Operation, args):
        """`op` applied to one scalar per operand; returns the scalar result."""
        name = op.name
        res_t = op.results[0].type
        if name in _INT_BINARY:
            return getattr(b, _INT_BINARY[name])(args[0], args[1])
        if name in _INT_MINMAX:
            cmp = (b.icmp_signed if name.endswith("si") else b.icmp_unsigned)(_INT_MINMAX[name], args[0], args[1])
            return b.select(cmp, args[0], args[1])
        if name == "arith.cmpi":
            pred, signed = _CMPI[op.attrs["predicate"]]
            return (b.icmp_signed if signed else b.icmp_unsigned)(pred, args[0], args[1])
        if name == "arith.select":
            return b.select(args[0], args[1], args[2])
        if name == "math.absi":
            neg = b.icmp_signed("<", args[0], llir.Constant(args[0].type, 0))
            return b.select(neg, b.neg(args[0]), args[0])
        if name == "tt.mulhiui":
            w = args[0].type.width
            wide = llir.IntType(2 * w)
            prod = b.mul(b.zext(args[0], wide), b.zext(args[1], wide))
            return b.trunc(b.lshr(prod, llir.Constant(wide, w)), args[0].type)
        if name in ("arith.extsi", "arith.extui", "arith.trunci", "arith.sitofp", "arith.uitofp",
                    "arith.fptosi", "arith.fptoui", "arith.extf", "arith.truncf", "arith.bitcast",
                    "tt.bitcast", "tt.int_to_ptr", "tt.ptr_to_int", "tt.fp_to_fp"):
            return self.cast(b, name, args[0], op.operands[0].type, res_t, op.attrs.get("rounding") or "rtne")
        # Float ops: bf16 is computed in f32.
        if name == "arith.cmpf":
            xs = [to_compute(b, a, v.type, self.isa) for a, v in zip(args, op.operands)]
            pred = op.attrs["predicate"]
            ordered = pred.startswith("o") or pred == "ord"
            return (b.fcmp_ordered if ordered else b.fcmp_unordered)(_CMPF[pred], xs[0], xs[1])
        if name in _CONTRACTABLE and is_storage_float(res_t):
            # bf16 add/sub/mul where the target has them (sm_90's add/mul.rn.bf16): one rounding, as
            # the f32 op then rounding to bf16 gives (24 >= 2 * 8 + 2 bits: no double rounding)
            native = self.isa.storage_float_arith(b, name, list(args), ir.element_type(res_t).name,
                                                  self.fp_fusion)
            if native is not None:
                return native
        xs = [to_compute(b, a, v.type, self.isa) for a, v in zip(args, op.operands)]
        if name == "arith.divf" and self.isa.math_symbol(name, xs[0].type) is not None:
            out = self.math(b, name, xs)   # the target's division (Triton's div.full.f32 on NVIDIA)
        elif name in _FLOAT_BINARY:
            out = getattr(b, _FLOAT_BINARY[name])(xs[0], xs[1])
            if self.fp_fusion and name in _CONTRACTABLE:
                out.flags.append("contract")
        elif name == "arith.negf":
            out = b.fneg(xs[0])
        elif name == "tt.clampf":
            out = self.math(b, "arith.minnumf", [self.math(b, "arith.maxnumf", [xs[0], xs[1]]), xs[2]])
        elif name.startswith("math.") or name in ("arith.maxnumf", "arith.minnumf", "arith.maximumf",
                                                  "arith.minimumf", "arith.remf", "tt.precise_sqrt"):
            out = self.math(b, name, xs)
        else:
            raise CompilationError.at(op.loc, f"the GPU lowering has no rule for {name}")
        return from_compute(b, out, res_t, isa=self.isa)

    def cast(self, b, name, v, src_t, dst_t, rounding: str = "rtne"):
        dst = llvm_type(dst_t)
        if name in ("arith.extsi",):
            return b.sext(v, dst)
        if name == "arith.extui":
            return b.zext(v, dst)
        if name == "arith.trunci":
            return b.trunc(v, dst)
        if name in ("arith.bitcast", "tt.bitcast"):
            if isinstance(v.type, llir.PointerType) and isinstance(dst, llir.PointerType):
                return b.addrspacecast(v, dst) if v.type.addrspace != dst.addrspace else v
            return b.bitcast(v, dst)
        if name == "tt.int_to_ptr":
            return b.inttoptr(v, dst)
        if name == "tt.ptr_to_int":
            return b.ptrtoint(v, dst)
        # Float conversions go through f32 for bf16 and fp8.
        src_e, dst_e = ir.element_type(src_t), ir.element_type(dst_t)
        if isinstance(src_e, ir.FloatType):
            v = to_compute(b, v, src_t, self.isa)
        compute_dst = F32 if is_storage_float(dst_t) else dst
        if rounding == "rtz" and isinstance(dst_e, ir.FloatType) and dst_e.name == "f16" and str(v.type) == "float":
            return f32_to_f16_toward_zero(b, v)
        if name == "arith.sitofp":
            out = b.sitofp(v, compute_dst)
        elif name == "arith.uitofp":
            out = b.uitofp(v, compute_dst)
        elif name == "arith.fptosi":
            out = b.fptosi(v, dst)
        elif name == "arith.fptoui":
            out = b.fptoui(v, dst)
        else:   # extf / truncf / fp_to_fp between computable floats
            have = v.type
            if str(have) == str(compute_dst):
                out = v
            elif _float_bits(have) < _float_bits(compute_dst):
                out = b.fpext(v, compute_dst)
            else:
                out = b.fptrunc(v, compute_dst)
        if isinstance(dst_e, ir.FloatType):
            out = from_compute(b, out, dst_t, rounding, self.isa)
        return out


def _float_bits(t) -> int:
    return {"half": 16, "float": 32, "double": 64}[str(t)]


def llvm_bits(ty) -> int:
    """Bits of an LLVM integer, float or (global, 64-bit) pointer type."""
    if isinstance(ty, llir.IntType):
        return ty.width
    return 64 if isinstance(ty, llir.PointerType) else _float_bits(ty)
