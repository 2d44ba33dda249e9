"""`tilejit compile` cross-compiles a kernel for an NVIDIA GPU on a machine without one."""
import json
import os

import pytest

from tilejit.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL = os.path.join(ROOT, "examples", "vector_add.py") + ":add_kernel"


@pytest.mark.parametrize("target,arch", [("cuda:90", "sm_90a"), ("cuda:80", "sm_80")])
def test_compile_writes_every_nvidia_stage(tmp_path, monkeypatch, target, arch):
    from tilejit_nvidia.toolchain import find_ptxas
    if find_ptxas() is None:
        pytest.skip("no ptxas (pip install nvidia-cuda-nvcc)")
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(os.path.join(ROOT, "examples"))
    out = tmp_path / "out"
    assert main(["compile", KERNEL, "--signature", "*fp32,*fp32,*fp32,i32,1024", "--target", target,
                 "-o", str(out)]) == 0
    files = {f.split(".", 1)[1]: out / f for f in os.listdir(out)}
    for stage in ("ttir", "ttgir", "llir", "ptx", "cubin"):
        assert stage in files, sorted(files)
    assert "tt.load" in files["ttir"].read_text()
    assert "#ttg.blocked" in files["ttgir"].read_text()
    assert "define" in files["llir"].read_text()
    ptx = files["ptx"].read_text()
    assert f".target {arch}" in ptx and ".visible .entry add_kernel" in ptx
    cubin = files["cubin"].read_bytes()
    assert cubin[:4] == b"\x7fELF" and int.from_bytes(cubin[18:20], "little") == 190  # EM_CUDA
    metadata = json.loads(files["json"].read_text())
    assert metadata["name"] == "add_kernel" and metadata["target"] == target
