"""Make `import triton` resolve to tilejit for a whole program.

`tilejit.alias_triton()` installs an import hook (a `sys.meta_path` finder) that answers every
`triton` and `triton.*` import with the matching tilejit module, so an unmodified Triton library or
test file runs on tilejit. The same switch from the command line: `tilejit run script.py [args]` or
`tilejit run -m module [args]` (docs/user-guide.md, "Running Triton code unchanged").

Under the alias `triton.__version__` is `TRITON_API_VERSION`, the Triton release whose Python API
tilejit implements (libraries branch on it), while `tilejit.__version__` stays tilejit's own. The
module `triton` is a thin proxy of `tilejit` (every attribute is tilejit's); each submodule is the
tilejit module itself or, where Triton's layout differs, a small shim in `tilejit.compat`.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
import types

TRITON_API_VERSION = "3.6.0"

# Triton module name -> tilejit module, where the name is not simply `tilejit` + the same suffix.
MODULE_MAP = {
    "triton": "tilejit.compat.triton_root",
    "triton.compiler": "tilejit.compat.compiler",
    "triton.compiler.compiler": "tilejit.compat.compiler",
    "triton.compiler.errors": "tilejit.errors",
    "triton.backends": "tilejit.compat.backends",
    "triton.backends.compiler": "tilejit.compat.backends",
    "triton.backends.driver": "tilejit.compat.backends",
    "triton.runtime.jit": "tilejit.compat.runtime_jit",
    "triton.runtime.driver": "tilejit.runtime.driver",
    "triton.runtime.errors": "tilejit.errors",
    "triton.runtime._allocation": "tilejit.runtime.allocation",
    "triton.runtime.autotuner": "tilejit.compat.runtime_autotuner",
    "triton.errors": "tilejit.errors",
    "triton._internal_testing": "tilejit.compat.internal_testing",
    "triton.knobs": "tilejit.compat.knobs",
}


def target_module_name(fullname: str) -> str:
    """The tilejit module that answers an import of `fullname` (a `triton...` name)."""
    if fullname in MODULE_MAP:
        return MODULE_MAP[fullname]
    return "tilejit" + fullname[len("triton"):]


class _AliasLoader(importlib.abc.Loader):
    """Hands out an already imported tilejit module instead of executing anything."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        return None


class _TritonDistribution(importlib.metadata.Distribution):
    """What `importlib.metadata.version("triton")` sees under the alias: a "triton" distribution of
    version TRITON_API_VERSION (libraries that check the installed version that way take the same
    path as those that read `triton.__version__`)."""

    def read_text(self, filename):
        if filename in ("METADATA", "PKG-INFO"):
            return (f"Metadata-Version: 2.1\nName: triton\nVersion: {TRITON_API_VERSION}\n"
                    "Summary: the Triton API, provided by tilejit (tilejit.alias_triton)\n")
        return None

    def locate_file(self, path):
        return None


class TritonAliasFinder(importlib.abc.MetaPathFinder):
    """Finds `triton` and `triton.*` as tilejit modules (first on `sys.meta_path`)."""

    def find_distributions(self, context=None):
        context = context if context is not None else importlib.metadata.DistributionFinder.Context()
        if context.name is None or context.name.lower().replace("_", "-") == "triton":
            yield _TritonDistribution()

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton" and not fullname.startswith("triton."):
            return None
        name = target_module_name(fullname)
        try:
            module_spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            module_spec = None
        if module_spec is None:
            raise ModuleNotFoundError(f"No module named '{fullname}': tilejit has no '{name}' (the alias maps "
                                      f"'{fullname}' to it; see docs/language.md for what is not supported)",
                                      name=fullname)
        is_package = module_spec.submodule_search_locations is not None or name in _SHIM_PACKAGES
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(name), is_package=is_package)


# Shims that stand for Triton packages (they have submodules under the alias).
_SHIM_PACKAGES = {"tilejit.compat.triton_root", "tilejit.compat.compiler", "tilejit.compat.backends"}

_finder: TritonAliasFinder | None = None


def alias_triton() -> types.ModuleType:
    """Make `import triton` (and every `triton.*` module) resolve to tilejit from now on; returns the
    `triton` module. Calling it again is harmless. A real Triton already imported in this process
    cannot be replaced: that is a RuntimeError."""
    global _finder
    existing = sys.modules.get("triton")
    if existing is not None and not getattr(existing, "__tilejit_alias__", False):
        raise RuntimeError("tilejit.alias_triton(): the real 'triton' package is already imported in this "
                           "process; call alias_triton() (or use `tilejit run`) before anything imports triton")
    if _finder is None:
        _finder = TritonAliasFinder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    return importlib.import_module("triton")


def is_aliased() -> bool:
    return _finder is not None and _finder in sys.meta_path


def remove_alias() -> None:
    """Undo `alias_triton()`: remove the hook and forget the `triton*` modules it created."""
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        module = sys.modules[name]
        if name == "triton" and not getattr(module, "__tilejit_alias__", False):
            continue
        if name == "triton" or getattr(module, "__name__", "").startswith("tilejit"):
            del sys.modules[name]
