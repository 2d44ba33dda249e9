"""Where a `@jit` function's source text comes from, and how error messages find its lines.

A kernel is compiled from the text its `JITFunction` holds (`src`), as in Triton. That text is read
with `inspect` when Python knows the function's source (a file, or a `linecache` entry such as an
IPython cell). Functions made with `exec()` of a string have no file: Triton's own test helpers build
kernels that way. Their text is then looked for in the frames that ran the `exec` (a local variable
or a constant holding it), and accepted only if compiling it gives the function's very bytecode.

Every source text that is not a file's current content (an `exec`'d string, a `src` replaced at run
time) is registered in `linecache` under a name of its own, so that `CompilationError` and
`InterpreterError`, which read source lines through `linecache`, show the lines that were compiled.
"""
from __future__ import annotations

import __future__
import hashlib
import inspect
import linecache
import re
import sys
import textwrap
import types
from typing import List, Optional, Tuple

_DEF = re.compile(r"^(async\s+)?def\s+(\w+)\s*\(", re.MULTILINE)
# The compiler flags of `from __future__ import ...`: an exec'd text is recompiled with the flags its
# function was compiled with, so the bytecode can be compared.
_FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag
# How many frames above the decorator are searched for an exec'd text.
_MAX_CALLER_FRAMES = 12


class SourceNotFound(Exception):
    """The source text of a function cannot be found."""


def read_source(fn) -> Tuple[List[str], int, str]:
    """(lines, first line number, file name) of `fn`'s source, decorators included; the file name is
    one that `linecache` knows. Raises SourceNotFound."""
    problem = None
    try:
        lines, first = inspect.getsourcelines(fn)
        if _defines(lines, fn.__name__):
            return lines, max(first, 1), fn.__code__.co_filename
        problem = f"the source found for it in {fn.__code__.co_filename!r} does not define '{fn.__name__}'"
    except (OSError, TypeError) as exc:
        problem = str(exc)
    found = _text_from_callers(fn.__code__)
    if found is None:
        raise SourceNotFound(problem)
    text = found
    name = register_text(text, f"source of {fn.__qualname__}")
    all_lines = text.splitlines(True)
    first = fn.__code__.co_firstlineno
    return inspect.getblock(all_lines[first - 1:]), first, name


def strip_decorators(lines: List[str], first_line: int, name: str) -> Tuple[str, int]:
    """(dedented text starting at `def`, line number of the `def`): what the frontend parses."""
    src = textwrap.dedent("".join(lines))
    match = _DEF.search(src)
    if match is None:
        raise SourceNotFound(f"cannot find the 'def' of '{name}' in its source")
    return src[match.start():], first_line + src[: match.start()].count("\n")


def register_text(text: str, label: str) -> str:
    """Make `text` readable through `linecache` under a name of its own (derived from its content, so
    the same text is registered once); returns that name."""
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    name = f"<{label} {digest}>"
    if name not in linecache.cache:
        # No modification time: `linecache.checkcache` keeps entries without one.
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    return name


def register_replaced_src(src: str, def_line: int, original_file: str, qualname: str) -> str:
    """Register a `src` set at run time so that its line `i` keeps the number `def_line + i - 1`, the
    numbering of the original file (a replacement that keeps the line count points at the same lines)."""
    return register_text("\n" * (def_line - 1) + src, f"src of {qualname} set at run time, from {original_file}")


def _defines(lines: List[str], name: str) -> bool:
    return any(match.group(2) == name for match in _DEF.finditer(textwrap.dedent("".join(lines))))


def _text_from_callers(code: types.CodeType) -> Optional[str]:
    """The text an exec'd function was compiled from, if a calling frame still holds it (as a local
    variable, a global of its module, or a constant of its code, e.g. `exec("def f(): ...")`)."""
    marker = f"def {code.co_name}"
    frame = sys._getframe(1)
    seen, seen_globals = set(), set()
    for _ in range(_MAX_CALLER_FRAMES + 8):  # + the frames of tilejit itself
        if frame is None:
            break
        candidates = list(frame.f_locals.values()) + list(frame.f_code.co_consts)
        if id(frame.f_globals) not in seen_globals:  # a module-level string exec'd by a function
            seen_globals.add(id(frame.f_globals))
            candidates += list(frame.f_globals.values())
        for value in candidates:
            if isinstance(value, str) and marker in value and id(value) not in seen:
                seen.add(id(value))
                if _compiles_to(value, code):
                    return value
        frame = frame.f_back
    return None


def _compiles_to(text: str, code: types.CodeType) -> bool:
    """Does compiling `text` give a function with exactly `code`'s bytecode at the same line?"""
    try:
        module = compile(text, code.co_filename, "exec", flags=code.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    stack = [module]
    while stack:
        candidate = stack.pop()
        if candidate.co_name == code.co_name and candidate.co_firstlineno == code.co_firstlineno and \
                candidate.co_code == code.co_code and candidate.co_varnames == code.co_varnames:
            return True
        stack.extend(c for c in candidate.co_consts if isinstance(c, types.CodeType))
    return False
