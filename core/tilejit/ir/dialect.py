"""A dialect context: the ops and the tensor encodings a text of IR may use, passed to the parser.

Nothing registers itself at import time: `default_context()` lists the TTIR and TTGIR ops (ops.py),
the layouts of `tilejit.gpu` and those the installed backends declare (`encoding_kinds()`, asked
through the backend registry), so `ir.parse_module(text)` reads any TTIR or TTGIR after
`import tilejit` alone, whichever modules were imported before. A caller with other layouts parses
with `default_context().with_encodings(its_kinds)`.
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
    """TTIR + TTGIR ops, every layout core defines, and those of the installed backends (each
    backend class's `encoding_kinds()`, found through the backend registry)."""
    from ..backends.registry import available_backends
    from ..gpu.layouts import ENCODING_KINDS
    kinds = dict(ENCODING_KINDS)
    for backend in available_backends().values():
        kinds.update(backend.encoding_kinds())
    return DialectContext(OPS, kinds)
