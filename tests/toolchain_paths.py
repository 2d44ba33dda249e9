"""The external tools the tests use, resolved the way tilejit itself resolves them.

Nothing here looks a Python tool up on PATH: `filecheck` runs in this process from the package
installed in the environment the tests run in (the venv), whether or not that venv's bin folder is on
PATH. ptxas and ld.lld come from the backends' own searches (knob, PATH, pip wheels, CUDA/ROCm
homes), so a test skips exactly when the backend itself would have no tool.
"""
from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import pytest


def filecheck(text: str, checks: str) -> None:
    """Assert that `text` matches the CHECK lines in `checks` (the `filecheck` package, LLVM's syntax).

    Skips where the package is missing (the GPU machine's bare Python); the project's set-up installs it.
    """
    pytest.importorskip("filecheck", reason="pip install filecheck")
    from filecheck.matcher import Matcher
    from filecheck.options import parse_argv_options

    with tempfile.TemporaryDirectory() as tmp:
        check_path, input_path = Path(tmp) / "checks.txt", Path(tmp) / "input.txt"
        check_path.write_text(checks)
        input_path.write_text(text)
        log = io.StringIO()
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            rc = Matcher.from_opts(parse_argv_options(
                ["filecheck", str(check_path), "--input-file", str(input_path)])).run()
    assert rc == 0, f"FileCheck failed:\n{log.getvalue()}\n--- input ---\n{text[:4000]}"


def ptxas() -> str | None:
    try:
        from tilejit_nvidia.toolchain import find_ptxas
    except ImportError:
        return None
    return find_ptxas()


def lld() -> str | None:
    """A usable ld.lld (new enough for the code-object version the AMD backend writes), or None."""
    try:
        from tilejit_amd.toolchain import MIN_LLD_MAJOR, find_lld, lld_version
    except ImportError:
        return None
    path = find_lld()
    version = path and lld_version(path)
    return path if version and version[0] >= MIN_LLD_MAJOR else None


needs_ptxas = pytest.mark.skipif(ptxas() is None, reason="no ptxas found (PATH, TILEJIT_PTXAS, CUDA wheels)")
needs_lld = pytest.mark.skipif(lld() is None, reason="no ld.lld >= 15 found (apt-get install lld-19)")
