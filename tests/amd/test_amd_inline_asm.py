"""`tl.inline_asm_elementwise` for AMD: refused at the user's line, with the reason. Writing the hsaco
makes LLVM parse the inline assembly again, and llvmlite's LLVM has no AMDGPU assembly parser, so
LLVM would abort the whole process ("Inline asm not supported by this streamer"); the refusal must
come before that (docs/language.md)."""
import pytest

import tilejit
import tilejit.language as tl
from tilejit.backends import GPUTarget
from tilejit.compiler import compile as tj_compile
from tilejit.frontend.source import ASTSource


@tilejit.jit
def _gcn_add_kernel(X, Y, Z, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    z = tl.inline_asm_elementwise("v_add_u32 $0, $1, $2", "=v,v,v", [tl.load(X + offs), tl.load(Y + offs)],
                                  dtype=tl.int32, is_pure=True, pack=1)
    tl.store(Z + offs, z)


def test_gcn_assembly_is_refused_at_the_users_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    src = ASTSource(_gcn_add_kernel, {"X": "*i32", "Y": "*i32", "Z": "*i32", "BLOCK": "constexpr"}, {"BLOCK": 256})
    with pytest.raises(tilejit.CompilationError) as info:
        tj_compile(src, target=GPUTarget.parse("hip:gfx942"))
    assert "AMDGPU assembly parser" in str(info.value)
    assert info.value.line == _gcn_add_kernel.fn.__code__.co_firstlineno + 3
