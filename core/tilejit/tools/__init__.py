"""`tilejit.tools` (`triton.tools` under the alias): host-side helpers for kernel authors."""
from . import tensor_descriptor

__all__ = ["tensor_descriptor"]
