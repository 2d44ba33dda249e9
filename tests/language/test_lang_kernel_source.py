"""Kernels whose source text is given at run time, as Triton's own test helpers make them: `exec()` of
a string (the text lives in no file) and a `JITFunction` whose `src` is replaced (`_unsafe_update_src`,
or assigning `src` as Triton up to 3.1 did). The JIT compiles the text it holds, and errors show the
lines of that text."""
import inspect
import textwrap

import numpy as np
import pytest

import tilejit
import tilejit.language as tl


@tilejit.jit
def _template(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))  # noqa: F841 - used by the replaced text
    tl.store(out_ptr + tl.arange(0, N), GENERATE_TEST_HERE)  # noqa: F821


def _exec_patched(template, to_replace):
    """Triton's `patch_kernel` under its interpreter: the kernel's text edited, then exec'd."""
    namespace = {}
    src = textwrap.dedent(inspect.getsource(template.fn))
    for key, value in to_replace.items():
        src = src.replace(key, value)
    exec(src, globals(), namespace)  # noqa: S102
    return namespace[template.fn.__name__]


def _updated(template, to_replace):
    """Triton's `patch_kernel` on GPUs: a new JITFunction of the same function, its `src` replaced."""
    kernel = tilejit.JITFunction(template.fn)
    for key, value in to_replace.items():
        kernel._unsafe_update_src(kernel.src.replace(key, value))
    return kernel


def _run(kernel, device, x):
    out = device.zeros(x.shape, x.dtype)
    kernel[(1,)](device.tensor(x), out, N=x.size)
    return device.numpy(out)


X = np.arange(8, dtype=np.float32) - 3


@pytest.mark.parametrize("patch", [_exec_patched, _updated])
@pytest.mark.parametrize("expr, reference", [("x * 2", X * 2), ("tl.abs(x) + 1", np.abs(X) + 1)])
def test_patched_kernel_compiles_the_new_text(device, patch, expr, reference):
    kernel = patch(_template, {"GENERATE_TEST_HERE": expr})
    np.testing.assert_array_equal(_run(kernel, device, X), reference)


def test_exec_of_a_string_literal(device):
    namespace = {"tilejit": tilejit, "tl": tl}
    exec("@tilejit.jit\ndef literal_kernel(out_ptr):\n    tl.store(out_ptr + tl.arange(0, 4), 7.5)\n",  # noqa: S102
         namespace)
    out = device.zeros(4, np.float32)
    namespace["literal_kernel"][(1,)](out)
    np.testing.assert_array_equal(device.numpy(out), np.full(4, 7.5, np.float32))


def test_replacing_src_drops_the_compiled_kernels(device):
    kernel = _updated(_template, {"GENERATE_TEST_HERE": "x + 1"})
    np.testing.assert_array_equal(_run(kernel, device, X), X + 1)
    kernel._unsafe_update_src(kernel.src.replace("x + 1", "x - 1"))
    np.testing.assert_array_equal(_run(kernel, device, X), X - 1)
    kernel.src = kernel.src.replace("x - 1", "x * x")  # Triton <= 3.1 spelling
    np.testing.assert_array_equal(_run(kernel, device, X), X * X)


def test_error_in_exec_source_shows_its_line(device):
    kernel = _exec_patched(_template, {"GENERATE_TEST_HERE": "x + not_defined_anywhere"})
    with pytest.raises(tilejit.CompilationError) as info:
        _run(kernel, device, X)
    error = info.value
    assert "not_defined_anywhere" in error.message
    assert error.line == 4  # line 4 of the exec'd text (decorator on line 1)
    assert "x + not_defined_anywhere" in error.source_line
    assert "x + not_defined_anywhere" in str(error)


def test_error_in_replaced_src_shows_the_replaced_line(device):
    kernel = _updated(_template, {"GENERATE_TEST_HERE": "x + also_not_defined"})
    with pytest.raises(tilejit.CompilationError) as info:
        _run(kernel, device, X)
    error = info.value
    # The same line number as the template's line in this file; the text is the replaced one.
    template_line = inspect.getsourcelines(_template.fn)[1] + 3
    assert error.line == template_line
    assert "x + also_not_defined" in error.source_line


def test_syntax_error_in_replaced_src_is_a_compilation_error(device):
    kernel = _updated(_template, {"GENERATE_TEST_HERE": "x +* 1"})
    with pytest.raises(tilejit.CompilationError, match="syntax error") as info:
        _run(kernel, device, X)
    assert "x +* 1" in info.value.source_line
