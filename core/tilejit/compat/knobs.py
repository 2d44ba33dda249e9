"""`triton.knobs` under the alias: Triton 3.x's knob namespaces (`knobs.cache`, `knobs.compilation`,
`knobs.runtime`, `knobs.language`, `knobs.nvidia`, `knobs.amd`, `knobs.build`, `knobs.autotuning`),
each with `scope()`, a context manager that restores every knob of the namespace on exit.

A knob that has a tilejit counterpart is that counterpart: reading it asks `tilejit.config.knobs`,
setting it sets the environment variable tilejit reads (`knobs.cache.dir = d` is
`TILEJIT_CACHE_DIR=d`, undone by `scope()`). The others (Triton's tuning switches tilejit has no use
for) keep the value they are given and change nothing; they exist so that code which sets them runs.
"""
from __future__ import annotations

import contextlib
import os

from tilejit.config import knobs as _tilejit_knobs

_UNSET = object()


class _Env:
    """A knob that is a tilejit environment variable: `read` turns tilejit's value into Triton's."""

    def __init__(self, variable: str, read):
        self.variable, self.read = variable, read

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else self.read()

    def __set__(self, obj, value):
        if value is None or value is False:
            os.environ.pop(self.variable, None)
        else:
            os.environ[self.variable] = "1" if value is True else str(value)


class _Namespace:
    """One namespace of knobs: class attributes are the defaults, `_Env` descriptors the live ones."""

    def _env_knobs(self):
        return [v for klass in type(self).__mro__ for v in vars(klass).values() if isinstance(v, _Env)]

    @contextlib.contextmanager
    def scope(self):
        saved_attrs = dict(self.__dict__)
        saved_env = {k.variable: os.environ.get(k.variable, _UNSET) for k in self._env_knobs()}
        try:
            yield self
        finally:
            self.__dict__.clear()
            self.__dict__.update(saved_attrs)
            for variable, value in saved_env.items():
                if value is _UNSET:
                    os.environ.pop(variable, None)
                else:
                    os.environ[variable] = value

    def reset(self):
        """Back to the defaults (Triton's `knobs.<namespace>.reset()`). As in Triton, the default of
        a knob backed by an environment variable is what the environment says."""
        self.__dict__.clear()
        return self


class cache_knobs(_Namespace):
    dir = _Env("TILEJIT_CACHE_DIR", lambda: _tilejit_knobs.cache_dir)
    dump_dir = _Env("TILEJIT_DUMP_DIR", lambda: _tilejit_knobs.dump_dir)
    override_dir = None
    manager_class = None
    remote_manager_class = None


class compilation_knobs(_Namespace):
    always_compile = _Env("TILEJIT_ALWAYS_COMPILE", lambda: _tilejit_knobs.always_compile)
    override = False
    dump_ir = False
    store_binary_only = False
    disable_line_info = False
    front_end_debugging = False
    allow_non_constexpr_globals = False
    enable_experimental_consan = False
    listener = None


class runtime_knobs(_Namespace):
    interpret = _Env("TILEJIT_INTERPRET", lambda: _tilejit_knobs.interpret)
    debug = _Env("TILEJIT_DEBUG", lambda: _tilejit_knobs.debug)
    override_arch = None
    launch_enter_hook = None
    launch_exit_hook = None
    jit_cache_hook = None
    jit_post_compile_hook = None
    add_stages_inspection_hook = None


class language_knobs(_Namespace):
    fp32_default = _Env("TILEJIT_F32_DEFAULT", lambda: _tilejit_knobs.fp32_default)
    default_fp_fusion = True


class autotuning_knobs(_Namespace):
    cache = False
    print = _Env("TILEJIT_PRINT_AUTOTUNING", lambda: _tilejit_knobs.print_autotuning)


class build_knobs(_Namespace):
    cc = None
    cudacrt_path = None
    libcuda_path = None


def _ptxas_version() -> str | None:
    """The version of the ptxas tilejit would use, as Triton's "13.0"; None without one."""
    try:
        from tilejit_nvidia.toolchain import find_ptxas_or_none, ptxas_version
    except ImportError:
        return None
    path = find_ptxas_or_none()
    return ".".join(map(str, ptxas_version(path))) if path else None


class _ptxas_tool:
    """`knobs.nvidia.ptxas`: Triton's NvidiaTool (a path and a version)."""

    @property
    def path(self):
        from tilejit_nvidia.toolchain import find_ptxas_or_none
        return find_ptxas_or_none()

    @property
    def version(self):
        return _ptxas_version()


class nvidia_knobs(_Namespace):
    ptxas_path = _Env("TILEJIT_PTXAS", lambda: _tilejit_knobs.ptxas)
    ptxas = _ptxas_tool()
    dump_nvptx = False
    disable_ptxas_opt = False
    mock_ptx_version = None
    libdevice_path = None
    libcuda_path = None


class amd_knobs(_Namespace):
    lld_path = _Env("TILEJIT_LLD", lambda: _tilejit_knobs.lld)
    use_buffer_ops = True
    use_buffer_atomics = True
    dump_amdgcn = False
    use_block_pingpong = None
    use_in_thread_transpose = None
    libhip_path = None


cache = cache_knobs()
compilation = compilation_knobs()
runtime = runtime_knobs()
language = language_knobs()
autotuning = autotuning_knobs()
build = build_knobs()
nvidia = nvidia_knobs()
amd = amd_knobs()


def __getattr__(name):
    # tilejit's own knobs stay readable through `triton.knobs` (e.g. `knobs.cache_dir`).
    return getattr(_tilejit_knobs, name)
