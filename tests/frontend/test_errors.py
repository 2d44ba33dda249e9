"""Bad kernels: each must raise one `CompilationError` at the right line with a useful message."""
import inspect

import pytest

from tilejit.errors import CompilationError
from tilejit.frontend import ASTSource

from . import bad_kernels as bk

CASES = [
    # (kernel, signature, constexprs, message fragment)
    (bk.arange_not_pow2, {}, {}, "power of 2"),
    (bk.arange_runtime_bound, {"n": "i32"}, {}, "constexpr integer"),
    (bk.arange_reversed, {}, {}, "greater than the start"),
    (bk.arange_too_big, {}, {}, "exceeds the maximum tensor numel"),
    (bk.add_shape_mismatch, {}, {}, "incompatible dimensions"),
    (bk.bitwise_on_float, {"p": "*fp32"}, {}, "needs integer operands"),
    (bk.xor_on_float, {"p": "*fp32"}, {}, "needs integer operands"),
    (bk.shift_on_float, {"p": "*fp32"}, {}, "needs integer operands"),
    (bk.invert_float, {"p": "*fp32"}, {}, "needs an integer operand"),
    (bk.calls_plain_python, {"p": "*fp32"}, {}, "cannot call 'plain_python'"),
    (bk.uses_lambda, {"p": "*fp32"}, {}, "lambda"),
    (bk.uses_with, {"p": "*fp32"}, {}, "'with' statements are not supported"),
    (bk.uses_try, {"p": "*fp32"}, {}, "'try' statements are not supported"),
    (bk.uses_break, {"n": "i32"}, {}, "'break' is not supported"),
    (bk.uses_continue, {"n": "i32"}, {}, "'continue' is not supported"),
    (bk.uses_global_decl, {"n": "i32"}, {}, "'global'"),
    (bk.uses_del, {"p": "*fp32"}, {}, "'del'"),
    (bk.uses_list_comp, {"p": "*fp32"}, {}, "nested comprehensions"),
    (bk.uses_nested_def, {"p": "*fp32"}, {}, "nested function definitions"),
    (bk.uses_raise, {"p": "*fp32"}, {}, "'raise' is not supported"),
    (bk.undefined_name, {"p": "*fp32"}, {}, "'not_defined_anywhere' is not defined"),
    (bk.non_constexpr_global, {"p": "*fp32"}, {}, "cannot access global variable 'GLOBAL_INT'"),
    (bk.loop_type_change, {"p": "*fp32", "n": "i32"}, {}, "loop-carried variable 'acc'"),
    (bk.branch_type_mismatch, {"p": "*fp32", "flag": "i32"}, {}, "Mismatched type for x between then block"),
    (bk.too_many_args, {"p": "*fp32"}, {}, "too many positional arguments"),
    (bk.missing_args, {"p": "*fp32"}, {}, "missing a required argument"),
    (bk.dot_shape_mismatch, {"p": "*fp32"}, {}, "not compatible for matmul"),
    (bk.dot_bad_precision, {"p": "*fp32"}, {}, "input_precision must be one of"),
    (bk.dot_dtype_mismatch, {"p": "*fp32"}, {}, "same dtype"),
    (bk.store_to_non_pointer, {"n": "i32"}, {}, "unsupported ptr type"),
    (bk.load_of_float, {"x": "fp32"}, {}, "unsupported ptr type fp32"),
    (bk.bad_boundary_check, {"p": "*fp16"}, {}, "boundary_check dimension 2 is out of range"),
    (bk.boundary_check_plain_ptr, {"p": "*fp16"}, {}, "only supported for block pointers"),
    (bk.mask_with_block_ptr, {"p": "*fp16"}, {}, "cannot be specified for loading block pointers"),
    (bk.bad_padding, {"p": "*fp16"}, {}, "padding_option"),
    (bk.floordiv_float, {"p": "*fp32"}, {}, "only defined for integers"),
    (bk.pow_on_tensor, {"p": "*fp32"}, {}, "'**' is not supported"),
    (bk.static_assert_fails, {"p": "*fp32"}, {"N": 4}, "N too small"),
    (bk.assert_constexpr_fails, {"p": "*fp32"}, {"N": 4}, "N must be big"),
    (bk.tensor_if_condition, {"p": "*fp32"}, {}, "condition must be a scalar"),
    (bk.return_in_loop, {"p": "*fp32", "n": "i32"}, {}, "'return' inside a 'for' or 'while'"),
    (bk.unsigned_negative_scalar, {"p": "*u32"}, {}, "unsigned tensor and a negative scalar"),
    (bk.scalar_out_of_range, {"p": "*i8"}, {}, "out of range for type int8"),
    (bk.bad_cast_rounding, {"p": "*fp32"}, {}, "only for truncating fp conversions"),
    (bk.bitcast_size_mismatch, {"p": "*fp32"}, {}, "cannot bitcast"),
    (bk.reshape_bad_numel, {"p": "*fp32"}, {}, "cannot reshape a tensor of 16 elements"),
    (bk.unknown_tensor_attribute, {"p": "*fp32"}, {}, "no attribute 'no_such_thing'"),
    (bk.exp_of_int, {"p": "*fp32"}, {}, "Expected dtype"),
    (bk.program_id_bad_axis, {}, {}, "program_id axis must be 0, 1, or 2 but got"),
    (bk.bad_cache_modifier, {"p": "*fp32"}, {}, "cache_modifier '.zz' is not supported"),
    (bk.unpack_mismatch, {"p": "*fp32"}, {}, "cannot unpack 2 values into 3 names"),
    (bk.kernel_returns_value, {"p": "*fp32"}, {}, "must not return a value"),
    (bk.uses_async_for_walrus, {"p": "*fp32"}, {}, "walrus"),
    (bk.uses_dict, {"p": "*fp32"}, {}, "dict literals"),
    (bk.tensor_index, {"p": "*fp32"}, {}, "unsupported tensor index 3"),
    (bk.matmul_operator, {"p": "*fp32"}, {}, "use tl.dot"),
    (bk.atomic_on_block_ptr, {"p": "*fp32"}, {}, "atomic_add: ptr must be a pointer"),
    (bk.where_shape_mismatch, {"p": "*fp32"}, {}, "incompatible dimensions"),
    (bk.mod_mixed_signedness, {"p": "*i32", "q": "*u32"}, {}, "different signedness"),
    (bk.reduce_bad_axis, {"p": "*fp32"}, {}, "axis 2 is out of range"),
    (bk.full_non_pow2, {"p": "*fp32"}, {}, "must be a power of 2"),
    (bk.constexpr_annot_tensor, {"p": "*fp32"}, {}, "annotated tl.constexpr"),
]


def _marked_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    for i, text in enumerate(lines):
        if "# ERR" in text:
            return first + i
    raise AssertionError(f"{fn.__name__} has no '# ERR' marker")


@pytest.mark.parametrize("kernel,sig,consts,fragment", CASES, ids=[c[0].__name__ for c in CASES])
def test_bad_kernel(kernel, sig, consts, fragment):
    with pytest.raises(CompilationError) as info:
        ASTSource(kernel, sig, consts).make_ir(None, None)
    err = info.value
    assert fragment in err.message, err.message
    assert err.file and err.file.endswith("bad_kernels.py")
    assert err.line == _marked_line(kernel), str(err)
    assert err.source_line and "# ERR" in err.source_line
    # One conversion at the innermost node: the message is not wrapped twice.
    assert str(err).count(" at ") >= 1 and "CompilationError" not in err.message


@pytest.mark.parametrize("kernel,sig,consts,fragment", CASES[:12], ids=[c[0].__name__ for c in CASES[:12]])
def test_bad_kernel_position_is_also_given_as_triton_numbers_it(kernel, sig, consts, fragment):
    """Besides file:line:col, the message names the place as Triton does, "at 2:4:": line 1 is the
    `def` (below the decorators), columns count from 0 in the dedented source (Triton's
    test_compile_errors looks for that text)."""
    with pytest.raises(CompilationError) as info:
        ASTSource(kernel, sig, consts).make_ir(None, None)
    err = info.value
    lines, first = inspect.getsourcelines(kernel.fn)
    def_index = next(i for i, text in enumerate(lines) if text.lstrip().startswith("def "))
    indent = len(lines[def_index]) - len(lines[def_index].lstrip())
    assert err.position == (err.line - (first + def_index) + 1, err.col - 1 - indent)
    assert f"at {err.position[0]}:{err.position[1]}: {err.file}:{err.line}:{err.col}" in str(err)


def test_error_in_helper_is_reported_at_the_call_caused_by_the_helpers_error():
    """As Triton: the error names the call in the kernel; its cause, the line in the helper."""
    with pytest.raises(CompilationError) as info:
        ASTSource(bk.helper_mismatched_returns, {"p": "*fp32", "flag": "i32"}, {}).make_ir(None, None)
    err = info.value
    # Triton's tests read the message without its location as `error_message` (test_const)
    assert err.error_message == err.message
    assert err.error_message.startswith("in the call of 'helper_typed': Inconsistent return types: ")
    assert "bad_kernels.py" in str(err) and "bad_kernels.py" not in err.error_message
    assert "helper_typed(flag)" in str(err)   # the call's line
    inner = err.__cause__
    assert isinstance(inner, CompilationError) and inner.error_message.startswith("Inconsistent return types: ")
    lines, first = inspect.getsourcelines(bk.helper_typed.fn)
    assert first <= inner.line < first + len(lines)


def test_error_column_and_caret():
    with pytest.raises(CompilationError) as info:
        ASTSource(bk.add_shape_mismatch, {}, {}).make_ir(None, None)
    err = info.value
    assert err.col == err.source_line.index("a + b") + 1
    assert "^" in str(err)


def test_too_many_cases():
    assert len(CASES) >= 40


import tilejit  # noqa: E402
import tilejit.language as tl  # noqa: E402


@tilejit.jit
def _branchy(n):
    if n == 0:
        return tl.arange(0, 4)
    else:
        return tl.arange(0, 8)   # the second return


@tilejit.jit
def _middle(n):
    return _branchy(n) + 1


@tilejit.jit
def _calls_two_levels(n):
    _middle(n)


def test_each_level_of_calls_adds_one_link_pointing_at_its_call():
    with pytest.raises(CompilationError) as info:
        ASTSource(_calls_two_levels, {"n": "i32"}, {}).make_ir(None, None)
    outer = info.value
    middle, inner = outer.__cause__, outer.__cause__.__cause__
    assert "_middle(n)" in str(outer) and "_branchy(n) + 1" in str(middle)
    assert outer.message == "in the call of '_middle': " + inner.message   # the root message once
    assert middle.message == "in the call of '_branchy': " + inner.message
    # as Triton, the mismatch is reported at the second `return`
    assert inner.message.startswith("Inconsistent return types") and "the second return" in str(inner)
    assert inner.__cause__ is None
