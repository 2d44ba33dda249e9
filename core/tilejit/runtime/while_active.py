"""A process-wide setting held while any compilation is in progress (nested, or in other threads)."""
from __future__ import annotations

import threading
from contextlib import contextmanager


class WhileAnyActive:
    """`with setting():` applies a process-wide setting when the first user enters and restores it
    when the last one leaves: `apply()` runs then, and its return value is what `restore(saved)`
    gets back. Users overlap freely (compiles nest, and the autotuner's threads compile together)."""

    def __init__(self, apply, restore):
        self._apply, self._restore = apply, restore
        self._lock = threading.Lock()
        self._active = 0
        self._saved = None

    @contextmanager
    def __call__(self):
        with self._lock:
            if self._active == 0:
                self._saved = self._apply()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    saved, self._saved = self._saved, None
                    self._restore(saved)
