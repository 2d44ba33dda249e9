"""A pytest plugin (loaded with `-p cross_compile_plugin`) that compiles, for the GPU targets too,
every kernel the language suite compiles for the interpreter.

The language suite knows the real signatures and constexprs of its kernels; this plugin wraps
`tilejit.compiler.compile` so that each interpreter compilation is repeated for every target in
`TILEJIT_CROSS_TARGETS` (comma-separated, e.g. `cuda:90,cuda:80,hip:gfx942`), through every stage
down to the binary. Each failure (kernel, target, error) is appended to the JSON-lines file named by
`TILEJIT_CROSS_REPORT`; the interpreter test itself is not affected.
"""
from __future__ import annotations

import json
import os
import traceback



def _targets():
    return [t for t in os.environ.get("TILEJIT_CROSS_TARGETS", "").split(",") if t]


def pytest_configure(config):
    from tilejit import compiler
    original = compiler.compile
    report = os.environ.get("TILEJIT_CROSS_REPORT")
    seen = set()

    def compile_everywhere(src, target=None, options=None):
        kernel = original(src, target=target, options=options)
        if str(getattr(kernel.target, "backend", "")) != "interpreter":
            return kernel
        for other in _targets():
            key = (getattr(src, "name", "?"), kernel.metadata.get("hash"), other)
            if key in seen:
                continue
            seen.add(key)
            record = {"kernel": key[0], "target": other, "ok": True}
            try:
                gpu_options = {k: v for k, v in (options or {}).items() if k in ("num_warps", "num_stages")}
                compiled = original(src, target=other, options=gpu_options)
                record["stages"] = list(compiled.asm)
            except Exception as exc:   # every failure is recorded, none hides the others
                if "input_precision must be one of" in str(exc):
                    # The target's language rules reject the kernel, as Triton's do (tf32x3 on AMD):
                    # no lowering failed, and there is no binary to record.
                    continue
                record.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:2000],
                              where=traceback.format_exc(limit=-3)[-1500:])
            if report:
                with open(report, "a") as f:
                    f.write(json.dumps(record) + "\n")
        return kernel

    compiler.compile = compile_everywhere
