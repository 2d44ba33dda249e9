"""`tl.extra.cuda`: `libdevice` (tilejit's target-neutral set), the warp/thread counts and the PDL
controls. `globaltimer`, `smid` and `convert_custom_float8_sm70/80` (PTX inline assembly in Triton)
are not provided (docs/language.md)."""
from .._launch_info import gdc_launch_dependents, gdc_wait, num_threads, num_warps
from . import libdevice

__all__ = ["libdevice", "num_threads", "num_warps", "gdc_launch_dependents", "gdc_wait"]
