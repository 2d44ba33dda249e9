"""Measures the JIT side of `kernel[grid](...)`: the launcher is replaced by one that does nothing, so
what is left is binding, specialization, the cache look-up, grid normalisation and `CompiledKernel.run`.

Run: `python tests/runtime/measure_launch_cost.py [launches] [repeats] [--profile]` (not a pytest
file: timings on shared machines are too noisy to assert on). Prints microseconds per launch.
"""
from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np

import tilejit
import tilejit.language as tl


@tilejit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@tilejit.jit
def tuple_kernel(ptrs, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(ptrs[2] + offsets, tl.load(ptrs[0] + offsets, mask=mask) + tl.load(ptrs[1] + offsets, mask=mask),
             mask=mask)


def _silence(kernel):
    """Replace the backend launcher of the kernel just compiled by one that does nothing."""
    kernel._launcher = lambda grid, args, stream=None: None


def measure(launches: int, repeats: int, profile: bool) -> None:
    x, y, out = (np.ones(4096, np.float32) for _ in range(3))
    grid = (4,)
    cases = {
        "add_kernel[grid](x, y, out, n, BLOCK=1024)": lambda: add_kernel[grid](x, y, out, 4096, BLOCK=1024),
        "tuple_kernel[grid]((x, y, out), n, BLOCK=1024)": lambda: tuple_kernel[grid]((x, y, out), 4096, BLOCK=1024),
    }
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tx, ty, tout = (torch.ones(4096) for _ in range(3))
        cases["add_kernel[grid](torch CPU tensors)"] = lambda: add_kernel[grid](tx, ty, tout, 4096, BLOCK=1024)
    for label, launch in cases.items():
        _silence(launch())
        best = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(launches):
                launch()
            best.append((time.perf_counter() - start) / launches * 1e6)
        print(f"{label}: min {min(best):.2f} us, median {sorted(best)[len(best) // 2]:.2f} us per launch")
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(launches):
                launch()
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    measure(int(arguments[0]) if arguments else 20000, int(arguments[1]) if len(arguments) > 1 else 7,
            "--profile" in sys.argv)
