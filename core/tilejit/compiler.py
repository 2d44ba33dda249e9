"""The compile driver: `compile(src, target, options) -> CompiledKernel`.

The driver knows nothing about any particular backend. It asks the backend for its options and its
stages, puts the core's `ttir` stage first, lets plugins edit the stage table, and runs one loop over
it (docs/internals.md, "Stages and the compile driver"). Results are cached in memory per process and
on disk (`tilejit.runtime.cache`), keyed by everything that can change the generated code.

"""
from __future__ import annotations

import contextvars
import hashlib
import importlib
import json
import os
import threading
import time
import warnings

from tilejit import backends, ir, plugins
from tilejit.config import knobs
from tilejit.errors import CompilationError, TilejitError
from tilejit.passes.pipeline import run_ttir_passes
from tilejit.runtime.gc_pause import cyclic_gc_paused

__all__ = ["compile", "CompiledKernel", "make_ttir", "clear_memory_cache", "normalize_grid", "PureStage"]


# --- collaborators ------------------------------------------------------------------------------
# Small functions, not names imported into callers: the runtime asks them, tests replace them.

def _backends():
    return backends


def _knobs():
    return knobs


def _cache_manager(key: str):
    # Imported here: the runtime package imports this module (its @jit compiles through it).
    from tilejit.runtime.cache import get_cache_manager
    return get_cache_manager(key)


def _plugin_manager():
    return plugins.get_plugin_manager()


def _run_ttir_passes(module, options):
    return run_ttir_passes(module, options)


_version_cache: list = []


def tilejit_version() -> str:
    """The installed tilejit version (part of every cache key)."""
    if not _version_cache:
        import tilejit

        version = getattr(tilejit, "__version__", None)
        if version is None:
            try:
                from importlib.metadata import PackageNotFoundError, version as dist_version

                version = dist_version("tilejit")
            except PackageNotFoundError:
                version = "0+unknown"
        _version_cache.append(str(version))
    return _version_cache[0]


# Plugins that observe launches are looked up once; most processes have none, and then a launch
# does not even build the hook arguments.
_launch_hooks_state: list = []
_NO_HOOKS = (None, None)


def launch_hooks():
    """(pre, post) hook callers when some plugin implements `tilejit_pre_launch`/`tilejit_post_launch`,
    else None in their place (the very object `_NO_HOOKS` when there are none)."""
    if not _launch_hooks_state:
        found = []
        manager = _plugin_manager()
        for hook_name in ("tilejit_pre_launch", "tilejit_post_launch"):
            caller = getattr(manager.hook, hook_name, None) if manager is not None else None
            found.append(caller if caller is not None and caller.get_hookimpls() else None)
        _launch_hooks_state.append(_NO_HOOKS if found == [None, None] else tuple(found))
    return _launch_hooks_state[0]


def reset_launch_hooks() -> None:
    """Look the launch hooks up again on the next launch (after registering a plugin at run time)."""
    _launch_hooks_state.clear()


# --- helpers ------------------------------------------------------------------------------------

def normalize_grid(grid, kernel_name: str | None = None) -> tuple[int, int, int]:
    """The launch ABI's one grid check (`tilejit.runtime.launch_abi.normalize_grid`; imported here
    when called: the runtime package imports this module)."""
    from tilejit.runtime.launch_abi import normalize_grid as check
    return check(grid, kernel_name)


def _checked_grid(grid, kernel) -> tuple:
    """`grid` as three ints in [0, 2**31 - 1]: as it is when it already is (the JIT's grids), else
    through `normalize_grid`, which raises naming the kernel (as the launcher's own check did)."""
    if type(grid) is tuple and len(grid) == 3:
        x, y, z = grid
        if type(x) is int and type(y) is int and type(z) is int and 0 <= x <= 0x7FFFFFFF \
                and 0 <= y <= 0x7FFFFFFF and 0 <= z <= 0x7FFFFFFF:
            return grid
    return normalize_grid(grid, kernel.metadata.get("name", kernel.name))


def _json_safe(value):
    """Constants may be dtypes, functions, ...: keep plain values, spell the rest as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {_json_key(k): _json_safe(v) for k, v in value.items()}
    inner = getattr(value, "value", None)  # tl.constexpr wraps a plain value
    if inner is not None and type(value).__name__ == "constexpr":
        return _json_safe(inner)
    return str(value)


def _json_key(key) -> str:
    if isinstance(key, tuple):
        return ",".join(str(k) for k in key)
    return str(key)


def _flat_signature(signature: dict) -> dict:
    """The launchers' view of a signature: one entry per leaf, a tuple parameter's elements named by
    their index (`t[0]`, `t[1][0]`), in depth-first order, the order of the kernel's arguments."""
    flat = {}

    def walk(name, entry):
        if isinstance(entry, (tuple, list)):
            for i, element in enumerate(entry):
                walk(f"{name}[{i}]", element)
        elif isinstance(entry, str) and entry.startswith("tensordesc<"):
            # A host-side tensor descriptor travels as its base pointer, shape (i32) and strides (i64).
            element = entry[len("tensordesc<"):].split("[", 1)[0].strip()
            rank = len([d for d in entry.split("[", 1)[1].split("]", 1)[0].split(",") if d.strip()])
            flat[f"{name}.base"] = "*" + element
            for i in range(rank):
                flat[f"{name}.shape[{i}]"] = "i32"
            for i in range(rank):
                flat[f"{name}.strides[{i}]"] = "i64"
        else:
            flat[name] = str(entry)

    for key, entry in signature.items():
        walk(_json_key(key), entry)
    return flat


def _nested_types(signature: dict) -> list:
    """[[name, type or nested list of types], ...] in parameter order: tuple parameters' structure."""
    def plain(entry):
        return [plain(e) for e in entry] if isinstance(entry, (tuple, list)) else str(entry)

    return [[_json_key(key), plain(entry)] for key, entry in signature.items()]


def _options_value(options, name, default):
    return getattr(options, name, default)


def _to_artifact(stage: str, output, kernel: str):
    """A stage's output as it is kept in `asm`: printed IR, text or the binary."""
    if isinstance(output, (str, bytes)):
        return output
    if isinstance(output, bytearray):
        return bytes(output)
    if isinstance(output, ir.Module):
        return ir.print_module(output)
    raise CompilationError(f"stage '{stage}' returned a {type(output).__name__}; a stage must return an "
                           "ir.Module, a str or bytes", kernel=kernel)


# --- the compiled kernel ------------------------------------------------------------------------

class KernelMetadata(dict):
    """A compiled kernel's metadata: a dict (JSON-safe, what the launcher and the cache read) whose
    entries are also attributes, as the fields of Triton's `KernelMetadata` namedtuple are
    (`kernel.metadata.shared`, `kernel.metadata.num_warps`, `kernel.metadata._asdict()`)."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"kernel metadata has no field {name!r}") from None

    def _asdict(self) -> dict:
        return dict(self)


class AsmDict(dict):
    """`CompiledKernel.asm`: each stage's artifact, and on first use what the kernel's backend derives
    from them (`derived_asm(name, asm)`; Triton's `asm["sass"]`, the disassembled cubin). A name
    neither a stage nor derivable is a KeyError, as in a dict."""

    def __init__(self, stages, target):
        super().__init__(stages)
        self._target = target

    def __missing__(self, name):
        derive = getattr(_backends().backend_for_target(self._target), "derived_asm", None)
        value = derive(name, self) if derive is not None else None
        if value is None:
            raise KeyError(name)
        self[name] = value
        return value


class CompiledKernel:
    """One compiled kernel: every stage's artifact, its metadata, and (lazily) a launcher.

    `asm[stage]` holds each stage's output (text for IR and assembly, bytes for the binary),
    `metadata` the JSON-safe facts the launcher needs (`signature` has one entry per runtime leaf,
    tuple elements as `t[0]`; `param_types` keeps each parameter's nested type). `kernel[grid](*args)` launches it like
    Triton's compiled kernel; `args` are the runtime arguments (constexprs removed), in signature
    order. Passing every argument (constexprs included) also works: the constexprs are dropped.
    """

    # Triton 3.0-3.3's launch hooks: `CompiledKernel.launch_enter_hook = fn` is called with the
    # `launch_metadata(...)` dict before every launch, `launch_exit_hook` after it.
    launch_enter_hook = None
    launch_exit_hook = None

    def __init__(self, src_name: str, target, metadata: dict, asm: dict):
        self.src_name = src_name
        self.jit_function = None  # set by the JIT: its `launch_metadata` function feeds the hooks
        self.name = metadata.get("name", src_name)
        self.target = target
        self.metadata = KernelMetadata(metadata)
        self.asm = AsmDict(asm, target)
        self.hash = metadata.get("hash")
        # Seconds each stage took when this process compiled the kernel ({} when it came from the
        # disk cache): what `bench/compile_speed.py` reports. Not metadata: it differs run to run.
        self.stage_times: dict = {}
        # What a launch calls: the launcher's `direct_call` function when it has one (see
        # `tilejit.backends.Launcher`), else the launcher itself; None until the first launch.
        self._launcher = None
        self._launcher_object = None
        self._lock = threading.Lock()

    @property
    def launcher(self):
        """The backend's launcher of this kernel, made on first use."""
        if self._launcher_object is None:
            with self._lock:
                if self._launcher_object is None:
                    backends = _backends()
                    launcher = backends.backend_for_target(self.target).make_launcher(self)
                    # `_launcher` first: a thread that sees it set launches without the lock.
                    self._launcher = getattr(launcher, "direct_call", None) or launcher
                    self._launcher_object = launcher
        return self._launcher_object

    @property
    def runtime_arg_names(self) -> list:
        """Names of the launcher's arguments: runtime parameters, tuple elements as `t[0]`, `t[1]`."""
        signature = self.metadata.get("signature", {})
        return [name for name, ty in signature.items() if ty != "constexpr"]

    def launch_metadata(self, grid, stream, *args) -> dict:
        """What launch hooks report about one launch (Triton's `CompiledKernel.launch_metadata`): the
        kernel's name, grid and stream, plus what the `@jit(launch_metadata=fn)` function returns for
        `fn(grid, metadata, args)` where `args` maps parameter names to the bound values."""
        info = {"name": self.name, "grid": grid, "stream": stream}
        function = getattr(self.jit_function, "launch_metadata", None)
        if function is not None:
            # As Triton: every parameter by name, constexprs from the constants (tuple elements
            # appear flattened, under their launcher names `t[0]`, ...).
            values = {k: v for k, v in (self.metadata.get("constants") or {}).items() if isinstance(k, str)}
            values.update(zip(self.runtime_arg_names, args))
            extra = function(grid, self.metadata, values)
            if extra:
                info.update(extra)
        return info

    def run(self, grid, args, stream=None):
        """Launch on a 3-tuple grid with the runtime arguments in signature order. Plugins' launch
        hooks fire here (so both `kernel[grid]` and JIT launches see them), only if some exist."""
        launcher = self._launcher
        if launcher is None:
            self.launcher  # noqa: B018 - makes the launcher, which sets `_launcher`
            launcher = self._launcher
        if launcher is not self._launcher_object:
            grid = _checked_grid(grid, self)  # a `direct_call` takes the grid checked
        hooks = _launch_hooks_state[0] if _launch_hooks_state else launch_hooks()
        if hooks is _NO_HOOKS and CompiledKernel.launch_enter_hook is None and CompiledKernel.launch_exit_hook is None:
            return launcher(grid, args, stream)
        return self._run_with_hooks(launcher, hooks, grid, args, stream)

    def _run_with_hooks(self, launcher, hooks, grid, args, stream):
        pre, post = hooks
        enter, leave = CompiledKernel.launch_enter_hook, CompiledKernel.launch_exit_hook
        info = self.launch_metadata(grid, stream, *args)
        if enter is not None:
            enter(info)
        if pre is not None:
            pre(kernel_name=self.name, grid=grid, args=args, metadata=info)
        result = launcher(grid, args, stream)
        if post is not None:
            post(kernel_name=self.name, grid=grid, args=args, metadata=info)
        if leave is not None:
            leave(info)
        return result

    def __getitem__(self, grid):
        grid3 = normalize_grid(grid, self.name)

        def runner(*args, stream=None):
            return self.run(grid3, self._runtime_args(args), stream)

        return runner

    def _runtime_args(self, args) -> tuple:
        """The launcher's arguments from what a user passed to `compiled[grid](...)`: the runtime
        arguments, or every parameter (constexprs are dropped). Tuple parameters may be passed as
        tuples (flattened here, their constexpr elements dropped) or already flattened."""
        signature = self.metadata.get("signature", {})
        runtime_names = self.runtime_arg_names
        nested = self.metadata.get("param_types")
        if nested and any(type(a) is tuple or isinstance(a, tuple) for a in args):
            return self._flatten_tuple_args(args, nested, runtime_names)
        if not signature or len(args) == len(runtime_names):
            return tuple(args)
        if len(args) == len(signature):
            return tuple(a for a, ty in zip(args, signature.values()) if ty != "constexpr")
        raise TypeError(f"kernel '{self.name}' takes {len(runtime_names)} runtime arguments "
                        f"({', '.join(runtime_names)}), got {len(args)}")

    def _flatten_tuple_args(self, args, nested: list, runtime_names: list) -> tuple:
        def has_runtime_leaf(entry):
            if isinstance(entry, list):
                return any(has_runtime_leaf(e) for e in entry)
            return entry != "constexpr"

        if len(args) == len(nested):
            params = nested
        else:
            params = [p for p in nested if has_runtime_leaf(p[1])]
            if len(args) != len(params):
                raise TypeError(f"kernel '{self.name}' takes {len(nested)} parameters "
                                f"({', '.join(p[0] for p in nested)}) or its {len(params)} runtime ones, "
                                f"got {len(args)} arguments")
        flat = []

        def walk(name, entry, value):
            if isinstance(entry, list):
                if not isinstance(value, tuple) or len(value) != len(entry):
                    raise TypeError(f"kernel '{self.name}': parameter '{name}' takes a tuple of {len(entry)} "
                                    f"elements, got {value!r:.60}")
                for i, (sub, element) in enumerate(zip(entry, value)):
                    walk(f"{name}[{i}]", sub, element)
            elif entry != "constexpr":
                flat.append(value)

        for (name, entry), value in zip(params, args):
            walk(name, entry, value)
        return tuple(flat)

    def __repr__(self):
        return f"CompiledKernel({self.name!r}, target={self.target!s}, stages={list(self.asm)})"


# --- stages that may run concurrently -----------------------------------------------------------

class PureStage:
    """A stage that is a pure function of its input text: `fn(src, *args)`, with `fn` a module-level
    function and `args` plain values, touching no Python state shared with other compilations.

    The driver runs every other stage of every compilation in the process one at a time (under one
    lock: the frontend, the passes and the lowering are Python code written for one compilation at a
    time, and bound by the GIL anyway), but pure stages outside that lock, so several compilations in
    threads (the autotuner's) overlap their assemblers and LLVM with each other's Python. A backend
    marks its toolchain steps (LLVM IR -> assembly -> binary) this way; a pure stage ignores the
    metadata.
    """

    __slots__ = ("fn", "args")

    def __init__(self, fn, *args):
        self.fn = fn
        self.args = args

    def __call__(self, src, metadata=None):
        return self.fn(src, *self.args)

    def __repr__(self):
        return f"PureStage({getattr(self.fn, '__qualname__', self.fn)}, {', '.join(map(repr, self.args))})"


# Held while a compilation runs its stages that are not PureStages (see PureStage); reentrant, so a
# stage may compile another kernel.
_python_stages_lock = threading.RLock()

# A `tilejit.runtime.compile_workers.WorkerPool` where the pure stages of compilations in this context
# run (the autotuner sets it for its compile threads), or None: in this process.
_offload_pool: contextvars.ContextVar = contextvars.ContextVar("tilejit_offload_pool", default=None)


def offload_pure_stages(pool) -> None:
    """Run the PureStages of compilations in the current context in `pool`'s worker processes (None:
    in this process). Meant for a context of its own (`contextvars.copy_context().run`)."""
    _offload_pool.set(pool)


def _offloadable(stage_fn) -> bool:
    fn = getattr(stage_fn, "fn", None)
    return isinstance(stage_fn, PureStage) and "<" not in getattr(fn, "__qualname__", "<")


def _run_offloaded(pool, run: list, module, metadata):
    """(outputs, seconds) of the pure stages `run` ([(name, PureStage)]) in a worker, or None to run
    them here. A stage's failure is raised as it would have been here."""
    from tilejit.runtime.compile_workers import StageFailed
    try:
        return pool.run([fn for _, fn in run], module)
    except StageFailed as failed:
        name, error = run[failed.index][0], failed.error

    def reraise(_module, _metadata):
        raise error

    return _run_stage(name, reraise, module, metadata)  # wraps a foreign error as it would be here


# --- the driver ---------------------------------------------------------------------------------

_memory_cache: dict = {}
_memory_lock = threading.Lock()


def clear_memory_cache() -> None:
    """Forget every kernel compiled in this process (the disk cache stays)."""
    with _memory_lock:
        _memory_cache.clear()


def _resolve_target(target):
    backends = _backends()
    gpu_target_cls = getattr(backends, "GPUTarget", None)
    if gpu_target_cls is not None and isinstance(target, gpu_target_cls):
        return target
    return backends.select_target([], explicit=target) if target is not None else backends.select_target([])


def _as_source(src):
    if isinstance(src, (str, os.PathLike)):
        from tilejit.frontend.source import IRSource

        return IRSource(src)
    return src


def _prepare(src, target, options):
    """(src, target, backend, parsed options, cache key) for a compilation."""
    src = _as_source(src)
    target = _resolve_target(target)
    backend = _backends().backend_for_target(target)
    opts = backend.parse_options(dict(options or {}))
    parts = [src.hash(), backend.hash(), opts.hash(), _knobs().cache_key_part(), tilejit_version(), str(target),
             compiler_fingerprint("tilejit"), compiler_fingerprint(type(backend).__module__.split(".")[0])]
    key = hashlib.sha256("-".join(str(p) for p in parts).encode()).hexdigest()
    return src, target, backend, opts, key


_fingerprints: dict = {}


def compiler_fingerprint(package: str) -> str:
    """A digest of a package's Python sources (path, size, mtime of each file), once per process.

    The disk cache must never hand out a kernel built by other compiler code: the version number alone
    does not change while the compiler is edited (an editable install), so the sources are part of the
    key. File metadata rather than contents keeps this under a millisecond.
    """
    digest = _fingerprints.get(package)
    if digest is None:
        module = importlib.import_module(package)
        root = os.path.dirname(os.path.abspath(module.__file__))
        h = hashlib.sha256()
        for folder, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{os.path.relpath(os.path.join(folder, name), root)}:{st.st_size}:{st.st_mtime_ns};".encode())
        digest = _fingerprints[package] = h.hexdigest()[:16]
    return digest


def make_ttir(src, metadata: dict, options, target):
    """The core's `ttir` stage: build the kernel's IR and run the TTIR pipeline on it."""
    module = src.make_ir(target, options)
    return _run_ttir_passes(module, options)


def compile_ttir(src, target=None, options=None):
    """Run only the `ttir` stage and return the `ir.Module` (no toolchain, no cache needed)."""
    src, target, _backend, opts, key = _prepare(src, target, options)
    metadata = _initial_metadata(src, target, opts, key)
    return _run_stage("ttir", lambda s, md: make_ttir(s, md, opts, target), src, metadata)


def _initial_metadata(src, target, opts, key) -> dict:
    return {
        "name": src.name,
        "target": str(target),
        "num_warps": _options_value(opts, "num_warps", 4),
        "num_stages": _options_value(opts, "num_stages", 3),
        "num_ctas": _options_value(opts, "num_ctas", 1),
        "debug": bool(_options_value(opts, "debug", False)),
        "shared": 0,
        "signature": _flat_signature(getattr(src, "signature", None) or {}),
        "param_types": _nested_types(getattr(src, "signature", None) or {}),
        "constants": _json_safe(dict(getattr(src, "constexprs", None) or {})),
        "hash": key,
    }


def _run_stage(name, stage_fn, module, metadata):
    kernel = metadata.get("name")
    try:
        return stage_fn(module, metadata)
    except TilejitError:
        raise
    except Exception as exc:  # a bug or a tool failure inside a stage: never leak it raw
        raise CompilationError(f"stage '{name}' failed while compiling kernel '{kernel}': "
                               f"{type(exc).__name__}: {exc}", kernel=kernel) from exc


def _dump(dump_dir: str, metadata: dict, asm: dict) -> None:
    kernel = metadata["name"]
    folder = os.path.join(dump_dir, f"{kernel}-{metadata['hash'][:8]}")
    os.makedirs(folder, exist_ok=True)
    for stage, artifact in asm.items():
        mode = "wb" if isinstance(artifact, bytes) else "w"
        with open(os.path.join(folder, f"{kernel}.{stage}"), mode) as f:
            f.write(artifact)
    with open(os.path.join(folder, f"{kernel}.json"), "w") as f:
        json.dump(metadata, f, indent=2)


def _load_from_disk(key: str, src_name: str, target):
    """A CompiledKernel from the disk cache, or None when absent or unusable."""
    try:
        entry = _cache_manager(key).load()
    except (OSError, ValueError, TilejitError) as exc:
        warnings.warn(f"tilejit: ignoring unreadable cache entry {key[:8]}: {exc}")
        return None
    if entry is None:
        return None
    metadata, artifacts = entry
    kinds = metadata.get("artifacts") if isinstance(metadata, dict) else None
    if not isinstance(kinds, list) or metadata.get("hash") != key:
        return None
    asm = {}
    for stage, kind in kinds:
        data = artifacts.get(stage)
        if data is None:
            return None  # incomplete entry: recompile rather than launch half a kernel
        if kind == "text":
            try:
                data = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else str(data)
            except UnicodeDecodeError:
                return None
        elif isinstance(data, str):
            return None
        asm[stage] = data
    return CompiledKernel(src_name, target, metadata, asm)


def _store_to_disk(key: str, metadata: dict, asm: dict) -> None:
    try:
        _cache_manager(key).store(metadata, dict(asm))
    except OSError as exc:  # a read-only or full cache must not break compilation
        warnings.warn(f"tilejit: could not store kernel {metadata['name']} in the cache: {exc}")


def _stage_table(src, target, backend, opts) -> dict:
    stages = {"ttir": lambda s, md: make_ttir(s, md, opts, target)}
    backend.add_stages(stages, opts)
    plugin_manager = _plugin_manager()
    hook = getattr(plugin_manager.hook, "tilejit_add_stages", None) if plugin_manager is not None else None
    if hook is not None:
        hook(stages=stages, options=opts, target=target)
    return stages


def compile(src, target=None, options=None) -> CompiledKernel:
    """Compile `src` (an ASTSource, an IRSource, or the path/text of a .ttir file) for `target`
    (a GPUTarget, a string like "cuda:90", or None for the default target) with backend `options`."""
    src, target, backend, opts, key = _prepare(src, target, options)
    knobs = _knobs()
    always_compile = bool(knobs.always_compile)
    if not always_compile:
        with _memory_lock:
            cached = _memory_cache.get(key)
        if cached is not None:
            return cached
        loaded = _load_from_disk(key, src.name, target)
        if loaded is not None:
            with _memory_lock:
                _memory_cache[key] = loaded
            return loaded

    with cyclic_gc_paused():
        return _compile_uncached(src, target, backend, opts, key, knobs)


def _compile_uncached(src, target, backend, opts, key, knobs) -> CompiledKernel:
    metadata = _initial_metadata(src, target, opts, key)
    with _python_stages_lock:
        stages = _stage_table(src, target, backend, opts)
    asm: dict = {}
    stage_times: dict = {}
    module = src
    pool = _offload_pool.get()
    items = list(stages.items())
    index = 0
    while index < len(items):
        name, stage_fn = items[index]
        if pool is not None and _offloadable(stage_fn) and isinstance(module, (str, bytes)):
            end = index
            while end < len(items) and _offloadable(items[end][1]):
                end += 1
            run = items[index:end]
            done = _run_offloaded(pool, run, module, metadata)
            if done is not None:
                for (stage, _), output, seconds in zip(run, *done):
                    asm[stage] = _to_artifact(stage, output, metadata["name"])
                    stage_times[stage] = seconds
                module = done[0][-1]
                index = end
                continue
        index += 1
        started = time.perf_counter()
        if isinstance(stage_fn, PureStage):
            module = _run_stage(name, stage_fn, module, metadata)
        else:
            with _python_stages_lock:
                module = _run_stage(name, stage_fn, module, metadata)
        asm[name] = _to_artifact(name, module, metadata["name"])
        stage_times[name] = time.perf_counter() - started
    metadata["artifacts"] = [[name, "binary" if isinstance(a, bytes) else "text"] for name, a in asm.items()]
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise CompilationError(f"metadata of kernel '{metadata['name']}' is not JSON-serialisable: {exc}",
                               kernel=metadata["name"]) from exc

    dump_dir = knobs.dump_dir
    if dump_dir:
        try:
            _dump(str(dump_dir), metadata, asm)
        except OSError as exc:  # a debugging aid must not fail the compilation (warned once per directory)
            from tilejit.config import warn_dump_failure
            warn_dump_failure(str(dump_dir), exc)
    started = time.perf_counter()
    _store_to_disk(key, metadata, asm)
    stage_times["store"] = time.perf_counter() - started
    kernel = CompiledKernel(src.name, target, metadata, asm)
    kernel.stage_times = stage_times
    with _memory_lock:
        _memory_cache[key] = kernel
    return kernel
