"""TTIR -> a readable NumPy program that runs a batch of programs of the grid at once.

Every SSA value becomes one Python variable. A *varying* value (one that may differ between
programs, see analysis.py) holds shape (P, *ir_shape): P programs side by side; a *uniform* value
holds `ir_shape` and broadcasts. Control flow on uniform conditions is plain Python; on varying
conditions it runs under a per-program mask `act` (both branches of an `scf.if`, merged with
`np.where`; loops until every program is done), and every side effect is masked by `act`.

The program is generated once per compiled kernel and kept as text (`asm["py"]`); the launcher
compiles it once, so launching never dispatches on ops.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from tilejit import ir
from tilejit.errors import CompilationError

from . import numerics as nx
from .analysis import (Analysis, is_pointerish, largest_tensor, reading_functions, suspending_functions,
                       waiting_loops, written_slots)
from .codegen_ops import FLOAT_BINARY, FLOAT_UNARY, INT_BINARY, ValueOpsMixin, py_literal
from .memory import DYNAMIC

CASTS = ("arith.extsi arith.extui arith.trunci arith.extf arith.truncf arith.sitofp arith.uitofp "
         "arith.fptosi arith.fptoui arith.bitcast tt.bitcast tt.int_to_ptr tt.ptr_to_int tt.fp_to_fp").split()
NO_CODE = {"tt.assume", "gpu.barrier"}
RMW_KINDS = {1: "and", 2: "or", 3: "xor", 4: "add", 5: "fadd", 6: "max", 7: "min", 8: "umax", 9: "umin",
             10: "xchg"}
# A reduction/scan region made of one of these ops is one NumPy ufunc call.
KNOWN_COMBINERS = {"arith.addf": "add", "arith.addi": "add", "arith.mulf": "mul", "arith.muli": "mul",
                   "arith.maxnumf": "fmax", "arith.minnumf": "fmin", "arith.maximumf": "max",
                   "arith.minimumf": "min", "arith.maxsi": "max", "arith.minsi": "min", "arith.maxui": "umax",
                   "arith.minui": "umin", "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor"}

FUNC_PARAMS = "mem, P, pid0, pid1, pid2, nprog0, nprog1, nprog2, act"


def _dispatch_table() -> Dict[str, str]:
    table = {}
    for name in INT_BINARY:
        table[name] = "op_int_binary"
    for name in FLOAT_BINARY:
        table[name] = "op_float_binary"
    for name in FLOAT_UNARY:
        table[name] = "op_float_unary"
    for name in CASTS:
        table[name] = "op_cast"
    return table


def _emulated_format(v: ir.Value):
    """The emulated float format (bf16, fp8) of `v`'s elements, whose NaN is a bit pattern, or None."""
    return ir.element_type(v.type).name if nx.is_emulated(v.type) else None


class ProgramGenerator(ValueOpsMixin):
    DISPATCH = _dispatch_table()

    def __init__(self, module: ir.Module, param_names: Optional[List[str]] = None, sanitize: bool = False):
        self.module = module
        self.sanitize = sanitize
        funcs = module.functions
        if not funcs:
            raise CompilationError("the TTIR module has no tt.func")
        public = [f for f in funcs if f.attrs.get("sym_visibility", "public") == "public"]
        self.kernel = (public or funcs)[0]
        self.kernel_name = self.kernel.attrs.get("sym_name", "kernel")
        entry = self.kernel.regions[0].blocks[0]
        names = list(param_names or [])
        if len(names) != len(entry.args):
            names = [f"arg{i}" for i in range(len(entry.args))]
        self.param_names = names
        self.constants: List[str] = []
        self.sites: List[str] = []
        self.functions: List[List[str]] = []
        self.pending_callees: List[ir.Operation] = []
        self.callee_names: Dict[str, str] = {}
        self.counter = 0

    # -- entry point ----------------------------------------------------------------------------
    def generate(self) -> str:
        entry = self.kernel.regions[0].blocks[0]
        self.analyses = {}
        for func in self.module.functions:
            if func is self.kernel:
                self.analyses[self.kernel_name] = Analysis(func)
            else:
                slots = [DYNAMIC] * len(func.regions[0].blocks[0].args)
                self.analyses[func.attrs.get("sym_name")] = Analysis(func, args_varying=True, arg_slots=slots)
        # Programs that wait for each other (spin locks, flags) run one program at a time, each a
        # generator that yields to the others while it waits (scheduler.py); all others in lockstep.
        self.suspending = suspending_functions(self.module, self.analyses)
        # The sanitizer needs to know which program makes each access: it runs programs one at a time.
        self.cooperative = self.sanitize or self.kernel_name in self.suspending
        self.function(self.kernel, "program" if self.cooperative else "kernel", self.analyses[self.kernel_name],
                      act=None)
        while self.pending_callees:
            callee = self.pending_callees.pop()
            name = callee.attrs["sym_name"]
            self.function(callee, self.callee_names[name], self.analyses[name], act="act")
        params = []
        for name, a in zip(self.param_names, entry.args):
            t = a.type
            if isinstance(t, ir.PointerType):
                params.append((name, "pointer", nx.dtype_name(nx.memory_dtype(t.pointee))
                               if not isinstance(t.pointee, ir.TensorType) else "np.uint8"))
            else:
                params.append((name, str(t), nx.dtype_name(nx.numpy_dtype(t))))
        out = [f'"""NumPy program of kernel {self.kernel_name!r}, generated by tilejit_interpreter from TTIR.',
               "",
               "Values carry a leading program axis P (programs of one batch) unless uniform; `act`",
               'is the mask of active programs under divergent control flow (None: all)."""',
               "import numpy as np",
               "from tilejit.ir import Location as Loc",
               "from tilejit_interpreter import memory as mx, numerics as nx, runtime as rt, scheduler",
               "",
               f"KERNEL_NAME = {self.kernel_name!r}",
               *self.batch_constants(),
               "# (parameter name, IR type or 'pointer', NumPy dtype of the scalar or of the pointee)",
               "PARAMS = [" + "".join(f"\n    ({n!r}, {k!r}, {d}),"
                                      for n, k, d in [(p[0], p[1], p[2]) for p in params]) + "\n]",
               "# source location and op of every memory access, print and assert (for error messages)",
               "SITES = [" + "".join(f"\n    {s}," for s in self.sites) + "\n]",
               "", *self.constants, ""]
        if self.cooperative:
            out.extend([f"def kernel({FUNC_PARAMS}, *args):",
                        "    scheduler.run_programs(program, mem, P, (pid0, pid1, pid2), (nprog0, nprog1, nprog2), "
                        f"args, PROGRAM_ELEMENTS, sanitize={self.sanitize})", ""])
        for lines in self.functions:
            out.extend(lines)
            out.append("")
        return "\n".join(out)

    def batch_constants(self) -> List[str]:
        largest = largest_tensor(self.kernel)
        if not self.cooperative:
            return [f"LARGEST_TENSOR = {largest}"]
        # Every program runs alone (P = 1): the launcher's batch is the set of programs resident at
        # once, as on a GPU, bounded by the scheduler from the elements of one program's values.
        return ["LARGEST_TENSOR = 1", f"PROGRAM_ELEMENTS = {largest}"]

    # -- per function state ---------------------------------------------------------------------
    def function(self, func: ir.Operation, fname: str, analysis: Analysis, act: Optional[str]) -> None:
        self.analysis = analysis
        self.names: Dict[ir.Value, str] = {}
        # Pointer tensors only loaded or stored through (addptr/broadcast chains over a splat scalar):
        # value -> (scalar base pointer, offset terms, (lead, first) when the one term is
        # `lead + make_range(first, ..)`, see row_offsets).
        self.fused_pointers: Dict[ir.Value, tuple] = {}
        # Slots this function never writes: a load from them may return a view of the argument.
        self.written = written_slots(func, analysis)
        # Loops that wait for other programs: each iteration ends with a `yield` to the scheduler.
        self.waiting = set(waiting_loops(func, analysis, reading_functions(self.module))) if self.cooperative else set()
        self.lines: List[str] = []
        self.indent = 1
        self.act = act
        entry = func.regions[0].blocks[0]
        args = [self.fresh(a, "arg") for a in entry.args]
        head = f"def {fname}({FUNC_PARAMS}" + "".join(", " + a for a in args) + "):"
        self.block(entry)
        term = entry.terminator
        if term is not None and term.name == "tt.return" and term.operands:
            self.emit("return (" + "".join(self.as_varying(v) + ", " for v in term.operands) + ")")
        if len(self.lines) == 0:
            self.emit("pass")
        self.functions.append([head] + self.lines)

    def fresh(self, v: ir.Value, prefix: str = "v") -> str:
        self.counter += 1
        name = f"{prefix}{self.counter}"
        self.names[v] = name
        return name

    def name(self, v: ir.Value) -> str:
        try:
            return self.names[v]
        except KeyError:
            raise CompilationError("the interpreter met a value used before its definition "
                                   f"(type {v.type})") from None

    def varying(self, v: ir.Value) -> bool:
        return self.analysis.is_varying(v)

    def as_varying(self, v: ir.Value) -> str:
        """`v` with the program axis (uniform values are broadcast, not copied)."""
        if self.varying(v) or _is_aggregate(v.type):
            return self.name(v)
        return f"rt.spread({self.name(v)}, P, {tuple(ir.shape_of(v.type))})"

    def coerce(self, src: ir.Value, dst: ir.Value) -> str:
        """`src` in the representation of `dst` (varying when `dst` is, pinned to its argument when
        `dst`'s argument is not known statically)."""
        return self.pinned(src, dst, self.as_varying(src) if self.varying(dst) else self.name(src))

    def pinned(self, src: ir.Value, dst: ir.Value, expr: Optional[str] = None) -> str:
        """`expr` (the name of pointer `src`) as it flows into `dst`: when `src`'s argument is known
        and `dst`'s is not, the pointer is pinned to its argument (memory.pin), since from here on
        its slot bits are its provenance."""
        expr = self.name(src) if expr is None else expr
        if is_pointerish(dst.type) and self.analysis.slot(dst) == DYNAMIC and self.analysis.slot(src) > 0:
            return f"mx.pin({expr}, {self.analysis.slot(src)})"
        return expr

    def assign(self, targets: List[str], exprs: List[str]) -> None:
        """`a, b = x, y`: every right-hand side is evaluated before any target changes."""
        self.emit(", ".join(targets) + " = " + ", ".join(exprs))

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def define(self, v: ir.Value, expr: str, op: ir.Operation, alias: bool = False) -> None:
        if alias:
            self.names[v] = expr
            return
        name = self.fresh(v)
        line = f"{name} = {expr}"
        if op is not None and op.loc.line:
            line += f"  # {op.name} line {op.loc.line}"
        self.emit(line)

    def define_constant(self, v: ir.Value, expr: str) -> None:
        self.counter += 1
        name = f"K{self.counter}"
        self.constants.append(f"{name} = {expr}")
        self.names[v] = name

    def where(self, op: ir.Operation) -> str:
        """A trailing comment naming the op and its source line (empty without a location)."""
        return f"  # {op.name} line {op.loc.line}" if op.loc.line else ""

    def error(self, op: ir.Operation, message: str) -> CompilationError:
        return CompilationError.at(op.loc, message, kernel=self.kernel_name)

    def site(self, op: ir.Operation) -> int:
        loc = op.loc
        self.sites.append(f"(Loc({loc.file!r}, {loc.line}, {loc.col}), {op.name!r})")
        return len(self.sites) - 1

    def act_expr(self) -> str:
        return self.act if self.act is not None else "None"

    # -- blocks and dispatch --------------------------------------------------------------------
    def block(self, block: ir.Block) -> List[ir.Value]:
        """Emit a block's ops; returns the operands of its terminator."""
        for op in block.ops:
            if ir.op_info(op.name).terminator:
                return list(op.operands)
            self.op(op)
        return []

    def op(self, op: ir.Operation) -> None:
        if op.name in NO_CODE:
            return
        self.check_type_supported(op)
        method = self.DISPATCH.get(op.name) or "op_" + op.name.replace(".", "_")
        handler = getattr(self, method, None)
        if handler is None:
            raise self.error(op, f"the interpreter does not implement op '{op.name}'")
        handler(op)

    def body(self, block: ir.Block, act: Optional[str]) -> List[ir.Value]:
        saved, self.act = self.act, act
        self.indent += 1
        start = len(self.lines)
        yields = self.block(block)
        self.act = saved
        self._pending_pass = len(self.lines) == start
        return yields

    def end_body(self) -> None:
        if self._pending_pass:
            self.emit("pass")
        self.indent -= 1

    def op_tt_elementwise_inline_asm(self, op: ir.Operation) -> None:
        raise self.error(op, "tl.inline_asm_elementwise runs GPU assembly (PTX or GCN), which the interpreter "
                             "cannot execute: run this kernel on a GPU backend")

    # -- structured control flow ----------------------------------------------------------------
    def op_scf_if(self, op: ir.Operation) -> None:
        cond = op.operands[0]
        then_block = op.regions[0].blocks[0]
        else_block = op.regions[1].blocks[0] if len(op.regions) > 1 and op.regions[1].blocks else None
        results = [self.fresh(r) for r in op.results]
        if not self.varying(cond):
            self.emit(f"if {self.name(cond)}:  # scf.if line {op.loc.line}")
            self.branch(then_block, op, results, self.act)
            if else_block is not None:
                self.emit("else:")
                self.branch(else_block, op, results, self.act)
            return
        c = self.name(cond)
        self.counter += 1
        n = self.counter
        then_names = [f"t{n}_{i}" for i in range(len(results))]
        else_names = [f"e{n}_{i}" for i in range(len(results))]
        self.emit(f"then{n} = rt.and_mask({self.act_expr()}, {c})  # divergent scf.if line {op.loc.line}")
        self.emit(f"else{n} = rt.and_not_mask({self.act_expr()}, {c})")
        for mask, block, names in ((f"then{n}", then_block, then_names), (f"else{n}", else_block, else_names)):
            if block is None:
                continue
            if not results:
                self.emit(f"if {mask}.any():")
                self.branch(block, op, names, mask)
            else:
                self.indent -= 1
                self.branch(block, op, names, mask)
                self.indent += 1
        for i, r in enumerate(op.results):
            self.emit(f"{results[i]} = rt.merge({c}, {then_names[i]}, {else_names[i]}, "
                      f"{_rank(r.type)})")

    def branch(self, block: ir.Block, op: ir.Operation, names: List[str], act: Optional[str]) -> None:
        yields = self.body(block, act)
        for name, y, r in zip(names, yields, op.results):
            self.emit(f"{name} = {self.coerce(y, r)}")
            self._pending_pass = False
        self.end_body()

    def op_scf_for(self, op: ir.Operation) -> None:
        lb, ub, step, *inits = op.operands
        body = op.regions[0].blocks[0]
        iv, *iter_args = body.args
        iv_name = self.fresh(iv, "iv")
        carried = [self.fresh(a, "a") for a in iter_args]
        for name, init, a in zip(carried, inits, iter_args):
            self.emit(f"{name} = {self.coerce(init, a)}")
        divergent = any(self.varying(v) for v in (lb, ub, step))
        dtype = self.dt(iv.type)
        if not divergent:
            self.emit(f"for {iv_name} in rt.irange({self.name(lb)}, {self.name(ub)}, {self.name(step)}, "
                      f"{dtype}):  # scf.for line {op.loc.line}")
            yields = self.body(body, self.act)
            if carried:
                self.assign(carried, [self.coerce(y, a) for y, a in zip(yields, iter_args)])
                self._pending_pass = False
            self.end_body()
        else:
            self.counter += 1
            n = self.counter
            self.emit(f"trips{n} = rt.trip_count({self.name(lb)}, {self.name(ub)}, {self.name(step)})"
                      f"  # divergent scf.for line {op.loc.line}")
            self.emit(f"for k{n} in range(int(np.max(trips{n}, initial=0))):")
            self.indent += 1
            self.emit(f"run{n} = rt.and_mask({self.act_expr()}, k{n} < trips{n})")
            self.emit(f"{iv_name} = rt.iv_at({self.name(lb)}, {self.name(step)}, k{n}, {dtype})")
            self.indent -= 1
            yields = self.body(body, f"run{n}")
            if carried:
                self.assign(carried, [f"rt.merge(run{n}, {self.coerce(y, a)}, {c}, {_rank(a.type)})"
                                      for y, a, c in zip(yields, iter_args, carried)])
            self._pending_pass = False
            self.end_body()
        for r, name in zip(op.results, carried):
            self.define(r, name, None, alias=True)

    def op_scf_while(self, op: ir.Operation) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        carried = [self.fresh(a, "w") for a in before.args]
        for name, init, a in zip(carried, op.operands, before.args):
            self.emit(f"{name} = {self.coerce(init, a)}")
        results = [self.fresh(r) for r in op.results]
        cond_op = before.terminator
        divergent = self.varying(cond_op.operands[0])
        self.counter += 1
        n = self.counter
        if divergent:
            self.emit(f"alive{n} = rt.active_programs({self.act_expr()}, P)  # divergent scf.while line "
                      f"{op.loc.line}")
            for r in results:
                self.emit(f"{r} = None")
        self.emit("while True:" + ("" if divergent else f"  # scf.while line {op.loc.line}"))
        cond, *forwarded = self.body(before, f"alive{n}" if divergent else self.act)
        if divergent:
            self.emit(f"stay{n} = np.asarray({self.name(cond)}) & alive{n}")
            self.emit(f"leave{n} = alive{n} & ~stay{n}")
            for r, f, res in zip(results, forwarded, op.results):
                self.emit(f"{r} = rt.merge(leave{n}, {self.coerce(f, res)}, {r}, {_rank(res.type)})")
            self.emit(f"alive{n} = stay{n}")
            self.emit(f"if not alive{n}.any():")
        else:
            for r, f, res in zip(results, forwarded, op.results):
                self.emit(f"{r} = {self.coerce(f, res)}")
            self.emit(f"if not {self.name(cond)}:")
        self.emit("    break")
        for a, f in zip(after.args, forwarded):
            self.emit(f"{self.fresh(a, 'b')} = {self.coerce(f, a)}")
        self.indent -= 1
        yields = self.body(after, f"alive{n}" if divergent else self.act)
        if carried:
            self.assign(carried, [self.coerce(y, a) for y, a in zip(yields, before.args)])
        if op in self.waiting:
            # Let the other programs run; the scheduler compares (loop, carried values) between
            # rounds to tell a wait that can end from one that never will.
            self.emit(f"yield ({self.site(op)}, " + "".join(c + ", " for c in carried) + ")")
        self._pending_pass = False
        self.end_body()

    # -- reductions and scans -------------------------------------------------------------------
    def known_combiner(self, op: ir.Operation) -> Optional[str]:
        block = op.regions[0].blocks[0]
        if len(op.operands) != 1 or len(block.ops) != 2:
            return None
        inner, term = block.ops
        fmt = self.fmt(op.operands[0])
        if fmt in nx.EMULATED_FLOATS or fmt == "i1" or inner.name not in KNOWN_COMBINERS:
            return None
        if set(inner.operands) != set(block.args) or list(term.operands) != [inner.results[0]]:
            return None
        return KNOWN_COMBINERS[inner.name]

    def combine_function(self, op: ir.Operation) -> str:
        """Emit the region as a local Python function of 2K arrays returning K arrays."""
        block = op.regions[0].blocks[0]
        self.counter += 1
        fname = f"combine{self.counter}"
        params = [self.fresh(a, "c") for a in block.args]
        self.emit(f"def {fname}({', '.join(params)}):")
        yields = self.body(block, None)
        self.emit("return (" + "".join(self.name(y) + ", " for y in yields) + ")")
        self._pending_pass = False
        self.end_body()
        return fname

    def reduce_inputs(self, op: ir.Operation):
        varying = any(self.varying(v) for v in op.operands)
        names = [self.as_varying(v) if varying else self.name(v) for v in op.operands]
        return names, int(op.attrs.get("axis", 0)) + (1 if varying else 0)

    def op_tt_reduce(self, op: ir.Operation) -> None:
        names, axis = self.reduce_inputs(op)
        kind = self.known_combiner(op)
        if kind is not None:
            w = self.width(op.operands[0])
            self.define(op.results[0], f"rt.reduce_known('{kind}', {names[0]}, {axis}, {w})", op)
            return
        fname = self.combine_function(op)
        outs = [self.fresh(r) for r in op.results]
        self.emit(f"{''.join(o + ', ' for o in outs)}= rt.reduce_tree({fname}, [{', '.join(names)}], {axis})")

    def op_tt_scan(self, op: ir.Operation) -> None:
        names, axis = self.reduce_inputs(op)
        reverse = bool(op.attrs.get("reverse", False))
        kind = self.known_combiner(op)
        if kind is not None:
            w = self.width(op.operands[0])
            self.define(op.results[0], f"rt.scan_known('{kind}', {names[0]}, {axis}, {reverse}, {w})", op)
            return
        fname = self.combine_function(op)
        outs = [self.fresh(r) for r in op.results]
        self.emit(f"{''.join(o + ', ' for o in outs)}= rt.scan_tree({fname}, [{', '.join(names)}], {axis}, "
                  f"{reverse})")

    # -- memory ---------------------------------------------------------------------------------
    def masked(self, mask: Optional[ir.Value], rank: int) -> str:
        m = self.name(mask) if mask is not None else "None"
        if self.act is None:
            return m
        return f"mx.combine_masks({m}, {self.act}, {rank})"

    def op_tt_load(self, op: ir.Operation) -> None:
        ptr, r = op.operands[0], op.results[0]
        shape = tuple(ir.shape_of(r.type))
        dtype = nx.dtype_name(nx.memory_dtype(r.type))
        is_bool = isinstance(ir.element_type(r.type), ir.IntType) and ir.element_type(r.type).width == 1
        site, slot = self.site(op), self.analysis.slot(ptr)
        if ir.is_block_ptr(ptr.type):
            check = [int(d) for d in op.attrs.get("boundary_check", []) or []]
            padding = op.attrs.get("padding", 1)
            padding = "nan" if padding in (2, "nan", "NAN", "PAD_NAN") else "zero"
            self.define(r, f"rt.block_pointer_load(mem, {site}, {slot}, {self.name(ptr)}, {shape}, {check}, "
                           f"'{padding}', {dtype}, {self.act_expr()}, P, {is_bool}, fmt={_emulated_format(r)!r})", op)
            return
        mask = op.operands[1] if len(op.operands) > 1 else None
        other = self.name(op.operands[2]) if len(op.operands) > 2 else "None"
        fused = self.fused_pointers.get(ptr)
        if fused is not None:
            base, terms, rows = fused
            self.define(r, f"rt.load_offsets(mem, {site}, {slot}, {self.name(base)}, "
                           f"{self.fused_offsets(terms, shape)}, "
                           f"{self.masked(mask, len(shape))}, {other}, {dtype}, {shape}, P, {is_bool}"
                           f"{self.rows_argument(rows)}{self.view_argument(slot, rows)})", op)
            return
        self.define(r, f"rt.load(mem, {site}, {slot}, {self.name(ptr)}, {self.masked(mask, len(shape))}, "
                       f"{other}, {dtype}, {shape}, P, {is_bool}, {self.analysis.is_aligned(ptr)})", op)

    def rows_argument(self, rows) -> str:
        """`, rows=(lead, first)` for offsets that are runs of consecutive elements (or nothing)."""
        if rows is None:
            return ""
        lead, first = rows
        return f", rows=({self.name(lead) if lead is not None else 0}, {first})"

    def view_argument(self, slot: int, rows) -> str:
        """`, fresh=False` when a load of consecutive elements may return a view of the argument:
        nothing in the kernel writes its slot (the launch checks that no other argument overlaps)."""
        if rows is None or self.written is None or slot in self.written:
            return ""
        return ", fresh=False"

    def op_tt_store(self, op: ir.Operation) -> None:
        ptr, value = op.operands[0], op.operands[1]
        shape = tuple(ir.shape_of(value.type))
        dtype = nx.dtype_name(nx.memory_dtype(value.type))
        site, slot = self.site(op), self.analysis.slot(ptr)
        if ir.is_block_ptr(ptr.type):
            check = [int(d) for d in op.attrs.get("boundary_check", []) or []]
            self.emit(f"rt.block_pointer_store(mem, {site}, {slot}, {self.name(ptr)}, {self.name(value)}, "
                      f"{shape}, {check}, {dtype}, {self.act_expr()})" + self.where(op))
            return
        mask = op.operands[2] if len(op.operands) > 2 else None
        fused = self.fused_pointers.get(ptr)
        if fused is not None:
            base, terms, rows = fused
            self.emit(f"rt.store_offsets(mem, {site}, {slot}, {self.name(base)}, {self.fused_offsets(terms, shape)}, "
                      f"{self.stored(value)}, {self.masked(mask, len(shape))}, {dtype}, {shape}"
                      f"{self.rows_argument(rows)})" + self.where(op))
            return
        self.emit(f"rt.store(mem, {site}, {slot}, {self.name(ptr)}, {self.stored(value)}, "
                  f"{self.masked(mask, len(shape))}, {dtype}, {shape}, {self.analysis.is_aligned(ptr)})"
                  + self.where(op))

    def stored(self, value: ir.Value) -> str:
        """A stored value; pointers stored as data are pinned to their argument (loaded back, their
        slot is decoded from their bits)."""
        slot = self.analysis.slot(value)
        if is_pointerish(value.type) and slot > 0:
            return f"mx.pin({self.name(value)}, {slot})"
        return self.name(value)

    def op_tt_descriptor_load(self, op: ir.Operation) -> None:
        desc, *offsets = op.operands
        r = op.results[0]
        shape = tuple(ir.shape_of(r.type))
        offs = "(" + "".join(self.name(o) + ", " for o in offsets) + ")"
        self.define(r, f"rt.descriptor_load(mem, {self.site(op)}, {self.analysis.slot(desc)}, {self.name(desc)}, "
                       f"{offs}, {shape}, {nx.dtype_name(nx.memory_dtype(r.type))}, {self.act_expr()}, P, "
                       f"fmt={_emulated_format(r)!r})", op)

    def op_tt_descriptor_store(self, op: ir.Operation) -> None:
        desc, value, *offsets = op.operands
        shape = tuple(ir.shape_of(value.type))
        offs = "(" + "".join(self.name(o) + ", " for o in offsets) + ")"
        self.emit(f"rt.descriptor_store(mem, {self.site(op)}, {self.analysis.slot(desc)}, {self.name(desc)}, "
                  f"{self.name(value)}, {offs}, {shape}, {nx.dtype_name(nx.memory_dtype(value.type))}, "
                  f"{self.act_expr()})" + self.where(op))

    def op_tt_atomic_rmw(self, op: ir.Operation) -> None:
        # The pointer gets the program axis even when uniform: every program performs the atomic.
        ptr, value = op.operands[0], op.operands[1]
        mask = op.operands[2] if len(op.operands) > 2 else None
        kind = op.attrs.get("atomic_rmw_op", "add")
        kind = RMW_KINDS.get(kind, kind) if isinstance(kind, int) else str(kind).lower()
        shape = tuple(ir.shape_of(value.type))
        r = op.results[0] if op.results else None
        need_old = bool(r is not None and r.uses)
        call = (f"mx.atomic_rmw(mem, {self.site(op)}, {self.analysis.slot(ptr)}, '{kind}', "
                f"{self.as_varying(ptr)}, {self.name(value)}, {self.masked(mask, len(shape))}, "
                f"{nx.dtype_name(nx.memory_dtype(value.type))}, '{self.fmt(value)}', {need_old}, {len(shape)}"
                f"{self.sem_argument(op)})")
        if r is None:
            self.emit(call)
        elif need_old:
            self.define(r, f"rt.spread({call}, P, {shape})", op)
        else:
            self.define(r, call, op)

    def op_tt_atomic_cas(self, op: ir.Operation) -> None:
        ptr, cmp, value = op.operands
        shape = tuple(ir.shape_of(value.type))
        call = (f"mx.atomic_cas(mem, {self.site(op)}, {self.analysis.slot(ptr)}, "
                f"{self.as_varying(ptr)}, {self.name(cmp)}, {self.name(value)}, {self.masked(None, len(shape))}, "
                f"{nx.dtype_name(nx.memory_dtype(value.type))}, {len(shape)}{self.sem_argument(op)})")
        self.define(op.results[0], f"rt.spread({call}, P, {shape})", op)

    def op_tt_atomic_load(self, op: ir.Operation) -> None:
        ptr, mask = op.operands
        r = op.results[0]
        shape = tuple(ir.shape_of(r.type))
        call = (f"mx.atomic_load(mem, {self.site(op)}, {self.analysis.slot(ptr)}, {self.as_varying(ptr)}, "
                f"{self.masked(mask, len(shape))}, {nx.dtype_name(nx.memory_dtype(r.type))}, {len(shape)}"
                f"{self.sem_argument(op)})")
        self.define(r, f"rt.spread({call}, P, {shape})", op)

    def op_tt_atomic_store(self, op: ir.Operation) -> None:
        # A store that is an atomic for the sanitizer's ordering (an exchange whose old value is unused).
        ptr, value, mask = op.operands
        shape = tuple(ir.shape_of(value.type))
        self.emit(f"mx.atomic_rmw(mem, {self.site(op)}, {self.analysis.slot(ptr)}, 'xchg', "
                  f"{self.as_varying(ptr)}, {self.name(value)}, {self.masked(mask, len(shape))}, "
                  f"{nx.dtype_name(nx.memory_dtype(value.type))}, '{self.fmt(value)}', False, {len(shape)}"
                  f"{self.sem_argument(op)})" + self.where(op))

    def sem_argument(self, op: ir.Operation) -> str:
        """`, sem=...` for the sanitizer, which orders programs by the atomics' semantics."""
        if not self.sanitize:
            return ""
        sem = str(op.attrs.get("sem", "acq_rel")).lower()
        return f", sem={sem!r}"

    # -- print, assert, calls -------------------------------------------------------------------
    def op_tt_print(self, op: ir.Operation) -> None:
        prefix = op.attrs.get("prefix", "")
        hex_ = bool(op.attrs.get("hex", False))
        signed = op.attrs.get("is_signed", [])
        signed = [bool(s) for s in (signed if isinstance(signed, list) else [signed])]
        values = "[" + ", ".join(self.name(v) for v in op.operands) + "]"
        shapes = [tuple(ir.shape_of(v.type)) for v in op.operands]
        fmts = [self.fmt(v) for v in op.operands]
        if not op.operands:
            self.emit(f"rt.device_print(mem, {prefix!r}, False, [np.int32(0)], [()], ['i32'], [True], "
                      f"{self.act_expr()}, P)")
            return
        self.emit(f"rt.device_print(mem, {prefix!r}, {hex_}, {values}, {shapes}, {fmts}, {signed}, "
                  f"{self.act_expr()}, P)" + self.where(op))

    def op_tt_assert(self, op: ir.Operation) -> None:
        cond = op.operands[0]
        message = op.attrs.get("message", "assertion failed")
        self.emit(f"rt.device_assert(mem, {self.site(op)}, {self.name(cond)}, {self.varying(cond)}, "
                  f"{self.act_expr()}, {py_literal(str(message))}, P)" + self.where(op))

    def op_tt_call(self, op: ir.Operation) -> None:
        callee_name = str(op.attrs.get("callee", "")).lstrip("@")
        callee = self.module.get(callee_name)
        if callee is None:
            raise self.error(op, f"call of unknown function '{callee_name}'")
        if callee_name not in self.callee_names:
            self.callee_names[callee_name] = f"func_{len(self.callee_names)}_{_identifier(callee_name)}"
            self.pending_callees.append(callee)
        callee_args = callee.regions[0].blocks[0].args
        args = "".join(", " + self.pinned(v, a, self.as_varying(v)) for v, a in zip(op.operands, callee_args))
        outs = [self.fresh(r) for r in op.results]
        call = (f"{self.callee_names[callee_name]}(mem, P, pid0, pid1, pid2, nprog0, nprog1, nprog2, "
                f"{self.act_expr()}{args})")
        if callee_name in self.suspending:
            call = "yield from " + call  # the callee may wait for other programs
        self.emit((("".join(o + ", " for o in outs) + "= ") if outs else "") + call)


def _rank(t: ir.Type) -> int:
    return len(ir.shape_of(t)) if not _is_aggregate(t) else 0


def _is_aggregate(t: ir.Type) -> bool:
    """Block pointers and tensor descriptors are tuples of scalars, not arrays."""
    return isinstance(t, ir.TensorDescType) or ir.is_block_ptr(t)


def _identifier(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def generate_program(module: ir.Module, param_names: Optional[List[str]] = None, sanitize: bool = False) -> str:
    """The NumPy program (Python source) of the module's kernel (`sanitize`: checked for data races
    and uninitialised reads, see sanitizer.py)."""
    return ProgramGenerator(module, param_names, sanitize).generate()
