import importlib.metadata
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # for platform_fakes, also in subprocesses' imports

from tilejit import plugins  # noqa: E402
from tilejit.backends import BACKEND_GROUP, reset_backends  # noqa: E402

FAKES = "platform_fakes"


def make_entry_points(group_to_pairs):
    """Real EntryPoint objects, as installed packages would declare them."""
    eps = []
    for group, pairs in group_to_pairs.items():
        eps += [importlib.metadata.EntryPoint(name=n, value=v, group=group) for n, v in pairs]
    return eps


@pytest.fixture
def fake_entry_points(monkeypatch):
    """Replace the installed entry points by the given ones: `fake_entry_points({group: [(name, value)]})`."""

    def install(group_to_pairs):
        eps = make_entry_points(group_to_pairs)

        def entry_points(group=None, **kwargs):
            return [ep for ep in eps if group is None or ep.group == group]

        monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
        reset_backends()
        plugins.reset_plugins()

    yield install
    reset_backends()
    plugins.reset_plugins()


@pytest.fixture
def standard_fakes(fake_entry_points):
    """A fake GPU backend, a fake CPU fallback and three broken plugins."""
    from platform_fakes import FakeGPUBackend
    FakeGPUBackend.ACTIVE = True
    fake_entry_points({BACKEND_GROUP: [
        ("fakegpu", f"{FAKES}:FakeGPUBackend"),
        ("fakecpu", f"{FAKES}:FakeCPUBackend"),
        ("missingmod", "tilejit_no_such_module_xyz:Backend"),
        ("notabackend", f"{FAKES}:NotABackend"),
        ("future", f"{FAKES}:FutureBackend"),
    ]})
    yield
    FakeGPUBackend.ACTIVE = True


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No tilejit knob leaks in from the developer's shell; the cache lives in a temp dir."""
    for name in list(os.environ):
        if name.startswith("TILEJIT_") or name == "TRITON_INTERPRET":
            monkeypatch.delenv(name)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
