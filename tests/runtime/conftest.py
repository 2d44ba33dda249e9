import os
import sys

import pytest

try:
    import tilejit  # noqa: F401  (installed?)
except ImportError:  # not installed: test the checkout
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core"))
sys.path.insert(0, os.path.dirname(__file__))

# The knobs that change what the runtime does (not where its tools are: TILEJIT_PTXAS and TILEJIT_LLD
# stay). Left set in a developer's shell, a cache size bound evicted the entries these tests store.
_KNOBS = ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET", "TILEJIT_DUMP_DIR", "TILEJIT_ALWAYS_COMPILE",
          "TILEJIT_DEBUG", "TILEJIT_SANITIZE", "TILEJIT_AUTOTUNE_CACHE",
          "TILEJIT_CACHE_MAX_BYTES", "TILEJIT_CACHE_STRICT", "TILEJIT_MAX_TENSOR_NUMEL",
          "TILEJIT_AUTOTUNE_INTERPRETER", "TILEJIT_AUTOTUNE_COMPILE_WORKERS", "TILEJIT_AUTOTUNE_COMPILE_PROCESSES",
          "TILEJIT_PRINT_AUTOTUNING", "TRITON_PRINT_AUTOTUNING")


@pytest.fixture(autouse=True)
def _clean_knobs(monkeypatch):
    for knob in _KNOBS:
        monkeypatch.delenv(knob, raising=False)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A fresh cache dir, clean knobs, and the fake backend/source installed; yields the counters."""
    import fakes

    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    counters = fakes.install(monkeypatch.setattr)
    yield counters
    from tilejit import compiler
    compiler.clear_memory_cache()
    compiler.reset_launch_hooks()
