"""Every kernel of the shared language suite (tests/language) compiles for the GPU targets.

The suite runs on the interpreter in a subprocess, with `cross_compile_plugin` compiling each kernel
it builds (real signatures and constexprs) again for the target, down to the binary (cubin / hsaco).
About 20 s a target.
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


# AMD targets (gfx942, gfx1100) are covered by tests/amd/test_amd_language_suite_hsaco.py, which also
# checks every hsaco with the ELF reader and lists the kernels AMD cannot compile yet.
@pytest.mark.parametrize("target", ["cuda:90", "cuda:80"])
def test_language_suite_kernels_compile(target, tmp_path):
    from tilejit_nvidia.toolchain import find_ptxas
    if find_ptxas() is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc)")
    report = tmp_path / "cross.jsonl"
    env = dict(os.environ, TILEJIT_CROSS_TARGETS=target, TILEJIT_CROSS_REPORT=str(report),
               PYTHONPATH=os.pathsep.join([HERE, os.path.join(ROOT, "core"), os.path.join(ROOT, "backends", "nvidia"),
                                           os.path.join(ROOT, "backends", "amd"),
                                           os.path.join(ROOT, "backends", "interpreter"),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "cross_compile_plugin", "-k", "interpreter",
                           "-p", "no:cacheprovider", os.path.join(ROOT, "tests", "language")],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    if not report.exists():
        pytest.skip(f"the language suite compiled no kernel here:\n{proc.stdout[-2000:]}")
    records = [json.loads(line) for line in report.read_text().splitlines()]
    failures = [f"{r['kernel']}: {r['error']}" for r in records if not r["ok"]]
    assert records and not failures, "\n\n".join(failures)
