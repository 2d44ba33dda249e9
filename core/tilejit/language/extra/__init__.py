"""`triton.language.extra` (`tl.extra`): `libdevice`, and the per-vendor namespaces `cuda` and `hip`,
whose `libdevice` is the same target-neutral module (see `libdevice.py`)."""
from . import cuda, hip, libdevice

__all__ = ["cuda", "hip", "libdevice"]
