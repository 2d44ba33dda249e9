"""Triton semantics the frontend implements: TTIR checked with FileCheck, then run on the NumPy
interpreter (through `tilejit.compile`, which needs no GPU) to check the values."""
import re

import numpy as np
import pytest

import tilejit
from tilejit.errors import CompilationError
from tilejit.frontend import ASTSource

from . import semantics_kernels as sk
from .helpers import filecheck, ttir


def run_on_interpreter(src, args):
    pytest.importorskip("tilejit_interpreter")
    kernel = tilejit.compile(src, target="interpreter")
    kernel.run((1, 1, 1), tuple(args))


# -- range with a constant negative step ------------------------------------------------------------
@pytest.mark.parametrize("start,step", [(9, -2), (10, -2), (5, -1), (0, -3), (-4, -1), (7, -7)])
def test_negative_step_counts_down_like_python(start, step):
    src = ASTSource(sk.negative_step, {"out_ptr": "*i32", "start": "i32"}, {"STEP": step})
    out = np.zeros(2, np.int32)
    run_on_interpreter(src, [out, start])
    expected = list(range(start, 0, step))
    assert out.tolist() == [sum(expected), len(expected)]


def test_negative_step_becomes_an_upward_scf_for():
    text = ttir(sk.negative_step, {"out_ptr": "*i32", "start": "i32"}, {"STEP": -2})
    # bounds swapped (0 .. start by +2) and the induction variable mapped back: start - iv + 0
    lower, step = re.search(r"scf\.for %(\d+), %start, %(\d+)", text).groups()
    assert f"%{lower} = arith.constant {{value = 0}} : i32" in text
    assert f"%{step} = arith.constant {{value = 2}} : i32" in text
    filecheck(text, """
CHECK: scf.for %[[LB:[0-9]+]], %start, %[[STEP:[0-9]+]]
CHECK: ^bb(%[[IV:arg[0-9]+]]: i32
CHECK: %[[D:[0-9]+]] = arith.subi %start, %[[IV]]
CHECK: arith.addi %[[D]], %[[LB]]
""")


def test_zero_step_is_a_compilation_error():
    with pytest.raises(CompilationError, match="must not be zero"):
        ttir(sk.zero_step, {"out_ptr": "*i32", "n": "i32"})


# -- tl.load `other` is cast to the element type --------------------------------------------------------
def test_float_other_of_an_integer_load_truncates_toward_zero():
    text = ttir(sk.float_other_for_int_load, {"src_ptr": "*i8", "dst_ptr": "*i8"}, {"OTHER": -2.75})
    filecheck(text, """
CHECK: arith.constant {value = -2.75} : f32
CHECK: arith.fptosi {{.*}} to i8
CHECK: tt.load
""")
    src = ASTSource(sk.float_other_for_int_load, {"src_ptr": "*i8", "dst_ptr": "*i8"}, {"OTHER": -2.75})
    dst = np.zeros(8, np.int8)
    run_on_interpreter(src, [np.arange(8, dtype=np.int8), dst])
    assert dst.tolist() == [0, 1, 2, 3, -2, -2, -2, -2]


# -- reductions over every axis keep the rank with keep_dims ---------------------------------------------
def test_full_reduction_with_keep_dims_keeps_the_rank():
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32"}
    filecheck(ttir(sk.reduce_all_keep_dims, sig), "CHECK: -> (tensor<1x1xf32>)")
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(1, np.float32)
    run_on_interpreter(ASTSource(sk.reduce_all_keep_dims, sig), [x, out])
    assert out[0] == x.sum()


# -- tuple parameters (Triton 3.x) ------------------------------------------------------------------------
TUPLE_SIG = {"ptrs": ("*fp32", "*fp32", "*fp32"), "n": "i32", "meta": ("fp32", "constexpr")}
TUPLE_CONSTEXPRS = {"BLOCK": 16, (2, 1): 16}


def test_tuple_parameters_are_flattened_into_function_arguments():
    text = ttir(sk.tuple_params, TUPLE_SIG, TUPLE_CONSTEXPRS, {(0, 2): [["tt.divisibility", 16]]})
    # the constexpr element meta[1] is no argument; attrs address tuple elements by path
    filecheck(text, """
CHECK: tt.func public @tuple_params(%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>, %arg2: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32, %arg4: f32) -> ()
CHECK: tt.call
CHECK: tt.func private @_scaled_pair_sum{{.*}}(%arg0: tensor<16xf32>, %arg1: tensor<16xf32>, %arg2: f32) -> (tensor<16xf32>)
CHECK: tt.make_range {start = 0, end = 16}
""")


def test_tuple_parameters_run_with_flattened_arguments():
    a, b = np.arange(16, dtype=np.float32), np.full(16, 0.5, np.float32)
    out = np.zeros(16, np.float32)
    run_on_interpreter(ASTSource(sk.tuple_params, TUPLE_SIG, TUPLE_CONSTEXPRS), [a, b, out, 10, 3.0])
    expected = (a + b) * 3.0 + np.arange(16)
    np.testing.assert_allclose(out[:10], expected[:10])
    assert not out[10:].any()


def test_nested_tuple_parameter():
    sig = {"out_ptr": "*i32", "pairs": (("i32", "i32"), "i32")}
    filecheck(ttir(sk.nested_tuple_param, sig),
              "CHECK: tt.func public @nested_tuple_param(%out_ptr: !tt.ptr<i32>, %arg1: i32, %arg2: i32, %arg3: i32)")
    out = np.zeros(1, np.int32)
    run_on_interpreter(ASTSource(sk.nested_tuple_param, sig), [out, 5, 7, 3])
    assert out[0] == 5 + 7 * 3


def test_tuple_constexpr_element_without_a_value_is_an_error():
    with pytest.raises(CompilationError, match=r"constexpr element \[1\] of tuple parameter 'meta' has no value"):
        ttir(sk.tuple_params, TUPLE_SIG, {"BLOCK": 16})


# -- fp8e4b15 is i8 in TTIR (as in Triton) with integer conversion code -----------------------------------
# (These replaced two tests that asserted fp8e4b15 was an error, from before tilejit supported it.)
def test_fp8e4b15_casts_are_integer_code_on_i8():
    text = ttir(sk.cast_through_fp8e4b15, {"x_ptr": "*fp32", "out_ptr": "*fp32"})
    assert "f8" not in text  # no float8 IR type is involved
    filecheck(text, """
CHECK: tt.bitcast {{.*}} : (f32) -> (i32)
CHECK: arith.trunci {{.*}} : i32 to i8
CHECK: arith.extui {{.*}} : i8 to i16
CHECK: tt.bitcast {{.*}} : (i16) -> (f16)
""")
    x = np.array([0.3], np.float32)
    out = np.zeros(1, np.float32)
    run_on_interpreter(ASTSource(sk.cast_through_fp8e4b15, {"x_ptr": "*fp32", "out_ptr": "*fp32"}), [x, out])
    assert out[0] == 0.3125  # 0.3 rounded to 3 mantissa bits: 1.25 * 2**-2


def test_fp8e4b15_in_a_signature_is_a_pointer_to_i8():
    text = ttir(sk.copy_kernel, {"x_ptr": "*fp8e4b15", "out_ptr": "*fp8e4b15"})
    assert "!tt.ptr<i8>" in text


def test_fp8e4b15_arithmetic_is_a_located_error():
    with pytest.raises(CompilationError, match="arithmetic on float8e4b15 is not supported") as info:
        ttir(sk.copy_kernel_plus_one, {"x_ptr": "*fp8e4b15", "out_ptr": "*fp8e4b15"})
    assert info.value.line is not None


# -- promotion and pointer arithmetic details of Triton's semantic.py -------------------------------------
def test_unsigned_offsets_are_zero_extended_before_addptr():
    text = ttir(sk.unsigned_offset, {"x_ptr": "*fp32", "out_ptr": "*fp32", "off": "u32"})
    filecheck(text, """
CHECK: %[[WIDE:[0-9]+]] = arith.extui %off : i32 to i64
CHECK-NEXT: tt.addptr %x_ptr, %[[WIDE]] : (!tt.ptr<f32>, i64) -> (!tt.ptr<f32>)
""")
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(1, np.float32)
    run_on_interpreter(ASTSource(sk.unsigned_offset, {"x_ptr": "*fp32", "out_ptr": "*fp32", "off": "u32"}),
                       [x, out, 5])
    assert out[0] == 5.0


def test_fp8_tensor_with_an_integer_tensor_needs_a_cast():
    with pytest.raises(CompilationError, match="unexpected types fp8e5 and int32"):
        ttir(sk.fp8_plus_int_tensor, {"x_ptr": "*fp8e5", "i_ptr": "*i32", "out_ptr": "*fp32"})
