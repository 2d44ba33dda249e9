"""Long expressions (issue: a 2,000-term sum raised RecursionError): they compile, and code nested
deeper than the compiler allows is a CompilationError at the user's line, never a RecursionError."""
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as tl  # noqa: F401 - used by the exec'd kernels
from tilejit.errors import CompilationError
from tilejit.frontend import recursion


def _sum_kernel(terms: int):
    """A kernel storing x + x + ... (`terms` times); made with exec, as a generated kernel would be."""
    src = ("@tilejit.jit\n"
           "def long_sum(x_ptr, out_ptr):\n"
           "    x = tl.load(x_ptr)\n"
           f"    y = {' + '.join(['x'] * terms)}\n"
           "    tl.store(out_ptr, y)\n")
    namespace = {"tilejit": tilejit, "tl": tl}
    exec(src, namespace)  # noqa: S102
    return namespace["long_sum"]


def test_two_thousand_terms_compile_and_run():
    limit = sys.getrecursionlimit()
    x, out = np.ones(1, np.float32), np.zeros(1, np.float32)
    _sum_kernel(2000)[(1,)](x, out)
    assert out[0] == 2000
    assert sys.getrecursionlimit() == limit  # the raised limit is scoped to the compilation


@pytest.mark.parametrize("stage", ["cache key", "code generation"])
def test_too_deep_is_a_compilation_error_at_the_line(monkeypatch, stage):
    kernel = _sum_kernel(2000)
    # No extra room: the default limit is too small for 2,000 nested additions.
    monkeypatch.setattr(recursion, "COMPILE_RECURSION_LIMIT", sys.getrecursionlimit())
    if stage == "code generation":
        kernel._cache_key = "computed beforehand"  # skip the cache key's own walk of the AST
    with pytest.raises(CompilationError, match="nested too deeply") as info:
        kernel[(1,)](np.ones(1, np.float32), np.zeros(1, np.float32))
    assert info.value.line in ((2, 4) if stage == "cache key" else (4,))
