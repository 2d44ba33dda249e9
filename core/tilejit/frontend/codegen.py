"""Python AST -> TTIR: one visitor per generated function (Triton's CodeGenerator is the model).

Constexpr values fold in Python; tensor values become ops. `if` on a constexpr picks a branch at
compile time, on a scalar tensor it becomes `scf.if`; `for` over `range`/`tl.range` becomes `scf.for`,
`tl.static_range` is unrolled; `while` becomes `scf.while`. Loop-carried values are the names a loop
body assigns that existed before the loop. Each called `@jit` function becomes a private `tt.func`
per specialization, called with `tt.call`.

Every exception raised while visiting a node becomes one `CompilationError` at the innermost node.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import linecache
import os
import re
from typing import Dict, List, Optional

from .. import ir
from .._constexpr import ConstexprFunction
from ..errors import (CompilationError, CompileTimeAssertionFailure, InterpretedCompilationError,
                      InterpretedCompileTimeAssertionFailure, StaticAssertionError)
from ..language import core as tl
from ..language.semantic import Semantic
from ..language.structure import as_python_index, slice as tl_slice, tuple as tl_tuple
from .predication import PredicationMixin
from .reuse import parse_source, signature_of
from .statements import StatementsMixin
from .values import (flatten, is_jit_function, is_named_tuple_class, is_tensor, named_tuple, rebuild,
                     tuple_fields, type_key, unwrap, wrap)

_UNSUPPORTED = {
    "AsyncWith": "'async with' statements are not supported",
    "Try": "'try' statements are not supported",
    "TryStar": "'try' statements are not supported",
    "Raise": "'raise' is not supported; use tl.device_assert or tl.static_assert",
    "Lambda": "lambda functions are not supported; define a @jit function instead",
    "Global": "'global' declarations are not supported",
    "Nonlocal": "'nonlocal' declarations are not supported",
    "Delete": "'del' is not supported",
    "Break": "'break' is not supported in loops (as in Triton)",
    "Continue": "'continue' is not supported in loops (as in Triton)",
    "FunctionDef": "nested function definitions are not supported; define a @jit function at module level",
    "AsyncFunctionDef": "async functions are not supported",
    "ClassDef": "class definitions are not supported",
    "Await": "'await' is not supported",
    "Yield": "'yield' is not supported",
    "YieldFrom": "'yield from' is not supported",
    "SetComp": "set comprehensions are not supported",
    "DictComp": "dict comprehensions are not supported",
    "Import": "'import' inside a kernel is not supported",
    "ImportFrom": "'import' inside a kernel is not supported",
    "AsyncFor": "'async for' is not supported",
    "NamedExpr": "the walrus operator ':=' is not supported",
    "Set": "set literals are not supported",
    "Dict": "dict literals are not supported",
    "Starred": "starred expressions are only supported as call arguments",
    "Match": "'match' statements are not supported",
}

_BIN_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
            ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and_", ast.BitOr: "or_", ast.BitXor: "xor_",
            ast.LShift: "shl", ast.RShift: "shr"}
_PY_BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: lambda a, b: a ** b, ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b,
           ast.BitXor: lambda a, b: a ^ b, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
           ast.MatMult: lambda a, b: a @ b}
_CMP_OPS = {ast.Eq: "equal", ast.NotEq: "not_equal", ast.Lt: "less_than", ast.LtE: "less_equal",
            ast.Gt: "greater_than", ast.GtE: "greater_equal"}
_PY_CMP = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
           ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
           ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b, ast.In: lambda a, b: a in b,
           ast.NotIn: lambda a, b: a not in b}


class BoundMember:
    """`x.sum` for a tensor `x`: calls `tl.sum(x, ...)` (a builtin or a `@jit` function)."""

    def __init__(self, fn, obj):
        self.fn, self.obj = fn, obj


class ModuleContext:
    """State shared by the functions generated for one kernel: the module and generated callees."""

    def __init__(self, options=None, target=None):
        self.module = ir.Module()
        self.options = options
        self.target = target
        self.functions: Dict[tuple, tuple] = {}  # specialization key -> (name, result types, tree)
        self.in_progress: set = set()
        self.names: set = set()

    def unique_name(self, base: str) -> str:
        name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", base)).rstrip("_")
        if len(name) > 120:
            name = name[:80] + "_" + hashlib.sha1(name.encode()).hexdigest()[:12]
        candidate, n = name, 1
        while candidate in self.names:
            candidate, n = f"{name}_{n}", n + 1
        self.names.add(candidate)
        return candidate


def source_file(fn) -> str:
    """The name (known to `linecache`) of the file whose lines `fn.src` numbers refer to."""
    registered = getattr(fn, "src_file", None)
    if registered:
        return registered
    try:
        return inspect.getsourcefile(fn.fn) or fn.fn.__code__.co_filename
    except TypeError:
        return fn.fn.__code__.co_filename


class CodeGenerator(StatementsMixin, PredicationMixin, ast.NodeVisitor):
    def __init__(self, fn, ctx: ModuleContext):
        self.fn = fn
        self.ctx = ctx
        self.file = source_file(fn)
        self.line_offset = fn.starting_line_number - 1
        self.def_line = 1   # the `def`'s line in fn.src (`parse` reads it)
        first = linecache.getline(self.file, fn.starting_line_number)
        self.col_offset = len(first) - len(first.lstrip()) if first.strip() else 0
        self.builder = ir.Builder()
        self.semantic = Semantic(self.builder, self, ctx.options)
        self.scope: Dict[str, object] = {}
        self.pending_annotations: Dict[str, object] = {}  # `name: tl.constexpr` declared, not yet assigned
        self.globals = dict(fn.__globals__)
        # module globals declared `NAME: tl.constexpr = value` (newer Triton reads these as constexprs)
        self.global_annotations = dict(fn.__globals__.get("__annotations__", None) or {})
        closure = getattr(fn.fn, "__closure__", None)
        self.captured = set(fn.fn.__code__.co_freevars) if closure else set()
        if closure:
            for name, cell in zip(fn.fn.__code__.co_freevars, closure):
                try:
                    self.globals[name] = cell.cell_contents
                except ValueError:
                    pass
        self.terminated = False
        self.return_stack: List[dict] = []  # innermost returning `if` branch collects its return value
        self.loop_depth = 0
        self.ret_types: Optional[list] = None
        self.is_kernel = False
        self.ret_tree = None

    # -- locations and errors -------------------------------------------------------------------------
    def loc(self, node) -> ir.Location:
        return ir.Location(self.file, self.line_offset + node.lineno, node.col_offset + 1 + self.col_offset,
                           self.fn.__name__)

    def error(self, node, message: str, static_assert: bool = False) -> CompilationError:
        line = self.line_offset + node.lineno if hasattr(node, "lineno") else None
        col = node.col_offset + 1 + self.col_offset if hasattr(node, "col_offset") else None
        # On the interpreter a compile error is also an InterpreterError, as Triton's interpreter reports it.
        interpreted = getattr(self.ctx.target, "backend", None) == "interpreter"
        if static_assert:
            error_class = InterpretedCompileTimeAssertionFailure if interpreted else CompileTimeAssertionFailure
        else:
            error_class = InterpretedCompilationError if interpreted else CompilationError
        position = (node.lineno - self.def_line + 1, node.col_offset) if hasattr(node, "col_offset") else None
        return error_class(message, self.file, line, col, kernel=self.fn.__name__, position=position)

    def visit(self, node):
        if node is None:
            return None
        kind = type(node).__name__
        saved_loc = self.builder.loc
        if hasattr(node, "lineno"):
            self.builder.loc = self.loc(node)
        try:
            if kind in _UNSUPPORTED:
                raise NotImplementedError(_UNSUPPORTED[kind])
            return super().visit(node)
        except CompilationError as exc:
            # An error inside tilejit's own `tl` library (standard.py, ...) is the caller's mistake:
            # point at the innermost user line instead.
            if _in_library(exc.file) and not _in_library(self.file):
                raise self.error(node, exc.message) from exc
            # An error inside a called @jit function of the user's: as Triton, an error at the call,
            # caused by the callee's (each level of calls adds one to the chain).
            callee = getattr(exc, "in_callee", None)
            if callee is not None:
                exc.in_callee = None
                root = getattr(exc, "root_message", exc.message)   # the callee's own message, once
                wrapped = self.error(node, f"in the call of '{callee}': {root}")
                wrapped.root_message = root
                raise wrapped from exc
            raise
        except RecursionError as exc:
            if "recursive call of @jit function" in str(exc):
                raise self.error(node, str(exc)) from None
            deep = self.error(node, "this code is nested too deeply to compile (an expression or calls nested "
                                    "thousands of levels deep); split it into several statements")
            deep.call_chain = False   # not wrapped at each of the thousands of calls
            raise deep from None
        except StaticAssertionError as exc:   # Triton's CompileTimeAssertionFailure, without a cause
            raise self.error(node, str(exc), static_assert=True) from None
        except Exception as exc:  # every user or semantic error: report once, at this node
            message = "; ".join([str(exc) or type(exc).__name__] + list(getattr(exc, "__notes__", ())))
            if isinstance(exc, (KeyError, AttributeError, IndexError, NameError, ZeroDivisionError)):
                message = f"{type(exc).__name__}: {message}"
            raise self.error(node, message) from exc
        finally:
            self.builder.loc = saved_loc

    def generic_visit(self, node):
        raise NotImplementedError(f"unsupported syntax: {type(node).__name__}")

    # -- function generation -----------------------------------------------------------------------------
    def parse(self) -> ast.FunctionDef:
        try:
            tree = parse_source(self.fn.src)  # parsed once per text (frontend/reuse.py)
        except SyntaxError as exc:
            raise CompilationError(f"syntax error: {exc.msg}", self.file,
                                   self.line_offset + (exc.lineno or 1), exc.offset) from None
        fdef = tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            raise CompilationError("a @jit function must be a plain 'def'", self.file, self.line_offset + 1, 1)
        self.def_line = fdef.lineno   # (below its decorators)
        return fdef

    def generate(self, func_name: str, bindings: Dict[str, object], runtime_params: List[tuple],
                 public: bool, arg_attrs=None, noinline=False) -> ir.Operation:
        """Create `tt.func func_name`. `bindings`: every parameter's compile-time value (constexprs);
        `runtime_params`: (param name, tree, leaf types) of the parameters passed at run time."""
        fdef = self.parse()
        # A `tl.constexpr` leaf (a constexpr element of a tuple parameter) is bound, not passed.
        arg_types = [t.to_ir() for _, _, leaf_types in runtime_params for t in leaf_types
                     if not isinstance(t, tl.constexpr)]
        func = ir.make_func(func_name, arg_types, [], arg_attrs, public=public, loc=self.loc(fdef),
                            noinline=noinline)
        entry = func.regions[0].blocks[0]
        self.builder.set_insertion_point_to_end(entry)
        self.builder.loc = self.loc(fdef)
        self.scope.update(bindings)
        pos = 0
        for name, tree, leaf_types in runtime_params:
            leaves = []
            # A parameter passed as one value prints under its Python name (`%x: f16`, as Triton);
            # the values of a tuple parameter keep their positions (`%argN`).
            single = len(leaf_types) == 1
            for t in leaf_types:
                if isinstance(t, tl.constexpr):
                    leaves.append(t)
                    continue
                arg = entry.args[pos]
                pos += 1
                if single:
                    arg.name_hint = name
                leaves.append(tl.tensor_descriptor(arg, t.block_type, [], []) if isinstance(t, tl.tensor_descriptor_type)
                              else tl.tensor(arg, t))
            self.scope[name] = self.rebuild_param(tree, leaves)
        with self.semantic:
            self.visit_statements(fdef.body)
            if not self.terminated:
                self.builder.loc = self.loc(fdef.body[-1])
                self.emit_return(None, fdef.body[-1])
        results = self.ret_types or []
        func.attrs["function_type"] = ir.FunctionType(tuple(arg_types), tuple(t.to_ir() for t in results))
        return func

    def rebuild_param(self, tree, leaves):
        """A parameter's value from its runtime leaves; a host-side tensor descriptor (tree
        ("tensordesc", block shape, padding)) becomes `tl.make_tensor_descriptor(base, shape, strides,
        block, padding)`."""
        if isinstance(tree, tuple) and tree[0] == "tensordesc":
            rank = len(tree[1])
            with self.semantic:
                return self.semantic.make_tensor_descriptor(leaves[0], leaves[1:1 + rank], leaves[1 + rank:],
                                                            list(tree[1]), tree[2])
        if isinstance(tree, tuple) and tree[0] == "tuple":
            items, pos = [], 0
            for count, sub in tree[1]:
                items.append(self.rebuild_param(sub, leaves[pos:pos + count]))
                pos += count
            return named_tuple(items, tree[2] if len(tree) > 2 else None)
        return rebuild(tree, leaves)

    # -- returns --------------------------------------------------------------------------------------------
    def return_leaves(self, value, node):
        value = unwrap(value) if not isinstance(unwrap(value), tuple) else unwrap(value)
        if value is None:
            return [], "none"
        leaves, tree = flatten(value)
        if any(isinstance(unwrap(leaf), tl.tensor_descriptor) for leaf in leaves):
            # a descriptor travels as its base, shape and strides, and is made again where it lands
            # (the caller, or the merge of returning branches), as through control flow
            from .statements import _WithDescriptors
            leaves, spec = self.expand_descriptors(leaves, "the returned value")
            tree = _WithDescriptors(tree, spec)
        return [self.semantic.to_tensor(unwrap(leaf)) for leaf in leaves], tree

    def rebuild_returned(self, tree, values):
        """A returned value from its leaves (`return_leaves`' tree), descriptors made again."""
        from .statements import _WithDescriptors
        if isinstance(tree, _WithDescriptors):
            return rebuild(tree.tree, self.rebuild_descriptors(values, tree.spec))
        return rebuild(tree, values)

    def emit_return(self, value, node):
        tensors, tree = self.return_leaves(value, node)
        if self.return_stack:
            self.return_stack[-1]["value"] = (tensors, tree)
            self.return_stack[-1]["node"] = node
        else:
            if self.is_kernel and tensors:
                raise TypeError(f"kernel '{self.fn.__name__}' must not return a value")
            self.record_return_types([t.type for t in tensors], tree, node)
            self.builder.create("tt.return", [t.handle for t in tensors], [])
        self.terminated = True

    def record_return_types(self, types_, tree, node):
        if self.ret_types is None:
            self.ret_types, self.ret_tree = list(types_), tree
        elif self.ret_types != list(types_) or self.ret_tree != tree:
            raise TypeError(f"inconsistent return types: {[str(t) for t in self.ret_types]} and "
                            f"{[str(t) for t in types_]}")

    # -- names ----------------------------------------------------------------------------------------------
    def lookup(self, name: str, node):
        if name in self.scope:
            return self.scope[name]
        if name in self.globals:
            value = self.globals[name]
            if isinstance(value, (tl.constexpr, tl.dtype)) or is_jit_function(value) or callable(value) or \
                    inspect.ismodule(value) or value is None:
                return wrap(value)
            if name not in self.captured and _is_constexpr_annotation(self.global_annotations.get(name)):
                return tl.constexpr(value)
            if name in self.captured:   # Triton's wording for a captured variable ("X is not defined")
                raise NameError(f"{name} is not defined in the kernel: a variable captured from the enclosing "
                                f"function can be used only when it is a tl.constexpr (`{name} = tl.constexpr(...)`)")
            raise NameError(f"cannot access global variable '{name}' from within a @jit function: only "
                            f"tl.constexpr globals (`{name} = tl.constexpr(...)` or `{name}: tl.constexpr = ...`), "
                            f"modules, types and functions can be used")
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NameError(f"name '{name}' is not defined")

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            return node.id
        return self.lookup(node.id, node)

    # -- expressions --------------------------------------------------------------------------------------
    def visit_Constant(self, node):
        return tl.constexpr(node.value)

    def visit_JoinedStr(self, node):
        parts = []
        for value in node.values:
            v = unwrap(self.visit(value))
            if is_tensor(v):
                raise TypeError("f-strings can only format compile-time values")
            parts.append(v if isinstance(value, ast.Constant) else str(v))
        return tl.constexpr("".join(str(p) for p in parts))

    def visit_FormattedValue(self, node):
        v = unwrap(self.visit(node.value))
        if is_tensor(v):
            raise TypeError("f-strings can only format compile-time values")
        spec = unwrap(self.visit(node.format_spec)) if node.format_spec is not None else ""
        if node.conversion == ord("r"):
            v = repr(v)
        elif node.conversion == ord("s"):
            v = str(v)
        return tl.constexpr(format(v, spec))

    def visit_Tuple(self, node):
        return tuple(self.visit_elements(node.elts))

    def visit_List(self, node):
        return list(self.visit_elements(node.elts))

    def visit_ListComp(self, node):
        """`[f(v) for v in seq if cond]` over a compile-time sequence (a tuple, a list, a range or
        `tl.static_range` with constexpr bounds): unrolled while compiling, as Triton does. The loop
        variable does not outlive the comprehension (Python 3 scoping)."""
        if len(node.generators) != 1:
            raise NotImplementedError("nested comprehensions are not supported")
        comp = node.generators[0]
        if comp.is_async:
            raise NotImplementedError("async comprehensions are not supported")
        items = self.compile_time_sequence(self.visit(comp.iter), "a comprehension")
        names = {n.id for n in ast.walk(comp.target) if isinstance(n, ast.Name)}
        saved = {name: self.scope[name] for name in names if name in self.scope}
        results = []
        try:
            for item in items:
                self.assign_target(comp.target, wrap(item))
                conditions = [unwrap(self.visit(test)) for test in comp.ifs]
                if any(is_tensor(c) for c in conditions):
                    raise TypeError("the conditions of a comprehension must be compile-time values")
                if all(conditions):
                    results.append(self.visit(node.elt))
        finally:
            for name in names:
                self.scope.pop(name, None)
            self.scope.update(saved)
        return results

    visit_GeneratorExp = visit_ListComp  # `tuple(f(v) for v in seq)`: the same, as a list

    def compile_time_sequence(self, iterable, what: str) -> list:
        raw = unwrap(iterable)
        if isinstance(raw, (tuple, list, range)):
            return list(raw)
        if isinstance(raw, (tl.static_range, tl.range)):
            bounds = [unwrap(b) for b in (raw.start, raw.end, raw.step)]
            if not any(is_tensor(b) for b in bounds):
                return list(range(*bounds))
        if isinstance(raw, tl.tensor):
            raise TypeError(f"{what} cannot iterate over a tensor")
        raise TypeError(f"{what} must iterate over a tuple, a list or a range with compile-time bounds, "
                        f"got {type(raw).__name__}")

    def visit_elements(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                value = unwrap(self.visit(e.value))
                out.extend(wrap(v) for v in value)
            else:
                out.append(self.visit(e))
        return out

    def visit_Slice(self, node):
        parts = [unwrap(self.visit(p)) if p is not None else None for p in (node.lower, node.upper, node.step)]
        if any(is_tensor(p) for p in parts):
            raise TypeError("slice bounds must be compile-time values")
        return tl_slice(*parts)

    def visit_Subscript(self, node):
        value = self.visit(node.value)
        index = as_python_index(self.visit(node.slice))
        raw = unwrap(value)
        if isinstance(raw, tl.tensor):
            return self.semantic.subscript(raw, index)
        idx = unwrap(index)
        if isinstance(idx, tl.tensor):
            raise TypeError("tuples and lists can only be indexed with compile-time constants")
        if isinstance(idx, tuple):
            idx = tuple(unwrap(i) for i in idx)
        result = raw[idx]
        return tuple(result) if isinstance(raw, tuple) and isinstance(idx, slice) else wrap(result)

    def visit_With(self, node):
        """`with tl.async_task(...):` (the only context managers a kernel may use): the body is
        compiled in place, as Triton does on targets without warp specialization."""
        unsupported = "'with' statements are not supported (except `with tl.async_task(...)`)"
        for item in node.items:
            expr = item.context_expr
            # Look at what is called before calling it: `with open(...)` must not run anything.
            if isinstance(expr, ast.Call) and unwrap(self.visit(expr.func)) is not tl.async_task:
                raise NotImplementedError(unsupported)
            context = unwrap(self.visit(expr))
            if not isinstance(context, tl.async_task):
                raise NotImplementedError(unsupported)
            if item.optional_vars is not None:
                self.assign_target(item.optional_vars, context)
        self.visit_statements(node.body)

    def visit_Attribute(self, node):
        obj = self.visit(node.value)
        return self.get_attribute(obj, node.attr)

    def get_attribute(self, obj, attr: str):
        if isinstance(obj, tl.tensor):
            if attr in ("dtype", "shape", "type", "numel", "T", "handle"):
                return getattr(obj, attr)
            if attr == "to":
                return obj.to
            if attr in tl.TENSOR_MEMBER_FUNCTIONS:
                import tilejit.language as language
                fn = getattr(language, attr, None)
                if fn is None:
                    raise AttributeError(f"tensor method '{attr}' is not available (tl.{attr} is missing)")
                return BoundMember(fn, obj)
            raise AttributeError(f"'tensor' object has no attribute '{attr}'")
        if isinstance(obj, tl.tensor_descriptor):
            if attr in ("load", "store", "block_shape", "dtype", "shape", "strides", "type", "block_type",
                        "atomic_add", "atomic_min", "atomic_max", "atomic_and", "atomic_or", "atomic_xor"):
                return getattr(obj, attr)
            if attr in ("gather", "scatter"):  # written in tl (language/descriptor_rows.py)
                from tilejit.language import descriptor_rows
                return BoundMember(getattr(descriptor_rows, attr), obj)
            raise AttributeError(f"'tensor_descriptor' object has no attribute '{attr}'")
        if isinstance(obj, tuple):
            fields = tuple_fields(obj)
            if fields and attr in fields:  # `t.x` of a named tuple
                return wrap(obj[fields.index(attr)])
            if not (isinstance(obj, tl_tuple) and attr in ("type", "fields")):
                kind = f"named tuple with fields ({', '.join(fields)})" if fields else "tuple"
                raise AttributeError(f"'{kind}' object has no attribute '{attr}'")
        if isinstance(obj, BoundMember):  # `x.sum.foo`: name the method, not the frontend's wrapper
            raise AttributeError(f"tensor method '{getattr(obj.fn, '__name__', '?')}' has no attribute '{attr}'")
        if isinstance(obj, tl.constexpr) and attr == "type" and not hasattr(obj.value, "type"):
            return obj.type  # a compile-time value's type: tl.constexpr_type(value)
        return wrap(getattr(unwrap(obj), attr))

    def visit_UnaryOp(self, node):
        operand = self.visit(node.operand)
        raw = unwrap(operand)
        if not isinstance(raw, tl.tensor):
            folds = {ast.Not: lambda v: not v, ast.USub: lambda v: -v, ast.UAdd: lambda v: +v,
                     ast.Invert: lambda v: ~v}
            return wrap(folds[type(node.op)](raw))
        methods = {ast.Not: self.semantic.not_, ast.USub: self.semantic.minus, ast.UAdd: lambda v: v,
                   ast.Invert: self.semantic.invert}
        return methods[type(node.op)](raw)

    def binary(self, op_type, lhs, rhs):
        a, b = unwrap(lhs), unwrap(rhs)
        if not is_tensor(a) and not is_tensor(b):
            if isinstance(a, tuple) or isinstance(b, tuple):
                if op_type is ast.Add and isinstance(a, tuple) and isinstance(b, tuple):
                    return a + b
                if op_type is ast.Mult and _is_count(b if isinstance(a, tuple) else a):
                    # `(0,) * ndim`: repetition by a compile-time count, as in Python
                    items, count = (a, b) if isinstance(a, tuple) else (b, a)
                    return tuple(items) * int(count)
                raise TypeError("unsupported operation on tuples")
            return wrap(_PY_BIN[op_type](a, b))
        if op_type is ast.MatMult:
            raise TypeError("operator '@' is not supported; use tl.dot")
        return getattr(self.semantic, _BIN_OPS[op_type])(a, b)

    def visit_BinOp(self, node):
        return self.binary(type(node.op), self.visit(node.left), self.visit(node.right))

    def visit_Compare(self, node):
        left = self.visit(node.left)
        result = None
        for op, comparator in zip(node.ops, node.comparators):
            right = self.visit(comparator)
            a, b = unwrap(left), unwrap(right)
            if isinstance(op, (ast.Is, ast.IsNot)):
                # Identity of the compile-time objects, tensors included (as Triton): `x is not None`
                # on an argument is decided by its specialization (a None argument is a constexpr).
                value = wrap((a is b) if isinstance(op, ast.Is) else (a is not b))
            elif is_tensor(a) or is_tensor(b):
                if type(op) not in _CMP_OPS:
                    raise TypeError(f"operator '{type(op).__name__}' is not supported on tensors")
                value = getattr(self.semantic, _CMP_OPS[type(op)])(a, b)
            else:
                if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and type(op) in _CMP_OPS:
                    # As Triton's tl.tuple: a shape compares equal to a list (`z.shape == [2]`).
                    a, b = tuple(unwrap(v) for v in a), tuple(unwrap(v) for v in b)
                value = wrap(_PY_CMP[type(op)](a, b))
            result = value if result is None else self.logical(ast.And, result, value)
            left = right
        return result

    def logical(self, op_type, a, b):
        ra, rb = unwrap(a), unwrap(b)
        if not is_tensor(ra) and not is_tensor(rb):
            return wrap((ra and rb) if op_type is ast.And else (ra or rb))
        fn = self.semantic.logical_and if op_type is ast.And else self.semantic.logical_or
        return fn(ra, rb)

    def visit_BoolOp(self, node):
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            raw = unwrap(result)
            # Python short-circuit on compile-time values, so `x is not None and x > 0` works.
            if not is_tensor(raw):
                if isinstance(node.op, ast.And) and not raw:
                    return result
                if isinstance(node.op, ast.Or) and raw:
                    return result
                result = self.visit(value_node)
                continue
            result = self.logical(type(node.op), result, self.visit(value_node))
        return result

    def visit_IfExp(self, node):
        cond = unwrap(self.visit(node.test))
        if not is_tensor(cond):
            return self.visit(node.body if cond else node.orelse)
        return self.dynamic_ifexp(node, cond)

    # -- calls ---------------------------------------------------------------------------------------------
    def visit_Call(self, node):
        fn = self.visit(node.func)
        args = self.visit_elements(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                extra = unwrap(self.visit(kw.value))
                kwargs.update({k: wrap(v) for k, v in dict(extra).items()})
            else:
                kwargs[kw.arg] = self.visit(kw.value)
        return self.call(fn, args, kwargs, node)

    def call(self, fn, args, kwargs, node):
        if isinstance(fn, BoundMember):
            return self.call(fn.fn, [fn.obj] + list(args), kwargs, node)
        fn = unwrap(fn)
        if is_jit_function(fn):
            return self.call_jit_function(fn, args, kwargs)
        if tl.is_builtin(fn):
            return wrap(fn(*args, _semantic=self.semantic, **kwargs))
        if isinstance(fn, ConstexprFunction):
            return self.call_constexpr_function(fn, args, kwargs)
        handler = self.python_builtins().get(fn) if _hashable(fn) else None
        if handler is not None:
            return handler(args, kwargs)
        if is_named_tuple_class(fn):
            return self.build_named_tuple(fn, args, kwargs)
        if isinstance(fn, type) and issubclass(fn, (tl.dtype, tl.constexpr)):
            return wrap(fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()}))
        name = getattr(fn, "__name__", type(fn).__name__)
        if callable(fn) and not any(_contains_tensor(unwrap(a)) for a in list(args) + list(kwargs.values())):
            # As Triton's code generator does, a plain Python function runs at compile time on
            # compile-time values (`tl.core.get_int_dtype(bitwidth=x.dtype.primitive_bitwidth, ...)`).
            values = [_compile_time_value(a) for a in args]
            named = {k: _compile_time_value(v) for k, v in kwargs.items()}
            try:
                result = fn(*values, **named)
            except Exception as exc:  # noqa: BLE001 - re-raised with what the call was
                raise TypeError(f"'{name}' is not a @jit function, so it ran as plain Python while compiling, "
                                f"and failed: {exc} (decorate it with @tilejit.jit if it builds tensors)") from exc
            return _wrap_python_result(result)
        raise TypeError(f"cannot call '{name}' from a @jit function on a tensor: it is not a @jit function or "
                        "a tilejit.language builtin (decorate it with @tilejit.jit)")

    def call_constexpr_function(self, fn, args, kwargs):
        """`@constexpr_function` (e.g. `triton.cdiv`): evaluated now on the compile-time values of its
        arguments; the result is a constexpr."""
        values = [_compile_time_value(a) for a in args]
        named = {k: _compile_time_value(v) for k, v in kwargs.items()}
        for value in list(values) + list(named.values()):
            if _contains_tensor(value):
                raise TypeError(f"{fn.__name__}() is a constexpr_function: its arguments must be compile-time "
                                "values, got a tensor (as in Triton, a name assigned a Python number in a "
                                "kernel holds a tensor; `name: tl.constexpr = ...` keeps a constant)")
        return _wrap_python_result(fn.fn(*values, **named))

    def build_named_tuple(self, cls, args, kwargs):
        """`Point(x=a, y=b)` inside a kernel: the arguments bound as the class binds them (defaults
        included), kept as a `tl.tuple` that knows the field names."""
        try:
            bound = inspect.signature(cls).bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{cls.__name__}(): {exc}") from None
        bound.apply_defaults()
        return named_tuple([wrap(bound.arguments[name]) for name in cls._fields], cls._fields)

    def call_jit_function(self, fn, args, kwargs, elementwise=None, elementwise_shape=None):
        """Emit `tt.call` to the private function generated for this specialization of `fn`.
        `elementwise`: compile the callee in elementwise mode (`tl.map_elementwise`); by default a
        callee inherits the caller's mode."""
        if elementwise is None:
            elementwise, elementwise_shape = self.elementwise, self.elementwise_shape
        try:
            bound = signature_of(fn.fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{fn.__name__}(): {exc}") from None
        bound.apply_defaults()
        bindings, runtime_params, runtime_values, key_parts = {}, [], [], []
        for param in fn.params:
            value = bound.arguments[param.name]
            raw = unwrap(value)
            # A `tl.constexpr` annotation on a called function's parameter does not make a tensor
            # argument compile-time: as in Triton, the callee then receives it as a runtime value
            # (fla passes `tl.cdiv(K, BK)`, a tensor, to `unflatten_program_id(X: tl.constexpr)`).
            if not _contains_tensor(raw):
                bindings[param.name] = wrap(raw) if not isinstance(raw, tuple) else raw
                key_parts.append(type_key(raw))
                continue
            # A tuple mixing tensors and compile-time values: as in Triton, the compile-time
            # elements stay constexprs of the callee (part of its specialization), only the
            # tensors are passed.
            leaves, tree = flatten(raw)
            leaf_values = [unwrap(l) for l in leaves]
            runtime_params.append((param.name, tree, [l.type if is_tensor(l) else tl.constexpr(l)
                                                      for l in leaf_values]))
            runtime_values.extend(l for l in leaf_values if is_tensor(l))
            key_parts.append(type_key(rebuild(tree, leaf_values)))
        key = (id(fn), fn.cache_key if hasattr(fn, "cache_key") else fn.__name__, tuple(key_parts), elementwise,
               tuple(elementwise_shape or ()))
        if key not in self.ctx.functions:
            if key in self.ctx.in_progress:
                raise RecursionError(f"recursive call of @jit function '{fn.__name__}' is not supported")
            self.ctx.in_progress.add(key)
            try:
                callee = CodeGenerator(fn, self.ctx)
                callee.elementwise, callee.elementwise_shape = elementwise, elementwise_shape
                suffix = "_elementwise" if elementwise else ""
                name = self.ctx.unique_name(f"{fn.__name__}__{'_'.join(key_parts)}{suffix}")
                try:
                    func = callee.generate(name, bindings, runtime_params, public=False,
                                           noinline=bool(getattr(fn, "noinline", False)))
                except CompilationError as exc:
                    if not _in_library(exc.file) and getattr(exc, "call_chain", True):
                        exc.in_callee = fn.__name__   # `visit` wraps it at the call
                    raise
                self.ctx.module.body.append(func)
                self.ctx.functions[key] = (name, callee.ret_types or [], callee.ret_tree or "none")
            finally:
                self.ctx.in_progress.discard(key)
        name, ret_types, ret_tree = self.ctx.functions[key]
        op = self.builder.create("tt.call", [v.handle for v in runtime_values], [t.to_ir() for t in ret_types],
                                 {"callee": name})
        results = [tl.tensor(r, t) for r, t in zip(op.results, ret_types)]
        if ret_tree == "none":
            return None
        return self.rebuild_returned(ret_tree, results)

    def python_builtins(self):
        if not hasattr(self, "_builtin_table"):
            self._builtin_table = {
                builtins.range: self._py_range, builtins.min: self._py_minmax(False),
                builtins.max: self._py_minmax(True), builtins.print: self._py_print,
                builtins.len: self._py_fold(len), builtins.isinstance: self._py_fold(isinstance),
                builtins.int: self._py_fold(int), builtins.float: self._py_fold(float),
                builtins.bool: self._py_fold(bool), builtins.str: self._py_fold(str),
                builtins.hasattr: self._py_fold(hasattr), builtins.tuple: self._py_fold(tuple),
                builtins.list: self._py_fold(list), builtins.zip: self._py_fold(lambda *a: list(zip(*a))),
                builtins.enumerate: self._py_fold(lambda *a: [(tl.constexpr(i), v) for i, v in enumerate(*a)]),
                builtins.getattr: self._py_getattr, builtins.abs: self._py_abs, builtins.type: self._py_fold(type),
                builtins.round: self._py_fold(round), builtins.divmod: self._py_fold(divmod),
                builtins.issubclass: self._py_fold(issubclass), builtins.repr: self._py_fold(repr),
                builtins.all: self._py_fold(all), builtins.any: self._py_fold(any),
            }
        return self._builtin_table

    def _py_fold(self, fn):
        def handler(args, kwargs):
            raw = [a if isinstance(a, (tuple, list)) else unwrap(a) for a in args]
            if any(is_tensor(a) for a in raw) and fn not in (isinstance, len, type, hasattr, tuple, list) and \
                    getattr(fn, "__name__", "") != "<lambda>":
                raise TypeError(f"{getattr(fn, '__name__', fn)}() needs compile-time values, got a tensor")
            if fn is len and raw and isinstance(raw[0], tl.tensor):
                shape = raw[0].shape
                if not shape:
                    raise TypeError("len() of a scalar tensor")
                return shape[0]
            result = fn(*raw, **{k: unwrap(v) for k, v in kwargs.items()})
            return tuple(result) if isinstance(result, list) and fn is tuple else wrap(result)
        return handler

    def _py_range(self, args, kwargs):
        return tl.range(*args, **kwargs)

    def _py_minmax(self, is_max: bool):
        def handler(args, kwargs):
            values = [unwrap(a) for a in args]
            if len(values) == 1 and isinstance(values[0], (tuple, list)):
                values = [unwrap(v) for v in values[0]]
            if not any(is_tensor(v) for v in values):
                return wrap((builtins.max if is_max else builtins.min)(*values, **kwargs))
            result = values[0]
            for v in values[1:]:
                result = self.semantic.minmax(result, v, is_max)
            return result
        return handler

    def _py_print(self, args, kwargs):
        prefix, values = [], []
        for a in args:
            raw = unwrap(a)
            if is_tensor(raw) or values:
                values.append(raw)
            else:
                prefix.append(str(raw))
        text = " ".join(prefix) + (" " if prefix and values else "")
        self.semantic.device_print(text, values)

    def _py_getattr(self, args, kwargs):
        if len(args) not in (2, 3):
            raise TypeError("getattr expects 2 or 3 arguments")
        try:
            return self.get_attribute(args[0], unwrap(args[1]))
        except AttributeError:
            if len(args) == 3:
                return args[2]
            raise

    def _py_abs(self, args, kwargs):
        raw = unwrap(args[0])
        return self.semantic.abs(raw) if is_tensor(raw) else wrap(abs(raw))


_LIBRARY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_constexpr_annotation(annotation) -> bool:
    """Whether a module-level annotation declares a constexpr: `tl.constexpr` itself, or its text
    under `from __future__ import annotations` ("tl.constexpr", "triton.language.constexpr", ...)."""
    if annotation is None:
        return False
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return annotation is tl.constexpr


def _in_library(path) -> bool:
    """Is `path` a source file of the tilejit package itself (the `tl` library written in tl)?"""
    return bool(path) and os.path.abspath(path).startswith(_LIBRARY_DIR + os.sep)


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _wrap_python_result(result):
    """What a Python function run at compile time returned, as frontend values."""
    return tuple(wrap(v) for v in result) if isinstance(result, tuple) and not tuple_fields(result) else wrap(result)


def _compile_time_value(v):
    """A constexpr (or a tuple/list of them) as the plain Python value a Python function expects."""
    v = unwrap(v)
    if isinstance(v, (tuple, list)) and not isinstance(v, tl_tuple):
        return type(v)(_compile_time_value(x) for x in v) if not tuple_fields(v) else v
    if isinstance(v, tl_tuple) and not tuple_fields(v):
        return tuple(_compile_time_value(x) for x in v)
    return v


def _contains_tensor(v) -> bool:
    if isinstance(v, (tuple, list)):
        return any(_contains_tensor(unwrap(x)) for x in v)
    return is_tensor(v)
