"""`tl.math`: the math namespace of Triton 3.x (`triton.language.math`).

Triton 3.x's `tl.math` holds exactly these element-wise functions; they are language builtins (each
lowers to one TTIR/`math` op), defined once in `functions.py` and re-exported here so that
`tl.math.exp(x)` and `tl.exp(x)` are the same function. The libdevice extras (`tanh`, `pow`, ...) are
not part of `triton.language.math` in Triton 3.x (they live in `triton.language.extra.libdevice`,
which is backend-specific), so they are not here either.
"""
from __future__ import annotations

from .functions import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2, rsqrt, sin,
                        sqrt, sqrt_rn, umulhi)

__all__ = [
    "umulhi", "exp", "exp2", "fma", "log", "log2", "cos", "rsqrt", "sin", "sqrt", "sqrt_rn", "abs", "fdiv",
    "div_rn", "erf", "floor", "ceil",
]
