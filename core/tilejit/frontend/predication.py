"""`tl.map_elementwise`: a scalar `@jit` function applied to every element of tensors.

Triton 3.5 builds a `tt.map_elementwise` op whose region holds the scalar body, and each GPU backend
loops over the elements. tilejit instead compiles the scalar function once over whole tensors, which
gives the same values because every `tl` operation on scalars is elementwise on tensors. What does not
carry over is scalar control flow, so inside the mapped function (and the `@jit` functions it calls)
the code generator runs in *elementwise mode*, where a condition that is a tensor means "per element":

- `if c:` / `a if c else b` evaluate both sides and merge every assigned name (and the returned value)
  with `tl.where(c, then, else)`: the SIMT if-conversion a GPU does for divergent lanes;
- `while c:` runs while any element's condition holds (`scf.while` on a reduction of `c`) and only the
  elements whose condition holds take the new values of the loop-carried names.

Because both sides of a branch run for every element, a branch may not store, print, assert, update
memory atomically or load (a lane that did not take the branch could fault): those are reported as a
compile error naming the operation. Every backend runs the result: no new TTIR op is involved.
"""
from __future__ import annotations

from typing import List

from .. import ir
from ..language import core as tl
from .values import flatten, is_jit_function, is_tensor, rebuild, unwrap

# Operations that must not run for elements that did not take a branch.
_UNSAFE_IN_BRANCH = {
    "tt.store": "a store", "tt.atomic_rmw": "an atomic", "tt.atomic_cas": "an atomic",
    "tt.atomic_load": "an atomic", "tt.atomic_store": "an atomic",
    "tt.print": "a print", "tt.assert": "an assert", "tt.load": "a load",
    "tt.descriptor_load": "a load", "tt.descriptor_store": "a store", "tt.histogram": None,
}


class PredicationMixin:
    """Elementwise mode of the code generator (see the module docstring)."""

    elementwise = False
    elementwise_shape = None  # the shape of the mapped tensors, inside the mapped function

    # -- tl.map_elementwise ------------------------------------------------------------------------
    def map_elementwise(self, scalar_fn, args, pack):
        if not is_jit_function(scalar_fn):
            raise TypeError(f"map_elementwise: scalar_fn must be a @jit function, got {type(scalar_fn).__name__}")
        if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
            raise ValueError(f"map_elementwise: pack must be a positive compile-time int, got {pack!r}")
        if not args:
            raise TypeError("map_elementwise needs at least one tensor argument")
        sem = self.semantic
        values = sem.broadcast_all(*[sem.to_tensor(unwrap(a)) for a in args])
        shape = list(values[0].type.shape) if values[0].type.is_block() else []
        numel = values[0].type.numel if shape else 1
        if pack > 1:
            if pack & (pack - 1) or numel % pack:
                raise ValueError(f"map_elementwise: pack={pack} must be a power of 2 that divides the number "
                                 f"of elements ({numel})")
            columns = [self._columns(sem.reshape(v, [numel // pack] + [2] * _log2(pack)), pack) for v in values]
            call_args = [c for cols in columns for c in cols]  # argument-major: x0..x{p-1}, y0..y{p-1}
        else:
            call_args = values
        mapped_shape = list(call_args[0].type.shape) if call_args[0].type.is_block() else None
        result = self.call_jit_function(scalar_fn, call_args, {}, elementwise=True, elementwise_shape=mapped_shape)
        single = not isinstance(result, tuple)
        results = [result] if single else list(result)
        if not results or any(r is None for r in results):
            raise TypeError("map_elementwise: the mapped function must return one or more values")
        results = [sem.to_tensor(unwrap(r)) for r in results]
        if pack > 1:
            if len(results) % pack:
                raise ValueError(f"map_elementwise: with pack={pack} the function must return a multiple of "
                                 f"{pack} values, got {len(results)}")
            outputs = []
            for first in range(0, len(results), pack):  # result-major: r0 of each element, then r1...
                group = results[first:first + pack]
                if len({str(r.type.scalar) for r in group}) != 1:
                    raise TypeError("map_elementwise: the packed values of one result have different types: "
                                    f"{[str(r.type.scalar) for r in group]}")
                group = [sem.broadcast_to(r, [numel // pack]) for r in group]
                outputs.append(sem.reshape(self._interleave(group), shape))
            results = outputs
        else:
            results = [sem.broadcast_to(r, shape) if shape else r for r in results]
        return results[0] if len(results) == 1 else tuple(results)

    def _columns(self, x, count) -> List[tl.tensor]:
        """x of shape [m, 2, ..., 2] (log2(count) twos) -> the `count` tensors x[:, j] (j row-major)."""
        if count == 1:
            return [x]
        even, odd = self.semantic.split(x)  # the least significant bit of j
        low, high = self._columns(even, count // 2), self._columns(odd, count // 2)
        return [(low if j % 2 == 0 else high)[j // 2] for j in range(count)]

    def _interleave(self, columns) -> tl.tensor:
        """The inverse of `_columns`: [m] tensors c_j -> one [m * count] tensor with c_j at i*count + j."""
        level = list(columns)
        while len(level) > 1:  # join along the most significant remaining bit of j first
            half = len(level) // 2
            level = [self.semantic.join(level[j], level[j + half]) for j in range(half)]
        joined = level[0]
        return self.semantic.reshape(joined, [joined.type.numel])

    # -- if-conversion ---------------------------------------------------------------------------------
    def is_elementwise_condition(self, cond) -> bool:
        return self.elementwise and is_tensor(cond) and cond.type.is_block()

    def inline_branch(self, stmts, before, returning: bool):
        """Visit `stmts` in the current block (no region); returns (scope, returned value or None)."""
        self.scope = dict(before)
        start = len(self.builder.block.ops)
        if returning:
            self.return_stack.append({"value": None})
        try:
            self.visit_statements(stmts)
            ret = None
            if returning:
                value = self.return_stack[-1]["value"]
                ret = value if value is not None else ([], "none")
        finally:
            if returning:
                self.return_stack.pop()
            self.terminated = False
        self.check_branch_is_safe(self.builder.block.ops[start:], "a data-dependent branch")
        branch_scope, self.scope = self.scope, dict(before)
        return branch_scope, ret

    def predicated_if(self, node, cond):
        sem = self.semantic
        cond = sem.cast(cond, tl.int1)
        from .statements import contains_return
        returning = contains_return(node.body) or contains_return(node.orelse)
        before = dict(self.scope)
        then_scope, then_ret = self.inline_branch(node.body, before, returning)
        else_scope, else_ret = self.inline_branch(node.orelse, before, returning)
        self.scope = dict(before)
        for name in sorted(n for n in then_scope if n in else_scope):
            tv, ev = then_scope[name], else_scope[name]
            if tv is before.get(name) and ev is before.get(name):
                continue
            self.scope[name] = self.select_values(cond, tv, ev, f"'{name}'")
        if returning:
            (then_vals, then_tree), (else_vals, else_tree) = then_ret, else_ret
            if then_tree != else_tree:
                raise TypeError("the branches of this 'if' return different structures")
            if then_tree == "none":
                self.emit_return(None, node)
                return None
            merged = [self.select_leaf(cond, a, b, "the returned value") for a, b in zip(then_vals, else_vals)]
            self.emit_return(self.rebuild_returned(then_tree, merged), node)
        return None

    def predicated_ifexp(self, node, cond):
        start = len(self.builder.block.ops)
        then_value, else_value = self.visit(node.body), self.visit(node.orelse)
        self.check_branch_is_safe(self.builder.block.ops[start:], "a data-dependent conditional expression")
        return self.select_values(self.semantic.cast(cond, tl.int1), then_value, else_value,
                                  "the conditional expression")

    def select_values(self, cond, then_value, else_value, what: str):
        then_raw, else_raw = unwrap(then_value), unwrap(else_value)
        then_leaves, then_tree = flatten(then_raw if isinstance(then_raw, tuple) else then_value)
        else_leaves, else_tree = flatten(else_raw if isinstance(else_raw, tuple) else else_value)
        if then_tree != else_tree:
            raise TypeError(f"mismatched structure for {what} between the two branches")
        merged = []
        for a, b in zip(then_leaves, else_leaves):
            ra, rb = unwrap(a), unwrap(b)
            if not is_tensor(ra) and not is_tensor(rb) and type(ra) is type(rb) and _equal(ra, rb):
                merged.append(a)  # the same compile-time value on both sides stays compile-time
            else:
                merged.append(self.select_leaf(cond, ra, rb, what))
        return rebuild(then_tree, merged)

    def select_leaf(self, cond, a, b, what: str) -> tl.tensor:
        sem = self.semantic
        a, b = sem.to_tensor(unwrap(a)), sem.to_tensor(unwrap(b))
        if a.type.scalar != b.type.scalar:
            raise TypeError(f"mismatched type for {what} between the then branch ({a.type.scalar}) and the "
                            f"else branch ({b.type.scalar}); both branches must give it the same type")
        return sem.where(cond, a, b)

    # -- masked while ------------------------------------------------------------------------------------
    def predicated_while(self, node, carried, before):
        """`while c:` with a per-element condition: loop while any element's `c` holds; an element
        takes the body's new values only while its own `c` holds."""
        sem = self.semantic
        inits = [t for _, _, ts in carried for t in ts]
        types = [t.type.to_ir() for t in inits]
        before_block, after_block = ir.Block(types), ir.Block(types)
        saved = (self.builder.block, self.builder.index)
        try:
            self.builder.set_insertion_point_to_end(before_block)
            self.bind_block_args(carried, before_block.args)
            active = self.elementwise_loop_condition(node.test)
            as_int = sem.cast(active, tl.int32)
            any_active = sem.reduction(as_int, None, lambda a: sem.or_(a[0], a[1])) \
                if as_int.type.is_block() else as_int
            self.builder.create("scf.condition", [sem.not_equal(any_active, 0).handle] + list(before_block.args), [])
            self.builder.set_insertion_point_to_end(after_block)
            self.scope = dict(before)
            self.bind_block_args(carried, after_block.args)
            old = {name: self.scope[name] for name, _, _ in carried}
            # The condition again, from the same carried values: which elements run this iteration.
            active = self.elementwise_loop_condition(node.test)
            start = len(after_block.ops)
            self.visit_loop_body(node.body)
            self.check_branch_is_safe(after_block.ops[start:], "a loop with a data-dependent condition")
            for name, _, _ in carried:
                self.scope[name] = self.select_values(active, self.scope[name], old[name], f"'{name}'")
        finally:
            self.builder.block, self.builder.index = saved
        new_values = self.yielded_values(carried, after_block, node)
        after_block.append(ir.Operation("scf.yield", [v.handle for v in new_values], (), None, (), self.builder.loc))
        op = self.builder.create("scf.while", [t.handle for t in inits], types, None,
                                 [ir.Region([before_block]), ir.Region([after_block])])
        self.scope = before
        self.bind_block_args(carried, op.results)

    def elementwise_loop_condition(self, test) -> tl.tensor:
        start = len(self.builder.block.ops)
        cond = unwrap(self.visit(test))
        self.check_branch_is_safe(self.builder.block.ops[start:], "a data-dependent loop condition")
        return self.semantic.cast(self.semantic.to_tensor(cond), tl.int1)

    # -- safety ----------------------------------------------------------------------------------------------
    def check_branch_is_safe(self, ops, where: str, seen=None) -> None:
        seen = set() if seen is None else seen
        for op in ops:
            if op.name in _UNSAFE_IN_BRANCH:
                what = _UNSAFE_IN_BRANCH[op.name] or f"'{op.name}'"
                raise TypeError(f"map_elementwise: {what} ({op.name}) inside {where} is not supported: both "
                                "sides run for every element; move it out of the mapped function")
            if op.name == "tt.call":
                callee = op.attrs.get("callee")
                if callee not in seen:
                    seen.add(callee)
                    func = _find_function(self.ctx.module, callee)
                    if func is not None:
                        self.check_branch_is_safe(_all_ops(func), where, seen)
            for region in op.regions:
                for block in region.blocks:
                    self.check_branch_is_safe(block.ops, where, seen)


def _all_ops(func):
    return [op for region in func.regions for block in region.blocks for op in block.ops]


def _find_function(module, name):
    for op in module.body:
        if op.attrs.get("sym_name") == name:
            return op
    return None


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # values whose == is not a plain bool
        return a is b


def _log2(n: int) -> int:
    return n.bit_length() - 1
