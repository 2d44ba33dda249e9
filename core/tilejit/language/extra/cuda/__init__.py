"""`tl.extra.cuda`: Triton's CUDA extras; `libdevice` is tilejit's target-neutral libdevice."""
from . import libdevice

__all__ = ["libdevice"]
