"""`@tilejit.jit`: the JITFunction, its specialization and its launch path (Triton 3.x semantics).

`kernel[grid](*args, **kwargs)` binds the arguments and computes the specialization key in one call
of a function generated once from the kernel's signature, looks (key, options, selection knobs, scoped
target) up in one dict and, on a miss, chooses the target and compiles through
`tilejit.compiler.compile`. The cached path does no `inspect` work, no target selection, no hashing of
sources and no imports. Tuple parameters (Triton 3.x) are specialized element by element and reach the
launcher flattened depth-first, constexpr elements dropped.

Attributes that the frontend reads (keep them stable): `fn`, `src` (the dedented source starting at
`def`; replaceable at run time, see `_unsafe_update_src`), `src_file` (the name, known to `linecache`,
of the file whose lines `src` is: the kernel's file, or a registered text), `arg_names`, `params`
(`KernelParam`), `__name__`, `__globals__`, `starting_line_number` (line of the `def` in `src_file`,
i.e. line 1 of `src`), `noinline`, `cache_key`.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import operator
import threading
import types
import weakref
from functools import partial as _partial

from tilejit import compiler
from tilejit._constexpr import ConstexprFunction, constexpr_function  # noqa: F401 - Triton's home of it
from tilejit.errors import ArgumentValueError, CompilationError
from tilejit.runtime import kernel_source
from tilejit.runtime.args import (_is_numpy_scalar, _read_data_ptr, _read_numpy, annotation_kind, annotation_type_string,
                                  check_annotated_scalar, dtype_of, int_type_string, is_tensor_like, tensor_reader)
from tilejit.runtime.launch_abi import normalize_grid
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
_I32_DIVISIBLE = ("i32", True)
_I32 = ("i32", False)
# The key entry of a tuple argument is (_TUPLE, (entry of each element), named-tuple class or None);
# no type string is "tuple". The class is part of the key: a named and a plain tuple of the same
# types compile differently (the kernel may read `t.x`).
_TUPLE = "tuple"
# A host-side tensor descriptor (`tilejit.tools.tensor_descriptor.TensorDescriptor`) is keyed as
# (_DESC, key entry of its base, block shape, padding); at run time it is passed as its leaves
# (base, shape..., strides...), and the kernel rebuilds the descriptor from them (frontend).
_DESC = "tensordesc"


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

    __slots__ = ("name", "num", "is_constexpr", "annotation", "annotation_type", "default", "has_default",
                 "do_not_specialize", "do_not_specialize_on_alignment")

    def __init__(self, param: inspect.Parameter, num: int, do_not_specialize: bool,
                 do_not_specialize_on_alignment: bool):
        self.name = param.name
        self.num = num
        self.annotation = param.annotation
        self.is_constexpr = _is_constexpr_annotation(param.annotation)
        # The signature type a scalar annotation gives (`val: tl.float16` -> "fp16"), else None.
        self.annotation_type = None if self.is_constexpr else annotation_type_string(param.annotation)
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


def _numpy_key(array, name, align):
    """The key entry of a NumPy array, memoised per live array: reading `__array_interface__` builds a
    dict (~2-3 us, once the largest cost of a cached launch). The entry is used only while it refers to
    this very object (a weak reference) with the same shape and dtype; a NumPy array's data pointer does
    not move while its size stays the same (`resize` to another size changes the shape)."""
    entry = _numpy_memo.get(id(array))
    if entry is not None and entry[0]() is array and entry[1] == array.shape and entry[2] == array.dtype:
        return entry[3] if align else entry[4]
    type_string, address = _read_numpy(array, name)
    aligned, unaligned = (type_string, address % _DIVISIBILITY == 0), (type_string, False)
    try:
        ref = weakref.ref(array)
    except TypeError:  # pragma: no cover - ndarrays support weak references
        return aligned if align else unaligned
    if len(_numpy_memo) >= _NUMPY_MEMO_SIZE:
        _numpy_memo.clear()
    _numpy_memo[id(array)] = (ref, array.shape, array.dtype, aligned, unaligned)
    return aligned if align else unaligned


def _scalar_key(value, name, specialize):
    """Key entry of an argument that is neither a plain int/float, a tensor nor a tuple."""
    if value is None:
        return _NONE_CONSTANT
    if type(value) is MockArg:
        return (value.type_string, value.type_string.startswith("*"))
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return ("constexpr", value.value)  # a `tl.constexpr` passed as an argument, as in Triton
    if isinstance(value, JITFunction):
        return ("constexpr", value)  # a @jit function (e.g. in a tuple) is a compile-time value, as in Triton
    type_string = dtype_of(value, name)  # raises, naming the parameter, for unsupported values
    if type_string in ("i32", "i64", "u64"):
        number = int(value)  # int subclasses and NumPy integers follow the int rules
        if specialize and number == 1:
            return _EQUAL_TO_ONE
        return (type_string, specialize and number % _DIVISIBILITY == 0)
    return (type_string, False)


class _NotYetSeen:
    """Stands for `numpy.ndarray` (or `torch.Tensor`) until the first one is keyed: this module
    imports neither library."""


_ndarray_type = _NotYetSeen


class _LaunchTypes:
    """Types the generated launch binders test inline. `tensor` becomes `torch.Tensor` once the first
    torch tensor is keyed; the binders read it on every launch (one attribute load)."""
    tensor = _NotYetSeen


def _arg_key(value, name, specialize, align):
    """The specialization of one runtime argument: (type string, divisible by 16) for scalars and
    NumPy arrays, (type string, aligned, device) for other tensors (the device steers the target),
    ("constexpr", value) for 1, None and `tl.constexpr` values, and (_TUPLE, (entries...)) for a tuple,
    whose elements are specialized like top-level arguments (Triton 3.x)."""
    global _ndarray_type
    kind = type(value)
    if kind is _ndarray_type:  # the memo check of `_numpy_key` inlined: the common case of a launch
        entry = _numpy_memo.get(id(value))
        if entry is not None and entry[0]() is value and entry[1] == value.shape and entry[2] == value.dtype:
            return entry[3] if align else entry[4]
        return _numpy_key(value, name, align)
    kind = type(value)
    if kind is int:
        if specialize and value == 1:
            return _EQUAL_TO_ONE
        if -0x80000000 <= value <= 0x7FFFFFFF:
            return ("i32", specialize and value % _DIVISIBILITY == 0)
        return (int_type_string(value, name), specialize and value % _DIVISIBILITY == 0)
    if kind is float:
        return _FP32
    if getattr(kind, "__tilejit_tensor_descriptor__", False):
        return (_DESC, _arg_key(value.base, f"{name}.base", specialize, align), tuple(value.block_shape),
                value.padding)
    if isinstance(value, tuple):  # tuples and named tuples
        return (_TUPLE, tuple([_arg_key(element, f"{name}[{i}]", specialize, align)
                               for i, element in enumerate(value)]),
                kind if hasattr(value, "_fields") else None)
    reader = tensor_reader(value)
    if reader is None:
        return _scalar_key(value, name, specialize)
    if reader is _read_numpy:
        _ndarray_type = kind
        return _numpy_key(value, name, align)
    if reader is _read_data_ptr and kind.__name__ == "Tensor" and kind.__module__ == "torch":
        _LaunchTypes.tensor = kind
    type_string, address = reader(value, name)
    return (type_string, align and address % _DIVISIBILITY == 0, getattr(value, "device", None))


def _annotated_key(value, name, type_string, specialize, align):
    """Key entry of a number passed for a parameter annotated with a scalar type: that type (Triton
    3.9's `annotation_type`), divisibility specialized for integers only (floats and bools never are,
    and no annotated parameter becomes the constant 1). Anything else (a float for an integer type, a
    tensor, a mock argument) is keyed as usual: the launch that first sees it reports it."""
    kind = type(value)
    is_int = kind is int or kind is bool or _is_numpy_scalar(value) and value.dtype.kind in "iub"
    is_float = kind is float or _is_numpy_scalar(value) and value.dtype.kind == "f"
    if type_string[0] in "iu" and type_string != "i1":
        if is_int:
            return (type_string, specialize and int(value) % _DIVISIBILITY == 0)
    elif is_int or is_float:
        return (type_string, False)
    return _arg_key(value, name, specialize, align)


def _is_meta_tensor(value) -> bool:
    device = getattr(value, "device", None)
    return getattr(device, "type", None) == "meta"


def _grid3(grid):
    """The common grids as a 3-tuple without a call into `normalize_grid`: a tuple of 1 to 3 plain ints
    in [0, 2**31 - 1]. None for anything else (which `normalize_grid` checks and reports)."""
    if type(grid) is tuple:
        n = len(grid)
        if n == 1:
            x = grid[0]
            if type(x) is int and 0 <= x <= 0x7FFFFFFF:
                return (x, 1, 1)
        elif n == 3:
            x, y, z = grid
            if type(x) is int and type(y) is int and type(z) is int and 0 <= x <= 0x7FFFFFFF \
                    and 0 <= y <= 0x7FFFFFFF and 0 <= z <= 0x7FFFFFFF:
                return grid
        elif n == 2:
            x, y = grid
            if type(x) is int and type(y) is int and 0 <= x <= 0x7FFFFFFF and 0 <= y <= 0x7FFFFFFF:
                return (x, y, 1)
    return None


_selection_env = _knobs_object.selection_env
_hooks_state = compiler._launch_hooks_state
_NO_HOOKS = compiler._NO_HOOKS
_CompiledKernel = compiler.CompiledKernel


def _binder_parts(params: list, launch_key: bool = False):
    """(parameter list, key expressions, namespace) of a generated binder: the parameters as the kernel
    declares them (defaults read from the namespace) and one expression per parameter computing its
    key entry. Shared by `_make_specializer` and the launch functions of `tilejit.runtime.fast_launch`.

    The common int (an i32 other than 1) is keyed inline; everything else goes through `_arg_key`.
    With `launch_key`, a torch tensor is keyed inline too (see `_make_specializer`)."""
    defaults = {p.name: p.default for p in params if p.has_default}
    pieces = [f"{p.name}=_tj_defaults[{p.name!r}]" if p.has_default else p.name for p in params]
    keys = []
    for p in params:
        n = p.name
        if p.is_constexpr:
            keys.append(n)
        elif p.annotation_type is not None:
            keys.append(f"_tj_annotated({n}, {n!r}, {p.annotation_type!r}, {not p.do_not_specialize}, "
                        f"{not p.do_not_specialize_on_alignment})")
        elif p.do_not_specialize:
            keys.append(f"_tj_key({n}, {n!r}, False, False)")
        else:
            align = not p.do_not_specialize_on_alignment
            full = f"_tj_key({n}, {n!r}, True, {align})"
            kind = f"_tj_type({n})"
            if launch_key:  # the type is asked once (`_tj_t`, a local of the generated function)
                aligned = f"not {n}.data_ptr() & 15" if align else "False"
                full = f"(({n}.dtype, {aligned}, {n}.device) if _tj_t is _tj_launch_types.tensor else {full})"
                kind = f"(_tj_t := _tj_type({n}))"
            keys.append(f"((_tj_i32_divisible if {n} % 16 == 0 else _tj_i32) if {kind} is int and "
                        f"{n} != 1 and -2147483648 <= {n} <= 2147483647 else {full})")
    namespace = {"_tj_defaults": defaults, "_tj_key": _arg_key, "_tj_type": type, "_tj_i32": _I32,
                 "_tj_i32_divisible": _I32_DIVISIBLE, "_tj_launch_types": _LaunchTypes,
                 "_tj_annotated": _annotated_key}
    return pieces, keys, namespace


def _make_specializer(kernel_name: str, params: list, launch_key: bool = False):
    """Generate, once per kernel, a function with the kernel's own signature that binds a launch's
    arguments and computes its specialization key in one expression per parameter:

        def kernel(x, n, BLOCK=<default>, **options):
            return (x, n, BLOCK), options, (_tj_key(x, 'x', True, True), <inline int test on n>, BLOCK)

    Python checks the call itself (naming missing or duplicated parameters) at C speed, and the key
    needs no loop and no per-parameter plan lookups.

    With `launch_key`, a torch tensor is keyed inline too, by what its full entry is a function of:
    `(dtype, 16-byte aligned, device)` with the dtype object unconverted. That key only finds the
    launch-cache entry; a miss computes the full key (the one compilation uses) with the other binder.
    A raw dtype never equals a type string, so the two forms cannot collide in the launch cache."""
    pieces, keys, namespace = _binder_parts(params, launch_key)
    options_name = "_tilejit_options"
    source = (f"def {kernel_name}({', '.join(pieces + ['**' + options_name])}):\n"
              f"    return ({''.join(p.name + ', ' for p in params)}), {options_name}, "
              f"({''.join(k + ', ' for k in keys)})\n")
    label = "launch binder" if launch_key else "binder"
    exec(compile(source, f"<tilejit {label} of {kernel_name}>", "exec"), namespace)  # noqa: S102
    return namespace[kernel_name]


def _make_runtime_picker(paths: list, count: int):
    """`bound -> runtime arguments` for one specialization: None when every parameter is a runtime
    argument as it is (the bound tuple is passed on unchanged), else a generated `lambda b: (b[0],
    b[2][1], ...)` that drops constexprs and flattens tuple elements depth-first."""
    if len(paths) == count and all(len(path) == 1 and path[0] == i for i, path in enumerate(paths)):
        return None
    if len(paths) > 1 and all(len(path) == 1 for path in paths):
        # Top-level parameters only (constexprs dropped): `itemgetter` builds the tuple in C, a
        # Python frame less per launch. (With one index it would return the element, not a tuple.)
        return operator.itemgetter(*[path[0] for path in paths])
    items = "".join("b" + "".join(f"[{i}]" for i in path) + ", " for path in paths)
    return eval(f"lambda b: ({items})")  # noqa: S307 - built from integer paths only


def _flat_runtime_args(params, bound):
    """(values, names) of every runtime leaf, tuples flattened (`t[0]`, `t[1]`): what target selection
    inspects for tensors."""
    values, names = [], []

    def walk(value, name):
        if getattr(type(value), "__tilejit_tensor_descriptor__", False):
            value = value.base  # its memory decides the target
        if isinstance(value, tuple):
            for i, element in enumerate(value):
                walk(element, f"{name}[{i}]")
        else:
            values.append(value)
            names.append(name)

    for param, value in zip(params, bound):
        if not param.is_constexpr:
            walk(value, param.name)
    return values, names


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
        elif isinstance(value, ConstexprFunction):
            self.found.append(f"{label}:constexpr_function:{value.cache_key}")
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
        self._src, self.starting_line_number, self.src_file, self.raw_src = self._read_source(fn)
        self.file_name = fn.__code__.co_filename  # as Triton's; `src_file` is where `src`'s lines are
        self._original_src, self._original_file = self._src, self.src_file

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
        # (index, kind, annotation) of the runtime parameters annotated as scalars (`n: int`): checked
        # when a launch key is first seen (a tensor has another key than a number).
        self._annotated_scalars = tuple((p.num, kind, p.annotation) for p in self.params if not p.is_constexpr
                                        for kind in [annotation_kind(p.annotation)] if kind is not None)
        self._specializer = _make_specializer(self.__name__, self.params)
        self._launch_binder = _make_specializer(self.__name__, self.params, launch_key=True)
        self.cache: dict = {}  # target -> {(key, options, target) -> (CompiledKernel, runtime picker)}
        # The launch path's one look-up: (launch key..., options, selection knobs..., scoped target)
        # -> the entry of `cache`. The target depends only on those (the key holds every tensor's type and
        # device). Launch keys key torch tensors by raw dtype (see `_make_specializer`).
        self._launch_cache: dict = {}
        # `kernel[grid](...)`'s function: `(grid, *args, **kwargs)`, generated at the first launch
        # (tilejit.runtime.fast_launch); until then the method that generates it.
        self._fast_launch = self._first_launch
        self._cache_key = None
        self._option_names: dict = {}  # target -> (the backend's option names, all accepted keys)
        self._compile_lock = threading.Lock()
        self._compiling: dict = {}  # key -> Event set when the thread compiling that key is done

    # --- construction helpers -------------------------------------------------------------------

    @staticmethod
    def _read_source(fn):
        """(src from `def`, line of the `def`, file name whose lines `src` numbers refer to, raw lines)."""
        try:
            lines, first_line, file_name = kernel_source.read_source(fn)
            src, def_line = kernel_source.strip_decorators(lines, first_line, fn.__name__)
        except kernel_source.SourceNotFound as exc:
            raise CompilationError(f"cannot read the source of kernel '{fn.__name__}': {exc}; define it in a "
                                   "file, or create it with exec() of a string that is still held by a "
                                   "variable, or register its text in linecache") from None
        return src, def_line, file_name, lines

    @property
    def src(self) -> str:
        """The text compiled for this function, starting at `def`."""
        return self._src

    @src.setter
    def src(self, new_src: str) -> None:
        # Assigning `src` is how Triton up to 3.1 replaced a kernel's text; later versions spell it
        # `_unsafe_update_src`. Both are accepted.
        self._unsafe_update_src(new_src)

    def _unsafe_update_src(self, new_src: str) -> None:
        """Compile `new_src` from now on (Triton's API). As in Triton, callers that already computed
        their cache key are not told; this function's own compiled kernels are dropped."""
        if not isinstance(new_src, str):
            raise TypeError(f"kernel '{self.__name__}': src must be a string, got {type(new_src).__name__}")
        self._src = new_src
        if new_src == self._original_src:
            self.src_file = self._original_file
        else:
            self.src_file = kernel_source.register_replaced_src(new_src, self.starting_line_number,
                                                                self._original_file,
                                                                self.__qualname__)
        self._cache_key = None
        self.clear_cache()

    @property
    def hash(self):
        """Triton's name for the cached cache key; setting it to None makes it be computed again."""
        return self._cache_key

    @hash.setter
    def hash(self, value) -> None:
        self._cache_key = value

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
        try:
            finder.visit(self._parse_src())
        except RecursionError:
            raise CompilationError("this code is nested too deeply to compile (an expression nested thousands "
                                   "of levels deep); split it into several statements", self.src_file,
                                   self.starting_line_number, kernel=self.__name__) from None
        for dependency in finder.found:
            if isinstance(dependency, JITFunction):
                dependency._hash_into(digest, seen)
            else:
                digest.update(dependency.encode())

    def _parse_src(self) -> ast.Module:
        try:
            return ast.parse(self._src)
        except SyntaxError as exc:
            line = self.starting_line_number + (exc.lineno or 1) - 1
            raise CompilationError(f"syntax error: {exc.msg}", self.src_file, line, exc.offset,
                                   kernel=self.__name__) from None

    def clear_cache(self) -> None:
        """Forget this kernel's compiled specializations (the process and disk caches stay)."""
        with self._compile_lock:
            self.cache.clear()
            self._option_names.clear()
            self._launch_cache.clear()

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"Cannot call @jit'd function '{self.__name__}' outside of the scope of a kernel")

    def __repr__(self):
        return f"JITFunction({self.module}:{self.__qualname__})"

    # --- binding -----------------------------------------------------------------------------------

    def _bind(self, args, kwargs):
        """(bound arguments, launch options, specialization key) of one launch."""
        try:
            return self._specializer(*args, **kwargs)
        except TypeError as exc:
            # A binding error is raised by the call itself, before the generated function's frame
            # runs: its traceback has no further frame. Errors from inside (an argument of an
            # unsupported type) already name the parameter and pass unchanged.
            if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:
                raise
            raise TypeError(f"kernel '{self.__name__}': {exc} (parameters: {', '.join(self.arg_names)})") from None

    def _check_constexpr_values(self, bound) -> None:
        for i in self.constexpr_indices:
            if is_tensor_like(bound[i]):
                raise TypeError(f"kernel '{self.__name__}': constexpr parameter '{self.arg_names[i]}' was "
                                f"given a tensor ({type(bound[i]).__name__}); constexprs take Python values")

    def _option_names_for(self, target, backend):
        """(the backend's option names, every key a launch may pass) for `target`, cached."""
        names = self._option_names.get(target)
        if names is None:
            defaults = backend.parse_options({})
            fields = getattr(defaults, "__dataclass_fields__", None)
            own = frozenset(fields) if fields is not None else frozenset(vars(defaults))
            names = self._option_names[target] = (own, own | set(LAUNCH_OPTIONS) | _LAUNCH_ONLY)
        return names

    def _check_options(self, options: dict, target, backend) -> None:
        allowed = self._option_names_for(target, backend)[1]
        unknown = [k for k in options if k not in allowed]
        if unknown:
            raise TypeError(f"kernel '{self.__name__}' got unexpected keyword argument(s) "
                            f"{', '.join(repr(k) for k in unknown)} (parameters: {', '.join(self.arg_names)}; "
                            f"launch options: {', '.join(sorted(allowed))})")

    def _compile_options(self, options: dict, target, backend) -> dict:
        """The options the backend compiles with: unset ones (None) left out, and Triton's generic
        launch options the backend does not have (`maxnreg` on AMD or the interpreter) ignored, as
        Triton's backends keep only their own fields, so one `triton.Config` serves every target."""
        own = self._option_names_for(target, backend)[0]
        return {k: v for k, v in options.items() if v is not None and (k in own or k not in LAUNCH_OPTIONS)}

    # --- specialization ----------------------------------------------------------------------------

    def _source_for(self, bound, spec_key):
        """(ASTSource, runtime picker) of one specialization. A tuple argument's signature entry is a
        nested tuple of type strings; its constexpr elements and aligned elements are addressed by
        paths `(param index, element index, ...)` in `constexprs` and `attrs` (Triton 3.x)."""
        signature, constexprs, attrs, runtime_paths = {}, {}, {}, []

        def entry_type(entry, value, path):
            if entry[0] == _TUPLE:
                elements = [entry_type(sub, value[j], path + (j,)) for j, sub in enumerate(entry[1])]
                # A named tuple keeps its class, so the frontend knows the field names (`t.x`).
                return entry[2](*elements) if entry[2] is not None else tuple(elements)
            if entry[0] == _DESC:
                return descriptor_type(entry, value, path)
            if entry[0] == "constexpr":
                constexprs[path if len(path) > 1 else self.arg_names[path[0]]] = entry[1]
                return "constexpr"
            if entry[1]:
                attrs[path] = [["tt.divisibility", _DIVISIBILITY]]
            runtime_paths.append(path)
            return entry[0]

        def descriptor_type(entry, value, path):
            base, block_shape, padding = entry[1], entry[2], entry[3]
            if base[1]:
                attrs[path + (0,)] = [["tt.divisibility", _DIVISIBILITY]]
            runtime_paths.extend(path + (k,) for k in range(1 + 2 * len(block_shape)))
            suffix = "" if padding == "zero" else f",padding={padding}"   # tilejit's; Triton has none
            return f"tensordesc<{base[0][1:]}[{', '.join(str(b) for b in block_shape)}]{suffix}>"

        for i, (param, entry) in enumerate(zip(self.params, spec_key)):
            if param.is_constexpr:
                signature[param.name] = "constexpr"
                constexprs[param.name] = bound[i]
            else:
                signature[param.name] = entry_type(entry, bound[i], (i,))
        picker = _make_runtime_picker(runtime_paths, len(self.params))
        return _make_ast_source(self, signature, constexprs, attrs), picker

    # --- targets ---------------------------------------------------------------------------------

    def _target_for(self, bound, explicit=None):
        values, names = _flat_runtime_args(self.params, bound)
        if explicit is not None:
            return compiler._backends().select_target(values, explicit=explicit, names=names)
        scoped = _explicit_target_var().get()
        if scoped is not None:
            return scoped
        return compiler._backends().select_target(values, names=names)

    # --- launch ------------------------------------------------------------------------------------

    def run(self, *args, grid, warmup=False, **kwargs):
        """Bind, specialize, compile on a cache miss, then launch (or, with `warmup=True`, return the
        CompiledKernel without launching). Returns the CompiledKernel."""
        if warmup:
            return self._run(args, kwargs, grid, True, None)
        return self._fast_launch(grid, *args, **kwargs)

    def __getitem__(self, grid):
        # The launch path: the generated launch function (`fast_launch`) with the grid bound by a
        # C-level partial, no Python frame between the call and it. It binds any call (it hands what
        # it does not handle itself, binding errors included, to `_run`).
        return _partial(self._fast_launch, grid)

    def _first_launch(self, grid, *args, **kwargs):
        """Generate this kernel's launch function (once the backends can be imported), then launch.
        A `kernel[grid]` made before the first launch keeps calling this method: it generates once."""
        if self._fast_launch == self._first_launch:
            from tilejit.runtime.fast_launch import make_fast_launch
            _, keys, namespace = _binder_parts(self.params, launch_key=True)
            self._fast_launch = make_fast_launch(self, keys, namespace, _grid3, _selection_env,
                                                 _explicit_target_var().get)
        return self._fast_launch(grid, *args, **kwargs)

    def _run(self, args, kwargs, grid, warmup, explicit_target):
        try:
            bound, options, args_key = self._launch_binder(*args, **kwargs)
        except TypeError:
            bound, options, args_key = self._bind(args, kwargs)  # raises, naming the kernel
        stream = None
        if options:
            stream = options.pop("stream", None)
            if "warmup" in options:
                warmup = options.pop("warmup")
            # Triton's launch attributes: accepted; tilejit launches every grid normally (docs/language.md).
            options.pop("launch_cooperative_grid", None)
            options.pop("launch_pdl", None)
        if self.debug is not None and "debug" not in options:
            options["debug"] = self.debug
        options_key = tuple(sorted(options.items())) if options else ()
        scope = explicit_target if explicit_target is not None else _explicit_target_var().get()
        # One flat tuple (each parameter's entry, the options, each selection knob, the scope): a
        # nested key costs a tuple and a hash level more per look-up. The lengths are fixed per
        # kernel, so the positions cannot be confused.
        launch_key = args_key + (options_key,) + _selection_env() + (scope,)
        try:
            entry = self._launch_cache.get(launch_key)
        except TypeError as exc:  # an unhashable constexpr value (or a tensor given to a constexpr)
            self._check_constexpr_values(bound)
            raise TypeError(f"kernel '{self.__name__}': constexpr arguments must be hashable: {exc}") from None
        if entry is None:
            entry = self._miss(args, kwargs, options, options_key, explicit_target, launch_key, warmup)
        kernel, picker = entry
        if warmup:
            return kernel

        if callable(grid):
            meta = dict(zip(self.arg_names, bound))
            meta.update(options)
            grid = grid(meta)
        grid3 = _grid3(grid)
        if grid3 is None:
            grid3 = normalize_grid(grid, self.__name__)
        runtime_args = bound if picker is None else picker(bound)
        launcher = kernel._launcher
        # `CompiledKernel.run` without its frame when no launch hook is set (the condition it tests).
        if launcher is not None and _hooks_state and _hooks_state[0] is _NO_HOOKS \
                and _CompiledKernel.launch_enter_hook is None and _CompiledKernel.launch_exit_hook is None:
            launcher(grid3, runtime_args, stream)
        else:
            kernel.run(grid3, runtime_args, stream)
        return kernel

    def _miss(self, args, kwargs, options, options_key, explicit_target, launch_key, warmup=False):
        """First launch with this launch key: compute the full specialization key, choose the target,
        compile (or find the specialization compiled for an equal key under another launch key or
        scope), and remember the entry for the launch path.

        A meta tensor has no memory: it may be compiled for, never launched with. Such an entry is not
        remembered, so every launch with one comes here and is refused before a launcher can pass its
        null address to a device."""
        bound, _, spec_key = self._bind(args, kwargs)
        self._check_constexpr_values(bound)
        for index, kind, annotation in self._annotated_scalars:
            check_annotated_scalar(bound[index], kind, annotation, self.arg_names[index], self.__name__)
        target = self._target_for(bound, explicit_target)
        entry = self._compile(bound, spec_key, options, target, (spec_key, options_key, target))
        meta = [name for name, value in zip(self.arg_names, bound) if _is_meta_tensor(value)]
        if not meta:
            self._launch_cache[launch_key] = entry
        elif not warmup:
            raise ArgumentValueError(
                f"kernel '{self.__name__}': argument '{meta[0]}' is a meta tensor: it has no data for a "
                "kernel to run on (meta tensors can be used to compile: `kernel.warmup(...)`)")
        return entry

    def _compile(self, bound, spec_key, options, target, key):
        """The (CompiledKernel, runtime picker) for `key`, compiled once even when several threads ask
        at once; different keys compile concurrently (the autotuner's configs)."""
        while True:
            with self._compile_lock:
                per_target = self.cache.setdefault(target, {})
                entry = per_target.get(key)
                if entry is not None:
                    return entry
                pending = self._compiling.get(key)
                if pending is None:
                    pending = self._compiling[key] = threading.Event()
                    break
            pending.wait()  # another thread compiles this key; if it failed, try ourselves
        try:
            backend = compiler._backends().backend_for_target(target)
            self._check_options(options, target, backend)
            compile_options = self._compile_options(options, target, backend)
            src, picker = self._source_for(bound, spec_key)
            kernel = compiler.compile(src, target=target, options=compile_options)
            if self.launch_metadata is not None or kernel.jit_function is None:
                kernel.jit_function = self
            if self.repr is not None:
                kernel.name = self._repr_name(src)
            entry = (kernel, picker)
            with self._compile_lock:
                self.cache.setdefault(target, {})[key] = entry
            return entry
        finally:
            with self._compile_lock:
                self._compiling.pop(key, None)
            pending.set()

    def _repr_name(self, src) -> str:
        """`@jit(repr=fn)`: the name `fn(specialization)` gives the compiled kernel (`CompiledKernel.name`,
        what profilers and `h.name` show), as Triton; `specialization` has `.signature` ({name: type
        string}) and `.constants` ({name: value} of constexprs and of integers specialized to 1). The
        symbol in the binary keeps the function's own name."""
        spec = types.SimpleNamespace(signature=dict(src.signature), constants=dict(src.constexprs),
                                     attrs=dict(src.attrs))
        name = self.repr(spec)
        if not isinstance(name, str):
            raise TypeError(f"kernel '{self.__name__}': repr= must return a str, got {type(name).__name__}")
        return name

    def warmup(self, *args, grid=None, target=None, **kwargs):
        """Compile for these arguments without launching; returns the CompiledKernel. Arguments may be
        type strings ("*fp32", "i32", ...) instead of data. The target comes from `target=`, a
        `with tilejit.target(...)` block, the environment, or the arguments."""
        def as_mock(index, value):
            if index is None or self.params[index].is_constexpr:
                return value
            if isinstance(value, str):
                return MockArg(value)
            if isinstance(value, tuple):  # a tuple parameter given as ("*fp32", "i32", ...)
                return tuple(as_mock(index, element) for element in value)
            return value

        args = tuple(as_mock(i if i < len(self.params) else None, a) for i, a in enumerate(args))
        kwargs = {k: as_mock(self.arg_names.index(k) if k in self.arg_names else None, v)
                  for k, v in kwargs.items()}
        return self._run(args, kwargs, grid, True, target)


def jit(fn=None, *, version=None, do_not_specialize=(), do_not_specialize_on_alignment=(), debug=None,
        noinline=False, repr=None, launch_metadata=None):
    """Decorate a kernel: `@jit` or `@jit(do_not_specialize=["n"], ...)` -> JITFunction. `version` is
    accepted and unused, as in Triton 3.x."""

    def decorator(function):
        return JITFunction(function, do_not_specialize=do_not_specialize,
                           do_not_specialize_on_alignment=do_not_specialize_on_alignment, debug=debug,
                           noinline=noinline, repr=repr, launch_metadata=launch_metadata)

    if fn is not None:
        return decorator(fn)
    return decorator
