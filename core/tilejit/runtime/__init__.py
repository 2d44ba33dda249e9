"""The runtime: `@jit` kernels and their launches, the autotuner, argument normalisation, the cache.

The `jit` decorator lives in `tilejit.runtime.jit.jit` (and `tilejit.jit`); it is not re-exported here
so that `tilejit.runtime.jit` stays the module.
"""
from tilejit.runtime.autotuner import Autotuner, Config, Heuristics, autotune, heuristics
from tilejit.runtime.jit import JITFunction, KernelInterface, KernelParam

__all__ = ["Autotuner", "Config", "Heuristics", "autotune", "heuristics", "JITFunction", "KernelInterface",
           "KernelParam"]
