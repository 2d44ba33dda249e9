"""`tl.extra.cuda.globaltimer()` and `smid()`: PTX special registers, read with inline assembly as
Triton does (so GPU backends only: on the interpreter they are a located compile error)."""
from __future__ import annotations

from ... import core
from ...functions import inline_asm_elementwise


@core.builtin
def globaltimer(_semantic=None):
    """The GPU's global nanosecond timer (`%globaltimer`), an int64; read anew at each call."""
    return inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=core.int64, is_pure=False, pack=1,
                                  _semantic=_semantic)


@core.builtin
def smid(_semantic=None):
    """The index of the streaming multiprocessor running this program (`%smid`), an int32."""
    return inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=core.int32, is_pure=True, pack=1,
                                  _semantic=_semantic)
