"""Shared by every test folder: make the checkout importable when tilejit is not installed.

`make test` installs tilejit and its backends editable in .venv, so this is only a fallback for a bare
`python -m pytest` from a fresh clone (the backends are then found only if installed)."""
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import tilejit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(_ROOT, "core"))
    for _backend in ("interpreter", "nvidia", "amd"):
        sys.path.insert(0, os.path.join(_ROOT, "backends", _backend))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu_only: runs only on a GPU backend")
