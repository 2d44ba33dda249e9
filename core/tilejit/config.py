"""Every environment knob tilejit reads, in one place.

Other modules never look at `os.environ` themselves: they ask `knobs`. Each property reads the
environment when it is asked (not at import), so a test can `monkeypatch.setenv` and see the effect at
once. Knobs that change the generated code are folded into the cache key by `knobs.cache_key_part()`.
"""
from __future__ import annotations

import os

from tilejit.errors import TilejitError

_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("", "0", "false", "no", "off")

DEFAULT_CACHE_MAX_BYTES = 1 << 30  # 1 GiB


class KnobError(TilejitError, ValueError):
    """An environment variable holds a value tilejit cannot understand."""


def _flag(name: str) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw in _TRUE_WORDS:
        return True
    if raw in _FALSE_WORDS:
        return False
    raise KnobError(f"{name}={os.environ[name]!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def _text(name: str) -> str | None:
    raw = os.environ.get(name, "").strip()
    return raw or None


def _selection_key_reader(names: tuple):
    """A function returning the raw values of `names` as a hashable tuple.

    On POSIX `os.environ` keeps its values in a dict of bytes; reading that dict costs 0.1 us where
    `os.environ.get` costs ~1.3 us per missing name (it raises and catches a KeyError). The dict is
    used only while `os.environ` is still the same object (tests may replace it).
    """
    environ = os.environ

    def slow() -> tuple:
        return tuple(os.environ.get(n) for n in names)

    data = getattr(environ, "_data", None)
    encode = getattr(environ, "encodekey", None)
    if not isinstance(data, dict) or encode is None:
        return slow
    try:
        keys = tuple(encode(n) for n in names)
    except Exception:  # an unusual os.environ: read it the ordinary way
        return slow

    if len(keys) == 3:  # the launch path reads three knobs: no generator, ~0.2 us
        k0, k1, k2 = keys

        def fast() -> tuple:
            if os.environ is not environ:
                return slow()
            return data.get(k0), data.get(k1), data.get(k2)
    else:
        def fast() -> tuple:
            if os.environ is not environ:
                return slow()
            return tuple(data.get(k) for k in keys)

    # What the function reads, for code that inlines it (the JIT's generated launch functions): while
    # `os.environ is environ`, the value is `tuple(data.get(k) for k in keys)`.
    fast.inline_parts = (environ, data, keys)
    return fast


class Knobs:
    """Live view of the tilejit environment variables."""

    @property
    def cache_dir(self) -> str:
        """TILEJIT_CACHE_DIR: root of the on-disk compilation cache (default ~/.cache/tilejit)."""
        raw = _text("TILEJIT_CACHE_DIR")
        path = raw if raw else os.path.join("~", ".cache", "tilejit")
        return os.path.abspath(os.path.expanduser(path))

    @property
    def cache_max_bytes(self) -> int:
        """TILEJIT_CACHE_MAX_BYTES: size bound of the disk cache; oldest entries are evicted past it.

        Accepts a plain number of bytes or a number with a K/M/G suffix (powers of 1024).
        """
        raw = _text("TILEJIT_CACHE_MAX_BYTES")
        if raw is None:
            return DEFAULT_CACHE_MAX_BYTES
        units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
        number, scale = raw.lower(), 1
        if number.endswith("b"):
            number = number[:-1]
        if number and number[-1] in units:
            number, scale = number[:-1], units[number[-1]]
        try:
            value = int(number) * scale
        except ValueError:
            raise KnobError(f"TILEJIT_CACHE_MAX_BYTES={raw!r} is not a size; use e.g. 1073741824, 512M or 2G") from None
        if value < 0:
            raise KnobError(f"TILEJIT_CACHE_MAX_BYTES={raw!r} must not be negative")
        return value

    @property
    def cache_strict(self) -> bool:
        """TILEJIT_CACHE_STRICT (default on): use a cache directory only when nobody else can write it.

        See tilejit.runtime.cache_trust for the rules; `0` turns the checks off, like ssh's `StrictModes no`.
        """
        return _flag("TILEJIT_CACHE_STRICT") if os.environ.get("TILEJIT_CACHE_STRICT", "").strip() else True

    @property
    def always_compile(self) -> bool:
        """TILEJIT_ALWAYS_COMPILE: ignore cached binaries and compile again."""
        return _flag("TILEJIT_ALWAYS_COMPILE")

    @property
    def dump_dir(self) -> str | None:
        """TILEJIT_DUMP_DIR: when set, every stage of every compilation is written there."""
        raw = _text("TILEJIT_DUMP_DIR")
        return os.path.abspath(os.path.expanduser(raw)) if raw else None

    # The raw values of the knobs that steer target selection, unparsed: an opaque memo key for the
    # launch path, where a parsed read would cost microseconds per launch.
    selection_env = staticmethod(_selection_key_reader(("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET")))

    @property
    def target(self) -> str | None:
        """TILEJIT_TARGET: a target string (`cuda:90`, `hip:gfx942`, `interpreter`) that overrides discovery."""
        return _text("TILEJIT_TARGET")

    @property
    def interpret(self) -> bool:
        """TILEJIT_INTERPRET, or Triton's TRITON_INTERPRET: run every kernel on the NumPy interpreter."""
        return _flag("TILEJIT_INTERPRET") or _flag("TRITON_INTERPRET")

    @property
    def ptxas(self) -> str | None:
        """TILEJIT_PTXAS: path of the `ptxas` used to turn PTX into a cubin."""
        return _text("TILEJIT_PTXAS")

    @property
    def lld(self) -> str | None:
        """TILEJIT_LLD: path of the `ld.lld` used to link an AMD hsaco."""
        return _text("TILEJIT_LLD")

    @property
    def debug(self) -> bool:
        """TILEJIT_DEBUG: compile kernels with device-side asserts and bounds checks."""
        return _flag("TILEJIT_DEBUG")

    @property
    def sanitize(self) -> bool:
        """TILEJIT_SANITIZE: the interpreter checks for data races between programs and for reads of
        memory marked uninitialised (a compile option of the interpreter, so part of the cache key)."""
        return _flag("TILEJIT_SANITIZE")

    @property
    def fp32_default(self) -> str | None:
        """TILEJIT_F32_DEFAULT, or Triton's TRITON_F32_DEFAULT: the `input_precision` of every fp32
        `tl.dot` that does not name one ("ieee", "tf32", "tf32x3", ...); it overrides `allow_tf32`, as
        in Triton. Unset: "tf32" where the target has it, else "ieee"."""
        raw = _text("TILEJIT_F32_DEFAULT") or _text("TRITON_F32_DEFAULT")
        return raw.lower() if raw else None

    @property
    def autotune_interpreter(self) -> bool:
        """TILEJIT_AUTOTUNE_INTERPRETER: time every autotune config on the interpreter too (by default
        the interpreter takes the first config that compiles)."""
        return _flag("TILEJIT_AUTOTUNE_INTERPRETER")

    @property
    def print_autotuning(self) -> bool:
        """TILEJIT_PRINT_AUTOTUNING, or Triton's TRITON_PRINT_AUTOTUNING: after an autotuner has timed
        its configs for a new key, print the kernel, the key, the tuning time and the config chosen
        (Triton's message), so that a user sees what each compiler picked."""
        return _flag("TILEJIT_PRINT_AUTOTUNING") or _flag("TRITON_PRINT_AUTOTUNING")

    @property
    def autotune_compile_workers(self) -> int:
        """TILEJIT_AUTOTUNE_COMPILE_WORKERS: how many configs the autotuner compiles at once before it
        times them (default: the CPU count, at most 8); 0 or 1 compiles them one by one, as each is
        timed."""
        raw = _text("TILEJIT_AUTOTUNE_COMPILE_WORKERS")
        if raw is None:
            return min(8, os.cpu_count() or 1)
        try:
            value = int(raw)
        except ValueError:
            raise KnobError(f"TILEJIT_AUTOTUNE_COMPILE_WORKERS={raw!r} is not a number of threads") from None
        if value < 0:
            raise KnobError(f"TILEJIT_AUTOTUNE_COMPILE_WORKERS={raw!r} must not be negative")
        return value

    @property
    def autotune_compile_processes(self) -> bool:
        """TILEJIT_AUTOTUNE_COMPILE_PROCESSES (default on): the autotuner's compile threads run the
        toolchain stages (LLVM, the assembler) in worker processes, where they run in parallel; off:
        in this process, where llvmlite runs one LLVM call at a time."""
        raw = os.environ.get("TILEJIT_AUTOTUNE_COMPILE_PROCESSES", "1").strip().lower()
        if raw in _TRUE_WORDS or raw == "":
            return True
        return _flag("TILEJIT_AUTOTUNE_COMPILE_PROCESSES")

    def cache_key_part(self) -> str:
        """The knobs that change generated code, as one string to mix into every cache key.

        Tool paths are included because another ptxas/ld.lld may emit another binary; the backends'
        own `hash()` adds the tool versions.
        """
        return (f"debug={int(self.debug)};ptxas={self.ptxas or ''};lld={self.lld or ''};"
                f"f32={self.fp32_default or ''}")

    def as_dict(self) -> dict[str, object]:
        """Every knob with its current value (for `tilejit backends` and bug reports)."""
        names = ("cache_dir", "cache_max_bytes", "cache_strict", "always_compile", "dump_dir", "target",
                 "interpret", "ptxas", "lld", "debug", "sanitize", "fp32_default", "autotune_interpreter",
                 "print_autotuning", "autotune_compile_workers", "autotune_compile_processes")
        return {name: getattr(self, name) for name in names}


knobs = Knobs()

_dump_failures: set = set()


def warn_dump_failure(dump_dir: str, exc: OSError) -> None:
    """TILEJIT_DUMP_DIR cannot be written: a debugging aid must not fail compilations. Warns once per
    directory and process (not at every compilation); the compilation goes on without its dump."""
    import warnings
    if dump_dir in _dump_failures:
        return
    _dump_failures.add(dump_dir)
    warnings.warn(f"tilejit: cannot write TILEJIT_DUMP_DIR={dump_dir} ({exc.strerror or exc}); "
                  "compiling without dumps", RuntimeWarning, stacklevel=3)
