"""The contract every backend package implements: options, the backend class and its launcher.

A backend is found through the entry-point group `tilejit.backends` (see `registry.py`); the entry
point names a `BaseBackend` subclass. Compile side: `parse_options`, `hash`, `add_stages`,
`make_launcher`. Device side (class methods, because they describe the machine, not one target):
`is_active`, `inactive_reason`, `get_current_target`, `owns`, `get_benchmarker`, plus
`default_target` and `toolchain_status` for cross-compiling and for `tilejit backends`.
"""
from __future__ import annotations

import abc
import dataclasses
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from tilejit.backends.errors import BackendUnavailableError, OptionsError, TargetError
from tilejit.backends.gpu_target import GPUTarget
from tilejit.runtime.launch_abi import normalize_grid  # noqa: F401 (part of the backend API; the ABI owns it)

# Bumped when the backend interface changes incompatibly; a plugin built for another version is
# reported as broken instead of failing in the middle of a compilation. A backend states the version
# it was written for (`api_version = N` in its class) and pins the core versions that provide it in
# its pyproject (`tilejit>=0.2,<0.3` for version 2).
# 2: GPU backends hand the core a `TargetDescription` (gpu/target.py) and build their TTGIR pass list
#    in `add_stages`; `encoding_kinds()` declares a backend's TTGIR layouts.
API_VERSION = 2


@dataclass(frozen=True)
class BaseOptions:
    """Compile options shared by every backend. Backends subclass it to add their own fields."""

    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 3
    debug: bool = False
    # With `debug`, tl.add/sub/mul check integer overflow (Triton's default is on as well).
    sanitize_overflow: bool = True
    enable_fp_fusion: bool = True

    def __post_init__(self):
        for field in dataclasses.fields(self):
            _check_field_type(type(self).__name__, field, getattr(self, field.name))
        if self.num_warps < 1 or self.num_warps & (self.num_warps - 1):
            raise OptionsError(f"num_warps must be a power of two, got {self.num_warps}")
        if self.num_ctas < 1:
            raise OptionsError(f"num_ctas must be at least 1, got {self.num_ctas}")
        if self.num_stages < 0:
            raise OptionsError(f"num_stages must not be negative, got {self.num_stages}")

    def hash(self) -> str:
        """sha256 of every field, so two option sets hash equal exactly when they compile equal code."""
        text = ";".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
        return hashlib.sha256(f"{type(self).__qualname__}:{text}".encode()).hexdigest()

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_field_type(owner: str, field: dataclasses.Field, value) -> None:
    # The default value tells the field's kind; this keeps subclasses free of per-field checks.
    default = field.default
    if default is dataclasses.MISSING or default is None:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise OptionsError(f"{owner}.{field.name} must be of type {type(default).__name__}, "
                           f"got {value!r} ({type(value).__name__})")


def wall_clock_benchmarker(fn: Callable[[], Any], warmup: int = 3, rep: int = 20,
                           quantiles=None, return_mode: str = "mean"):
    """Time `fn` with the host clock, in milliseconds: the benchmarker of backends without device timers."""
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be one of min, max, mean, median, all; got {return_mode!r}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(rep, 1)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    from tilejit.testing import summarize_times
    return summarize_times(times, quantiles, return_mode)


class Launcher(abc.ABC):
    """Runs one compiled kernel on a grid. Backends implement `launch`.

    `__call__` normalises the grid and skips empty grids, so every backend behaves the same there.
    Plugin launch hooks fire in `CompiledKernel.run`, which looks them up once per process: asking
    pluggy on every launch would cost several microseconds on the hot path.

    A launcher may also have a `direct_call` attribute: a plain function `(grid, args, stream)` that
    does what calling the launcher does for a grid already checked, three ints in [0, 2**31 - 1]
    (`normalize_grid`'s result; a zero size launches nothing). `CompiledKernel` (and the JIT, which
    checks its grids itself) then call that function: dispatching through a Python `__call__` costs
    ~0.07 us more than calling a function, and checking the grid twice another ~0.1 us, on a path of a
    few microseconds.
    """

    def __init__(self, compiled_kernel):
        self.compiled_kernel = compiled_kernel

    @property
    def kernel_name(self) -> str:
        return str(getattr(self.compiled_kernel, "name", "") or "")

    def __call__(self, grid, args, stream=None):
        grid = normalize_grid(grid)
        if 0 in grid:
            return None
        return self.launch(grid, args, stream)

    @abc.abstractmethod
    def launch(self, grid: tuple[int, int, int], args, stream):
        """Run the kernel; `grid` is a 3-tuple of positive ints, `args` the runtime arguments."""




class BaseBackend(abc.ABC):
    """One backend: compiles TTIR for its targets and launches the result."""

    name: ClassVar[str] = ""
    api_version: ClassVar[int] = API_VERSION
    options_class: ClassVar[type] = BaseOptions
    # A CPU fallback (the interpreter) steps aside when a device backend is also active, so a GPU
    # machine with every backend installed still picks the GPU when the arguments do not decide.
    cpu_fallback: ClassVar[bool] = False

    def __init__(self, target: GPUTarget):
        target = GPUTarget.parse(target)
        if not self.supports_target(target):
            raise TargetError(f"backend '{self.name}' does not support target '{target}'")
        self.target = target

    # ---- compile side -------------------------------------------------------------------------
    @staticmethod
    @abc.abstractmethod
    def supports_target(target: GPUTarget) -> bool:
        """Whether this backend compiles for `target`."""

    def parse_options(self, options: "Mapping[str, Any] | BaseOptions | None" = None):
        """Build the frozen options object; unknown keys are an `OptionsError` naming the allowed ones."""
        cls = self.options_class
        if isinstance(options, cls):
            return options
        options = dict(options or {})
        allowed = [f.name for f in dataclasses.fields(cls)]
        unknown = [key for key in options if key not in allowed]
        if unknown:
            raise OptionsError(f"unknown option{'s' if len(unknown) > 1 else ''} "
                               f"{', '.join(repr(k) for k in unknown)} for backend '{self.name}'; "
                               f"allowed: {', '.join(allowed)}")
        if "debug" in allowed and "debug" not in options:
            from tilejit.config import knobs
            options["debug"] = knobs.debug
        try:
            return cls(**options)
        except TypeError as exc:  # e.g. a required field of a subclass is missing
            raise OptionsError(f"bad options for backend '{self.name}': {exc}") from None

    def hash(self) -> str:
        """This backend's part of the cache key; subclasses add their toolchain versions."""
        return f"{self.name}:{self.target}:api{self.api_version}"

    @classmethod
    def encoding_kinds(cls) -> dict:
        """Tensor layouts this backend adds to the TTGIR text: kind (`x` in `#ttg.x<{...}>`) ->
        fn(fields) -> encoding; the parser's default dialect context includes them."""
        return {}

    @abc.abstractmethod
    def add_stages(self, stages: dict, options) -> None:
        """Append `{stage name: fn(src, metadata)}` entries after the core's `ttir` stage."""

    @abc.abstractmethod
    def make_launcher(self, compiled_kernel) -> Launcher:
        """Return a `Launcher` that runs `compiled_kernel`."""

    # ---- device side --------------------------------------------------------------------------
    @classmethod
    def is_active(cls) -> bool:
        """Whether a device of this backend can run kernels in this process."""
        return False

    @classmethod
    def inactive_reason(cls) -> str:
        """Why `is_active()` is false (empty when active), shown by `tilejit backends`."""
        return "" if cls.is_active() else "no device driver"

    @classmethod
    def get_current_target(cls) -> GPUTarget:
        """The target of the current device."""
        raise BackendUnavailableError(f"backend '{cls.name}' has no active device: {cls.inactive_reason()}")

    @classmethod
    def owns(cls, arg) -> bool:
        """Whether `arg` (a tensor, array, ...) lives on this backend's device."""
        return False

    @classmethod
    def get_benchmarker(cls) -> Callable:
        """A `do_bench`-like function `(fn, warmup, rep, quantiles, return_mode) -> ms`."""
        return wall_clock_benchmarker

    @classmethod
    def default_target(cls) -> GPUTarget:
        """The target to compile for when there is no device (cross-compilation)."""
        raise BackendUnavailableError(f"backend '{cls.name}' has no default target")

    @classmethod
    def describe_targets(cls) -> str:
        """The targets this backend accepts, in words, for `tilejit backends`."""
        try:
            return f"e.g. {cls.default_target()}"
        except BackendUnavailableError:
            return "(not stated)"

    @classmethod
    def toolchain_status(cls) -> dict[str, str]:
        """Each external tool or library the backend uses, and where it was found or why not."""
        return {}
