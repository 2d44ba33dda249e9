"""Make the in-tree `tilejit` importable when it is not installed (a fresh checkout)."""
import os
import sys

try:
    import tilejit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core"))
