"""The shared language suite (tests/language) run on the interpreter in subprocesses, with plugins
that compile every kernel it builds again for GPU targets (tests/gpu/cross_compile_plugin.py).

Those cross-compilations are most of the whole test suite's time, and pytest runs one test at a time:
the suite's files are split into shards (balanced by size) that run at once, one per core (at most
four), so that the two cores of CI are both used.
"""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANGUAGE = os.path.join(ROOT, "tests", "language")


def shards(count: int) -> list:
    """The suite's test files in `count` groups of about equal total size (largest first, each to
    the lightest group)."""
    files = sorted((os.path.getsize(os.path.join(LANGUAGE, f)), f) for f in os.listdir(LANGUAGE)
                   if f.startswith("test_") and f.endswith(".py"))
    groups = [[0, []] for _ in range(count)]
    for size, name in reversed(files):
        lightest = min(groups, key=lambda g: g[0])
        lightest[0] += size
        lightest[1].append(os.path.join(LANGUAGE, name))
    return [sorted(g[1]) for g in groups if g[1]]


def run_sharded(work, env: dict, plugins: list, report_var: str, extra_vars=(), timeout: int = 900) -> list:
    """Run the suite's interpreter tests in shards at once, in `work`. Each shard gets `env` plus its
    own `report_var` file (and its own folder for each of `extra_vars`), `work/<var>.<i>`; returns the
    (report path, {var: folder}, completed process) of every shard."""
    count = max(1, min(4, os.cpu_count() or 1))
    running = []
    for i, files in enumerate(shards(count)):
        shard_env = dict(env, **{report_var: os.path.join(str(work), f"report.{i}.jsonl")})
        folders = {var: os.path.join(str(work), f"{var.lower()}.{i}") for var in extra_vars}
        shard_env.update(folders)
        args = [sys.executable, "-m", "pytest", "-q", "-k", "interpreter", "-p", "no:cacheprovider"]
        for plugin in plugins:
            args += ["-p", plugin]
        proc = subprocess.Popen(args + files, env=shard_env, cwd=str(work), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        running.append((shard_env[report_var], folders, proc))
    results = []
    for report, folders, proc in running:
        out, err = proc.communicate(timeout=timeout)
        results.append((report, folders, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)))
    return results
