"""The TTIR pipeline that every backend runs after the frontend (the interpreter included).

inline -> canonicalize -> cse -> dce -> unroll -> canonicalize -> cse -> dce, then whatever plugins
append through the `tilejit_ttir_passes(passes, options)` hook.
"""
from __future__ import annotations

from typing import List

from ..ir import Module
from .base import PassManager, run_passes  # noqa: F401  (run_passes is part of this module's API)
from .canonicalize import Canonicalize
from .cse import CSE
from .dce import DCE
from .inline import Inline
from .unroll import Unroll


def default_ttir_passes() -> List:
    return [Inline(), Canonicalize(), CSE(), DCE(), Unroll(), Canonicalize(), CSE(), DCE()]


def _plugin_passes(passes: List, options) -> None:
    """Let `tilejit.plugins` extensions edit `passes` in place."""
    from .. import plugins   # here: the plugin manager loads entry points, which may import this package
    plugins.get_plugin_manager().hook.tilejit_ttir_passes(passes=passes, options=options)


def ttir_pass_manager(options=None) -> PassManager:
    """The manager for the TTIR pipeline; `options.debug` (or TILEJIT_DEBUG) turns verification on."""
    passes = default_ttir_passes()
    _plugin_passes(passes, options)
    verify = True if getattr(options, "debug", False) else None
    return PassManager(passes, verify=verify)


def run_ttir_passes(module: Module, options=None) -> Module:
    """Run the TTIR pipeline on `module` in place and return it."""
    return ttir_pass_manager(options).run(module)
