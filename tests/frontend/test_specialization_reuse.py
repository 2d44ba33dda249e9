"""What the frontend keeps between compilations (issue 12, item 3: a new specialization compiles
faster): a function's parsed source and a callee's signature, reused only while they are valid."""
import ast

import tilejit
import tilejit.language as tl
from tilejit.frontend import reuse

from .helpers import ttir

SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32"}


@tilejit.jit
def _scaled(x, FACTOR: tl.constexpr = 2):
    return x * FACTOR


@tilejit.jit
def _kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _scaled(tl.load(x_ptr + offs)))


def test_a_new_specialization_parses_nothing_again(monkeypatch):
    first = ttir(_kernel, SIG, {"BLOCK": 64})
    parses = []
    real_parse = ast.parse
    monkeypatch.setattr(reuse.ast, "parse", lambda *a, **k: parses.append(a) or real_parse(*a, **k))
    second = ttir(_kernel, SIG, {"BLOCK": 128})
    assert parses == []
    assert second == first.replace("64", "128")


def test_an_edited_source_is_parsed_anew():
    kernel = tilejit.JITFunction(_kernel.fn)
    before = ttir(kernel, SIG, {"BLOCK": 64})
    kernel._unsafe_update_src(kernel.src.replace("_scaled(tl.load(x_ptr + offs))", "tl.load(x_ptr + offs) + 1.0"))
    after = ttir(kernel, SIG, {"BLOCK": 64})
    assert "tt.call" in before and "tt.call" not in after and "arith.addf" in after


def test_a_callee_with_new_defaults_binds_them():
    before = ttir(_kernel, SIG, {"BLOCK": 64})
    saved = _scaled.fn.__defaults__
    try:
        _scaled.fn.__defaults__ = (3,)
        after = ttir(_kernel, SIG, {"BLOCK": 64})
    finally:
        _scaled.fn.__defaults__ = saved
    assert "value = 2" in before and "value = 3" in after
