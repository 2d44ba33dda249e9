"""A pytest plugin (`-p hsaco_capture_plugin`, loaded before `cross_compile_plugin`) that keeps every
hsaco compiled during a run, with what it must match: for each compilation for a `hip` target it
writes `<n>.hsaco` and `<n>.json` (kernel name, target, runtime signature) into the folder named by
`TILEJIT_HSACO_CAPTURE`. `tests/gpu/cross_compile_plugin.py` decides what is compiled; this plugin
only wraps `tilejit.compiler.compile` underneath it, so it must configure first (tryfirst).
"""
from __future__ import annotations

import itertools
import json
import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    folder = os.environ.get("TILEJIT_HSACO_CAPTURE")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    from tilejit import compiler
    from tilejit.gpu.stages import runtime_signature
    original = compiler.compile
    counter = itertools.count()

    def compile_and_capture(src, target=None, options=None):
        kernel = original(src, target=target, options=options)
        if getattr(kernel.target, "backend", None) == "hip" and "hsaco" in kernel.asm:
            n = next(counter)
            md = kernel.metadata
            with open(os.path.join(folder, f"{n}.hsaco"), "wb") as f:
                f.write(kernel.asm["hsaco"])
            with open(os.path.join(folder, f"{n}.json"), "w") as f:
                json.dump({"kernel": md["name"], "target": str(kernel.target),
                           "runtime_signature": list(runtime_signature(md).items())}, f)
        return kernel

    compiler.compile = compile_and_capture
