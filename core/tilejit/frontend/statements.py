"""Statements of the code generator: assignments, `if`, loops, `return`, `assert` (a mixin of
`CodeGenerator`, which provides `visit`, `scope`, `builder`, `semantic`)."""
from __future__ import annotations

import ast
import copy
from typing import Dict, List, Set

from .. import ir
from ..language import core as tl
from ..language.structure import tuple as tl_tuple
from .values import flatten, is_tensor, named_tuple, rebuild, tuple_fields, unwrap, wrap


def assigned_names(stmts) -> Set[str]:
    """Names stored anywhere in `stmts` (assignments, augmented assignments, loop targets)."""
    names = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def contains_return(stmts) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


def ends_with_return(stmts) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


class StatementsMixin:
    def visit_statements(self, stmts) -> None:
        for i, stmt in enumerate(stmts):
            if self.terminated:
                return  # code after a return is dead, as in Triton
            if isinstance(stmt, ast.If) and contains_return([stmt]) and i + 1 < len(stmts):
                # `if c: ...return...` followed by more code: the rest belongs to the branches that do
                # not return, so that each branch of the scf.if ends in a return.
                stmt = copy.copy(stmt)
                rest = list(stmts[i + 1:])
                stmt.body = list(stmt.body) + ([] if ends_with_return(stmt.body) else rest)
                stmt.orelse = list(stmt.orelse) + ([] if ends_with_return(stmt.orelse) else rest)
                self.visit(stmt)
                return
            self.visit(stmt)

    # -- simple statements --------------------------------------------------------------------------
    def visit_Pass(self, node):
        return None

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return None  # docstrings and bare constants
        self.visit(node.value)

    def assign_target(self, target, value, statement=False):
        """Bind `target` (a name or a tuple of them) to `value`. `statement`: an assignment statement,
        whose Python numbers become tensors (see `assigned_value`), except for names declared
        `name: tl.constexpr` beforehand."""
        if isinstance(target, ast.Name):
            if statement:
                if self.pending_annotations.pop(target.id, None) is tl.constexpr:
                    value = tl.constexpr(unwrap(value)) if not is_tensor(unwrap(value)) else value
                else:
                    value = self.assigned_value(value)
            self.scope[target.id] = wrap(value) if not isinstance(value, list) else value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            raw = unwrap(value)
            if isinstance(raw, tl.tensor):
                raise TypeError("cannot unpack a tensor; use tl.split")
            items = list(raw)
            if len(items) != len(target.elts):
                raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self.assign_target(t, wrap(v), statement)
            return
        raise NotImplementedError(f"assignment to {type(target).__name__} is not supported (only names and "
                                  "tuples of names)")

    def assigned_value(self, value):
        """What a name holds after `name = value`, as in Triton's code generator: a Python number
        (`scale = 2`, `eps = 1e-4`, a constexpr's value) becomes a scalar tensor of the literal's type
        (int32, fp32, ...), so it takes part in type promotion as a tensor (`int8 * scale` is int32)
        and has tensor methods (`.to`, `.dtype`). Tuples are converted element by element; other
        compile-time values (None, dtypes, functions, strings) stay as they are. `x: tl.constexpr = ...`
        (or `x: tl.constexpr` declared before the assignment) keeps a number a compile-time constant."""
        raw = unwrap(value)
        if isinstance(raw, (bool, int, float)):
            return self.semantic.to_tensor(raw)
        if isinstance(raw, list):  # a list display: Triton makes it a tuple and converts its elements
            return [self.assigned_value(item) for item in raw]
        if isinstance(raw, tuple):
            items = [self.assigned_value(item) for item in raw]
            if all(new is old for new, old in zip(items, raw)):
                return value
            if isinstance(raw, tl_tuple) and not tuple_fields(raw):
                return tl_tuple(items)
            return named_tuple(items, tuple_fields(raw))
        return value

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self.assign_target(target, value, statement=True)

    def visit_AnnAssign(self, node):
        annotation = unwrap(self.visit(node.annotation))
        if node.value is None:
            # `d0: tl.constexpr` alone: the next assignment to d0 (`d0, d1 = shape`) keeps a constant.
            if isinstance(node.target, ast.Name):
                self.pending_annotations[node.target.id] = annotation
            return None
        value = self.visit(node.value)
        if annotation is tl.constexpr:
            if is_tensor(unwrap(value)):
                raise TypeError(f"'{getattr(node.target, 'id', '?')}' is annotated tl.constexpr but is "
                                "assigned a runtime tensor")
            self.assign_target(node.target, tl.constexpr(unwrap(value)))
            return None
        self.assign_target(node.target, value, statement=True)

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise NotImplementedError("augmented assignment is only supported to a plain name")
        current = self.lookup(node.target.id, node)
        self.assign_target(node.target, self.binary(type(node.op), current, self.visit(node.value)), statement=True)

    def visit_Return(self, node):
        if self.loop_depth:
            raise NotImplementedError("'return' inside a 'for' or 'while' loop is not supported (as in Triton)")
        value = self.visit(node.value) if node.value is not None else None
        self.emit_return(value, node)

    def visit_Assert(self, node):
        test = unwrap(self.visit(node.test))
        msg = unwrap(self.visit(node.msg)) if node.msg is not None else ""
        if not is_tensor(test):
            if not test:
                raise AssertionError(f"assertion failed: {msg}" if msg else "assertion failed")
            return None
        if getattr(self.ctx.options, "debug", False):
            self.semantic.device_assert(test, str(msg))
        return None

    # -- if ---------------------------------------------------------------------------------------------
    def scalar_condition(self, cond, what: str):
        if cond.type.is_block():
            if cond.type.numel != 1:
                raise TypeError(f"{what} condition must be a scalar, got a tensor of shape "
                                f"{list(cond.type.shape)}; use tl.where for elementwise selection")
            # A one-element tensor is its element, as in Triton (which warns and unsplats it).
            cond = self.semantic.unsplat(cond)
        return self.semantic.cast(cond, tl.int1)

    def visit_If(self, node):
        cond = unwrap(self.visit(node.test))
        if not is_tensor(cond):
            self.visit_statements(node.body if cond else node.orelse)
            return None
        if self.is_elementwise_condition(cond):
            return self.predicated_if(node, cond)
        cond = self.scalar_condition(cond, "if")
        returning = contains_return(node.body) or contains_return(node.orelse)
        before = dict(self.scope)
        then_block, then_scope, then_ret, _ = self.build_branch(node.body, before, returning)
        else_block, else_scope, else_ret, else_return = self.build_branch(node.orelse, before, returning)
        if returning:
            self.finish_returning_if(node, cond, then_block, then_ret, else_block, else_ret, else_return)
            return None
        names = [n for n in then_scope if n in else_scope and
                 (then_scope[n] is not before.get(n) or else_scope[n] is not before.get(n))]
        yielded, merged = [], {}
        then_vals, else_vals = [], []
        for name in sorted(names):
            tv, ev = then_scope[name], else_scope[name]
            tl_leaves, ttree = flatten(unwrap(tv) if isinstance(unwrap(tv), tuple) else tv)
            el_leaves, etree = flatten(unwrap(ev) if isinstance(unwrap(ev), tuple) else ev)
            if ttree != etree:
                raise TypeError(f"mismatched structure for '{name}' between the then and else branches")
            if all(not is_tensor(unwrap(a)) and not is_tensor(unwrap(b)) and _same_constant(a, b)
                   for a, b in zip(tl_leaves, el_leaves)):
                merged[name] = tv
                continue
            tl_leaves, tspec = self.expand_descriptors(tl_leaves, name)
            el_leaves, espec = self.expand_descriptors(el_leaves, name)
            if tspec != espec:
                raise TypeError(f"mismatched type for '{name}' between the then and else branches (a tensor "
                                "descriptor in one, something else or another block type in the other)")
            yielded.append((name, ttree, len(tl_leaves), tspec))
            then_vals.extend(tl_leaves)
            else_vals.extend(el_leaves)
        then_t = self.to_block_tensors(then_block, then_vals)
        else_t = self.to_block_tensors(else_block, else_vals)
        for i, (a, b) in enumerate(zip(then_t, else_t)):
            if a.type != b.type:
                name = _name_of_leaf(yielded, i)
                # Triton's wording ("Mismatched type for x between then block ..."), which its tests match
                raise TypeError(f"Mismatched type for {name} between then block ({a.type}) and else block "
                                f"({b.type}); both branches must give it the same type")
        results = self.emit_if(cond, then_block, then_t, else_block, else_t, bool(node.orelse))
        self.scope = dict(before)
        self.scope.update(merged)
        pos = 0
        for name, tree, count, spec in yielded:
            self.scope[name] = rebuild(tree, self.rebuild_descriptors(results[pos:pos + count], spec))
            pos += count
        return None

    def build_branch(self, stmts, before: Dict, returning: bool):
        block = ir.Block()
        saved = (self.builder.block, self.builder.index)
        self.builder.set_insertion_point_to_end(block)
        self.scope = dict(before)
        if returning:
            self.return_stack.append({"value": None})
        ret = ret_node = None
        try:
            self.visit_statements(stmts)
            if returning:
                frame = self.return_stack[-1]
                # A branch that falls off the end returns None.
                ret = frame["value"] if frame["value"] is not None else ([], "none")
                ret_node = frame.get("node")
        finally:
            if returning:
                self.return_stack.pop()
            self.terminated = False
            self.builder.block, self.builder.index = saved
        branch_scope, self.scope = self.scope, dict(before)
        return block, branch_scope, ret, ret_node   # ret_node: the `return` that set `ret`, if any

    def to_block_tensors(self, block, values) -> List[tl.tensor]:
        saved = (self.builder.block, self.builder.index)
        self.builder.set_insertion_point_to_end(block)
        try:
            return [self.semantic.to_tensor(unwrap(v)) for v in values]
        finally:
            self.builder.block, self.builder.index = saved

    def emit_if(self, cond, then_block, then_t, else_block, else_t, has_else: bool) -> List[tl.tensor]:
        for block, values in ((then_block, then_t), (else_block, else_t)):
            block.append(ir.Operation("scf.yield", [v.handle for v in values], (), None, (), self.builder.loc))
        else_region = ir.Region([else_block]) if (then_t or has_else or else_block.ops[:-1]) else ir.Region()
        op = self.builder.create("scf.if", [cond.handle], [v.type.to_ir() for v in then_t], None,
                                 [ir.Region([then_block]), else_region])
        return [tl.tensor(r, v.type) for r, v in zip(op.results, then_t)]

    def finish_returning_if(self, node, cond, then_block, then_ret, else_block, else_ret, else_return=None):
        (then_vals, then_tree), (else_vals, else_tree) = then_ret, else_ret
        if then_tree != else_tree or [v.type for v in then_vals] != [v.type for v in else_vals]:
            # Triton's wording ("Inconsistent return types"), which its test_const matches, at the
            # else branch's `return` as Triton (at the `if` when that branch falls off the end)
            raise self.error(else_return or node,
                             "Inconsistent return types: the branches of this 'if' return different types: "
                             f"{[str(v.type) for v in then_vals]} and {[str(v.type) for v in else_vals]}")
        results = self.emit_if(cond, then_block, then_vals, else_block, else_vals, True)
        self.emit_return(self.rebuild_returned(then_tree, results) if then_tree != "none" else None, node)

    def dynamic_ifexp(self, node, cond):
        if self.is_elementwise_condition(cond):
            return self.predicated_ifexp(node, cond)
        cond = self.scalar_condition(cond, "conditional expression")
        values = []
        for branch in (node.body, node.orelse):
            block = ir.Block()
            saved = (self.builder.block, self.builder.index)
            self.builder.set_insertion_point_to_end(block)
            try:
                value = unwrap(self.visit(branch))
                values.append((block, None if value is None else self.semantic.to_tensor(value)))
            finally:
                self.builder.block, self.builder.index = saved
        (tb, tv), (eb, ev) = values
        if tv is None and ev is None:
            # `tl.store(a) if c else tl.store(b)`: evaluated for its side effects, as in Triton.
            self.emit_if(cond, tb, [], eb, [], True)
            return None
        if tv is None or ev is None:
            raise TypeError("one value of this conditional expression is None and the other is not")
        if tv.type != ev.type:
            raise TypeError(f"Ternary expression with dynamic condition has inconsistent types {tv.type} "
                            f"and {ev.type}")
        return self.emit_if(cond, tb, [tv], eb, [ev], True)[0]

    # -- loops -----------------------------------------------------------------------------------------
    def loop_carried(self, body_stmts, exclude=()) -> List[tuple]:
        """(name, tree, initial tensor leaves) for names the body assigns that exist before the loop."""
        carried = []
        for name in sorted(assigned_names(body_stmts) - set(exclude)):
            if name not in self.scope:
                continue
            value = self.scope[name]
            raw = unwrap(value)
            leaves, tree = flatten(raw if isinstance(raw, tuple) else value)
            if not all(is_tensor(unwrap(l)) or isinstance(unwrap(l), (int, float, bool)) for l in leaves):
                continue  # compile-time objects (dtypes, functions) are not carried
            leaves, spec = self.expand_descriptors(leaves, name)
            if any(spec):
                tree = _WithDescriptors(tree, spec)
            tensors = [self.semantic.to_tensor(unwrap(l)) if not is_tensor(unwrap(l)) else unwrap(l)
                       for l in leaves]
            if self.elementwise and self.elementwise_shape:
                # map_elementwise: a scalar of the mapped function is one value per element, so a
                # loop-carried scalar is carried per element (the body may make it data-dependent).
                tensors = [t if t.type.is_block() else self.semantic.broadcast_to(t, self.elementwise_shape)
                           for t in tensors]
            carried.append((name, tree, tensors))
        return carried

    def bind_block_args(self, carried, args) -> None:
        pos = 0
        for name, tree, inits in carried:
            leaves = [tl.tensor(args[pos + i], t.type) for i, t in enumerate(inits)]
            if isinstance(tree, _WithDescriptors):
                tree, leaves = tree.tree, self.rebuild_descriptors(leaves, tree.spec)
            self.scope[name] = rebuild(tree, leaves)
            pos += len(inits)

    # A tensor descriptor is not a value that crosses an scf.if/for/while boundary: one made in this
    # function (`tl.make_tensor_descriptor`) crosses as its parts (base, shape, strides) and is made
    # again from them on the other side, as a persistent kernel that moves to a new batch needs.
    def expand_descriptors(self, leaves, name: str):
        """(leaves with each descriptor replaced by its parts, per original leaf its (block type,
        padding) or None)."""
        out, spec = [], []
        for leaf in leaves:
            d = unwrap(leaf)
            if not isinstance(d, tl.tensor_descriptor):
                out.append(leaf)
                spec.append(None)
                continue
            if d.base is None:
                raise TypeError(f"tensor descriptor '{name}' cannot change under control flow here: it was "
                                "not made by tl.make_tensor_descriptor in this function")
            out.extend([d.base, *d.shape, *d.strides])
            spec.append((d.block_type, d.padding))
        return out, spec

    def rebuild_descriptors(self, values, spec) -> list:
        """The inverse of `expand_descriptors` on values of the other side (block args, op results)."""
        out, pos = [], 0
        for entry in spec:
            if entry is None:
                out.append(values[pos])
                pos += 1
                continue
            block, padding = entry
            rank = len(block.shape)
            parts = values[pos:pos + 1 + 2 * rank]
            with self.semantic:
                out.append(self.semantic.make_tensor_descriptor(parts[0], parts[1:1 + rank], parts[1 + rank:],
                                                                list(block.shape), padding))
            pos += 1 + 2 * rank
        return out

    def yielded_values(self, carried, block, node) -> List[tl.tensor]:
        saved = (self.builder.block, self.builder.index)
        self.builder.set_insertion_point_to_end(block)
        try:
            out = []
            for name, tree, inits in carried:
                value = self.scope[name]
                raw = unwrap(value)
                leaves, new_tree = flatten(raw if isinstance(raw, tuple) else value)
                spec = tree.spec if isinstance(tree, _WithDescriptors) else [None] * len(leaves)
                tree = tree.tree if isinstance(tree, _WithDescriptors) else tree
                if new_tree != tree:
                    raise TypeError(f"loop-carried variable '{name}' changes its tuple structure in the loop")
                leaves, new_spec = self.expand_descriptors(leaves, name)
                if new_spec != spec:
                    raise TypeError(f"loop-carried variable '{name}' changes between a tensor descriptor and "
                                    "another value (or another block type) in the loop")
                for init, leaf in zip(inits, leaves):
                    t = self.semantic.to_tensor(unwrap(leaf))
                    if t.type != init.type:
                        raise TypeError(f"loop-carried variable '{name}' has initial type {init.type} but is "
                                        f"re-assigned to {t.type} in the loop; make sure that the type stays "
                                        "consistent")
                    out.append(t)
            return out
        finally:
            self.builder.block, self.builder.index = saved

    def visit_For(self, node):
        if node.orelse:
            raise NotImplementedError("'for ... else' is not supported")
        iterable = self.visit(node.iter)
        raw = unwrap(iterable)
        if isinstance(raw, tl.static_range):
            for i in range(raw.start, raw.end, raw.step):
                self.assign_target(node.target, tl.constexpr(i))
                self.visit_loop_body(node.body)
            return None
        if isinstance(raw, (tuple, list)) or (isinstance(iterable, tl.constexpr) and
                                              isinstance(raw, (tuple, list, range))):
            for item in raw:  # iterating a compile-time sequence unrolls, as in Triton
                self.assign_target(node.target, wrap(item))
                self.visit_loop_body(node.body)
            return None
        if not isinstance(raw, tl.range):
            raise TypeError(f"'for' loops must iterate over range, tl.range, tl.static_range or a tuple, "
                            f"got {type(raw).__name__}")
        if not isinstance(node.target, ast.Name):
            raise NotImplementedError("the loop variable of a 'for' over a range must be a single name")
        self.runtime_for(node, raw)
        return None

    def visit_loop_body(self, stmts):
        self.loop_depth += 1
        try:
            self.visit_statements(stmts)
        finally:
            self.loop_depth -= 1

    def runtime_for(self, node, rng):
        sem = self.semantic
        start, end, step_value = unwrap(rng.start), unwrap(rng.end), unwrap(rng.step)
        # scf.for only counts upwards. As in Triton, a constant negative step runs the loop over
        # [end, start) with the positive step and maps the counter back: iv = start - counter + end.
        negative_step = False
        if not is_tensor(step_value):
            if not isinstance(step_value, int) or isinstance(step_value, bool):
                raise TypeError(f"the step of a range must be an integer, got {step_value!r}")
            if step_value == 0:
                raise ValueError("the step of a range must not be zero")
            if step_value < 0:
                negative_step = True
                start, end, step_value = end, start, -step_value
        bounds = [sem.to_tensor(v) for v in (start, end, step_value)]
        for b in bounds:
            if b.type.is_block() or not b.type.scalar.is_int():
                raise TypeError(f"range bounds must be scalar integers, got {b.type}")
        iv_type = sem.integer_promote(sem.integer_promote(bounds[0].type, bounds[1].type), bounds[2].type)
        if iv_type.int_bitwidth < 32:
            iv_type = tl.int32
        lb, ub, step = [sem.cast(b, iv_type) for b in bounds]
        target = node.target.id
        before = dict(self.scope)
        carried = self.loop_carried(node.body, exclude=(target,))
        inits = [t for _, _, ts in carried for t in ts]
        body = ir.Block([iv_type.to_ir()] + [t.type.to_ir() for t in inits])
        saved = (self.builder.block, self.builder.index)
        self.builder.set_insertion_point_to_end(body)
        try:
            iv = tl.tensor(body.args[0], iv_type)
            self.scope[target] = sem.add(sem.sub(ub, iv), lb) if negative_step else iv
            self.bind_block_args(carried, body.args[1:])
            self.visit_loop_body(node.body)
        finally:
            self.builder.block, self.builder.index = saved
        new_values = self.yielded_values(carried, body, node)
        body.append(ir.Operation("scf.yield", [v.handle for v in new_values], (), None, (), self.builder.loc))
        attrs = {}
        for attr, value in (("tt.num_stages", rng.num_stages), ("tt.loop_unroll_factor", rng.loop_unroll_factor)):
            if value is not None:
                attrs[attr] = int(value)
        for attr, value in (("tt.disallow_acc_multi_buffer", rng.disallow_acc_multi_buffer),
                            ("tt.flatten", rng.flatten), ("tt.warp_specialize", rng.warp_specialize),
                            ("tt.disable_licm", rng.disable_licm)):
            if value:
                attrs[attr] = True
        op = self.builder.create("scf.for", [lb.handle, ub.handle, step.handle] + [t.handle for t in inits],
                                 [t.type.to_ir() for t in inits], attrs, [ir.Region([body])])
        self.scope = before
        self.bind_block_args(carried, op.results)

    def visit_While(self, node):
        if node.orelse:
            raise NotImplementedError("'while ... else' is not supported")
        before = dict(self.scope)
        carried = self.loop_carried(node.body)
        if self.elementwise and self.condition_is_per_element(node.test, carried):
            return self.predicated_while(node, carried, before)
        inits = [t for _, _, ts in carried for t in ts]
        types = [t.type.to_ir() for t in inits]
        before_block, after_block = ir.Block(types), ir.Block(types)
        saved = (self.builder.block, self.builder.index)
        disable_licm = False
        try:
            self.builder.set_insertion_point_to_end(before_block)
            self.bind_block_args(carried, before_block.args)
            cond = unwrap(self.visit(node.test))
            if isinstance(cond, tl.condition):  # `while tl.condition(c, disable_licm=...)`
                disable_licm = cond.disable_licm
                cond = unwrap(cond.condition)
            if not is_tensor(cond):
                cond = self.semantic.to_tensor(bool(cond))
            cond = self.scalar_condition(cond, "while")
            self.builder.create("scf.condition", [cond.handle] + list(before_block.args), [])
            self.builder.set_insertion_point_to_end(after_block)
            self.scope = dict(before)
            self.bind_block_args(carried, after_block.args)
            self.visit_loop_body(node.body)
        finally:
            self.builder.block, self.builder.index = saved
        new_values = self.yielded_values(carried, after_block, node)
        after_block.append(ir.Operation("scf.yield", [v.handle for v in new_values], (), None, (),
                                        self.builder.loc))
        op = self.builder.create("scf.while", [t.handle for t in inits], types,
                                 {"tt.disable_licm": True} if disable_licm else None,
                                 [ir.Region([before_block]), ir.Region([after_block])])
        self.scope = before
        self.bind_block_args(carried, op.results)

    def condition_is_per_element(self, test, carried) -> bool:
        """Is a `while` condition a tensor (elementwise mode)? Found by building it in a scratch block
        from the loop's initial values, which have the types the loop will carry."""
        scratch = ir.Block()
        saved_point, saved_scope = (self.builder.block, self.builder.index), dict(self.scope)
        try:
            self.builder.set_insertion_point_to_end(scratch)
            for name, tree, tensors in carried:
                self.scope[name] = rebuild(tree, tensors)
            cond = unwrap(self.visit(test))
            if isinstance(cond, tl.condition):
                cond = unwrap(cond.condition)
            return is_tensor(cond) and cond.type.is_block()
        finally:
            self.builder.block, self.builder.index = saved_point
            self.scope = saved_scope


def _same_constant(a, b) -> bool:
    a, b = unwrap(a), unwrap(b)
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # values whose == is not a plain bool
        return a is b


class _WithDescriptors:
    """A loop-carried or returned value's tree whose leaves include tensor descriptors carried as
    their parts (`spec`: per leaf, the descriptor's block type and padding, or None)."""

    def __init__(self, tree, spec):
        self.tree, self.spec = tree, spec

    def __eq__(self, other):
        return isinstance(other, _WithDescriptors) and (self.tree, self.spec) == (other.tree, other.spec)

    def __hash__(self):
        return hash((repr(self.tree), repr(self.spec)))


def _name_of_leaf(yielded, index: int) -> str:
    pos = 0
    for name, _tree, count, _spec in yielded:
        if index < pos + count:
            return name
        pos += count
    return "?"
