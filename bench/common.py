"""Shared helpers for the benchmarks: load `kernels.py` for Triton and for tilejit, and format tables."""
from __future__ import annotations

import importlib.util
import os
import sys
from contextlib import contextmanager

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "kernels.py")


@contextmanager
def _triton_is(module, language):
    """Make `import triton` / `import triton.language` resolve to the given modules while loading."""
    saved = {k: sys.modules.get(k) for k in ("triton", "triton.language")}
    sys.modules["triton"], sys.modules["triton.language"] = module, language
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def load_kernels(flavour: str):
    """The kernels module compiled by `flavour`: 'tilejit' (aliased as triton) or 'triton' (the real one)."""
    name = f"bench_kernels_{flavour}"
    spec = importlib.util.spec_from_file_location(name, KERNELS)
    module = importlib.util.module_from_spec(spec)
    if flavour == "tilejit":
        import tilejit
        import tilejit.language
        with _triton_is(tilejit, tilejit.language):
            spec.loader.exec_module(module)
    else:
        spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def markdown_table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
