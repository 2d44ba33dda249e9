"""What the frontend keeps from one compilation to the next: what depends only on a function's text
or its Python signature, not on the specialization being compiled (issue 12, item 3)."""
from __future__ import annotations

import ast
import inspect
from typing import Dict

_MAX_ENTRIES = 512

# Parsed function sources, by their text: every specialization of a kernel (and every kernel calling
# a `@jit` helper) generates from the same tree, which the generator only reads (`visit_statements`
# copies a statement before giving it more statements). Parsing is a pure function of the text, so a
# source edited through `_unsafe_update_src` is simply another key.
_parsed_sources: Dict[str, ast.Module] = {}

# function -> ((its code, defaults, keyword defaults), inspect.Signature): a `@jit` function's signature
# binds every call to it; it is made again when the function's code or defaults were replaced.
_signatures: Dict[object, tuple] = {}


def parse_source(src: str) -> ast.Module:
    """`ast.parse(src)`, once per text (SyntaxError as ast.parse raises it)."""
    tree = _parsed_sources.get(src)
    if tree is None:
        tree = ast.parse(src)
        if len(_parsed_sources) >= _MAX_ENTRIES:
            _parsed_sources.clear()
        _parsed_sources[src] = tree
    return tree


def signature_of(function) -> inspect.Signature:
    """`inspect.signature(function)`, kept while the function's code and defaults stay the same."""
    state = (getattr(function, "__code__", None), getattr(function, "__defaults__", None),
             getattr(function, "__kwdefaults__", None))
    cached = _signatures.get(function)
    if cached is not None and all(a is b for a, b in zip(cached[0], state)):
        return cached[1]
    signature = inspect.signature(function)
    if state[0] is not None and getattr(function, "__signature__", None) is None \
            and getattr(function, "__wrapped__", None) is None:
        if len(_signatures) >= _MAX_ENTRIES:
            _signatures.clear()
        _signatures[function] = (state, signature)
    return signature
