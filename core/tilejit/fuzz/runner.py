"""Running a fuzz case: on the interpreter against the model, and cross-compiled for GPU targets.

A case's kernel is written to a file and imported (`@jit` reads its function's source), under
`import tilejit as triton` or, for the comparison against Triton, under `import triton`.
"""
from __future__ import annotations

import atexit
import dataclasses
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings

from tilejit.fuzz.case import KERNEL_NAME, Case, compare

DEFAULT_TARGETS = ("cuda:90", "hip:gfx942")


@dataclasses.dataclass
class Outcome:
    """What happened to one seed on one backend or target.

    status: "ok"; "mismatch" (a wrong result); "error" (an exception where the kernel is valid);
    "rejected" (a clean CompilationError from a cross-compilation: a limit, not a crash); "slow" (a
    cross-compilation past its time limit: reported, not a failure of correctness).
    """

    seed: int
    family: str
    where: str
    status: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "error")


_module_dir = None


def load_kernel(case: Case, module: str = "tilejit"):
    """The case's kernel as a JIT function of `module` ("tilejit" or "triton")."""
    global _module_dir
    if _module_dir is None:
        _module_dir = tempfile.mkdtemp(prefix="tilejit-fuzz-")
        atexit.register(shutil.rmtree, _module_dir, True)
    name = f"fuzz_{module}_{case.seed}"
    path = os.path.join(_module_dir, name + ".py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(case.source(module))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return getattr(mod, KERNEL_NAME)


def launch(case: Case, kernel, to_device=lambda a: a, to_numpy=lambda a: a) -> dict:
    """Launch on fresh copies of the inputs; the outputs as NumPy arrays, by argument name."""
    arrays = {name: to_device(a) for name, a in case.fresh_arrays().items()}
    positional, constexprs = case.launch_args(arrays)
    kernel[case.grid](*positional, **constexprs)
    return {a.name: to_numpy(arrays[a.name]) for a in case.outputs()}


def check(case: Case, results: dict, where: str) -> Outcome:
    for arg in case.outputs():
        problem = compare(arg.expected, results[arg.name], arg.tolerance)
        if problem is not None:
            return Outcome(case.seed, case.family, where, "mismatch", f"{arg.name}: {problem}")
    return Outcome(case.seed, case.family, where, "ok")


def run_interpreter(case: Case) -> Outcome:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            results = launch(case, load_kernel(case))
    except Exception as exc:
        return Outcome(case.seed, case.family, "interpreter", "error", _describe(exc))
    return check(case, results, "interpreter")


class CompileTimeout(Exception):
    """A cross-compilation ran past its time limit."""


def cross_compile(case: Case, target: str, time_limit: float | None = None) -> Outcome:
    """Every stage down to the binary; a clean CompilationError is a rejection, anything else an error.

    With `time_limit` (seconds; main thread, POSIX), a compilation still running then is abandoned
    as "slow" (checked between Python steps: a long call into LLVM finishes first).
    """
    from tilejit.compiler import compile as compile_kernel
    from tilejit.errors import CompilationError
    from tilejit.frontend.source import ASTSource
    previous = _arm(time_limit)
    start = time.monotonic()
    try:
        kernel = load_kernel(case)
        compile_kernel(ASTSource(kernel, case.signature, case.constexprs, {}), target=target,
                       options={"num_warps": case.num_warps})
    except CompileTimeout:
        return Outcome(case.seed, case.family, target, "slow", f"still compiling after {time.monotonic() - start:.0f} s")
    except CompilationError as exc:
        if isinstance(exc.__cause__, CompileTimeout):
            return Outcome(case.seed, case.family, target, "slow", f"still compiling after {time_limit} s")
        return Outcome(case.seed, case.family, target, "rejected", _first_line(exc))
    except Exception as exc:
        return Outcome(case.seed, case.family, target, "error", _describe(exc))
    finally:
        _disarm(previous)
    return Outcome(case.seed, case.family, target, "ok")


def _arm(time_limit):
    if not time_limit or not hasattr(signal, "SIGALRM"):
        return None

    def expire(signum, frame):
        raise CompileTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, time_limit)
    return previous


def _disarm(previous):
    if previous is not None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_seed(seed: int, targets=DEFAULT_TARGETS, family: str | None = None) -> list[Outcome]:
    """The interpreter against the model, then each cross-compilation, for one seed."""
    from tilejit import compiler
    from tilejit.fuzz.generator import generate
    case = generate(seed, family)
    outcomes = [run_interpreter(case)]
    outcomes += [cross_compile(case, target) for target in targets]
    compiler.clear_memory_cache()  # thousands of seeds: keep memory flat
    return outcomes


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _describe(exc) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:]
    place = f" at {os.path.basename(where[0].filename)}:{where[0].lineno}" if where else ""
    return f"{_first_line(exc)}{place}"
