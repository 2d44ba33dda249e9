"""Masked loads on NVIDIA (cross-compiled, no GPU): a plain one is LLVM's `llvm.masked.load`, which
NVPTX expands into the guarded `ld.global` only when it emits code, so LLVM's optimisations see one
block instead of a branch per load and register (the compile time of masked kernels); one with a
cache modifier is inline PTX, `@!p mov` of `other` and `@p ld.global.cg`, as Triton's. The results
run on the host (`simt_runner`) against NumPy; the PTX keeps its one guarded vector load per four
elements and its immediate address offsets, with no more instructions, registers or spills."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.frontend.source import ASTSource

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from toolchain_paths import ptxas  # noqa: E402

D16 = [["tt.divisibility", 16]]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@tilejit.jit
def _masked_copy(src, dst, n, OTHER: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, B)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask, other=OTHER) + 1, mask=offs < B)


@tilejit.jit
def _masked_copy_cg(src, dst, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n, other=-2, cache_modifier=".cg"))


def _compile(fn, dtype, n_divisible: bool, constexprs, num_warps=4):
    sig = {"src": f"*{dtype}", "dst": f"*{dtype}", "n": "i32", **{k: "constexpr" for k in constexprs}}
    divisible = (0, 1, 2) if n_divisible else (0, 1)
    src = ASTSource(fn, sig, constexprs, {(i,): D16 for i in divisible})
    return tilejit.compile(src, target="cuda:90", options={"num_warps": num_warps})


@pytest.mark.parametrize("dtype,np_dtype,other", [("fp32", np.float32, -7.5), ("i16", np.int16, -300),
                                                  ("i8", np.int8, 3), ("i32", np.int32, 0)])
@pytest.mark.parametrize("n_divisible", [True, False], ids=["vector", "scalar"])
def test_masked_loads_run_on_the_host(dtype, np_dtype, other, n_divisible):
    from simt_runner import run
    B = 512
    kernel = _compile(_masked_copy, dtype, n_divisible, {"OTHER": other, "B": B})
    llir = kernel.asm["llir"]
    assert "llvm.masked.load" in llir and "guard.then" not in llir   # no branch per masked load
    n = 320 if n_divisible else 301
    src = (np.arange(B) % 100).astype(np_dtype)
    dst = np.zeros(B, np_dtype)
    run(llir, [src, dst, n], 4)
    expected = np.where(np.arange(B) < n, src, np.asarray(other, np_dtype)).astype(np_dtype) + np_dtype(1)
    np.testing.assert_array_equal(dst, expected)


def test_masked_vector_load_is_one_guarded_ld_v4_with_immediate_offsets():
    # 1024 fp32, 128 threads: 8 per thread, two 16-byte loads, the second 512 elements (2048 bytes)
    # after the first: one address register, an immediate offset (an inline-PTX operand had needed two)
    ptx = _compile(_masked_copy, "fp32", True, {"OTHER": 0.0, "B": 1024}).asm["ptx"]
    loads = re.findall(r"ld\.global\.v4\.b32\s+\{[^}]*\}, \[(%rd\d+)(\+\d+)?\];", ptx)
    assert len(loads) == 2 and loads[0][0] == loads[1][0] and loads[1][1] == "+2048", loads
    assert ptx.count("bra ") <= 2    # one guard per load, no per-register branches


def test_masked_load_with_cache_modifier_is_predicated_inline_ptx(tmp_path):
    kernel = _compile(_masked_copy_cg, "i32", False, {"B": 256})
    llir = kernel.asm["llir"]
    assert "guard.then" not in llir and "llvm.masked.load" not in llir
    # `other` (-2) where the mask is off, the load where it is on; no branch
    ptx = kernel.asm["ptx"]
    pairs = re.findall(r"@!(%p\d+) mov\.b32 (%r\d+), %r\d+;\s+@(%p\d+) ld\.global\.cg\.b32 (%r\d+), \[%rd\d+\];", ptx)
    assert len(pairs) == 2 and all(p == q and r == s for p, r, q, s in pairs), pairs   # 256 i32, 128 threads
    assert "bra" not in ptx
    tool = ptxas()
    if tool is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc)")
    (tmp_path / "k.ptx").write_text(kernel.asm["ptx"])
    done = subprocess.run([tool, "-arch=sm_90a", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
