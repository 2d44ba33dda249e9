"""Discovery of backends through the entry-point group `tilejit.backends`.

Entry points are loaded lazily, once per process. A plugin that fails to import, does not name a
`BaseBackend` subclass, or was written for another `API_VERSION` is recorded with its error, warned
about once, and skipped: the other backends still load.
"""
from __future__ import annotations

import importlib.metadata
import threading
import warnings

from tilejit.backends.base import API_VERSION, BaseBackend
from tilejit.backends.errors import BackendUnavailableError, TargetError
from tilejit.backends.gpu_target import GPUTarget

BACKEND_GROUP = "tilejit.backends"

# The backends tilejit ships, with the pip extra that installs each one.
KNOWN_BACKENDS = {
    "cuda": "pip install tilejit[nvidia]",
    "hip": "pip install tilejit[amd]",
    "interpreter": "pip install tilejit[interpreter]",
}

_lock = threading.RLock()
_available: dict[str, type] | None = None
_broken: dict[str, str] = {}
_instances: dict[GPUTarget, BaseBackend] = {}
_active_states: dict[type, tuple[bool, str]] = {}


def entry_points_of(group: str) -> list:
    """The entry points of `group`, one per name (the first one found wins, as on `sys.path`)."""
    found = importlib.metadata.entry_points(group=group)
    unique = {}
    for ep in found:
        unique.setdefault(ep.name, ep)
    return list(unique.values())


def _check_backend_class(name: str, obj) -> str | None:
    """The reason `obj` cannot serve as backend `name`, or None when it can."""
    if not isinstance(obj, type) or not issubclass(obj, BaseBackend):
        return f"entry point does not name a tilejit.backends.BaseBackend subclass (got {obj!r})"
    version = getattr(obj, "api_version", None)
    if version != API_VERSION:
        return f"written for backend API version {version!r}, this tilejit provides {API_VERSION}"
    if obj.name != name:
        return f"entry point is named '{name}' but the class declares name = {obj.name!r}"
    if getattr(obj, "__abstractmethods__", None):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        return f"backend class {obj.__name__} does not implement: {missing}"
    return None


def _load() -> dict[str, type]:
    global _available
    with _lock:
        if _available is not None:
            return _available
        available, broken = {}, {}
        for ep in entry_points_of(BACKEND_GROUP):
            try:
                obj = ep.load()
            except Exception as exc:  # any failure inside a plugin must not stop the others
                broken[ep.name] = f"import of '{ep.value}' failed: {type(exc).__name__}: {exc}"
                continue
            problem = _check_backend_class(ep.name, obj)
            if problem:
                broken[ep.name] = problem
            else:
                available[ep.name] = obj
        for name, error in broken.items():
            warnings.warn(f"tilejit: backend plugin '{name}' is broken and was skipped: {error}",
                          RuntimeWarning, stacklevel=3)
        _broken.clear()
        _broken.update(broken)
        _available = available
        return available


def available_backends() -> dict[str, type]:
    """Installed, working backend classes by name."""
    return dict(_load())


def broken_backends() -> dict[str, str]:
    """Installed backend plugins that failed to load, with the reason."""
    _load()
    return dict(_broken)


def reset_backends() -> None:
    """Forget everything discovered (tests use it after changing the installed entry points)."""
    global _available
    with _lock:
        _available = None
        _broken.clear()
        _instances.clear()
        _active_states.clear()


def get_backend_class(name: str) -> type:
    """The backend class called `name`; an error that says how to install it when it is missing."""
    backends = _load()
    if name in backends:
        return backends[name]
    raise BackendUnavailableError(f"backend '{name}' is not available: {_why_missing(name)}")


def backend_for_target(target: "GPUTarget | str") -> BaseBackend:
    """The backend instance that compiles for `target` (one instance per target)."""
    target = GPUTarget.parse(target)
    with _lock:
        instance = _instances.get(target)
        if instance is None:
            cls = get_backend_class(target.backend)
            if not cls.supports_target(target):
                raise TargetError(f"backend '{cls.name}' does not support target '{target}'; "
                                  f"it accepts {cls.describe_targets()}")
            instance = _instances[target] = cls(target)
        return instance


def _why_missing(name: str) -> str:
    if name in _broken:
        return f"its plugin is broken: {_broken[name]}"
    installed = ", ".join(sorted(_load())) or "none"
    hint = KNOWN_BACKENDS.get(name)
    how = f"install it with `{hint}`" if hint else "no installed package provides it"
    return f"{how} (installed backends: {installed})"


def active_state(cls: type) -> tuple[bool, str]:
    """`(is_active, reason)` of a backend class; a crash inside the check counts as inactive.

    Probing a driver can be slow and target selection runs at every launch, so the answer is kept
    until `reset_backends()`.
    """
    state = _active_states.get(cls)
    if state is None:
        try:
            state = (True, "") if cls.is_active() else (False, cls.inactive_reason() or "inactive")
        except Exception as exc:  # a driver probe that throws must not break discovery
            state = (False, f"driver check failed: {type(exc).__name__}: {exc}")
        _active_states[cls] = state
    return state


def installation_summary() -> str:
    """Installed backends with their state, broken ones, and how to add the missing ones."""
    lines = []
    for name, cls in sorted(_load().items()):
        active, reason = active_state(cls)
        lines.append(f"  {name}: " + ("active" if active else f"inactive ({reason})"))
    for name, error in sorted(_broken.items()):
        lines.append(f"  {name}: broken ({error})")
    missing = [f"  {name}: not installed (`{hint}`)" for name, hint in KNOWN_BACKENDS.items()
               if name not in _load() and name not in _broken]
    return "\n".join(lines + missing) if lines or missing else "  (no backend installed)"
