"""`tilejit compile FILE.py:KERNEL --target hip:ARCH -o DIR` cross-compiles for AMD GPUs (no GPU here)."""
from __future__ import annotations

import json
import os
import re

import pytest

from amd_support import requires_lld
from tilejit.cli import main
from tilejit_amd.elf import inspect_hsaco

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def _compile(tmp_path, monkeypatch, kernel, signature, target, *extra):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(EXAMPLES)
    out = tmp_path / "out"
    assert main(["compile", os.path.join(EXAMPLES, kernel), "--signature", signature, "--target", target,
                 "-o", str(out), *extra]) == 0
    return {name.split(".", 1)[1]: out / name for name in os.listdir(out)}


@requires_lld
@pytest.mark.parametrize("target,arch,wave", [("hip:gfx942", "gfx942", 64), ("hip:gfx1100", "gfx1100", 32)])
def test_compile_writes_amdgcn_and_hsaco(tmp_path, monkeypatch, target, arch, wave):
    files = _compile(tmp_path, monkeypatch, "vector_add.py:add_kernel", "*fp32:16,*fp32:16,*fp32:16,i32,1024", target)
    assert sorted(files) == ["amdgcn", "hsaco", "json", "llir", "ttgir", "ttir"]
    amdgcn = files["amdgcn"].read_text()
    assert f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}' in amdgcn and "add_kernel:" in amdgcn
    assert "global_load" in amdgcn and "global_store" in amdgcn
    info = inspect_hsaco(files["hsaco"].read_bytes())
    kernel = info.kernel("add_kernel")
    assert info.e_type == "ET_DYN" and info.arch == arch and kernel.has_descriptor
    assert kernel.wavefront_size == wave
    # Three pointers and n_elements (BLOCK_SIZE is a constexpr, baked in).
    assert [(a.value_kind, a.size) for a in kernel.explicit_args] == [("global_buffer", 8)] * 3 + [("by_value", 4)]
    metadata = json.loads(files["json"].read_text())
    assert metadata["name"] == "add_kernel" and metadata["target"] == target


@requires_lld
def test_compile_tutorial_matmul_uses_mfma(tmp_path, monkeypatch):
    signature = "*fp16:16,*fp16:16,*fp16:16,i32,i32,i32,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1,64,64,32,8,0"
    files = _compile(tmp_path, monkeypatch, "matmul.py:matmul_kernel", signature, "hip:gfx942", "--num-warps", "4")
    assert "#ttg.amd_mfma" in files["ttgir"].read_text()
    assert re.search(r"v_mfma_f32_32x32x8_f16", files["amdgcn"].read_text())
    assert inspect_hsaco(files["hsaco"].read_bytes()).kernel("matmul_kernel").has_descriptor
