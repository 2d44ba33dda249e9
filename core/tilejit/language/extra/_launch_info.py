"""`tl.extra.cuda` / `tl.extra.hip` helpers that need no device instruction: the launch's warp and
thread counts (compile-time constants from the compile options and the target), and the
programmatic-dependent-launch controls, which are no-ops because tilejit launches no grid early."""
from __future__ import annotations

from .. import core
from ..target_info import _compile_target


def _num_warps(semantic) -> int:
    options = getattr(semantic, "options", None)
    value = getattr(options, "num_warps", None)
    if value is None and isinstance(options, dict):
        value = options.get("num_warps")
    return int(value) if value is not None else 4


@core.builtin
def num_warps(_semantic=None):
    """The kernel's `num_warps` launch option, as a constexpr."""
    return core.constexpr(_num_warps(_semantic))


@core.builtin
def num_threads(_semantic=None):
    """Threads per program: `num_warps` times the target's warp size (1 on the interpreter)."""
    target = _compile_target(_semantic)
    warp_size = getattr(target, "warp_size", 32) if target is not None else 32
    return core.constexpr(_num_warps(_semantic) * int(warp_size))


@core.builtin
def gdc_wait(_semantic=None):
    """Wait for the grid this one depends on (PDL). tilejit never starts a grid before the previous
    one on its stream has finished, so there is nothing to wait for."""
    return None


@core.builtin
def gdc_launch_dependents(_semantic=None):
    """Allow the dependent grid to start (PDL): a no-op, dependent grids start after this one ends."""
    return None
