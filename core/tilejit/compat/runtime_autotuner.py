"""`triton.runtime.autotuner`: tilejit's autotuner module plus the errors Triton's module exports."""
import tilejit.runtime.autotuner as _autotuner
from tilejit.errors import OutOfResources, PTXASError  # noqa: F401
from tilejit.runtime.autotuner import Autotuner, Config, Heuristics, autotune, heuristics  # noqa: F401


def __getattr__(name):
    return getattr(_autotuner, name)
