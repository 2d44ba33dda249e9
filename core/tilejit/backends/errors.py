"""Errors raised by backend discovery, target parsing and option parsing.

They derive from both `TilejitError` (so the CLI and users can catch every tilejit failure at once) and
the built-in class a Python user expects (`ValueError` for a bad string or option).
"""
from __future__ import annotations

from tilejit.errors import TilejitError


class TargetError(TilejitError, ValueError):
    """A target string or `GPUTarget` that no backend accepts."""


class OptionsError(TilejitError, ValueError):
    """A compile option that the backend does not know, or a value of the wrong kind."""


class MixedDevicesError(TilejitError, ValueError):
    """Kernel arguments live on the devices of different backends."""


class BackendUnavailableError(TilejitError, RuntimeError):
    """No installed, working backend fits the request."""
