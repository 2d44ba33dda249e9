"""`tl.extra.cuda`: `libdevice` (tilejit's target-neutral set), the warp/thread counts, the PDL
controls, and the special registers `globaltimer` / `smid` (inline PTX, as in Triton).
`convert_custom_float8_sm70/80` (PTX inline assembly in Triton) are not provided (docs/language.md)."""
from .._launch_info import gdc_launch_dependents, gdc_wait, num_threads, num_warps
from ._special_registers import globaltimer, smid
from . import libdevice

__all__ = ["libdevice", "num_threads", "num_warps", "gdc_launch_dependents", "gdc_wait", "globaltimer", "smid"]
