"""Python's cyclic garbage collector paused while a kernel compiles.

A compile builds and drops tens of thousands of Python objects (IR operations, llvmlite
instructions), almost all freed by reference counting as soon as a stage ends. Their allocation
still counts towards the collector's thresholds: a compile triggers a few young collections and, now
and then, a full one, which walks every object of the process. In a process that has imported torch
(180,000 objects) a full collection took 109 ms in the middle of a 400 ms compile of the bench
attention kernel; a training script with a model loaded has many more objects. The compile itself
leaves almost no cyclic garbage (a young collection right after one frees nothing), so pausing the
collector for its duration skips that work rather than postponing it.

Nested and concurrent compiles (the autotuner's threads) share one pause: the collector is enabled
again, if it was enabled, when the last of them ends.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_active = 0
_resume = False


@contextmanager
def cyclic_gc_paused():
    global _active, _resume
    with _lock:
        if _active == 0:
            _resume = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _resume:
                gc.enable()
