"""`tilejit.tools` (`triton.tools` under the alias): host-side helpers for kernel authors."""
from . import tensor_descriptor

__all__ = ["tensor_descriptor", "mxfp"]


def __getattr__(name):
    if name == "mxfp":  # needs torch: imported on first use only
        import importlib
        return importlib.import_module(f"{__name__}.mxfp")
    raise AttributeError(f"module 'tilejit.tools' has no attribute '{name}'")
