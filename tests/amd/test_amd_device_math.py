"""The AMD f64 math library (`tilejit_amd/device_math.py`): accuracy on the CPU, code for AMDGPU.

The very IR the AMD backend links into kernels is JIT-compiled for the host (llvmlite MCJIT) and
compared with NumPy (ulp error) over random inputs and edge cases; then kernels that call every
function compile for gfx942 and gfx1100 to hsaco with no call left to an undefined symbol.
"""
from __future__ import annotations

import ctypes
import math

import llvmlite.binding as llvm
import llvmlite.ir as llir
import numpy as np
import pytest

from amd_support import requires_lld
from tilejit_amd import device_math, toolchain
from tilejit_amd.elf import inspect_hsaco
from tilejit_amd.isa import AmdISA

RNG = np.random.default_rng(1234)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 2.0 ** -1022, 1.0, -1.0]


@pytest.fixture(scope="module")
def host():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(str(device_math.build_library([], llvm.get_process_triple())))
    module.verify()
    engine = llvm.create_mcjit_compiler(module, llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()

    def function(op_name, suffix="f64"):
        c_type, np_type = (ctypes.c_double, np.float64) if suffix == "f64" else (ctypes.c_float, np.float32)
        address = engine.get_function_address(device_math.symbol_for(op_name, suffix))
        native = ctypes.CFUNCTYPE(*[c_type] * (device_math.arity(op_name) + 1))(address)
        return np.vectorize(native, otypes=[np_type])
    function.engine = engine   # keep the JIT alive as long as the functions
    return function


def ulp_error(got, ref):
    """|got - ref| in units of ref's last place; 0 where both are the same value or both nan."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    with np.errstate(all="ignore"):
        err = np.abs(got - ref) / np.maximum(np.spacing(np.abs(ref)), 2.0 ** -1074)
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)   # nan where a number was expected (or the reverse)


def _check(host, op_name, ref, max_ulp, *args):
    with np.errstate(all="ignore"):
        got, want = host(op_name)(*args), ref(*args)
    err = ulp_error(got, want)
    worst = int(np.argmax(err))
    where = tuple(float(a[worst]) for a in args)
    assert err[worst] <= max_ulp, f"{op_name}{where} = {got[worst]!r}, NumPy {want[worst]!r}: {err[worst]} ulp"
    # Signed zeros must match too (equality above treats 0 and -0 as equal).
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), f"{op_name}: sign of zero"


def _with_specials(values):
    return np.concatenate([values, SPECIAL, [-s for s in SPECIAL]])


EXP_ARGS = _with_specials(np.concatenate([RNG.uniform(-750, 750, 4000), RNG.uniform(-1, 1, 2000),
                                          [709.78, 709.79, -745.13, -745.14, 1e-20]]))
POSITIVE = _with_specials(np.concatenate([np.exp(RNG.uniform(-744, 709, 4000)), RNG.uniform(0.5, 2, 2000)]))
TRIG = _with_specials(np.concatenate([RNG.uniform(-10, 10, 3000), RNG.uniform(-1.6e6, 1.6e6, 3000),
                                      np.pi / 2 * np.arange(-40, 41), [355.0, 103993.0, 1e-300]]))
HYPER = _with_specials(np.concatenate([RNG.uniform(-30, 30, 3000), RNG.uniform(-712, 712, 2000),
                                       RNG.uniform(-1e-3, 1e-3, 1000), [710.4, -710.4, 22.0]]))

def _mpmath_reference(name):
    """A correctly rounded reference (NumPy's cbrt is off by an ulp at times: cbrt(27) != 3)."""
    mpmath = pytest.importorskip("mpmath")

    exact, libm = getattr(mpmath, name), {"erf": math.erf, "cbrt": np.cbrt}[name]

    def one(v):
        if not np.isfinite(v) or v == 0:      # mpmath drops the sign of -0
            return float(libm(v))
        return math.copysign(float(exact(abs(v))), v)   # both are odd functions

    def ref(values):
        with mpmath.workprec(120):
            return np.array([one(v) for v in np.asarray(values, np.float64).tolist()])
    return ref


ERF_ARGS = _with_specials(np.concatenate([RNG.uniform(-7, 7, 4000), RNG.uniform(-2, 2, 3000),
                                          np.exp(RNG.uniform(-700, 0, 1000)), [1.5, -1.5, 5.92, 5.93, 6.0]]))

CBRT_ARGS = _with_specials(np.concatenate([POSITIVE, -POSITIVE[:2000], RNG.uniform(-9, 9, 2000),
                                           np.arange(-30.0, 31.0) ** 3]))   # exact cubes too


@pytest.mark.parametrize("op_name, ref, args, max_ulp", [
    ("math.exp", np.exp, EXP_ARGS, 1),
    ("math.exp2", np.exp2, EXP_ARGS * 1.45, 1),
    ("math.expm1", np.expm1, EXP_ARGS, 1),
    ("math.log", np.log, POSITIVE, 1),
    ("math.log2", np.log2, POSITIVE, 1),
    ("math.log10", np.log10, POSITIVE, 2),
    ("math.log1p", np.log1p, _with_specials(np.concatenate([RNG.uniform(-1, 1, 3000), POSITIVE[:2000]])), 2),
    ("math.sin", np.sin, TRIG, 1),
    ("math.cos", np.cos, TRIG, 1),
    ("math.tan", np.tan, TRIG, 3),
    ("math.sinh", np.sinh, HYPER, 2),
    ("math.cosh", np.cosh, HYPER, 2),
    ("math.tanh", np.tanh, HYPER, 2),
    ("math.atan", np.arctan, _with_specials(np.concatenate([RNG.uniform(-5, 5, 3000),
                                                           np.exp(RNG.uniform(-700, 700, 2000))])), 1),
    ("math.asin", np.arcsin, _with_specials(np.concatenate([RNG.uniform(-1, 1, 4000), [1 - 1e-12, 1.5]])), 2),
    ("math.acos", np.arccos, _with_specials(np.concatenate([RNG.uniform(-1, 1, 4000), [1 - 1e-12, -1.5]])), 2),
    ("math.erf", _mpmath_reference("erf"), ERF_ARGS, 2),
    ("math.cbrt", _mpmath_reference("cbrt"), CBRT_ARGS, 1),
])
def test_unary_accuracy_against_numpy(host, op_name, ref, args, max_ulp):
    _check(host, op_name, ref, max_ulp, args)


def _grid(values):
    y, x = np.meshgrid(values, values)
    return y.ravel(), x.ravel()


def test_atan2_accuracy_and_every_quadrant_and_special(host):
    edge_y, edge_x = _grid(np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-300]))
    y = np.concatenate([RNG.normal(size=5000) * np.exp(RNG.uniform(-30, 30, 5000)), edge_y])
    x = np.concatenate([RNG.normal(size=5000) * np.exp(RNG.uniform(-30, 30, 5000)), edge_x])
    _check(host, "math.atan2", np.arctan2, 1, y, x)


def test_pow_special_cases_follow_c99(host):
    y, x = _grid(np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf, np.nan, 1e-310]))
    _check(host, "math.powf", np.power, 1, x, y)


def test_pow_accuracy(host):
    # Moderate results: a couple of ulp. Near the overflow / underflow limits y log2(x) ~ 1000
    # magnifies the error of the double-double log2 (about 2^-57): documented as up to ~100 ulp.
    x = np.concatenate([np.exp(RNG.uniform(-10, 10, 4000)), -np.exp(RNG.uniform(-3, 3, 1000))])
    y = np.concatenate([RNG.uniform(-40, 40, 4000) / np.maximum(np.abs(np.log2(np.abs(x[:4000]))), 1),
                        np.round(RNG.uniform(-40, 40, 1000))])
    _check(host, "math.powf", np.power, 8, x, y)
    x = np.exp(RNG.uniform(-3, 3, 3000))
    y = RNG.uniform(-1000, 1000, 3000) / np.log2(x)
    _check(host, "math.powf", np.power, 128, x, y)


F32_CASES = {
    "math.tan": (np.tan, np.concatenate([RNG.uniform(-10, 10, 3000), RNG.uniform(-1e5, 1e5, 1000)])),
    "math.sinh": (np.sinh, np.concatenate([RNG.uniform(-90, 90, 2000), RNG.uniform(-1e-3, 1e-3, 1000),
                                           np.exp(RNG.uniform(-100, 0, 1000))])),
    "math.cosh": (np.cosh, RNG.uniform(-90, 90, 3000)),
    "math.tanh": (np.tanh, np.concatenate([RNG.uniform(-10, 10, 3000), RNG.uniform(-1e-3, 1e-3, 1000)])),
    "math.atan": (np.arctan, np.concatenate([RNG.uniform(-5, 5, 3000), np.exp(RNG.uniform(-80, 80, 2000))])),
    "math.asin": (np.arcsin, np.concatenate([RNG.uniform(-1, 1, 4000), np.exp(RNG.uniform(-80, 0, 500))])),
    "math.acos": (np.arccos, RNG.uniform(-1, 1, 4000)),
    "math.erf": (np.vectorize(math.erf), np.concatenate([RNG.uniform(-5, 5, 4000), np.exp(RNG.uniform(-80, 0, 500))])),
    "math.cbrt": (np.cbrt, np.concatenate([RNG.uniform(-9, 9, 2000), np.exp(RNG.uniform(-100, 88, 2000))])),
    "math.expm1": (np.expm1, np.concatenate([RNG.uniform(-90, 88, 3000), RNG.uniform(-1e-3, 1e-3, 1000)])),
    "math.log1p": (np.log1p, np.concatenate([RNG.uniform(-1, 1, 3000), np.exp(RNG.uniform(-80, 88, 1000))])),
}
F32_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.0, -1.0, 1e-38], np.float32)


def _check_f32(host, op_name, ref, max_ulp, *args):
    """f32 results against the f64 reference of the same (f32) inputs, in f32 ulp of the result."""
    args = [np.concatenate([np.asarray(a, np.float32), F32_SPECIAL]) for a in args]
    with np.errstate(all="ignore"):
        got = host(op_name, "f32")(*args).astype(np.float64)
        want = ref(*[a.astype(np.float64) for a in args])
        rounded = want.astype(np.float32).astype(np.float64)   # f32 overflow: want becomes inf
        unit = np.maximum(np.spacing(np.abs(want.astype(np.float32))).astype(np.float64), 2.0 ** -149)
        err = np.abs(got - want) / unit
    same = (got == rounded) | (np.isnan(got) & np.isnan(want))
    err = np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
    worst = int(np.argmax(err))
    where = tuple(float(a[worst]) for a in args)
    assert err[worst] <= max_ulp, f"{op_name}{where} = {got[worst]!r}, NumPy {want[worst]!r}: {err[worst]} ulp"
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), f"{op_name}: sign of zero"


@pytest.mark.parametrize("op_name", sorted(F32_CASES))
def test_f32_functions_are_correctly_rounded_within_one_ulp(host, op_name):
    ref, args = F32_CASES[op_name]
    _check_f32(host, op_name, ref, 1, args)


def test_f32_two_argument_functions(host):
    y, x = _grid(np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-30]))
    y = np.concatenate([RNG.normal(size=4000) * np.exp(RNG.uniform(-20, 20, 4000)), y])
    x = np.concatenate([RNG.normal(size=4000) * np.exp(RNG.uniform(-20, 20, 4000)), x])
    _check_f32(host, "math.atan2", np.arctan2, 1, y, x)
    base = np.exp(RNG.uniform(-5, 5, 4000))
    exponent = RNG.uniform(-120, 120, 4000) / np.maximum(np.abs(np.log2(base)), 1)   # results within f32 range
    _check_f32(host, "math.powf", np.power, 1, base, exponent)


def test_the_f32_check_fails_on_the_cores_polynomial_atan(host):
    # The core's f32 atan (minimax, ~1e-5 absolute) is what AMD used before: far above 1 ulp.
    coeffs = [0.99997726, -0.33262347, 0.19354346, -0.11643287, 0.05265332, -0.01172120]
    x = RNG.uniform(-1, 1, 1000).astype(np.float32)
    core_atan = x * np.polyval(coeffs[::-1], x * x)
    with pytest.raises(AssertionError, match="ulp"):
        _check_f32(lambda op, suffix: (lambda v: np.concatenate([core_atan, np.arctan(F32_SPECIAL)])),
                   "math.atan", np.arctan, 1, x)


def test_the_check_itself_fails_on_a_wrong_function(host):
    with pytest.raises(AssertionError, match="ulp"):
        _check(host, "math.sin", lambda v: np.sin(v) * (1 + 1e-15), 1, TRIG)


def test_double_double_constants_are_exact_splits():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 300

    def tail(value, head):
        return float(value - mpmath.mpf(head))
    assert device_math.LN2_TAIL == tail(mpmath.log(2), device_math.LN2)
    assert device_math.LOG2E_TAIL == tail(1 / mpmath.log(2), device_math.LOG2E)
    assert device_math.INV_LN10_TAIL == tail(1 / mpmath.log(10), device_math.INV_LN10)
    assert device_math.LN2_LO == tail(mpmath.log(2), device_math.LN2_HI)
    assert device_math.LOG10_2_LO == tail(mpmath.log10(2), device_math.LOG10_2_HI)
    assert device_math.PI_LO == tail(mpmath.pi, device_math.PI_HI)
    assert device_math.PIO2_3 == tail(mpmath.pi / 2 - device_math.PIO2_2, device_math.PIO2_1)
    for hi, lo, exact in zip(device_math.ATAN_HI, device_math.ATAN_LO,
                             [mpmath.atan(0.5), mpmath.atan(1), mpmath.atan(1.5), mpmath.pi / 2]):
        assert lo == tail(exact, hi)


def test_isa_table_names_the_library_for_f64_and_inaccurate_f32_ops():
    isa = AmdISA("gfx942", 64)
    assert isa.math_symbol("math.sin", llir.DoubleType()) == ("libcall", "__tilejit_amd_sin_f64")
    assert isa.math_symbol("math.powf", llir.DoubleType()) == ("libcall", "__tilejit_amd_powf_f64")
    assert isa.math_symbol("math.sqrt", llir.DoubleType()) == ("intrinsic", "llvm.sqrt.f64")
    assert isa.math_symbol("math.sin", llir.FloatType()) == ("intrinsic", "llvm.sin.f32")
    assert isa.math_symbol("math.erf", llir.DoubleType()) == ("libcall", "__tilejit_amd_erf_f64")
    assert isa.math_symbol("math.cbrt", llir.DoubleType()) == ("libcall", "__tilejit_amd_cbrt_f64")
    assert isa.math_symbol("math.atan", llir.FloatType()) == ("libcall", "__tilejit_amd_atan_f32")
    assert isa.math_symbol("math.exp", llir.FloatType()) == ("intrinsic", "llvm.exp.f32")
    assert isa.math_symbol("math.atan", llir.HalfType()) is None   # the core widens f16 to f32


def _kernel_calling_every_function() -> str:
    module = llir.Module()
    module.triple = toolchain.AMDGPU_TRIPLE
    ptr = llir.PointerType(addrspace=1)
    kernel = llir.Function(module, llir.FunctionType(llir.VoidType(), [ptr]), "every_math_function")
    AmdISA("gfx942", 64).mark_kernel(kernel, 64)
    b = llir.IRBuilder(kernel.append_basic_block())
    f64 = llir.DoubleType()
    x = b.load(kernel.args[0], typ=f64)
    isa = AmdISA("gfx942", 64)
    for i, (op_name, suffix) in enumerate(sorted(device_math.SYMBOLS.values())):
        # Through the ISA table, as the lowering asks for them: f64 and f32 versions.
        ty = f64 if suffix == "f64" else llir.FloatType()
        kind, symbol = isa.math_symbol(op_name, ty)
        assert kind == "libcall" and symbol == device_math.symbol_for(op_name, suffix)
        fn = llir.Function(module, llir.FunctionType(ty, [ty] * device_math.arity(op_name)), symbol)
        arg = x if suffix == "f64" else b.fptrunc(x, ty)
        out = b.gep(kernel.args[0], [llir.Constant(llir.IntType(64), i + 1)], source_etype=ty)
        b.store(b.call(fn, [arg] * device_math.arity(op_name)), out)
    b.ret_void()
    return str(module)


@requires_lld
@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_every_function_compiles_for_amdgpu_and_links(arch):
    art = toolchain.compile_llir(_kernel_calling_every_function(), arch)
    body = art.amdgcn.split(".amdgpu_metadata")[0]
    assert "v_fma" in body and "v_ldexp_f64" in body and "v_frexp_mant_f64" in body
    # Every library function was linked in and inlined: none is left declared, or exported.
    assert not [line for line in art.optimized_llir.splitlines()
                if line.startswith("declare") and "__tilejit_amd" in line]
    assert "v_cvt_f64_f32" in body and "v_cvt_f32_f64" in body   # the f32 versions go through f64
    info = inspect_hsaco(art.hsaco)
    assert info.arch == arch and set(info.kernels) == {"every_math_function"}


def test_an_unknown_function_is_a_compilation_error():
    from tilejit.errors import CompilationError
    with pytest.raises(CompilationError, match="no f64 math.nope"):
        device_math.define(llir.Module(), "math.nope")
    assert device_math.symbol_for("math.nope") is None
    assert math.isclose(device_math.LN2, math.log(2.0))
