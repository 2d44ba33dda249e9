"""The cached launch of a `@jit` kernel in one generated function (the hot path of `kernel[grid](...)`).

`JITFunction._run` is the general launch: it binds the arguments with one generated function, then
reads the selection knobs, the scoped target, the grid and the hooks through helper calls. Each
Python call costs 0.05-0.2 us, and a cached launch made about ten of them. Here the same steps for a
launch with no launch options, of a kernel without `debug=`, whose launch key is already cached, are
generated once per kernel as straight-line code (`kernel[grid]` binds `grid` with a C-level partial):

    def add_kernel(_tj_grid, x_ptr=<not passed>, n=<not passed>, BLOCK=<not passed>, /, *extra, **kw):
        <bind keywords and defaults; launch options, `debug=` or a bad call: return the general path>
        entry = <launch cache>.get((<key of x_ptr>, <key of n>, BLOCK, (), <knobs>..., <scoped target>))
        if entry is None: return <the general path>     (it compiles and fills the cache)
        <grid as three ints>; <runtime arguments>; <launcher, or CompiledKernel.run when hooks are set>

The key entries come from the expressions of `_launch_binder`, and the key has the shape `_run`
builds, so both paths share one cache. The general path gets the arguments exactly as passed, so it
reports a bad call (binding errors naming the kernel, unknown options, unhashable constexprs, meta
tensors) as it always did.
"""
from __future__ import annotations

import os

from tilejit import compiler
from tilejit.runtime.launch_abi import normalize_grid


class _Missing:
    """The default of every parameter of a launch function: this argument was not passed."""

    def __repr__(self):
        return "<not passed>"


_MISSING = _Missing()


def _binding_source(params) -> tuple[str, list]:
    """(statements, signature pieces) that bind a call's arguments to the kernel's parameters as
    Python binds `def kernel(p0, p1, p2=default, **options)`, without ever raising.

    Every parameter is positional-only with a private sentinel as its default, then `*_tj_extra,
    **_tj_kw`: any call binds, so no binding error can escape before the function runs (which a
    wrapper frame would have to catch to name the kernel). Keywords are bound here; a call Python
    would refuse (a parameter missing or given twice, too many arguments) or one with launch options
    goes to `_run` with the arguments exactly as they were passed (the positional ones are those
    before the first parameter left at the sentinel), and `_run` raises or handles it as always."""
    names = [p.name for p in params]
    values = "(" + "".join(n + ", " for n in names) + ")"
    pieces = [f"{n}=_tj_M" for n in names]
    required = [p.name for p in params if not p.has_default]
    general = f"_tj_self._run({values}[:_tj_npos] + _tj_extra, _tj_kw, _tj_grid, False, None)"
    # The common launch passes every parameter without a default positionally and nothing else.
    test = ["_tj_kw", "_tj_extra"] + ([f"{required[-1]} is _tj_M"] if required else [])
    lines = [f"    if {' or '.join(test)} or _tj_self.debug is not None:"]
    count = " else ".join(f"{i + 1} if {n} is not _tj_M" for i, n in reversed(list(enumerate(names))))
    lines.append(f"        _tj_npos = {count + ' else 0' if names else '0'}")
    lines.append("        _tj_left = _tj_len(_tj_kw)")
    for i, n in enumerate(names):
        lines += [f"        if {n!r} in _tj_kw:",
                  f"            if _tj_npos > {i}:",
                  f"                return {general}  # given twice",
                  f"            {n} = _tj_kw[{n!r}]",
                  "            _tj_left -= 1"]
    missing = "".join(f" or {n} is _tj_M" for n in required)
    lines += [f"        if _tj_left or _tj_extra{missing} or _tj_self.debug is not None:",
              f"            return {general}"]
    for p in params:
        if p.has_default:
            lines += [f"    if {p.name} is _tj_M:", f"        {p.name} = _tj_defaults[{p.name!r}]"]
    return "\n".join(lines), pieces


def make_fast_launch(jit_function, keys: list, namespace: dict, grid3, selection_env, scope_get):
    """The launch function of `jit_function` (see the module docstring). `keys` and `namespace` come
    from `jit._binder_parts(params, launch_key=True)`; `grid3` is the JIT's grid fast check (a 3-tuple
    or None), `selection_env` the knob reader the general path keys with and `scope_get` the scoped
    target's `ContextVar.get`."""
    name = jit_function.__name__
    params = jit_function.params
    values = "(" + "".join(p.name + ", " for p in params) + ")"
    meta = "{" + ", ".join(f"{p.name!r}: {p.name}" for p in params) + "}"
    # The selection knobs inline (three dict reads) while os.environ is the object the reader saw;
    # otherwise the reader itself, which then reads os.environ the ordinary way.
    inline = getattr(selection_env, "inline_parts", None)
    if inline is not None:
        environ, data, env_keys = inline
        namespace.update(_tj_os=os, _tj_environ=environ, _tj_env_get=data.get)
        reads = " ".join(f"_tj_env_get({k!r})," for k in env_keys)
        # A flat key (see `JITFunction._run`): the knobs' values are elements of the key itself.
        key = (f"(({''.join(k + ', ' for k in keys)}(), {reads} _tj_scope()) if _tj_os.environ is _tj_environ "
               f"else ({''.join(k + ', ' for k in keys)}(), *_tj_env(), _tj_scope()))")
    else:
        key = f"({''.join(k + ', ' for k in keys)}(), *_tj_env(), _tj_scope())"
    binding, pieces = _binding_source(params)
    general = f"_tj_self._run({values}, {{}}, _tj_grid, False, None)"
    source = f"""\
def {name}({', '.join(['_tj_grid'] + pieces + ['/', '*_tj_extra', '**_tj_kw'])}):
{binding}
    try:
        _tj_entry = _tj_cache_get({key})
    except TypeError:  # an unhashable constexpr: the general path reports it
        _tj_entry = None
    if _tj_entry is None:
        return {general}
    _tj_kernel, _tj_picker = _tj_entry
    if _tj_type(_tj_grid) is _tj_tuple and _tj_len(_tj_grid) == 1 and _tj_type(_tj_grid[0]) is _tj_int \\
            and 0 <= _tj_grid[0] <= 2147483647:
        _tj_g3 = (_tj_grid[0], 1, 1)
    else:
        if _tj_callable(_tj_grid):
            _tj_grid = _tj_grid({meta})
        _tj_g3 = _tj_grid3(_tj_grid) or _tj_normalize_grid(_tj_grid, _tj_self.__name__)
    _tj_launcher = _tj_kernel._launcher
    if _tj_launcher is not None and _tj_hooks and _tj_hooks[0] is _tj_no_hooks \\
            and _tj_compiled.launch_enter_hook is None and _tj_compiled.launch_exit_hook is None:
        _tj_launcher(_tj_g3, {values} if _tj_picker is None else _tj_picker({values}), None)
    else:
        _tj_kernel.run(_tj_g3, {values} if _tj_picker is None else _tj_picker({values}), None)
    return _tj_kernel
"""
    # Builtins under private names: a kernel parameter may be called `type`, `len` or `callable`.
    namespace.update(_tj_type=type, _tj_tuple=tuple, _tj_int=int, _tj_len=len, _tj_callable=callable)
    namespace.update(_tj_self=jit_function, _tj_M=_MISSING, _tj_cache_get=jit_function._launch_cache.get,
                     _tj_env=selection_env, _tj_scope=scope_get, _tj_grid3=grid3,
                     _tj_normalize_grid=normalize_grid, _tj_hooks=compiler._launch_hooks_state,
                     _tj_no_hooks=compiler._NO_HOOKS, _tj_compiled=compiler.CompiledKernel)
    exec(compile(source, f"<tilejit launch of {name}>", "exec"), namespace)  # noqa: S102
    return namespace[name]
