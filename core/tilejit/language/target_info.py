"""`tl.target_info`: questions about the target a kernel is compiled for, answered at compile time
(Triton 3.x's `triton.language.target_info`).

Inside a `@jit` function the answer comes from the target of the compilation (`ASTSource.make_ir(target,
...)`), so cross-compiling for `cuda:80` on a machine with an H100 answers for sm_80. Called from plain
Python, they answer for the target a launch would pick now (`with tilejit.target(...)`, the environment,
or the one active driver), or `False` when no target can be chosen. Inside a kernel each result is a
`tl.constexpr`, so `if tl.target_info.is_cuda():` selects a branch at compile time.
"""
from __future__ import annotations

from ..errors import TilejitError
from .core import constexpr, _unwrap_if_constexpr

__all__ = ["current_target", "is_cuda", "cuda_capability_geq", "is_hip", "is_hip_cdna3", "is_hip_cdna4"]


def _as_gpu_target(target):
    if target is None:
        return None
    from ..backends.gpu_target import GPUTarget
    return GPUTarget.parse(target) if isinstance(target, str) else target


def _target_outside_kernel():
    from ..backends.selection import select_target
    try:
        return select_target()
    except TilejitError:  # nothing installed or active: there is no current target
        return None


def _compile_target(semantic):
    if semantic is None:
        from .semantic import _ACTIVE
        semantic = _ACTIVE[-1] if _ACTIVE else None
    if semantic is None:
        return _target_outside_kernel()
    codegen = getattr(semantic, "codegen", None)
    ctx = getattr(codegen, "ctx", None)
    target = getattr(ctx, "target", None)
    return _as_gpu_target(target)


def _compile_time_function(fn):
    """Mark `fn` as a builtin whose Python result is a compile-time constant (Triton's constexpr_function)."""

    def wrapper(*args, _semantic=None, _builder=None, **kwargs):
        args = [_unwrap_if_constexpr(a) for a in args]
        kwargs = {k: _unwrap_if_constexpr(v) for k, v in kwargs.items()}
        result = fn(_compile_target(_semantic), *args, **kwargs)
        return constexpr(result) if _semantic is not None else result

    wrapper.__name__ = wrapper.__qualname__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__tilejit_builtin__ = True
    return wrapper


@_compile_time_function
def current_target(target):
    """The `GPUTarget` being compiled for (None outside a kernel when no target can be chosen)."""
    return target


@_compile_time_function
def is_cuda(target) -> bool:
    return target is not None and target.backend == "cuda"


@_compile_time_function
def cuda_capability_geq(target, major, minor=0) -> bool:
    """Is the target an NVIDIA GPU of compute capability >= (major, minor)?"""
    if isinstance(major, bool) or not isinstance(major, int) or isinstance(minor, bool) or \
            not isinstance(minor, int):
        raise TypeError(f"cuda_capability_geq expects compile-time ints, got {major!r}, {minor!r}")
    if target is None or target.backend != "cuda" or not isinstance(target.arch, int):
        return False
    return target.arch >= major * 10 + minor


@_compile_time_function
def is_hip(target) -> bool:
    return target is not None and target.backend == "hip"


@_compile_time_function
def is_hip_cdna3(target) -> bool:
    return target is not None and target.backend == "hip" and target.arch == "gfx942"


@_compile_time_function
def is_hip_cdna4(target) -> bool:
    return target is not None and target.backend == "hip" and target.arch == "gfx950"
