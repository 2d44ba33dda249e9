"""The `triton` module under the alias: every attribute is `tilejit`'s, except `__version__`, which is
the Triton API level tilejit implements (`tilejit.alias.TRITON_API_VERSION`)."""
import importlib as _importlib

import tilejit as _tilejit
import tilejit.runtime.driver  # noqa: F401  (`triton.runtime.driver.active` works after `import triton`)
from tilejit.alias import MODULE_MAP as _MODULE_MAP
from tilejit.alias import TRITON_API_VERSION

__version__ = TRITON_API_VERSION
__tilejit_alias__ = True
__path__: list = []  # a package: `import triton.language` goes through the alias finder


def __getattr__(name):
    if f"triton.{name}" in _MODULE_MAP:  # a submodule whose Triton layout a shim provides
        return _importlib.import_module(f"triton.{name}")
    return getattr(_tilejit, name)


def __dir__():
    return sorted(set(dir(_tilejit)) | {"__version__"})
