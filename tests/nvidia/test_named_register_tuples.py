"""Long register tuples of inline PTX (wgmma's accumulator) are a named struct type in the LLVM IR
(`inline_ptx._named_tuple`): the type is printed once instead of in every `extractvalue` of the
result, and the PTX is the same as with the literal type."""
from __future__ import annotations

import os
import re
import sys

import tilejit
from tilejit_nvidia import inline_ptx, toolchain

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))


def _llir(tmp_path, monkeypatch, label: str) -> str:
    """bench/gpu.py's fp16 matmul, 128x128x64 tile, alignments known: a cp.async + wgmma pipeline."""
    from common import load_kernels
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / label))
    tilejit.compiler.clear_memory_cache()
    names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
             "stride_cm", "stride_cn"]
    sig = {n: ("*fp16" if n.endswith("ptr") else "i32") for n in names}
    constexprs = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
    sig.update({n: "constexpr" for n in constexprs})
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n not in constexprs}
    src = tilejit.ASTSource(load_kernels("tilejit").matmul_kernel, sig, constexprs=constexprs, attrs=attrs)
    return tilejit.compile(src, target="cuda:90", options=dict(num_warps=8, num_stages=3)).asm["llir"]


def _literal_float_structs(llir: str) -> int:
    """Long float structs spelled out, outside the named types' definitions."""
    uses = re.sub(r"^%\"regs\.[^\n]*= type [^\n]*$", "", llir, flags=re.MULTILINE)
    return len(re.findall(r"\{float(?:, float){7,}\}", uses))


def test_the_accumulator_type_is_named_once(tmp_path, monkeypatch):
    llir = _llir(tmp_path, monkeypatch, "named")
    assert "wgmma.mma_async" in llir
    definitions = re.findall(r'^%"regs\.floatx(\d+)" = type \{float(?:, float)*\}$', llir, re.MULTILINE)
    assert definitions and all(int(n) >= inline_ptx._NAMED_FROM for n in definitions)
    assert re.search(r'extractvalue %"regs\.floatx\d+"', llir)
    assert _literal_float_structs(llir) == 0


def test_the_ptx_is_that_of_the_literal_type(tmp_path, monkeypatch):
    named = _llir(tmp_path, monkeypatch, "named")
    monkeypatch.setattr(inline_ptx, "_NAMED_FROM", 10**6)   # every tuple literal, as before
    literal = _llir(tmp_path, monkeypatch, "literal")
    assert _literal_float_structs(literal) > 10 and 'regs.' not in literal
    assert len(named) < len(literal) / 2
    assert toolchain.llir_to_ptx(named, 90) == toolchain.llir_to_ptx(literal, 90)
