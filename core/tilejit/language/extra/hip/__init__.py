"""`tl.extra.hip`: Triton's HIP extras; `libdevice` is tilejit's target-neutral libdevice."""
from . import libdevice

__all__ = ["libdevice"]
