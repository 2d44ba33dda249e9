"""What `tilejit.compile` compiles: a `@jit` function with a signature (`ASTSource`), or TTIR text
(`IRSource`). Both have `.name`, `.signature`, `.constexprs`, `.hash()` and `.make_ir(target, options)`."""
from __future__ import annotations

import hashlib
import json
import os
from typing import Dict, Optional

from .. import ir
from ..errors import CompilationError
from ..language import core as tl
from ..runtime.launch_abi import tensordesc_padding, tensordesc_parts
from .codegen import CodeGenerator, ModuleContext
from .recursion import deep_recursion
from .values import is_jit_function, is_named_tuple_class, wrap


def _ir_type_to_signature(t: ir.Type) -> str:
    if isinstance(t, ir.PointerType):
        return "*" + _ir_type_to_signature(t.pointee)
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.FloatType):
        return {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64", "f8E4M3FN": "fp8e4nv",
                "f8E5M2": "fp8e5", "f8E4M3FNUZ": "fp8e4b8", "f8E5M2FNUZ": "fp8e5b16"}[t.name]
    return str(t)


class ASTSource:
    """A `@jit` function specialised by `signature` ({name: "*fp32" | "i32" | "constexpr" | ...}),
    `constexprs` ({name or (index,): value}) and `attrs` ({(index,): [["tt.divisibility", 16]]}).

    As in Triton 3.x, a tuple parameter has a (nested) tuple of type strings as its signature, e.g.
    `("*fp32", "i32", "constexpr")`; its elements are addressed by paths `(param index, element
    index, ...)` in `constexprs` and `attrs`. The kernel's TTIR arguments are the runtime leaves of
    every parameter, flattened depth-first in order (constexpr elements are not arguments)."""

    def __init__(self, fn, signature: Dict, constexprs: Optional[Dict] = None, attrs: Optional[Dict] = None):
        if not is_jit_function(fn):
            raise TypeError(f"ASTSource expects a @jit function, got {type(fn).__name__}")
        self.fn = fn
        self.name = fn.__name__
        names = list(fn.arg_names)
        self.signature = {}
        for key, value in dict(signature or {}).items():
            name = self._param_name(key, names, "signature")
            self.signature[name] = value
        self.constexprs = {}
        for key, value in dict(constexprs or {}).items():
            if isinstance(key, tuple) and len(key) > 1:  # an element of a tuple parameter
                self.constexprs[self._element_path(key, names, "constexprs")] = value
            else:
                self.constexprs[self._param_name(key, names, "constexprs")] = value
        self.attrs = {}
        for key, value in dict(attrs or {}).items():
            if isinstance(key, tuple) and len(key) > 1:
                path = self._element_path(key, names, "attrs")
            else:
                index = key[0] if isinstance(key, tuple) else key
                path = (self._index(index, names) if isinstance(index, str) else int(index),)
            self.attrs[path] = [list(a) for a in value]
        for param in fn.params:
            if param.is_constexpr:
                self.signature.setdefault(param.name, "constexpr")
            if param.name not in self.signature:
                raise TypeError(f"kernel '{self.name}': the signature has no type for parameter '{param.name}'")
            if self.signature[param.name] == "constexpr" and param.name not in self.constexprs:
                if not getattr(param, "has_default", param.default is not None):
                    raise TypeError(f"kernel '{self.name}': constexpr parameter '{param.name}' has no value")
                self.constexprs[param.name] = param.default
        unknown = [n for n in self.signature if n not in names]
        if unknown:
            raise TypeError(f"kernel '{self.name}': the signature names unknown parameters {unknown} "
                            f"(parameters: {', '.join(names)})")

    def _element_path(self, key: tuple, names, what: str) -> tuple:
        """`(param, i, j, ...)` with the parameter given by name or index -> a path of ints."""
        head = self._index(key[0], names) if isinstance(key[0], str) else key[0]
        path = (head,) + tuple(key[1:])
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in path):
            raise TypeError(f"kernel '{self.name}': {what} key {key!r}: a tuple element's path must be "
                            "integers (parameter index, element index, ...)")
        if not 0 <= head < len(names):
            raise TypeError(f"kernel '{self.name}': {what} key {key!r}: parameter index {head} is out of range")
        return path

    def _param_name(self, key, names, what: str) -> str:
        if isinstance(key, tuple):
            key = key[0]
        if isinstance(key, int):
            if not 0 <= key < len(names):
                raise TypeError(f"kernel '{self.name}': {what} index {key} is out of range")
            return names[key]
        if key not in names:
            raise TypeError(f"kernel '{self.name}': {what} names unknown parameter {key!r} "
                            f"(parameters: {', '.join(names)})")
        return key

    def _index(self, name, names) -> int:
        if name not in names:
            raise TypeError(f"kernel '{self.name}': attrs name unknown parameter {name!r}")
        return names.index(name)

    def hash(self) -> str:
        with deep_recursion():  # the cache key walks the kernel's AST
            fn_key = self.fn.cache_key
        # A named tuple's field names are part of what is compiled (`t.x`), and JSON drops them.
        key = json.dumps([fn_key, {k: _with_fields(v) for k, v in self.signature.items()}, {str(k): repr(v) for k, v in self.constexprs.items()},
                          {str(k): v for k, v in self.attrs.items()}], sort_keys=True, default=repr)
        return hashlib.sha256(key.encode()).hexdigest()

    def make_ir(self, target=None, options=None) -> ir.Module:
        with deep_recursion():
            return self._make_ir(target, options)

    def _make_ir(self, target, options) -> ir.Module:
        ctx = ModuleContext(options, target)
        generator = CodeGenerator(self.fn, ctx)
        generator.is_kernel = True
        bindings, runtime_params, arg_attrs = {}, [], []
        for index, param in enumerate(self.fn.params):
            type_string = self.signature[param.name]
            if type_string == "constexpr" or param.is_constexpr:
                bindings[param.name] = wrap(self.constexprs.get(param.name))
                continue
            if _is_const_annotation(getattr(param, "annotation", None)) and isinstance(type_string, str) and \
                    type_string.startswith("*") and not type_string.startswith("*k"):
                type_string = "*k" + type_string[1:]  # `p: tl.const`: a pointer to read-only data
            try:
                leaves, tree, paths = self._signature_leaves(param.name, type_string, (index,),
                                                             _annotation_fields(param, self.fn))
                for leaf in leaves:  # a dtype without an IR type (fp8e4b15) fails here, named
                    if not isinstance(leaf, tl.constexpr):
                        leaf.to_ir()
            except TypeError as exc:
                raise CompilationError(f"kernel '{self.name}', parameter '{param.name}': {exc}") from None
            runtime_params.append((param.name, tree, leaves))
            for leaf, path in zip(leaves, paths):
                if isinstance(leaf, tl.constexpr):
                    continue  # a constexpr element of a tuple is not a function argument
                arg_attrs.append({str(entry[0]): entry[1] for entry in self.attrs.get(path, [])})
        ctx.names.add(self.name)
        func = generator.generate(self.name, bindings, runtime_params, public=True, arg_attrs=arg_attrs)
        ctx.module.body.insert(0, func)
        ir.verify(ctx.module)
        return ctx.module


    def _signature_leaves(self, name: str, type_entry, path: tuple, annotation_fields=None):
        """(leaves, tree, paths) of one parameter's signature entry: each leaf is the `tl` type of a
        runtime argument, or a `tl.constexpr` for a constexpr element of a tuple; `tree` rebuilds the
        tuple structure (`values.rebuild`); `paths` address each leaf as in `constexprs` and `attrs`.

        A named tuple keeps its field names so that `t.x` works in the kernel: as in Triton, the entry
        is then an instance of the argument's NamedTuple class holding type strings; a plain tuple
        entry takes the names of the parameter's annotation (`t: Point`) when it has as many fields."""
        if isinstance(type_entry, (tuple, list)):
            fields = getattr(type_entry, "_fields", None)
            if fields is None and annotation_fields is not None and len(annotation_fields) == len(type_entry):
                fields = annotation_fields
            leaves, trees, paths = [], [], []
            for i, element in enumerate(type_entry):
                sub_leaves, sub_tree, sub_paths = self._signature_leaves(name, element, path + (i,))
                leaves.extend(sub_leaves)
                paths.extend(sub_paths)
                trees.append((len(sub_leaves), sub_tree))
            return leaves, ("tuple", trees, tuple(fields) if fields else None), paths
        if isinstance(type_entry, str) and type_entry.startswith("tensordesc<"):
            element, block_shape = parse_tensordesc(type_entry)
            rank = len(block_shape)
            leaves = [tl.pointer_type(element)] + [tl.int32] * rank + [tl.int64] * rank
            return leaves, ("tensordesc", tuple(block_shape), tensordesc_padding(type_entry)), \
                [path + (k,) for k in range(len(leaves))]
        if type_entry == "constexpr":
            if path not in self.constexprs:
                raise TypeError(f"the constexpr element {list(path[1:])} of tuple parameter '{name}' has no value "
                                f"(give it in constexprs under the key {path!r})")
            return [tl.constexpr(self.constexprs[path])], "leaf", [path]
        return [tl.str_to_ty(type_entry)], "leaf", [path]


class IRSource:
    """A `.ttir` file (a path) or TTIR text; `make_ir` parses it."""

    def __init__(self, path_or_text):
        text = os.fspath(path_or_text) if isinstance(path_or_text, os.PathLike) else path_or_text
        if not isinstance(text, str):
            raise TypeError(f"IRSource expects a path or TTIR text, got {type(path_or_text).__name__}")
        if "\n" not in text and text.endswith((".ttir", ".mlir")) or os.path.isfile(text):
            self.path = text
            with open(text, encoding="utf-8") as f:
                self.text = f.read()
        else:
            self.path = "<ttir>"
            self.text = text
        self.module = ir.parse_module(self.text, self.path) if _accepts_filename() else ir.parse_module(self.text)
        functions = self.module.functions
        if not functions:
            raise CompilationError("the TTIR has no tt.func", self.path)
        public = [f for f in functions if f.attrs.get("sym_visibility", "public") == "public"]
        kernel = (public or functions)[0]
        self.name = kernel.attrs["sym_name"]
        fty = kernel.attrs["function_type"]
        self.signature = {f"arg{i}": _ir_type_to_signature(t) for i, t in enumerate(fty.inputs)}
        self.constexprs = {}
        self.attrs = {}

    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def make_ir(self, target=None, options=None) -> ir.Module:
        # A fresh parse each time: passes mutate the module they are given.
        return ir.parse_module(self.text, self.path) if _accepts_filename() else ir.parse_module(self.text)


def _with_fields(type_entry):
    """A signature entry with every named tuple's field names spelled out (for the hash)."""
    if isinstance(type_entry, (tuple, list)):
        elements = [_with_fields(e) for e in type_entry]
        fields = getattr(type_entry, "_fields", None)
        return {"fields": list(fields), "elements": elements} if fields is not None else elements
    return type_entry


def _annotation_fields(param, fn):
    """The field names of a parameter annotated with a NamedTuple class (`t: Point`, or the string
    "Point" under `from __future__ import annotations`), else None."""
    annotation = getattr(param, "annotation", None)
    if isinstance(annotation, str):
        annotation = getattr(fn, "__globals__", {}).get(annotation.strip())
    return tuple(annotation._fields) if is_named_tuple_class(annotation) else None


def _is_const_annotation(annotation) -> bool:
    """`tl.const` as written on a parameter: the class, or its name in a string annotation."""
    if annotation is tl.const:
        return True
    return isinstance(annotation, str) and annotation.replace(" ", "") in ("const", "tl.const", "triton.language.const", "tilejit.language.const")


def _accepts_filename() -> bool:
    import inspect
    return len(inspect.signature(ir.parse_module).parameters) >= 2


def parse_tensordesc(type_string: str):
    """`tensordesc<fp16[64, 64]>` (Triton's signature of a host-side TensorDescriptor argument) ->
    (element dtype, block shape). The kernel receives the base pointer, the shape (i32) and the strides
    (i64) and rebuilds the descriptor from them (the launch ABI passes those leaves)."""
    element, block_shape = tensordesc_parts(type_string)
    return tl.str_to_ty(element), block_shape
