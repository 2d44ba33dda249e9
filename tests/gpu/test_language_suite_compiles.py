"""Every kernel of the shared language suite (tests/language) compiles for the GPU targets.

The suite runs once on the interpreter, in shards at once (tests/language_suite_runs.py), with
`cross_compile_plugin` compiling each kernel it builds (real signatures and constexprs) again for
every target, down to the cubin.
"""
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


# AMD targets (gfx942, gfx1100) are covered by tests/amd/test_amd_language_suite_hsaco.py, which also
# checks every hsaco with the ELF reader and lists the kernels AMD cannot compile yet.
TARGETS = ["cuda:90", "cuda:80"]


@pytest.fixture(scope="module")
def cross_records(tmp_path_factory):
    """The suite's kernels compiled for every target of TARGETS: one run of the suite, in shards."""
    from tilejit_nvidia.toolchain import find_ptxas
    if find_ptxas() is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc)")
    from language_suite_runs import run_sharded
    work = tmp_path_factory.mktemp("cuda_suite")
    env = dict(os.environ, TILEJIT_CROSS_TARGETS=",".join(TARGETS),
               PYTHONPATH=os.pathsep.join([HERE, os.path.join(ROOT, "core"), os.path.join(ROOT, "backends", "nvidia"),
                                           os.path.join(ROOT, "backends", "amd"),
                                           os.path.join(ROOT, "backends", "interpreter"),
                                           os.environ.get("PYTHONPATH", "")]))
    runs = run_sharded(work, env, ["cross_compile_plugin"], "TILEJIT_CROSS_REPORT", timeout=600)
    records = []
    for report, _, proc in runs:
        if not os.path.exists(report):
            pytest.skip(f"a shard of the language suite compiled no kernel here:\n{proc.stdout[-2000:]}")
        with open(report) as f:
            records += [json.loads(line) for line in f.read().splitlines()]
    return records


@pytest.mark.parametrize("target", TARGETS)
def test_language_suite_kernels_compile(cross_records, target):
    records = [r for r in cross_records if r["target"] == target]
    failures = [f"{r['kernel']}: {r['error']}" for r in records if not r["ok"]]
    assert records and not failures, "\n\n".join(failures)
