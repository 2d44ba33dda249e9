import os
import sys

import pytest

try:
    import tilejit  # noqa: F401  (installed?)
except ImportError:  # not installed: test the checkout
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core"))
sys.path.insert(0, os.path.dirname(__file__))

_KNOBS = ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET", "TILEJIT_DUMP_DIR", "TILEJIT_ALWAYS_COMPILE",
          "TILEJIT_DEBUG", "TILEJIT_AUTOTUNE_CACHE")


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A fresh cache dir, clean knobs, and the fake backend/source installed; yields the counters."""
    import fakes

    for knob in _KNOBS:
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    counters = fakes.install(monkeypatch.setattr)
    yield counters
    from tilejit import compiler
    compiler.clear_memory_cache()
    compiler.reset_launch_hooks()
