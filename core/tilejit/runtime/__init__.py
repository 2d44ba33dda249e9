"""The runtime: `@jit` kernels and their launches, the autotuner, argument normalisation, the cache.

The `jit` decorator lives in `tilejit.runtime.jit.jit` (and `tilejit.jit`); it is not re-exported here
so that `tilejit.runtime.jit` stays the module.

The names below load on first use: the backend API (`tilejit.backends`) imports leaf modules of this
package (`launch_abi`, `args`), and importing the JIT and the autotuner eagerly from here would close
an import cycle through the compile driver back to `tilejit.backends`.
"""
import importlib

_LAZY = {
    "Autotuner": "tilejit.runtime.autotuner", "Config": "tilejit.runtime.autotuner",
    "Heuristics": "tilejit.runtime.autotuner", "autotune": "tilejit.runtime.autotuner",
    "heuristics": "tilejit.runtime.autotuner", "JITFunction": "tilejit.runtime.jit",
    "KernelInterface": "tilejit.runtime.jit", "KernelParam": "tilejit.runtime.jit",
}

__all__ = list(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tilejit.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
