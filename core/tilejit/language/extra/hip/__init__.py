"""`tl.extra.hip`: `libdevice` (tilejit's target-neutral set) and the warp/thread counts.
`memrealtime` and `smid` (GCN inline assembly in Triton) are not provided (docs/language.md)."""
from .._launch_info import num_threads, num_warps
from . import libdevice

__all__ = ["libdevice", "num_threads", "num_warps"]
