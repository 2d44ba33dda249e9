"""Room for deeply nested kernel code: the frontend walks the AST recursively, a few Python frames per
level, so a long expression (`a + b + ... `, 2,000 terms) nests deeper than Python's default limit of
1,000 frames. While a kernel is compiled the limit is raised (never lowered), and set back when the
last compilation in progress ends. Python frames calling Python frames use no C stack (3.11+), so
the higher limit is safe; code nested deeper still is a `CompilationError` at the user's line."""
from __future__ import annotations

import sys

from tilejit.runtime.while_active import WhileAnyActive

COMPILE_RECURSION_LIMIT = 40_000


def _raise_limit() -> int:
    saved = sys.getrecursionlimit()
    if saved < COMPILE_RECURSION_LIMIT:
        sys.setrecursionlimit(COMPILE_RECURSION_LIMIT)
    return saved


def _restore_limit(saved: int) -> None:
    # Another part of the program may have raised it meanwhile: keep the larger value.
    if sys.getrecursionlimit() == COMPILE_RECURSION_LIMIT:
        sys.setrecursionlimit(saved)


deep_recursion = WhileAnyActive(_raise_limit, _restore_limit)
