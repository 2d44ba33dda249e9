"""`tl.atomic_poll` (Triton 3.x): wait until the integer at each pointer equals an expected value.

Written in `tl` from existing ops, so every backend runs it: each round reads every element with an
atomic compare-and-swap of the expected value against itself (a read with the requested memory
semantics that never changes memory: on a match it stores the value already there), and the loop
ends once every element has been seen equal to the expected value. The GPU lowering reads such a
compare-and-swap as the atomic load it is (on NVIDIA `ld.relaxed.<scope>.global` + `fence.acquire`,
as Triton's poll); the loop has one read site, so the PTX holds one. The interpreter recognises the
loop as a waiting loop (its condition depends on an atomic) and lets the other programs run meanwhile.
"""
from __future__ import annotations

from ..runtime.jit import jit
from . import core
from .standard import _compile_time

_POLL_SEMANTICS = ("acquire", "relaxed")
_POLL_SCOPES = ("gpu", "cta", "sys")


@core.builtin
def _check_poll(pointer, timeout_ns, _semantic=None):
    pointer = core._unwrap_if_constexpr(pointer)
    if not isinstance(pointer, core.tensor) or not pointer.type.scalar.is_ptr():
        raise ValueError(f"Unsupported ptr type {getattr(pointer, 'type', pointer)!r} in `tl.atomic_poll`")
    element = pointer.type.scalar.element_ty
    if not element.is_int() or element.primitive_bitwidth not in (16, 32, 64):
        raise ValueError("atomic_poll only supports integer elements with width {16, 32, 64}")
    if core._unwrap_if_constexpr(timeout_ns) is not None:
        # Triton measures the budget with the GPU's global timer; tilejit's TTIR has no clock op.
        raise ValueError("atomic_poll: timeout_ns is not supported by tilejit (no global timer); "
                         "omit it to poll until the value appears")
    return core.constexpr(None)


@_compile_time
def _poll_semantic(sem):
    sem = "acquire" if sem is None else sem
    if sem not in _POLL_SEMANTICS:
        raise ValueError("atomic_poll only supports acquire and relaxed semantics")
    return sem


@_compile_time
def _poll_scope(scope):
    scope = "gpu" if scope is None else scope
    if scope not in _POLL_SCOPES:
        raise ValueError(f"atomic_poll: scope must be one of {list(_POLL_SCOPES)}, got {scope!r}")
    return scope


@core.builtin
def _none_matched(pointer, _semantic=None):
    """All false, in the shape of `pointer` (a scalar for a scalar pointer)."""
    shape = list(pointer.type.shape) if pointer.type.is_block() else []
    return _semantic.full(shape, False, core.int1)


@core.builtin
def _any_false(matched, _semantic=None):
    """A scalar int32: 1 while some element of `matched` is still false."""
    pending = _semantic.cast(_semantic.not_(matched), core.int32)
    if pending.type.is_block():
        pending = _semantic.reduction(pending, None, lambda args: _semantic.or_(args[0], args[1]))
    return pending


@jit
def atomic_poll(pointer, expected_value, sem=None, scope=None, timeout_ns=None):
    """Spin until `*pointer == expected_value` for every element; returns a block of booleans
    (all true: without a timeout every poll ends by matching)."""
    _check_poll(pointer, timeout_ns)
    SEM: core.constexpr = _poll_semantic(sem)
    SCOPE: core.constexpr = _poll_scope(scope)
    expected = core.cast(expected_value, pointer.dtype.element_ty)
    # One read site, inside the loop (as Triton's poll: one `ld.relaxed` in the PTX).
    matched = _none_matched(pointer)
    while _any_false(matched) != 0:
        matched = matched | (core.atomic_cas(pointer, expected, expected, sem=SEM, scope=SCOPE) == expected)
    return matched
