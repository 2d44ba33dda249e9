"""Choosing the target of a launch or a compilation, in the order DESIGN.md fixes:

1. explicit: the `explicit` argument, else the innermost `with tilejit.target(...)` block;
2. environment: `TILEJIT_TARGET`, else `TILEJIT_INTERPRET=1` / `TRITON_INTERPRET=1` (interpreter);
3. the arguments: the backend whose driver owns the tensor arguments (mixed owners are an error);
4. the single active backend (a CPU fallback steps aside for an active device backend).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Sequence

from tilejit.backends.errors import BackendUnavailableError, MixedDevicesError, TargetError
from tilejit.backends.registry import active_state, available_backends, installation_summary
from tilejit.backends.gpu_target import GPUTarget

INTERPRETER_TARGET = GPUTarget("interpreter", "numpy", 1)

_explicit_target: contextvars.ContextVar[GPUTarget | None] = contextvars.ContextVar(
    "tilejit_explicit_target", default=None)


@contextlib.contextmanager
def target(spec: "str | GPUTarget"):
    """`with tilejit.target("cuda:90"):` compiles and launches every kernel inside for that target."""
    parsed = GPUTarget.parse(spec)
    token = _explicit_target.set(parsed)
    try:
        yield parsed
    finally:
        _explicit_target.reset(token)


def current_explicit_target() -> GPUTarget | None:
    """The target of the innermost `with tilejit.target(...)` block, if any."""
    return _explicit_target.get()


_MEMORY_ATTRIBUTES = ("data_ptr", "__cuda_array_interface__", "__array_interface__", "__dlpack__", "__array__")


def _is_tensor_like(arg) -> bool:
    # Scalars never decide the device; everything that carries memory may. `data_ptr` is asked first
    # and a refusing property counts as present: torch's `__cuda_array_interface__` raises
    # RuntimeError (not AttributeError, which is all `hasattr` catches) for a tensor requiring grad.
    if arg is None or isinstance(arg, (bool, int, float, complex, str, bytes)):
        return False
    for attr in _MEMORY_ATTRIBUTES:
        try:
            if hasattr(arg, attr):
                return True
        except Exception:  # noqa: BLE001 - the attribute exists; it just refused this object
            return True
    return False


def _describe_arg(index: int, names: Sequence[str] | None) -> str:
    if names is not None and index < len(names):
        return f"argument {index} ('{names[index]}')"
    return f"argument {index}"


def _target_from_args(args: Sequence, names: Sequence[str] | None) -> GPUTarget | None:
    active = [cls for cls in available_backends().values() if active_state(cls)[0]]
    owners_by_backend: dict[str, list[int]] = {}
    chosen = {}
    for index, arg in enumerate(args):
        if not _is_tensor_like(arg):
            continue
        owners = [cls for cls in active if _safe_owns(cls, arg)]
        if len(owners) > 1:
            raise MixedDevicesError(f"{_describe_arg(index, names)} is claimed by several backends: "
                                    f"{', '.join(cls.name for cls in owners)}; choose one with "
                                    "`with tilejit.target(...)` or TILEJIT_TARGET")
        if owners:
            owners_by_backend.setdefault(owners[0].name, []).append(index)
            chosen[owners[0].name] = owners[0]
    if not owners_by_backend:
        return None
    if len(owners_by_backend) > 1:
        parts = [f"{', '.join(_describe_arg(i, names) for i in indices)} on '{name}'"
                 for name, indices in owners_by_backend.items()]
        raise MixedDevicesError("kernel arguments live on different devices: " + "; ".join(parts)
                                + ". Move them to one device.")
    (cls,) = chosen.values()
    return cls.get_current_target()


def _safe_owns(cls, arg) -> bool:
    if type(arg).__name__ == "TensorWrapper":  # `tilejit.reinterpret`: its memory is the base's
        arg = getattr(arg, "base", arg)
    try:
        return bool(cls.owns(arg))
    except Exception:  # a backend that cannot inspect an object simply does not own it
        return False


def _single_active_target() -> GPUTarget:
    active = [cls for cls in available_backends().values() if active_state(cls)[0]]
    if len(active) > 1:
        devices = [cls for cls in active if not getattr(cls, "cpu_fallback", False)]
        if len(devices) == 1:
            active = devices
    if len(active) == 1:
        return active[0].get_current_target()
    problem = "no backend is active" if not active else (
        "several backends are active (" + ", ".join(sorted(cls.name for cls in active)) + ")")
    raise BackendUnavailableError(
        f"cannot choose a target: {problem}. Pass target=..., use `with tilejit.target(...)` or set "
        f"TILEJIT_TARGET.\nBackends:\n{installation_summary()}")


def select_target(args: Sequence = (), explicit: "str | GPUTarget | None" = None,
                  names: Sequence[str] | None = None) -> GPUTarget:
    """The target for a kernel called with `args` (`names`: the parameter names, for messages)."""
    if explicit is not None:
        return GPUTarget.parse(explicit)
    scoped = _explicit_target.get()
    if scoped is not None:
        return scoped
    from tilejit.config import knobs
    env_target = knobs.target
    if env_target is not None:
        try:
            return GPUTarget.parse(env_target)
        except TargetError as exc:
            raise TargetError(f"TILEJIT_TARGET: {exc}") from None
    if knobs.interpret:
        return INTERPRETER_TARGET
    from_args = _target_from_args(args, names)
    if from_args is not None:
        return from_args
    return _single_active_target()
