"""The exceptions tilejit raises to users.

Every error that comes from a kernel's source carries the location of the user's line, so the message
can show the file, line, column, the source line itself and a caret under the column.
"""
from __future__ import annotations

import linecache


class TritonError(Exception):
    """Triton's common base of its errors (`triton.TritonError`): code written for Triton catches it."""


class TilejitError(TritonError):
    """Base class of every tilejit error (a `TritonError`, as Triton's errors are)."""


def format_source_context(file: str | None, line: int | None, col: int | None,
                          source_line: str | None = None) -> str:
    """Render `file:line:col` followed by the source line and a caret under the column."""
    if not file or not line:
        return ""
    text = source_line if source_line is not None else linecache.getline(file, line).rstrip("\n")
    where = f"{file}:{line}" + (f":{col}" if col else "")
    if not text:
        return where
    caret = ""
    if col:
        # Keep tabs so the caret lines up under the same character in a terminal.
        pad = "".join(ch if ch == "\t" else " " for ch in text[: col - 1])
        caret = "\n    " + pad + "^"
    return f"{where}\n    {text}{caret}"


class CompilationError(TilejitError):
    """A kernel could not be compiled; points at the user's source line."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 col: int | None = None, source_line: str | None = None, kernel: str | None = None,
                 position: tuple | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.kernel = kernel
        # (line, column) in the function's own numbering, as Triton prints it: line 1 is the `def`,
        # columns count from 0 in the dedented source ("at 2:4:"); None where unknown
        self.position = position
        self.source_line = source_line if source_line is not None else (
            linecache.getline(file, line).rstrip("\n") if file and line else None)
        super().__init__(self._render())

    @property
    def error_message(self) -> str:
        """The message alone, without the location (Triton's `CompilationError.error_message`)."""
        return self.message

    @classmethod
    def at(cls, loc, message: str, kernel: str | None = None) -> "CompilationError":
        """Build the error from an `ir.Location` (or anything with file/line/col)."""
        if loc is None:
            return cls(message, kernel=kernel)
        return cls(message, getattr(loc, "file", None), getattr(loc, "line", None),
                   getattr(loc, "col", None), kernel=kernel)

    def _render(self) -> str:
        head = f"in kernel '{self.kernel}': " if self.kernel else ""
        context = format_source_context(self.file, self.line, self.col, self.source_line)
        if context and getattr(self, "position", None):
            context = f"{self.position[0]}:{self.position[1]}: {context}"
        return f"{head}{self.message}" + (f"\n  at {context}" if context else "")


class OutOfResources(TilejitError):
    """The kernel needs more of a hardware resource than the device has."""

    def __init__(self, required: int, limit: int, name: str):
        self.required = required
        self.limit = limit
        self.name = name
        super().__init__(f"out of resource: {name}, required: {required}, hardware limit: {limit}. "
                         "Reducing block sizes or `num_stages` may help.")


class InterpreterError(TilejitError):
    """An error raised while the interpreter runs a kernel (out-of-bounds access, failed assert)."""

    def __init__(self, message: str, kernel: str | None = None, file: str | None = None,
                 line: int | None = None, col: int | None = None, program_id=None):
        self.message = message
        self.kernel = kernel
        self.file = file
        self.line = line
        self.col = col
        self.program_id = program_id
        head = f"in kernel '{kernel}'" if kernel else ""
        if program_id is not None:
            head += f", program {tuple(program_id)}"
        context = format_source_context(file, line, col)
        super().__init__((head + ": " if head else "") + message + (f"\n  at {context}" if context else ""))


class InterpretedCompilationError(CompilationError, InterpreterError):
    """A compile error in a kernel compiled for the interpreter. Triton's interpreter runs the
    kernel's Python, so it reports these mistakes as `InterpreterError`; compiled Triton reports them
    as `CompilationError`. Code written for either catches this one."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 col: int | None = None, source_line: str | None = None, kernel: str | None = None,
                 position: tuple | None = None):
        self.program_id = None
        self.message, self.file, self.line, self.col, self.kernel = message, file, line, col, kernel
        self.position = position
        self.source_line = source_line if source_line is not None else (
            linecache.getline(file, line).rstrip("\n") if file and line else None)
        TilejitError.__init__(self, self._render())


class PTXASError(TilejitError):
    """ptxas rejected the generated PTX (Triton's `triton.runtime.errors.PTXASError`)."""


class CompileTimeAssertionFailure(CompilationError):
    """A `tl.static_assert` failed (Triton's `triton.compiler.errors.CompileTimeAssertionFailure`)."""


class InterpretedCompileTimeAssertionFailure(InterpretedCompilationError, CompileTimeAssertionFailure):
    """A failed `tl.static_assert` in a kernel compiled for the interpreter: both of the above."""


class StaticAssertionError(AssertionError):
    """Raised by `tl.static_assert` inside the frontend; reported as `CompileTimeAssertionFailure` at
    the call's line, with no cause (as Triton reports it)."""


class UnsupportedLanguageConstruct(CompilationError):
    """Kernel code uses Python that the JIT cannot compile (Triton's name)."""


class LaunchError(TilejitError):
    """A backend failed to launch a compiled kernel."""


class ArgumentError(TilejitError):
    """A launch that a kernel cannot take: a wrong argument (named by its parameter) or a wrong grid.
    Raised as one of the two subclasses below, so `except TypeError`/`except ValueError` catch it too."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a kind the parameter cannot take (a tensor for an `int`, a string, ...)."""


class ArgumentValueError(ArgumentError, ValueError):
    """An argument of the right kind but an unusable value (out of range, read-only, no data, ...)."""


class GridError(ArgumentError, ValueError, TypeError):
    """A launch grid that is not 1 to 3 integers in [0, 2**31 - 1]. Every launch path raises this one
    class; it is both a ValueError and a TypeError, so code written for either keeps working."""
