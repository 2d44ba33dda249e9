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

from tilejit.runtime.while_active import WhileAnyActive


def _pause() -> bool:
    enabled = gc.isenabled()
    gc.disable()
    return enabled


def _resume(was_enabled: bool) -> None:
    if was_enabled:
        gc.enable()


cyclic_gc_paused = WhileAnyActive(_pause, _resume)
