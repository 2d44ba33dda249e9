"""pluggy hook specifications of tilejit (project name `tilejit`).

A plugin is any object (often a module) with functions decorated by `hookimpl` and named after the
specs below; it is registered through the entry-point group `tilejit.plugins` or, in tests, with
`tilejit.plugins.register(obj)`. Call sites always pass arguments by keyword, as pluggy requires.
"""
from __future__ import annotations

import pluggy

PROJECT_NAME = "tilejit"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def tilejit_add_stages(stages, options, target):
    """Change the ordered stage dict `{name: fn(src, metadata)}` after the backend filled it.

    Called by the compile driver once per compilation; edit `stages` in place (insert a stage, wrap
    one to dump or check its output, ...). `target` is the `GPUTarget`.
    """


@hookspec
def tilejit_ttir_passes(passes, options):
    """Append passes (objects with `name` and `apply(module)`) to the TTIR pipeline list `passes`."""


@hookspec
def tilejit_pre_launch(kernel_name, grid, args, metadata):
    """Called right before a kernel runs; `grid` is a 3-tuple of ints, `args` the runtime arguments,
    `metadata` what `CompiledKernel.launch_metadata` reports (name, grid, stream, and the kernel's
    `@jit(launch_metadata=fn)` values). An implementation may take any subset of these arguments."""


@hookspec
def tilejit_post_launch(kernel_name, grid, args, metadata):
    """Called right after a kernel was launched (asynchronously on GPUs: it may still be running)."""


@hookspec(firstresult=True)
def tilejit_cache_manager(key):
    """Return a cache object for `key` (with `load()` and `store(metadata, artifacts)`), or None.

    The first plugin that returns an object wins; without one, tilejit uses its disk cache.
    """
