"""`@tilejit.jit`: the JITFunction, its specialization and its launch path (Triton 3.x semantics).

`kernel[grid](*args, **kwargs)` binds the arguments with a binder generated once from the kernel's
signature, computes a specialization key with one tight loop over the arguments, looks the key up in
the per-target cache and, on a miss, compiles through `tilejit.compiler.compile`. The cached path does
no `inspect` work, no hashing of sources and no imports.

Attributes that the frontend reads (keep them stable): `fn`, `src` (the dedented source starting at
`def`), `arg_names`, `params` (`KernelParam`), `__name__`, `__globals__`, `starting_line_number`
(file line of the `def`, i.e. line 1 of `src`), `noinline`, `cache_key`.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import os
import re
import textwrap
import threading
import weakref

from tilejit import compiler
from tilejit.errors import CompilationError
from tilejit.runtime.args import _read_numpy, dtype_of, int_type_string, is_tensor_like, tensor_reader
from tilejit.config import knobs as _knobs_object

_explicit_target_cache: list = []


def _explicit_target_var():
    """The context variable behind `with tilejit.target(...)`, imported once (the launch path is hot)."""
    if not _explicit_target_cache:
        from tilejit.backends import selection
        _explicit_target_cache.append(selection._explicit_target)
    return _explicit_target_cache[0]

__all__ = ["jit", "JITFunction", "KernelInterface", "KernelParam", "LAUNCH_OPTIONS", "MockArg"]

# Keyword arguments of a launch that are options, not kernel parameters. `stream` and `warmup` steer
# the launch itself; the others go to the backend's `parse_options` with any backend option key.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "warmup", "debug")
_LAUNCH_ONLY = frozenset({"stream", "warmup", "target"})
_DIVISIBILITY = 16
_EQUAL_TO_ONE = ("constexpr", 1)
_NONE_CONSTANT = ("constexpr", None)
_FP32 = ("fp32", False)


def _is_constexpr_annotation(annotation) -> bool:
    """`tl.constexpr` as a string ("tl.constexpr", "constexpr") or as the class, checked by name so
    that this module does not import the language."""
    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):
        return annotation.strip().split(".")[-1] == "constexpr"
    return getattr(annotation, "__name__", None) == "constexpr" or type(annotation).__name__ == "constexpr"


class KernelParam:
    """One parameter of a kernel: `name`, `num` (position), `is_constexpr`, `annotation` (as written:
    a string or an object), `default`/`has_default`, and whether it may be specialized."""

    __slots__ = ("name", "num", "is_constexpr", "annotation", "default", "has_default",
                 "do_not_specialize", "do_not_specialize_on_alignment")

    def __init__(self, param: inspect.Parameter, num: int, do_not_specialize: bool,
                 do_not_specialize_on_alignment: bool):
        self.name = param.name
        self.num = num
        self.annotation = param.annotation
        self.is_constexpr = _is_constexpr_annotation(param.annotation)
        self.has_default = param.default is not inspect.Parameter.empty
        self.default = param.default if self.has_default else None
        self.do_not_specialize = do_not_specialize
        self.do_not_specialize_on_alignment = do_not_specialize_on_alignment

    def __repr__(self):
        return f"KernelParam({self.name!r}, constexpr={self.is_constexpr})"


class MockArg:
    """Stands for an argument by its type only (`"*fp32"`, `"i32"`): `warmup` accepts type strings so a
    kernel can be compiled with no data at hand. A mock pointer counts as 16-byte aligned."""

    __slots__ = ("type_string",)

    def __init__(self, type_string: str):
        self.type_string = type_string


class KernelInterface:
    """`kernel[grid](*args, **kwargs)` for anything with `run(*args, grid=..., warmup=..., **kwargs)`."""

    def __getitem__(self, grid):
        def launcher(*args, **kwargs):
            return self.run(*args, grid=grid, warmup=False, **kwargs)

        return launcher


_numpy_memo: dict = {}
_NUMPY_MEMO_SIZE = 256


def _numpy_facts(array, name):
    """`_read_numpy(array)` memoised per live array: reading `__array_interface__` builds a dict
    (~2-3 us, the largest cost of a cached launch). The entry is used only while it refers to this
    very object (a weak reference) with the same shape and dtype; a NumPy array's data pointer does
    not move while its size stays the same (`resize` to another size changes the shape)."""
    entry = _numpy_memo.get(id(array))
    if entry is not None and entry[0]() is array and entry[1] == array.shape and entry[2] == array.dtype:
        return entry[3]
    facts = _read_numpy(array, name)
    try:
        ref = weakref.ref(array)
    except TypeError:  # pragma: no cover - ndarrays support weak references
        return facts
    if len(_numpy_memo) >= _NUMPY_MEMO_SIZE:
        _numpy_memo.clear()
    _numpy_memo[id(array)] = (ref, array.shape, array.dtype, facts)
    return facts


def _grid3(grid):
    """The common grids as a 3-tuple without a call into `normalize_grid`: a tuple of 1 to 3 plain
    non-negative ints. None for anything else (which `normalize_grid` checks and reports)."""
    if type(grid) is tuple:
        n = len(grid)
        if n == 3:
            x, y, z = grid
            if type(x) is int and type(y) is int and type(z) is int and x >= 0 and y >= 0 and z >= 0:
                return grid
        elif n == 1:
            x = grid[0]
            if type(x) is int and x >= 0:
                return (x, 1, 1)
        elif n == 2:
            x, y = grid
            if type(x) is int and type(y) is int and x >= 0 and y >= 0:
                return (x, y, 1)
    return None


_selection_env = _knobs_object.selection_env


def _make_binder(kernel_name: str, params: list):
    """Generate `def <kernel>(a, b, c=<default>, **options): return (a, b, c), options` once, so that
    Python itself checks the call (and names missing or duplicated parameters) at C speed."""
    defaults = {p.name: p.default for p in params if p.has_default}
    pieces = [f"{p.name}=_defaults[{p.name!r}]" if p.has_default else p.name for p in params]
    names = "".join(f"{p.name}, " for p in params)
    options_name = "_tilejit_options"
    source = (f"def {kernel_name}({', '.join(pieces + ['**' + options_name])}):\n"
              f"    return ({names}), {options_name}\n")
    namespace = {"_defaults": defaults}
    exec(compile(source, f"<tilejit binder of {kernel_name}>", "exec"), namespace)  # noqa: S102
    return namespace[kernel_name]


class _DependencyFinder(ast.NodeVisitor):
    """Collects what a kernel's source refers to that can change its code: the `@jit` functions it calls
    (recursively) and global `constexpr` values."""

    def __init__(self, fn):
        self.globals = fn.__globals__
        self.nonlocals = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.nonlocals[name] = cell.cell_contents
                except ValueError:  # an empty cell (not yet assigned)
                    pass
        self.found: list = []

    def _lookup(self, name):
        if name in self.nonlocals:
            return self.nonlocals[name]
        return self.globals.get(name)

    def _note(self, label: str, value):
        if isinstance(value, JITFunction):
            self.found.append(value)
        elif type(value).__name__ == "constexpr":
            self.found.append(f"{label}={getattr(value, 'value', value)!r}")

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            self._note(node.id, self._lookup(node.id))

    def visit_Attribute(self, node):
        chain = []
        base = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name):
            value = self._lookup(base.id)
            label = base.id
            for attr in reversed(chain):
                if value is None:
                    break
                value = getattr(value, attr, None)
                label += "." + attr
                self._note(label, value)
        self.generic_visit(node)


def _make_ast_source(fn, signature, constexprs, attrs):
    """The frontend's source object for one specialization of `fn`."""
    source_module = importlib.import_module("tilejit.frontend.source")
    return source_module.ASTSource(fn, signature, constexprs=constexprs, attrs=attrs)


class JITFunction(KernelInterface):
    """A `@tilejit.jit` kernel. See the module docstring for the attributes the frontend relies on."""

    def __init__(self, fn, do_not_specialize=(), do_not_specialize_on_alignment=(), debug=None,
                 noinline=False, repr=None, launch_metadata=None):
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise TypeError(f"@tilejit.jit expects a Python function, got {type(fn).__name__}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__globals__ = fn.__globals__
        self.module = fn.__module__
        self.debug = debug
        self.noinline = noinline
        self.repr = repr
        self.launch_metadata = launch_metadata
        self.src, self.starting_line_number = self._read_source(fn)

        signature = inspect.signature(fn)
        for p in signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY):
                raise TypeError(f"kernel '{self.__name__}': parameter '{p.name}' must be a plain "
                                "positional-or-keyword parameter (no *args, **kwargs, '/' or '*')")
        self.arg_names = list(signature.parameters)
        no_spec = self._param_indices(do_not_specialize, "do_not_specialize")
        no_align = self._param_indices(do_not_specialize_on_alignment, "do_not_specialize_on_alignment")
        self.do_not_specialize = tuple(sorted(no_spec))
        self.do_not_specialize_on_alignment = tuple(sorted(no_align))
        self.params = [KernelParam(p, i, i in no_spec, i in no_align or i in no_spec)
                       for i, p in enumerate(signature.parameters.values())]
        self.constexpr_indices = tuple(p.num for p in self.params if p.is_constexpr)
        self._binder = _make_binder(self.__name__, self.params)
        # Per-launch work precomputed as flat tuples: (is_constexpr, specialize, specialize_alignment).
        self._param_plan = tuple((p.is_constexpr, not p.do_not_specialize,
                                  not p.do_not_specialize_on_alignment) for p in self.params)
        self.cache: dict = {}  # target -> {specialization key -> (CompiledKernel, runtime indices)}
        self._cache_key = None
        self._option_names: dict = {}  # target -> frozenset of accepted option keys
        self._target_memo: dict = {}
        self._compile_lock = threading.Lock()

    # --- construction helpers -------------------------------------------------------------------

    @staticmethod
    def _read_source(fn):
        try:
            lines, first_line = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise CompilationError(f"cannot read the source of kernel '{fn.__name__}': {exc}; "
                                   "@jit kernels must be defined in a file") from exc
        src = textwrap.dedent("".join(lines))
        # Drop decorators so that `src` starts at `def` (the frontend parses exactly this text).
        match = re.search(r"^(async\s+)?def\s+\w+\s*\(", src, re.MULTILINE)
        if match is None:
            raise CompilationError(f"cannot find the 'def' of kernel '{fn.__name__}' in its source")
        skipped_lines = src[: match.start()].count("\n")
        return src[match.start():], first_line + skipped_lines

    def _param_indices(self, names_or_indices, option: str) -> set:
        indices = set()
        for item in names_or_indices or ():
            if isinstance(item, int) and not isinstance(item, bool):
                if not 0 <= item < len(self.arg_names):
                    raise ValueError(f"kernel '{self.__name__}': {option} index {item} is out of range")
                indices.add(item)
            elif item in self.arg_names:
                indices.add(self.arg_names.index(item))
            else:
                raise ValueError(f"kernel '{self.__name__}': {option} names '{item}', which is not a "
                                 f"parameter (parameters: {', '.join(self.arg_names)})")
        return indices

    # --- identity ----------------------------------------------------------------------------------

    @property
    def cache_key(self) -> str:
        """Hash of this kernel's source, of every `@jit` function it reaches, and of the global
        constexpr values it reads. Computed on first use, when the called functions exist."""
        if self._cache_key is None:
            digest = hashlib.sha256()
            seen = set()
            self._hash_into(digest, seen)
            self._cache_key = digest.hexdigest()
        return self._cache_key

    def _hash_into(self, digest, seen: set) -> None:
        if id(self) in seen:
            return
        seen.add(id(self))
        digest.update(f"{self.module}.{self.__qualname__}:{self.noinline}\n".encode())
        digest.update(self.src.encode())
        finder = _DependencyFinder(self.fn)
        finder.visit(ast.parse(self.src))
        for dependency in finder.found:
            if isinstance(dependency, JITFunction):
                dependency._hash_into(digest, seen)
            else:
                digest.update(dependency.encode())

    def clear_cache(self) -> None:
        """Forget this kernel's compiled specializations (the process and disk caches stay)."""
        with self._compile_lock:
            self.cache.clear()
            self._option_names.clear()
            self._target_memo.clear()

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"Cannot call @jit'd function '{self.__name__}' outside of the scope of a kernel")

    def __repr__(self):
        return f"JITFunction({self.module}:{self.__qualname__})"

    # --- binding -----------------------------------------------------------------------------------

    def _bind(self, args, kwargs):
        try:
            bound, options = self._binder(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"kernel '{self.__name__}': {exc} (parameters: {', '.join(self.arg_names)})") from None
        for i in self.constexpr_indices:
            if is_tensor_like(bound[i]):
                raise TypeError(f"kernel '{self.__name__}': constexpr parameter '{self.arg_names[i]}' was "
                                f"given a tensor ({type(bound[i]).__name__}); constexprs take Python values")
        return bound, options

    def _check_options(self, options: dict, target, backend) -> None:
        allowed = self._option_names.get(target)
        if allowed is None:
            defaults = backend.parse_options({})
            fields = getattr(defaults, "__dataclass_fields__", None)
            names = set(fields) if fields is not None else set(vars(defaults))
            allowed = frozenset(names | set(LAUNCH_OPTIONS) | _LAUNCH_ONLY)
            self._option_names[target] = allowed
        unknown = [k for k in options if k not in allowed]
        if unknown:
            raise TypeError(f"kernel '{self.__name__}' got unexpected keyword argument(s) "
                            f"{', '.join(repr(k) for k in unknown)} (parameters: {', '.join(self.arg_names)}; "
                            f"launch options: {', '.join(sorted(allowed))})")

    # --- specialization ----------------------------------------------------------------------------

    def _specialize(self, bound) -> tuple:
        """(key, devices). The key has one entry per parameter: the constexpr's value, or (type string,
        specialization) where the specialization is True (divisible by 16), False, or the constant
        1 / None. `devices` holds (type, device) of each tensor argument, to memoise the target."""
        key = []
        devices = []
        names = self.arg_names
        for i, (is_constexpr, specialize, align) in enumerate(self._param_plan):
            value = bound[i]
            if is_constexpr:
                key.append(value)
                continue
            kind = type(value)
            if kind is int:
                if specialize and value == 1:
                    key.append(_EQUAL_TO_ONE)
                elif -0x80000000 <= value <= 0x7FFFFFFF:
                    key.append(("i32", specialize and value % _DIVISIBILITY == 0))
                else:
                    key.append((int_type_string(value, names[i]), specialize and value % _DIVISIBILITY == 0))
                continue
            if kind is float:
                key.append(_FP32)
                continue
            reader = tensor_reader(value)
            if reader is not None:
                if reader is _read_numpy:
                    type_string, address = _numpy_facts(value, names[i])
                else:
                    type_string, address = reader(value, names[i])
                key.append((type_string, align and address % _DIVISIBILITY == 0))
                devices.append((kind, getattr(value, "device", None)))
            else:
                key.append(self._scalar_key(value, names[i], specialize))
        return tuple(key), tuple(devices)

    @staticmethod
    def _scalar_key(value, name, specialize):
        if value is None:
            return _NONE_CONSTANT
        if type(value) is MockArg:
            return (value.type_string, value.type_string.startswith("*"))
        type_string = dtype_of(value, name)  # raises, naming the parameter, for unsupported values
        if type_string in ("i32", "i64", "u64"):
            number = int(value)  # int subclasses and NumPy integers follow the int rules
            if specialize and number == 1:
                return _EQUAL_TO_ONE
            return (type_string, specialize and number % _DIVISIBILITY == 0)
        return (type_string, False)

    def _source_for(self, bound, spec_key):
        signature, constexprs, attrs, runtime = {}, {}, {}, []
        for i, (param, entry) in enumerate(zip(self.params, spec_key)):
            if param.is_constexpr:
                signature[param.name] = "constexpr"
                constexprs[param.name] = bound[i]
            elif entry[0] == "constexpr":
                signature[param.name] = "constexpr"
                constexprs[param.name] = entry[1]
            else:
                signature[param.name] = entry[0]
                if entry[1]:
                    attrs[(i,)] = [["tt.divisibility", _DIVISIBILITY]]
                runtime.append(i)
        return _make_ast_source(self, signature, constexprs, attrs), tuple(runtime)

    # --- targets -----------------------------------------------------------------------------------

    def _target_for(self, bound, devices, explicit=None):
        if explicit is not None:
            return compiler._backends().select_target(bound, explicit=explicit, names=self.arg_names)
        scoped = _explicit_target_var().get()
        if scoped is not None:
            return scoped
        # `select_target` asks each backend's driver whether it owns each tensor. The answer depends
        # only on the environment and on the tensors' types and devices: memoise on those.
        memo_key = (_selection_env(), devices)
        try:
            return self._target_memo[memo_key]
        except KeyError:
            target = self._target_memo[memo_key] = compiler._backends().select_target(bound, names=self.arg_names)
            return target
        except TypeError:  # an unhashable device object: no memo for this call
            return compiler._backends().select_target(bound, names=self.arg_names)

    # --- launch ------------------------------------------------------------------------------------

    def run(self, *args, grid, warmup=False, **kwargs):
        """Bind, specialize, compile on a cache miss, then launch (or, with `warmup=True`, return the
        CompiledKernel without launching). Returns the CompiledKernel."""
        return self._run(args, kwargs, grid, warmup, None)

    def __getitem__(self, grid):
        # One call layer less than KernelInterface's (`run` only forwards to `_run`): the launch path.
        run = self._run

        def launcher(*args, **kwargs):
            return run(args, kwargs, grid, False, None)

        return launcher

    def _run(self, args, kwargs, grid, warmup, explicit_target):
        bound, options = self._bind(args, kwargs)
        stream = None
        if options:
            stream = options.pop("stream", None)
            if "warmup" in options:
                warmup = options.pop("warmup")
        if self.debug is not None and "debug" not in options:
            options["debug"] = self.debug
        spec_key, devices = self._specialize(bound)
        target = self._target_for(bound, devices, explicit_target)
        try:
            key = (spec_key, tuple(sorted(options.items())) if options else (), target)
            per_target = self.cache.get(target)
            if per_target is None:
                per_target = self.cache.setdefault(target, {})
            entry = per_target.get(key)
        except TypeError as exc:  # an unhashable constexpr value
            raise TypeError(f"kernel '{self.__name__}': constexpr arguments must be hashable: {exc}") from None
        if entry is None:
            entry = self._compile(bound, spec_key, options, target, key)
        kernel, runtime_indices = entry
        if warmup:
            return kernel

        if callable(grid):
            meta = dict(zip(self.arg_names, bound))
            meta.update(options)
            grid = grid(meta)
        grid3 = _grid3(grid)
        if grid3 is None:
            grid3 = compiler.normalize_grid(grid, self.__name__)
        # The runtime indices are an increasing subset of the parameters: same length, same tuple.
        kernel.run(grid3, bound if len(runtime_indices) == len(bound) else tuple([bound[i] for i in runtime_indices]),
                   stream)
        return kernel

    def _compile(self, bound, spec_key, options, target, key):
        with self._compile_lock:
            per_target = self.cache.setdefault(target, {})
            entry = per_target.get(key)
            if entry is not None:
                return entry
            backend = compiler._backends().backend_for_target(target)
            self._check_options(options, target, backend)
            compile_options = {k: v for k, v in options.items() if v is not None}
            src, runtime_indices = self._source_for(bound, spec_key)
            kernel = compiler.compile(src, target=target, options=compile_options)
            entry = (kernel, runtime_indices)
            per_target[key] = entry
            return entry

    def warmup(self, *args, grid=None, target=None, **kwargs):
        """Compile for these arguments without launching; returns the CompiledKernel. Arguments may be
        type strings ("*fp32", "i32", ...) instead of data. The target comes from `target=`, a
        `with tilejit.target(...)` block, the environment, or the arguments."""
        def as_mock(index, value):
            if isinstance(value, str) and index is not None and not self.params[index].is_constexpr:
                return MockArg(value)
            return value

        args = tuple(as_mock(i if i < len(self.params) else None, a) for i, a in enumerate(args))
        kwargs = {k: as_mock(self.arg_names.index(k) if k in self.arg_names else None, v)
                  for k, v in kwargs.items()}
        return self._run(args, kwargs, grid, True, target)


def jit(fn=None, *, do_not_specialize=(), do_not_specialize_on_alignment=(), debug=None, noinline=False,
        repr=None, launch_metadata=None):
    """Decorate a kernel: `@jit` or `@jit(do_not_specialize=["n"], ...)` -> JITFunction."""

    def decorator(function):
        return JITFunction(function, do_not_specialize=do_not_specialize,
                           do_not_specialize_on_alignment=do_not_specialize_on_alignment, debug=debug,
                           noinline=noinline, repr=repr, launch_metadata=launch_metadata)

    if fn is not None:
        return decorator(fn)
    return decorator
