"""`@autotune`, `Config` and `@heuristics`, with Triton 3.x semantics.

The autotuner times every (pruned) config with the benchmarker of the backend that runs the kernel
(`backend.get_benchmarker()`), keeps the fastest per tuning key in memory and, with
`cache_results=True` or the `autotune_cache` knob, on disk through `tilejit.runtime.cache.store_json`.

As in Triton, a config that does not compile (a failed `tl.static_assert`, `OutOfResources`, a
`CompilationError`, `PTXASError`) is skipped with a warning that names it; only when every config
fails is the first failure raised.

Before timing, every config's kernel is compiled, several at once in threads (the knob
`TILEJIT_AUTOTUNE_COMPILE_WORKERS`, or `Autotuner.compile_workers`; 0 or 1 compiles each as it is
timed, as before): the backends' toolchain stages (`tilejit.compiler.PureStage`: LLVM, ptxas) of one
config overlap the Python stages of the others, and run in worker processes
(`tilejit.runtime.compile_workers`; `TILEJIT_AUTOTUNE_COMPILE_PROCESSES=0` keeps them in threads of
this process, where llvmlite runs one LLVM call at a time). A config that fails to compile there is skipped with
the same warning, once, and not timed; which config wins does not change.

On the interpreter, timings say nothing about the GPU and each config costs a full CPU run, so the
autotuner takes the first config that compiles instead of timing them all (the first call then costs
one run, not one per config). `TILEJIT_AUTOTUNE_INTERPRETER=1` (or `Autotuner.bench_on_interpreter =
True`) times every config on the interpreter too.
"""
from __future__ import annotations

import builtins
import contextvars
import hashlib
import importlib
import inspect
import json
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from tilejit import compiler
from tilejit.errors import CompilationError, OutOfResources, PTXASError
from tilejit.runtime.args import is_tensor_like
from tilejit.runtime.jit import JITFunction, KernelInterface

__all__ = ["Config", "Autotuner", "autotune", "Heuristics", "heuristics"]

_QUANTILES = (0.5, 0.2, 0.8)
# What makes a config invalid rather than the program wrong: it is skipped, as Triton does.
_CONFIG_ERRORS = (CompilationError, OutOfResources, PTXASError)


def _first_line(exc) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


class Config:
    """One point of the search space: meta-parameter values (`kwargs`) and launch options."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict:
        """Meta-parameters plus the launch options that are set."""
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas,
                   "maxnreg": self.maxnreg}
        return {**self.kwargs, **{k: v for k, v in options.items() if v is not None}}

    def to_json(self) -> dict:
        return {"kwargs": {k: _plain(v) for k, v in self.kwargs.items()}, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "num_ctas": self.num_ctas, "maxnreg": self.maxnreg}

    def __str__(self):
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_ctas: {self.num_ctas}", f"num_stages: {self.num_stages}",
                  f"maxnreg: {self.maxnreg}"]
        return ", ".join(parts)

    __repr__ = __str__


def _plain(value):
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _zero(arg):
    if hasattr(arg, "zero_"):
        arg.zero_()
    else:
        arg[...] = 0


def _snapshot(arg):
    return arg.clone() if hasattr(arg, "clone") else arg.copy()


def _restore(dst, saved):
    if hasattr(dst, "copy_"):
        dst.copy_(saved)
    else:
        dst[...] = saved


def _base_jit_function(fn):
    """The JITFunction under any stack of autotuners/heuristics (for its cache key)."""
    while not isinstance(fn, JITFunction):
        inner = getattr(fn, "fn", None)
        if inner is None:
            return None
        fn = inner
    return fn


class Autotuner(KernelInterface):
    """Runs the fastest config for each value of the tuning `key` (the named arguments' values plus the
    dtypes of tensor arguments)."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero=None, restore_value=None, pre_hook=None,
                 post_hook=None, prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False,
                 do_bench=None, cache_results=False):
        self.fn = fn
        self.arg_names = list(arg_names)
        self.configs = list(configs) if configs else [Config({}, num_warps=4, num_stages=3, num_ctas=1)]
        self.keys = list(key)
        for name in self.keys + list(reset_to_zero or ()) + list(restore_value or ()):
            if name not in self.arg_names:
                raise ValueError(f"autotune: '{name}' is not a parameter of kernel "
                                 f"'{getattr(fn, '__name__', fn)}' (parameters: {', '.join(self.arg_names)})")
        self.reset_to_zero = list(reset_to_zero or ())
        self.restore_value = list(restore_value or ())
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        # Triton's names, read by libraries that subclass the autotuner (fla's CachedAutotuner installs
        # its own `pre_hook` / `post_hook` attributes when these are false).
        self.user_defined_pre_hook = bool(pre_hook)
        self.user_defined_post_hook = bool(post_hook)
        prune_configs_by = dict(prune_configs_by or {})
        unknown = set(prune_configs_by) - {"perf_model", "top_k", "early_config_prune"}
        if unknown:
            raise ValueError(f"autotune: unknown prune_configs_by keys {sorted(unknown)}; "
                             "allowed: perf_model, top_k, early_config_prune")
        self.perf_model = prune_configs_by.get("perf_model")
        self.configs_top_k = prune_configs_by.get("top_k", 1.0)
        self.early_config_prune = prune_configs_by.get("early_config_prune")
        self.num_warmups = warmup
        self.num_reps = rep
        self.use_cuda_graph = use_cuda_graph
        self.user_do_bench = do_bench
        self.cache_results = cache_results
        self.cache: dict = {}
        self.best_config = None
        self.configs_timings = None
        self.bench_time = None
        self.nargs = None
        self.restore_copies: dict = {}
        self.config_errors: list = []  # (config, exception) of the configs skipped at the last tuning
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.base_fn = fn  # the Python function under any stack of decorators (Triton's attribute)
        while not inspect.isfunction(self.base_fn) and hasattr(self.base_fn, "fn"):
            self.base_fn = self.base_fn.fn

    # Time every config on the interpreter too (else the first config that compiles is used); the
    # knob TILEJIT_AUTOTUNE_INTERPRETER=1 does the same for every autotuner.
    bench_on_interpreter = False
    # How many configs compile at once before timing; None: the knob TILEJIT_AUTOTUNE_COMPILE_WORKERS.
    compile_workers = None
    # Whether their toolchain stages run in worker processes; None: TILEJIT_AUTOTUNE_COMPILE_PROCESSES.
    compile_processes = None

    # --- hooks around each timed run -------------------------------------------------------------

    def _argument(self, nargs: dict, name: str):
        if name not in nargs:
            raise TypeError(f"kernel '{self.__name__}': argument '{name}' (named in reset_to_zero/restore_value) "
                            "was not passed")
        return nargs[name]

    def pre_hook(self, nargs: dict, reset_only: bool = False) -> None:
        for name in self.reset_to_zero + self.restore_value:
            self._argument(nargs, name)
        for name in self.reset_to_zero:
            _zero(nargs[name])
        if not reset_only:
            self.restore_copies = {name: _snapshot(nargs[name]) for name in self.restore_value}
        if self.user_pre_hook is not None and not reset_only:
            self.user_pre_hook(nargs)

    def post_hook(self, nargs: dict, exception=None) -> None:
        for name, saved in self.restore_copies.items():
            _restore(nargs[name], saved)
        self.restore_copies = {}
        if self.user_post_hook is not None:
            self.user_post_hook(nargs, exception)

    # --- benchmarking ------------------------------------------------------------------------------

    def _benchmarker(self):
        if self.user_do_bench is not None:
            return self.user_do_bench
        tensors = [v for v in (self.nargs or {}).values() if is_tensor_like(v)]
        backends = compiler._backends()
        backend = backends.backend_for_target(backends.select_target(tensors))
        get_benchmarker = getattr(backend, "get_benchmarker", None)
        if get_benchmarker is None:
            from tilejit.testing import do_bench

            return do_bench
        return get_benchmarker()

    def _check_no_conflicts(self, config: Config, meta: dict) -> None:
        conflicts = sorted(set(meta) & set(config.all_kwargs()))
        if conflicts:
            raise ValueError(f"kernel '{self.__name__}': conflicting meta-parameters {', '.join(conflicts)}; "
                             "do not pass the autotuned parameters yourself")

    def _bench(self, args, config: Config, meta: dict, bench):
        self._check_no_conflicts(config, meta)
        current = {**meta, **config.all_kwargs()}
        full_nargs = {**self.nargs, **current}

        def kernel_call():
            if config.pre_hook is not None:
                config.pre_hook(full_nargs)
            self.pre_hook(full_nargs)
            try:
                self.fn.run(*args, **current)
            except Exception as exc:
                self.post_hook(full_nargs, exception=exc)
                raise
            self.post_hook(full_nargs, exception=None)

        bench_kwargs = {"quantiles": _QUANTILES}
        if self.num_warmups is not None:
            bench_kwargs["warmup"] = self.num_warmups
        if self.num_reps is not None:
            bench_kwargs["rep"] = self.num_reps
        try:
            timing = bench(kernel_call, **bench_kwargs)
        except _CONFIG_ERRORS as exc:
            self._skip(config, exc)
            return [float("inf")] * len(_QUANTILES)
        return list(timing) if isinstance(timing, (list, tuple)) else [float(timing)]

    def _skip(self, config: Config, exc) -> None:
        self.config_errors.append((config, exc))
        warnings.warn(f"autotune: kernel '{self.__name__}': config [{config}] skipped: {_first_line(exc)}",
                      RuntimeWarning, stacklevel=4)

    def _runs_on_interpreter(self) -> bool:
        tensors = [v for v in (self.nargs or {}).values() if is_tensor_like(v)]
        try:
            return compiler._backends().select_target(tensors).backend == "interpreter"
        except Exception:  # noqa: BLE001 - no target: the launch itself reports it
            return False

    def _first_valid(self, args, kwargs: dict, configs: list) -> Config:
        """The first config that compiles (the interpreter's choice: no timing)."""
        meta = {k: v for k, v in kwargs.items() if k != "warmup"}  # compile only, never launch here
        for config in configs:
            try:
                self.fn.warmup(*args, **meta, **config.all_kwargs())
            except _CONFIG_ERRORS as exc:
                self._skip(config, exc)
                continue
            return config
        raise self.config_errors[0][1]

    # --- compiling the configs together ----------------------------------------------------------

    def _workers_for(self, count: int) -> int:
        workers = self.compile_workers
        if workers is None:
            workers = getattr(compiler._knobs(), "autotune_compile_workers", 1)
        return max(1, min(int(workers), count))

    def _use_processes(self) -> bool:
        processes = self.compile_processes
        if processes is None:
            processes = getattr(compiler._knobs(), "autotune_compile_processes", False)
        return bool(processes)

    def _compile_all(self, args, kwargs: dict, configs: list) -> list:
        """[(config, CompiledKernel or the exception its compilation raised)], in config order; the
        compilations run in `_workers_for` threads."""
        meta = {k: v for k, v in kwargs.items() if k != "warmup"}  # compile only, never launch here

        def build(config):
            try:
                return self.fn.warmup(*args, **meta, **config.all_kwargs())
            except Exception as exc:  # noqa: BLE001 - handed back to the caller in config order
                return exc

        workers = self._workers_for(len(configs))
        if workers <= 1:
            return [(config, build(config)) for config in configs]
        # Each compilation sees the caller's context variables (a `with tilejit.target(...)` scope).
        contexts = [contextvars.copy_context() for _ in configs]
        if self._use_processes():
            from tilejit.runtime import compile_workers
            pool = compile_workers.pool(workers)
            for context in contexts:
                context.run(compiler.offload_pure_stages, pool)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tilejit-autotune") as pool:
            results = pool.map(lambda job: job[0].run(build, job[1]), zip(contexts, configs))
            return list(zip(configs, results))

    def _precompile(self, args, kwargs: dict, configs: list) -> list:
        """Compile every config before timing (several at once); the configs that compiled. One that
        failed with a config error is skipped with its warning; any other error is raised, the first
        in config order, as the timing loop would have raised it."""
        if self._workers_for(len(configs)) <= 1:
            return configs  # one by one: each config compiles when it is first timed
        for config in configs:
            self._check_no_conflicts(config, kwargs)
        kept = []
        for config, result in self._compile_all(args, kwargs, configs):
            if isinstance(result, _CONFIG_ERRORS):
                self._skip(config, result)
            elif isinstance(result, BaseException):
                raise result
            else:
                kept.append(config)
        return kept

    def prune_configs(self, kwargs: dict) -> list:
        pruned = self.configs
        if self.early_config_prune is not None:
            pruned = list(self.early_config_prune(self.configs, self.nargs, **kwargs))
            if not pruned:
                raise ValueError(f"kernel '{self.__name__}': early_config_prune removed every config")
        if self.perf_model is not None:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(self.configs) * top_k))
            elif not isinstance(top_k, int):
                raise TypeError("autotune: top_k must be an int, or a float <= 1.0 (a fraction of the configs)")
            if len(pruned) > top_k:
                estimates = {c: self.perf_model(**self.nargs, **kwargs, **c.all_kwargs()) for c in pruned}
                pruned = sorted(estimates, key=estimates.get)[:top_k]
        return pruned

    # --- the tuning key and its disk cache -------------------------------------------------------

    def _tuning_key(self, kwargs: dict) -> tuple:
        all_args = {**self.nargs, **kwargs}
        named = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        return tuple(key)

    def _use_disk_cache(self) -> bool:
        if self.cache_results:
            return True
        return bool(getattr(compiler._knobs(), "autotune_cache", False))

    def _disk_name(self, key: tuple) -> str:
        base = _base_jit_function(self.fn)
        parts = [base.cache_key if base is not None else self.__name__, repr(key),
                 json.dumps([c.to_json() for c in self.configs], sort_keys=True), compiler.tilejit_version()]
        return "autotune-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def _load_best(self, key: tuple):
        cache = importlib.import_module("tilejit.runtime.cache")
        record = cache.load_json(self._disk_name(key))
        if not isinstance(record, dict):
            return None
        index = record.get("best_config_index")
        if not isinstance(index, int) or not 0 <= index < len(self.configs):
            return None
        config = self.configs[index]
        return config if record.get("best_config") == config.to_json() else None

    def _store_best(self, key: tuple, config: Config) -> None:
        cache = importlib.import_module("tilejit.runtime.cache")
        cache.store_json(self._disk_name(key), {"key": repr(key), "best_config_index": self.configs.index(config),
                                                "best_config": config.to_json()})

    # --- launch ------------------------------------------------------------------------------------

    def _best_for(self, args, kwargs: dict) -> Config:
        if len(self.configs) == 1:
            return self.configs[0]
        key = self._tuning_key(kwargs)
        config = self.cache.get(key)
        if config is None and self._use_disk_cache():
            config = self._load_best(key)
            if config is not None:
                self.cache[key] = config
        if config is None:
            pruned = self.prune_configs(kwargs)
            self.config_errors = []
            start = time.perf_counter()
            time_all = self.bench_on_interpreter or bool(getattr(compiler._knobs(), "autotune_interpreter", False))
            if self.user_do_bench is None and not time_all and self._runs_on_interpreter():
                config = self._first_valid(args, kwargs, pruned)
                self.configs_timings = None
            else:
                compiled = self._precompile(args, kwargs, pruned)
                if not compiled:
                    raise self.config_errors[0][1]
                bench = self._benchmarker()
                # A config that did not compile is timed as infinite, as when the timing loop finds it.
                failed = [float("inf")] * len(_QUANTILES)
                timings = {c: self._bench(args, c, kwargs, bench) if c in compiled else list(failed) for c in pruned}
                if len(self.config_errors) == len(pruned):
                    raise self.config_errors[0][1]
                config = builtins.min(timings, key=timings.get)
                self.configs_timings = timings
            self.bench_time = time.perf_counter() - start
            self.cache[key] = config
            # Timed runs may have written into the outputs; zero them again before the real run.
            self.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()}, reset_only=True)
            if self._use_disk_cache():
                self._store_best(key, config)
            if getattr(compiler._knobs(), "print_autotuning", False):
                print(f"Triton autotuning for function {self.__name__},\nwith key as {key},\n"
                      f"finished after {self.bench_time:.2f}s,\nbest config selected: {config};")
        return config

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        try:
            config = self._best_for(args, kwargs)
            self.best_config = config
            if config.pre_hook is not None:
                config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    def warmup(self, *args, **kwargs):
        """Compile every (pruned) config without running (several at once); returns the
        CompiledKernels in config order. The first error, in config order, is raised."""
        self.nargs = dict(zip(self.arg_names, args))
        try:
            results = self._compile_all(args, kwargs, self.prune_configs(kwargs))
        finally:
            self.nargs = None
        for _, result in results:
            if isinstance(result, BaseException):
                raise result
        return [result for _, result in results]


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None,
             post_hook=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=False):
    """Decorator: `@autotune(configs=[Config({...}), ...], key=["n"])` above `@jit`."""

    def decorator(fn):
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero=reset_to_zero, restore_value=restore_value,
                         pre_hook=pre_hook, post_hook=post_hook, prune_configs_by=prune_configs_by,
                         warmup=warmup, rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench,
                         cache_results=cache_results)

    return decorator


class Heuristics(KernelInterface):
    """Computes meta-parameters from the other arguments before each launch."""

    def __init__(self, fn, arg_names, values: dict):
        self.fn = fn
        self.arg_names = list(arg_names)
        self.values = dict(values)
        self.__name__ = getattr(fn, "__name__", "kernel")

    def _with_heuristics(self, args, kwargs) -> dict:
        kwargs = dict(kwargs)
        for name, heuristic in self.values.items():
            kwargs[name] = heuristic({**dict(zip(self.arg_names, args)), **kwargs})
        return kwargs

    def run(self, *args, **kwargs):
        return self.fn.run(*args, **self._with_heuristics(args, kwargs))

    def warmup(self, *args, **kwargs):
        return self.fn.warmup(*args, **self._with_heuristics(args, kwargs))


def heuristics(values: dict):
    """Decorator: `@heuristics({"BLOCK": lambda args: ...})` above `@jit` (or an autotuner)."""

    def decorator(fn):
        return Heuristics(fn, fn.arg_names, values)

    return decorator
