"""The default input precision of an fp32 tl.dot per target, as Triton chooses it: tf32 on CUDA and
on CDNA3 (gfx942, whose HIPOptions allow it), ieee on other AMD GPUs (Triton's HIP list: ieee, bf16x3,
bf16x6); a precision a target does not list is an error."""
import re

import pytest

import tilejit
import tilejit.language as tl
from tilejit.frontend.source import ASTSource
from toolchain_paths import needs_lld, needs_ptxas


@tilejit.jit
def _square(a_ptr, o_ptr, PREC: tl.constexpr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    tl.store(o_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a, input_precision=PREC))


def _ttir(target, prec=None):
    src = ASTSource(_square, {"a_ptr": "*fp32", "o_ptr": "*fp32", "PREC": "constexpr"}, {"PREC": prec})
    return tilejit.compile(src, target=target).asm["ttir"]


@pytest.mark.parametrize("target,expected", [
    pytest.param("cuda:80", "tf32", marks=needs_ptxas),
    pytest.param("hip:gfx942", "tf32", marks=needs_lld),
    pytest.param("hip:gfx90a", "ieee", marks=needs_lld)])
def test_fp32_dot_default_precision(target, expected):
    assert re.findall(r'inputPrecision = "(\w+)"', _ttir(target)) == [expected]


@needs_lld
def test_amd_allows_bf16x3_and_rejects_tf32x3():
    assert 'inputPrecision = "bf16x3"' in _ttir("hip:gfx90a", "bf16x3")
    with pytest.raises(tilejit.CompilationError, match="input_precision must be one of"):
        _ttir("hip:gfx90a", "tf32x3")
