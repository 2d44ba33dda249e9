"""Every kernel of the shared language suite (tests/language) becomes a valid hsaco for gfx942 (CDNA3,
wave64) and gfx1100 (RDNA3, wave32), checked one by one with the ELF reader.

The suite runs once on the interpreter, in shards at once (tests/language_suite_runs.py); `tests/gpu/cross_compile_plugin.py` compiles
each kernel it builds (real signatures, constexprs, specializations) again for both targets, and
`hsaco_capture_plugin.py` keeps each hsaco with the kernel's runtime signature. Each hsaco must be
EM_AMDGPU / ET_DYN for the right arch, define the kernel symbol and its `.kd` descriptor, and its
metadata note must list the kernel's runtime arguments: the same count, pointers as 8-byte
global buffers, scalars by value with their size. No AMD GPU is needed (about a minute or two).

Kernels the AMD lowering cannot compile yet are listed in `NOT_YET_ON_AMD` with the reason; any other
failure fails the test, and so does an entry that no longer matches any failure.
"""
from __future__ import annotations

import json
import os
import pathlib
import re

import pytest

from amd_support import LLD_PROBLEM
from tilejit_amd.elf import inspect_hsaco
from tilejit_amd.kernargs import normalize_type, scalar_size

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGETS = {"hip:gfx942": ("gfx942", 64), "hip:gfx1100": ("gfx1100", 32)}

# (kernel, regex on the error) -> why the AMD backend cannot compile it yet.
NOT_YET_ON_AMD: dict = {}   # every kernel of the suite compiles for AMD now


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
    if LLD_PROBLEM:
        pytest.skip(LLD_PROBLEM)
    from language_suite_runs import run_sharded
    work = tmp_path_factory.mktemp("amd_suite")
    env = dict(os.environ, TILEJIT_CROSS_TARGETS=",".join(TARGETS),
               PYTHONPATH=os.pathsep.join([HERE, os.path.join(ROOT, "tests", "gpu"), os.environ.get("PYTHONPATH", "")]))
    runs = run_sharded(work, env, ["hsaco_capture_plugin", "cross_compile_plugin"], "TILEJIT_CROSS_REPORT",
                       extra_vars=("TILEJIT_HSACO_CAPTURE",), timeout=900)
    records, captured = [], []
    for report, folders, proc in runs:
        assert os.path.exists(report), f"the language suite compiled no kernel:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
        with open(report) as f:
            records += [json.loads(line) for line in f.read().splitlines()]
        capture = pathlib.Path(folders["TILEJIT_HSACO_CAPTURE"])
        for meta in sorted(capture.glob("*.json"), key=lambda p: int(p.stem)):
            captured.append((json.loads(meta.read_text()), meta.with_suffix(".hsaco").read_bytes()))
    return records, captured


def _known_reason(record):
    for (kernel, pattern), reason in NOT_YET_ON_AMD.items():
        if record["kernel"] == kernel and re.search(pattern, record["error"]):
            return reason
    return None


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_language_suite_failures_are_only_the_listed_ones(suite_run, target):
    records = [r for r in suite_run[0] if r["target"] == target]
    assert len(records) > 50, "the suite should compile many kernels"
    failures = [r for r in records if not r["ok"]]
    unexplained = [f"{r['kernel']}: {r['error']}" for r in failures if _known_reason(r) is None]
    assert not unexplained, "\n\n".join(unexplained)
    stale = [key for key in NOT_YET_ON_AMD if not any(_known_reason(r) == NOT_YET_ON_AMD[key] for r in failures)]
    assert not stale, f"listed as failing on AMD but compiled: {stale}; remove them from NOT_YET_ON_AMD"
    assert all(r["stages"][-2:] == ["amdgcn", "hsaco"] for r in records if r["ok"])


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_language_suite_hsaco_is_valid(suite_run, target):
    arch, wave = TARGETS[target]
    captured = [(meta, blob) for meta, blob in suite_run[1] if meta["target"] == target]
    compiled = sum(1 for r in suite_run[0] if r["target"] == target and r["ok"])
    assert len(captured) >= compiled > 50   # one hsaco per successful compilation, at least
    problems = []
    for meta, blob in captured:
        name = meta["kernel"]
        info = inspect_hsaco(blob)
        kernel = info.kernels.get(name)
        where = f"{name} ({target})"
        if info.e_type != "ET_DYN" or info.arch != arch or kernel is None:
            problems.append(f"{where}: {info.e_type}, arch {info.arch}, kernels {list(info.kernels)}")
            continue
        if not (kernel.has_symbol and kernel.has_descriptor) or kernel.wavefront_size != wave:
            problems.append(f"{where}: symbol {kernel.has_symbol}, .kd {kernel.has_descriptor}, "
                            f"wave {kernel.wavefront_size}")
        params = meta["runtime_signature"]
        args = kernel.explicit_args
        if len(args) != len(params):
            problems.append(f"{where}: {len(args)} kernel arguments in the metadata, signature has {len(params)}")
            continue
        for (param, ty), arg in zip(params, args):
            if normalize_type(ty).startswith("*"):
                ok = arg.value_kind == "global_buffer" and arg.size == 8
            else:
                ok = arg.value_kind == "by_value" and arg.size == scalar_size(ty)
            if not ok:
                problems.append(f"{where}: parameter {param}: {ty} but metadata says {arg.value_kind} "
                                f"of {arg.size} bytes")
    assert not problems, "\n".join(problems)
