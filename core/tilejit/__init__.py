"""tilejit: a pure-Python, Triton-compatible tile-kernel compiler.

`import tilejit as triton` and `import tilejit.language as tl` run Triton 3.x kernels unchanged.

The public names are resolved lazily (PEP 562): `import tilejit` stays cheap, and a program that only
uses the interpreter never imports the LLVM toolchain.
"""
from __future__ import annotations

import importlib

__version__ = "0.2.0"

# public name -> (module, attribute)
_LAZY = {
    "jit": ("tilejit.runtime.jit", "jit"),
    "JITFunction": ("tilejit.runtime.jit", "JITFunction"),
    "KernelInterface": ("tilejit.runtime.jit", "KernelInterface"),
    "autotune": ("tilejit.runtime.autotuner", "autotune"),
    "heuristics": ("tilejit.runtime.autotuner", "heuristics"),
    "Config": ("tilejit.runtime.autotuner", "Config"),
    "compile": ("tilejit.compiler", "compile"),
    "CompiledKernel": ("tilejit.compiler", "CompiledKernel"),
    "ASTSource": ("tilejit.frontend.source", "ASTSource"),
    "IRSource": ("tilejit.frontend.source", "IRSource"),
    "GPUTarget": ("tilejit.backends", "GPUTarget"),
    "target": ("tilejit.backends", "target"),
    "knobs": ("tilejit.config", "knobs"),
    "TilejitError": ("tilejit.errors", "TilejitError"),
    "CompilationError": ("tilejit.errors", "CompilationError"),
    "OutOfResources": ("tilejit.errors", "OutOfResources"),
    "InterpreterError": ("tilejit.errors", "InterpreterError"),
    "LaunchError": ("tilejit.errors", "LaunchError"),
    "TritonError": ("tilejit.errors", "TritonError"),
    "PTXASError": ("tilejit.errors", "PTXASError"),
    "set_allocator": ("tilejit.runtime.allocation", "set_allocator"),
    "reinterpret": ("tilejit.runtime.tensor_wrapper", "reinterpret"),
    "TensorWrapper": ("tilejit.runtime.tensor_wrapper", "TensorWrapper"),
    "alias_triton": ("tilejit.alias", "alias_triton"),
    "TRITON_API_VERSION": ("tilejit.alias", "TRITON_API_VERSION"),
    "ArgumentError": ("tilejit.errors", "ArgumentError"),
    "GridError": ("tilejit.errors", "GridError"),
}

_SUBMODULES = ("language", "testing", "runtime", "backends", "ir", "frontend", "passes", "gpu", "config",
               "errors", "compiler", "tools", "alias", "compat")

__all__ = sorted(list(_LAZY) + ["cdiv", "next_power_of_2", "constexpr_function", "language", "testing",
                                 "__version__"])

from tilejit._constexpr import cdiv, constexpr_function, next_power_of_2  # noqa: E402,F401 - public names; cheap, no deps


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"tilejit.{name}")
    raise AttributeError(f"module 'tilejit' has no attribute '{name}'")


def __dir__():
    return __all__
