"""A dialect context: the ops and the tensor encodings a text of IR may use, passed to the parser.

Nothing registers itself at import time: `default_context()` lists the TTIR and TTGIR ops (ops.py)
and the layouts of `tilejit.gpu`, so `ir.parse_module(text)` reads any TTIR or TTGIR after
`import tilejit` alone. A backend that defines its own layouts parses with
`default_context().with_encodings(its_kinds)`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping

from ..errors import CompilationError
from .ops import OPS, OpInfo


@dataclass(frozen=True)
class DialectContext:
    """`ops`: name -> definition. `encodings`: layout kind (`blocked` in `#ttg.blocked<{...}>`) ->
    fn(fields dict) -> encoding object."""
    ops: Mapping[str, OpInfo]
    encodings: Mapping[str, Callable[[dict], object]] = field(default_factory=dict)

    def with_encodings(self, kinds: Mapping[str, Callable[[dict], object]]) -> "DialectContext":
        return DialectContext(self.ops, {**self.encodings, **kinds})

    def parse_encoding(self, text: str):
        if not text.startswith("#ttg."):
            raise CompilationError(f"unknown tensor encoding '{text}'")
        from ..gpu.layouts import parse_encoding
        return parse_encoding(text, self.encodings)


@lru_cache(maxsize=None)
def default_context() -> DialectContext:
    """TTIR + TTGIR ops and every layout core defines."""
    from ..gpu.amd_layouts import ENCODING_KINDS as amd_kinds
    from ..gpu.layouts import ENCODING_KINDS
    return DialectContext(OPS, {**ENCODING_KINDS, **amd_kinds})
