"""The interpreter backend: TTIR -> a generated NumPy program (stage `py`), run on the CPU."""
from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass

import numpy as np

from tilejit import ir
from tilejit.backends import BaseBackend, BaseOptions, GPUTarget, wall_clock_benchmarker
from tilejit.backends.errors import OptionsError

from .codegen import generate_program
from .launcher import DEFAULT_MAX_BATCH_ELEMENTS, InterpreterLauncher

# Bumped whenever the generated programs change for the same TTIR (part of the cache key).
GENERATOR_VERSION = 2
INTERPRETER_TARGET = GPUTarget("interpreter", "numpy", 1)


@dataclass(frozen=True)
class InterpreterOptions(BaseOptions):
    """num_warps, num_stages, ... are accepted (kernels written for a GPU pass them) and ignored."""
    # Elements per value in one batch of programs: P = max_batch_elements // largest tensor.
    max_batch_elements: int = DEFAULT_MAX_BATCH_ELEMENTS
    # Check for data races and uninitialised reads (sanitizer.py); default from TILEJIT_SANITIZE.
    sanitize: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.max_batch_elements < 1:
            raise OptionsError(f"max_batch_elements must be positive, got {self.max_batch_elements}")


def make_numpy_program(src, metadata: dict, options: InterpreterOptions) -> str:
    """The `py` stage: TTIR (an ir.Module or its text) -> the Python source of the NumPy program."""
    module = src if isinstance(src, ir.Module) else ir.parse_module(
        src.decode() if isinstance(src, bytes) else str(src))
    signature = metadata.get("signature") or {}
    names = [name for name, ty in signature.items() if ty != "constexpr"]
    metadata["max_batch_elements"] = options.max_batch_elements
    return generate_program(module, names, sanitize=options.sanitize)


@functools.lru_cache(maxsize=1)
def _sources_digest() -> str:
    """A digest of this package's code: a changed generator never reuses cached programs."""
    folder = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()[:16]


class InterpreterBackend(BaseBackend):
    name = "interpreter"
    api_version = 2
    options_class = InterpreterOptions
    cpu_fallback = True

    @staticmethod
    def supports_target(target) -> bool:
        return GPUTarget.parse(target).backend == "interpreter"

    def parse_options(self, options=None):
        if not isinstance(options, InterpreterOptions) and "sanitize" not in (options or {}):
            from tilejit.config import knobs
            options = {**(options or {}), "sanitize": knobs.sanitize}
        return super().parse_options(options)

    def hash(self) -> str:
        return f"{super().hash()}:numpy-{np.__version__}:gen{GENERATOR_VERSION}:{_sources_digest()}"

    def add_stages(self, stages: dict, options) -> None:
        stages["py"] = lambda src, metadata: make_numpy_program(src, metadata, options)

    def make_launcher(self, compiled_kernel) -> InterpreterLauncher:
        return InterpreterLauncher(compiled_kernel)

    @classmethod
    def is_active(cls) -> bool:
        return True

    @classmethod
    def get_current_target(cls) -> GPUTarget:
        return INTERPRETER_TARGET

    @classmethod
    def default_target(cls) -> GPUTarget:
        return INTERPRETER_TARGET

    @classmethod
    def describe_targets(cls) -> str:
        return "interpreter (NumPy on the CPU)"

    @classmethod
    def owns(cls, arg) -> bool:
        if isinstance(arg, np.ndarray):
            return True
        if type(arg).__module__.startswith("torch") and hasattr(arg, "device"):
            if arg.device.type == "cpu":
                return True
            from tilejit.config import knobs
            return bool(knobs.interpret) and arg.device.type == "cuda"
        return False

    @classmethod
    def get_benchmarker(cls):
        return wall_clock_benchmarker

    @classmethod
    def toolchain_status(cls) -> dict:
        return {"numpy": np.__version__}
