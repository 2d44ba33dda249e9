"""The plugin manager: loads extension plugins from the entry-point group `tilejit.plugins`.

An entry point names a module or an object with hook functions, or a class (instantiated with no
arguments) with hook methods. A plugin that fails to import, or whose hook functions do not match `tilejit.hookspecs`, is recorded
with its error, warned about once and skipped; the others still load.
"""
from __future__ import annotations

import threading
import warnings

import pluggy

from tilejit import hookspecs
from tilejit.backends.registry import entry_points_of

PLUGIN_GROUP = "tilejit.plugins"

_lock = threading.RLock()
_manager: pluggy.PluginManager | None = None
_broken: dict[str, str] = {}


def _register_checked(manager: pluggy.PluginManager, obj, name: str | None) -> str:
    """Register `obj`, undoing it if its hooks do not match the specs (so a bad plugin leaves no trace)."""
    registered = manager.register(obj, name=name)
    try:
        manager.check_pending()
    except pluggy.PluginValidationError:
        manager.unregister(obj)
        raise
    return registered


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created (and entry points loaded) on first use."""
    global _manager
    with _lock:
        if _manager is not None:
            return _manager
        manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        manager.add_hookspecs(hookspecs)
        broken = {}
        for ep in entry_points_of(PLUGIN_GROUP):
            try:
                plugin = ep.load()
                if isinstance(plugin, type):  # a class names a plugin whose hooks are methods
                    plugin = plugin()
                _register_checked(manager, plugin, ep.name)
            except Exception as exc:  # a broken plugin must not stop tilejit or the other plugins
                broken[ep.name] = f"{type(exc).__name__}: {exc}"
        for name, error in broken.items():
            warnings.warn(f"tilejit: plugin '{name}' is broken and was skipped: {error}",
                          RuntimeWarning, stacklevel=2)
        _broken.clear()
        _broken.update(broken)
        _manager = manager
        return manager


def register(plugin, name: str | None = None) -> str:
    """Register a plugin object by hand (tests, notebooks); returns its name in the manager.

    Raises `pluggy.PluginValidationError` when a hook function does not match its spec.
    """
    name = _register_checked(get_plugin_manager(), plugin, name)
    _forget_launch_hooks()
    return name


def unregister(plugin) -> None:
    """Remove a plugin registered with `register`."""
    get_plugin_manager().unregister(plugin)
    _forget_launch_hooks()


def broken_plugins() -> dict[str, str]:
    """Plugins from `tilejit.plugins` that failed to load, with the reason."""
    get_plugin_manager()
    return dict(_broken)


def reset_plugins() -> None:
    """Drop the manager and every registered plugin; the next use loads the entry points again."""
    global _manager
    with _lock:
        _manager = None
        _broken.clear()
    _forget_launch_hooks()


def _forget_launch_hooks() -> None:
    """The compile driver looks the launch hooks up once; make it look again after a change."""
    import sys
    compiler = sys.modules.get("tilejit.compiler")
    if compiler is not None:
        compiler.reset_launch_hooks()
