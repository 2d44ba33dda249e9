"""Running passes: the `PassManager`, IR dumps after every pass, and checks between passes.

A pass is anything with a `name` and an `apply(module) -> None` that edits the module in place
(the passes here are small frozen dataclasses). A plain function is accepted too, named after
itself. The TTIR pipeline and the GPU lowering's TTGIR passes both run through `PassManager`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Union

from ..config import knobs
from ..errors import CompilationError, TilejitError
from ..ir import Module, print_module, verify


@dataclass(frozen=True)
class FunctionPass:
    """Adapts a plain `fn(module) -> None` to the pass interface."""
    name: str
    fn: Callable

    def apply(self, module: Module) -> None:
        self.fn(module)


def as_pass(p):
    if hasattr(p, "name") and callable(getattr(p, "apply", None)):
        return p
    if callable(p):
        return FunctionPass(getattr(p, "__name__", "pass"), p)
    raise TypeError(f"a pass needs a `name` and an `apply(module)` method, got {p!r}")


@dataclass(frozen=True)
class PassRecord:
    """What the manager ran: the pass's name and its wall time."""
    name: str
    seconds: float


def kernel_name(module: Module) -> str:
    """The kernel's name (the first public function), used to name dump folders."""
    functions = module.functions
    for f in functions:
        if f.attrs.get("sym_visibility", "public") == "public":
            return str(f.attrs.get("sym_name", "module"))
    return str(functions[0].attrs.get("sym_name", "module")) if functions else "module"


def _knob(name: str, default=None):
    """A knob from `tilejit.config` (read when a manager is made, so tests can change it)."""
    return getattr(knobs, name, default)


class PassManager:
    """Runs passes in order; optionally verifies the IR after each and dumps it to files.

    - `verify`: None reads `TILEJIT_DEBUG` through `tilejit.config`.
    - `dump_dir`: None reads `TILEJIT_DUMP_DIR`; False turns dumps off. The IR after pass N is written
      to `<dump_dir>/<kernel>/NN-<pass>.<dump_ext>` (`00-input` is the IR before any pass).
    - `first_index`: the number of the first pass's dump, so that a second manager (the TTGIR passes)
      continues the numbering of the first.
    """

    def __init__(self, passes: Iterable = (), verify: Optional[bool] = None,
                 dump_dir: Union[str, bool, None] = None, dump_ext: str = "ttir", first_index: int = 1):
        self.passes: List = [as_pass(p) for p in passes]
        self.verify = bool(_knob("debug", False)) if verify is None else verify
        self.dump_dir = _knob("dump_dir") if dump_dir is None else (dump_dir or None)
        self.dump_ext = dump_ext
        self.first_index = first_index
        self.records: List[PassRecord] = []

    def add(self, p) -> "PassManager":
        self.passes.append(as_pass(p))
        return self

    @property
    def pass_names(self) -> List[str]:
        return [p.name for p in self.passes]

    def run(self, module: Module) -> Module:
        kernel = kernel_name(module)
        folder = os.path.join(self.dump_dir, kernel) if self.dump_dir else None
        if folder:
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as exc:  # an unwritable dump directory must not fail the compilation
                folder = self._dump_failed(exc)
        if folder and self.first_index <= 1:
            folder = self._dump(folder, 0, "input", module)
        if self.verify:
            self._verify(module, "before the first pass", kernel)
        for index, p in enumerate(self.passes, start=self.first_index):
            start = time.perf_counter()
            try:
                p.apply(module)
            except TilejitError:
                raise
            except Exception as e:  # a bug in a pass must still reach the user as a tilejit error
                raise CompilationError(f"internal compiler error in pass '{p.name}': {type(e).__name__}: {e}",
                                       kernel=kernel) from e
            self.records.append(PassRecord(p.name, time.perf_counter() - start))
            if folder:
                folder = self._dump(folder, index, p.name, module)
            if self.verify:
                self._verify(module, f"after pass '{p.name}'", kernel)
        return module

    def _dump(self, folder: str, index: int, name: str, module: Module) -> Optional[str]:
        """Write one dump; the folder for the next, or None when this one could not be written."""
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
        path = os.path.join(folder, f"{index:02d}-{safe}.{self.dump_ext}")
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(print_module(module))
        except OSError as exc:
            return self._dump_failed(exc)
        return folder

    def _dump_failed(self, exc: OSError) -> None:
        from ..config import warn_dump_failure
        warn_dump_failure(str(self.dump_dir), exc)
        return None

    @staticmethod
    def _verify(module: Module, when: str, kernel: str) -> None:
        try:
            verify(module)
        except CompilationError as e:
            raise CompilationError(f"{e.message} ({when})", e.file, e.line, e.col, e.source_line,
                                   kernel=kernel) from e


def run_passes(module: Module, passes: Iterable, dump: Union[str, bool, None] = None,
               verify: Optional[bool] = None) -> Module:
    """Run `passes` on `module` (in place) and return it; `dump` as `PassManager.dump_dir`."""
    return PassManager(passes, verify=verify, dump_dir=dump).run(module)
