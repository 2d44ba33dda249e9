"""Room for deeply nested kernel code: the frontend walks the AST recursively, a few Python frames per
level, so a long expression (`a + b + ... `, 2,000 terms) nests deeper than Python's default limit of
1,000 frames. While a kernel is compiled the limit is raised (never lowered), and set back when the
last compilation in progress ends. Python frames calling Python frames use no C stack (3.11+), so
the higher limit is safe; code nested deeper still is a `CompilationError` at the user's line."""
from __future__ import annotations

import contextlib
import sys
import threading

COMPILE_RECURSION_LIMIT = 40_000

_lock = threading.Lock()
_active = 0
_saved_limit = None


@contextlib.contextmanager
def deep_recursion():
    global _active, _saved_limit
    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            if _saved_limit < COMPILE_RECURSION_LIMIT:
                sys.setrecursionlimit(COMPILE_RECURSION_LIMIT)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved_limit is not None:
                # Another part of the program may have raised it meanwhile: keep the larger value.
                if sys.getrecursionlimit() == COMPILE_RECURSION_LIMIT:
                    sys.setrecursionlimit(_saved_limit)
                _saved_limit = None
