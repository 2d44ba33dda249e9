"""The backend API: targets, options, the backend base class, discovery and target selection."""
from tilejit.backends.base import (API_VERSION, BaseBackend, BaseOptions, Launcher, normalize_grid,
                                   wall_clock_benchmarker)
from tilejit.backends.errors import BackendUnavailableError, MixedDevicesError, OptionsError, TargetError
from tilejit.backends.registry import (BACKEND_GROUP, KNOWN_BACKENDS, active_state, available_backends,
                                       backend_for_target, broken_backends, get_backend_class,
                                       reset_backends)
from tilejit.backends.selection import INTERPRETER_TARGET, current_explicit_target, select_target, target
from tilejit.backends.gpu_target import GPUTarget

__all__ = [
    "API_VERSION", "BACKEND_GROUP", "INTERPRETER_TARGET", "KNOWN_BACKENDS", "BackendUnavailableError",
    "BaseBackend", "BaseOptions", "GPUTarget", "Launcher", "MixedDevicesError", "OptionsError",
    "TargetError", "active_state", "available_backends", "backend_for_target", "broken_backends",
    "current_explicit_target", "get_backend_class", "normalize_grid", "reset_backends", "select_target",
    "target", "wall_clock_benchmarker",
]
