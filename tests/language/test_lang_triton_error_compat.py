"""Compile-time behaviours Triton's own test_compile_errors.py checks, on every backend present:
annotated constexpr globals, the messages its tests compare exactly, the static_assert error class,
the deprecation warning of a non-boolean `tl.where` condition."""
import warnings

import numpy as np
import pytest

from tilejit.errors import CompilationError, CompileTimeAssertionFailure

import triton_compat_kernels as ck


def test_annotated_constexpr_global_is_a_constexpr(device):
    out = device.zeros(64, np.float32)
    ck.store_annotated_global[(1,)](out)
    np.testing.assert_array_equal(device.numpy(out), np.arange(64, dtype=np.float32))


def test_plain_global_is_refused_and_a_captured_variable_is_not_defined(device):
    with pytest.raises(CompilationError, match="cannot access global variable 'PLAIN_GLOBAL'"):
        ck.reads_plain_global[(1,)](device.zeros(1, np.float32))
    with pytest.raises(CompilationError, match="captured is not defined"):   # Triton's wording
        ck.make_capturing_kernel()[(1,)](device.zeros(1, np.float32))


def test_failing_static_assert_is_a_compile_time_assertion_failure(device):
    with pytest.raises(CompileTimeAssertionFailure) as info:
        ck.failing_static_assert[(1,)]()
    assert info.value.__cause__ is None and "static_assert failed" in str(info.value)
    assert info.value.line is not None


@pytest.mark.parametrize("kernel, message, note", [
    (ck.arange_not_power_of_two, "arange's range must be a power of 2", "got 5 (end 7 - start 2)"),
    (ck.full_not_power_of_two, "Shape element 0 must be a power of 2", "shape [33]"),
])
def test_power_of_two_messages_are_tritons_with_the_numbers_in_a_note(device, kernel, message, note):
    with pytest.raises(CompilationError) as info:
        kernel[(1,)]()
    assert str(info.value.__cause__) == message      # Triton's test compares the cause exactly
    assert message in info.value.message and note in info.value.message


def test_where_with_a_non_boolean_condition_warns_at_the_users_line(device, request):
    out = device.zeros(64, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ck.where_with_integer_condition[(1,)](out, TAG=request.node.name)
    hits = [w for w in caught if "non-boolean condition" in str(w.message)]
    assert hits and hits[0].filename.endswith("triton_compat_kernels.py")
    np.testing.assert_array_equal(device.numpy(out), np.full(64, 2.0, np.float32))   # 0 is false


def test_max_num_imprecise_acc_above_k_is_an_error(device):
    with pytest.raises(CompilationError) as info:
        ck.imprecise_acc_above_k[(1,)]()
    assert str(info.value.__cause__) == "max_num_imprecise_acc (128) must be <= K (64)"
