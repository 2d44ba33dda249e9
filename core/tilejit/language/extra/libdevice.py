"""`triton.language.extra.libdevice`: Triton 3.x's libdevice function set, on every backend.

Triton binds these names to vendor bitcode (`__nv_*`, `__ocml_*`). tilejit has no bitcode: each
function is one TTIR op every backend implements (`math.tanh`, `math.powf`, ...) or a composition of
such ops, so a kernel gives the same answer on the interpreter and on a GPU. The same module is
`tl.extra.cuda.libdevice` and `tl.extra.hip.libdevice`.

Types follow Triton's dispatch tables: the float functions take fp32 or fp64 (anything else is a
TypeError at compile time, as Triton's "input arg type does not match"); isnan/isinf/finitef/isfinited
return int1, signbit/ilogb int32. Accuracy and the few limits (fp64 fma_rz/rd/ru) are in
docs/language.md.
"""
from __future__ import annotations

from .. import functions as _f
from . import _common as _c
from ._bessel import cyl_bessel_i0, cyl_bessel_i1, j0, j1, jn, y0, y1, yn  # noqa: F401  (re-exported)
from ._float_math import (  # noqa: F401  (re-exported, see __all__)
                          acosh, asinh, atanh, cospi, erfc, erfcinv, erfcx, erfinv, exp10, fdim, finitef,
                          hypot, ilogb, isfinited, isinf, isnan, ldexp, lgamma, llrint, llround, logb,
                          nearbyint, nextafter, norm3d, norm4d, normcdf, normcdfinv, rcbrt, rcp64h, remainder,
                          rhypot, rint, rnorm3d, rnorm4d, saturatef, scalbn, signbit, sinpi, tgamma)
from ._integer import brev, byte_perm, clz, ffs, hadd, mul24, mulhi, popc, rhadd, sad  # noqa: F401
from ._rounding import (  # noqa: F401  (re-exported, see __all__)
                        add_rd, add_rn, add_ru, add_rz, div_rd, div_rn, div_ru, div_rz, double2float_rd,
                        double2float_rn, double2float_ru, double2float_rz, double2hiint, double2int_rd,
                        double2int_rn, double2int_ru, double2int_rz, double2ll_rd, double2ll_rn, double2ll_ru,
                        double2ll_rz, double2loint, double2uint_rd, double2uint_rn, double2uint_ru,
                        double2uint_rz, double2ull_rd, double2ull_rn, double2ull_ru, double2ull_rz,
                        double_as_longlong, float2int_rd, float2int_rn, float2int_ru, float2int_rz, float2ll_rd,
                        float2ll_rn, float2ll_ru, float2ll_rz, float2uint_rd, float2uint_rn, float2uint_ru,
                        float2uint_rz, float2ull_rd, float2ull_rn, float2ull_ru, float2ull_rz, float_as_int,
                        float_as_uint, fma_rd, fma_rn, fma_ru, fma_rz, hiloint2double, int2double_rn,
                        int2float_rd, int2float_rn, int2float_ru, int2float_rz, int_as_float, ll2double_rd,
                        ll2double_rn, ll2double_ru, ll2double_rz, ll2float_rd, ll2float_rn, ll2float_ru,
                        ll2float_rz, longlong_as_double, mul_rd, mul_rn, mul_ru, mul_rz, rcp_rd, rcp_rn, rcp_ru,
                        rcp_rz, rsqrt_rn, sqrt_rd, sqrt_rn, sqrt_ru, sqrt_rz, sub_rd, sub_rn, sub_ru, sub_rz,
                        uint2double_rn, uint2float_rd, uint2float_rn, uint2float_ru, uint2float_rz,
                        uint_as_float, ull2double_rd, ull2double_rn, ull2double_ru, ull2double_rz, ull2float_rd,
                        ull2float_rn, ull2float_ru, ull2float_rz)

# One TTIR op each.
abs = _f.abs  # noqa: A001  (libdevice's names shadow Python's builtins here, as in Triton)
floor = _f.floor
ceil = _f.ceil
exp = _f.exp
exp2 = _f.exp2
log = _f.log
log2 = _f.log2
sqrt = _f.sqrt_rn   # __nv_sqrtf is IEEE (sqrt.rn); `tl.sqrt` is sqrt.approx on NVIDIA, as in Triton
rsqrt = _f.rsqrt
sin = _f.sin
cos = _f.cos
erf = _f.erf
fma = _f.fma
trunc = _c.m_trunc
round = _c.m_round  # noqa: A001
tanh = _c.m_tanh
sinh = _c.m_sinh
cosh = _c.m_cosh
tan = _c.m_tan
asin = _c.m_asin
acos = _c.m_acos
atan = _c.m_atan
log10 = _c.m_log10
log1p = _c.m_log1p
expm1 = _c.m_expm1
cbrt = _c.m_cbrt
atan2 = _c.m_atan2
copysign = _c.m_copysign
fmod = _c.m_fmod


@_f.builtin
def pow(arg0, arg1, _semantic=None):  # noqa: A001
    """arg0 ** arg1; an integer exponent is converted to arg0's float type (libdevice's powi)."""
    base = _semantic.to_tensor(arg0)
    exponent = _semantic.to_tensor(arg1)
    if base.type.scalar.is_floating() and exponent.type.scalar.is_int():
        exponent = _semantic.cast(exponent, base.type.scalar)
    return _c.m_pow(base, exponent, _semantic=_semantic)


# The fast (approximate) variants: tilejit computes them with the accurate function.
fast_sinf = sin
fast_cosf = cos
fast_log2f = log2
fast_logf = log
fast_expf = exp
fast_tanf = tan
fast_exp10f = exp10
fast_log10f = log10
fast_powf = pow


@_f.builtin
def fast_dividef(arg0, arg1, _semantic=None):
    return _semantic.fdiv(arg0, arg1, False)


# Names of the set that tilejit does not provide (none today; kept for the documentation test).
UNSUPPORTED = ()


__all__ = sorted(n for n in dir() if not n.startswith("_") and n not in ("annotations", "UNSUPPORTED"))
