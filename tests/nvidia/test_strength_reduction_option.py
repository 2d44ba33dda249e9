"""NVPTX code generation runs LLVM 22's straight-line strength reduction without its poison-reuse
check (`llvm_setup.cheap_strength_reduction`): the check was 40-60% of code generation on the unrolled
address arithmetic of matmul and attention. These compile the compile-speed benchmark's matmul and
attention (bench/kernels.py, its options) both ways: the PTX may differ (SLSR reuses more address
computations) but has no more instructions of any kind in the main loop, no more in the kernel, and no
more registers or spills; the option is back on after each emission."""
from __future__ import annotations

import collections
import contextlib
import os
import re
import sys

import llvmlite.binding as llvm
import pytest

import tilejit
from tilejit_nvidia import llvm_setup, toolchain

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
sys.path.insert(0, os.path.join(HERE, ".."))
from toolchain_paths import ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(llvm.llvm_version_info[0] != 22, reason="the option is set on LLVM 22 only")


def _statements(ptx: str):
    """("label", name) and ("op", mnemonic) in order; an instruction may span lines, so split at `;`."""
    out = []
    for chunk in re.sub(r"//[^\n]*", "", ptx).split(";"):
        text = chunk.strip().lstrip("{}").strip()
        while (label := re.match(r"(\$L__BB\d+_\d+):\s*", text)) is not None:
            out.append(("label", label.group(1)))
            text = text[label.end():].lstrip("{}").strip()
        text = re.sub(r"^@!?%p\d+\s+", "", text)
        if text and not text.startswith((".", "(", ")")):
            out.append(("op", ".".join(text.split()[0].split(".")[:2]) + ("" if "bra" not in text else " " + text.split()[-1])))
    return out


def _opcodes(ptx: str):
    """Instruction mnemonics (`ld.global`, `mma.sync`) in the kernel and in its first loop (from a
    label to the branch back to it)."""
    statements = _statements(ptx)
    kernel = collections.Counter(v.split()[0] for k, v in statements if k == "op")
    for i, (kind, label) in enumerate(statements):
        back = [j for j, (k, v) in enumerate(statements) if j > i and k == "op" and v.endswith(" " + label)]
        if kind == "label" and back:
            loop = collections.Counter(v.split()[0] for k, v in statements[i:back[-1] + 1] if k == "op")
            return kernel, loop
    return kernel, collections.Counter()


def _llir(name: str, tmp_path) -> str:
    from common import load_kernels
    from compile_speed import KERNELS, _signature
    os.environ["TILEJIT_CACHE_DIR"] = str(tmp_path / name)
    kernel, sig, constexprs, options = KERNELS[name]
    fn = getattr(load_kernels("tilejit"), kernel)
    src = tilejit.ASTSource(fn, _signature(sig, constexprs), constexprs=constexprs)
    return tilejit.compile(src, target="cuda:90", options=options).asm["llir"]


def _resources(ptx: str, tmp_path) -> dict:
    import subprocess
    tool = ptxas()
    if tool is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc)")
    (tmp_path / "k.ptx").write_text(ptx)
    out = subprocess.run([tool, "-v", "-arch=sm_90a", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True, check=True)
    return next(iter(toolchain.parse_resource_usage(out.stdout + out.stderr).values()))


@pytest.mark.parametrize("name", ["matmul", "attention"])
def test_no_worse_ptx_without_the_poison_reuse_check(name, tmp_path, monkeypatch):
    llir = _llir(name, tmp_path)
    fast = toolchain.llir_to_ptx(llir, 90)
    monkeypatch.setattr(toolchain, "cheap_strength_reduction", contextlib.nullcontext)
    checked = toolchain.llir_to_ptx(llir, 90)
    (fast_ops, fast_loop), (checked_ops, checked_loop) = _opcodes(fast), _opcodes(checked)
    assert sum(fast_loop.values()) > 100 and sum(fast_ops.values()) <= sum(checked_ops.values())
    assert all(fast_loop[op] <= n for op, n in checked_loop.items()) and set(fast_loop) <= set(checked_loop)
    fast_res, checked_res = _resources(fast, tmp_path), _resources(checked, tmp_path)
    assert fast_res["registers"] <= checked_res["registers"]
    assert fast_res["spill_stores"] <= checked_res["spill_stores"]


def test_the_check_is_back_on_after_emission(monkeypatch):
    calls = []
    monkeypatch.setattr(llvm_setup.llvm, "set_option", lambda name, option: calls.append(option))
    with llvm_setup.cheap_strength_reduction():
        with llvm_setup.cheap_strength_reduction():   # another thread emitting meanwhile
            assert calls == ["-enable-poison-reuse-guard=false"]
        assert len(calls) == 1
    assert calls == ["-enable-poison-reuse-guard=false", "-enable-poison-reuse-guard=true"]
