"""Static facts the generator needs about a function's values.

*Varying*: a value may differ between the programs of the grid. Values derived only from
constants, kernel scalar arguments and uniform loop induction variables are *uniform*: the
generated program holds them once (no program axis) and control flow on them is a plain Python
`if`/`for`. Everything else carries a leading program axis P.

*Slot*: which kernel argument a pointer points into (its parameter index + 1), when that is the
same on every path; `DYNAMIC` when it is not known statically (the memory helpers then decode it
per element).

Both are fixpoints over loops: a loop-carried value is varying when its initial value or the value
yielded for it is, so the analysis repeats until nothing changes (the sets only grow).
"""
from __future__ import annotations

from typing import Dict, Optional, Set

from tilejit import ir

from .memory import DYNAMIC

# Ops whose results differ between programs whatever their operands are.
ALWAYS_VARYING = {"tt.get_program_id", "tt.load", "tt.descriptor_load", "tt.atomic_rmw", "tt.atomic_cas",
                  "tt.atomic_load", "tt.call"}


def is_pointerish(t: ir.Type) -> bool:
    return isinstance(ir.element_type(t), (ir.PointerType, ir.TensorDescType))


class Analysis:
    def __init__(self, func: ir.Operation, args_varying: bool = False, arg_slots=None):
        self.varying: Set[ir.Value] = set()
        self.slots: Dict[ir.Value, int] = {}
        # Pointers that may not be a whole number of elements from their argument's start (made
        # by a pointer bitcast, from an integer, or loaded from memory): their accesses check alignment.
        self.maybe_misaligned: Set[ir.Value] = set()
        entry = func.regions[0].blocks[0]
        for i, a in enumerate(entry.args):
            if args_varying:
                self.varying.add(a)
            if is_pointerish(a.type):
                self.slots[a] = arg_slots[i] if arg_slots is not None else i + 1
        self.changed = True
        while self.changed:
            self.changed = False
            self._block(entry)

    # -- lattice updates ------------------------------------------------------------------------
    def is_varying(self, v: ir.Value) -> bool:
        return v in self.varying

    def slot(self, v: ir.Value) -> int:
        s = self.slots.get(v)
        return DYNAMIC if s is None else s

    def _mark(self, v: ir.Value, varying: bool) -> None:
        if varying and v not in self.varying:
            self.varying.add(v)
            self.changed = True

    def _set_slot(self, v: ir.Value, slot: Optional[int]) -> None:
        if slot is None or not is_pointerish(v.type):
            return
        old = self.slots.get(v)
        new = slot if old is None or old == slot else DYNAMIC
        if new != old:
            self.slots[v] = new
            self.changed = True

    def _flow(self, dst: ir.Value, src: ir.Value, force_varying: bool = False) -> None:
        self._mark(dst, force_varying or src in self.varying)
        self._set_slot(dst, self.slots.get(src))
        self._misalign(dst, src in self.maybe_misaligned)

    def _misalign(self, v: ir.Value, flag: bool) -> None:
        if flag and v not in self.maybe_misaligned:
            self.maybe_misaligned.add(v)
            self.changed = True

    def is_aligned(self, v: ir.Value) -> bool:
        return v not in self.maybe_misaligned and self.slot(v) != DYNAMIC

    # -- walk -----------------------------------------------------------------------------------
    def _block(self, block: ir.Block) -> None:
        for op in block.ops:
            handler = getattr(self, "_op_" + op.name.replace(".", "_"), None)
            if handler is not None:
                handler(op)
            else:
                self._default(op)

    def _default(self, op: ir.Operation) -> None:
        varying = op.name in ALWAYS_VARYING or any(v in self.varying for v in op.operands)
        for r in op.results:
            self._mark(r, varying)
            if is_pointerish(r.type):
                self._misalign(r, op.name in ("tt.bitcast", "tt.int_to_ptr", "tt.load", "tt.atomic_rmw",
                                              "tt.atomic_cas", "tt.call")
                               or any(v in self.maybe_misaligned for v in op.operands))
        if op.name in ir.POINTER_PASSTHROUGH and op.operands:
            for r in op.results:
                self._set_slot(r, self.slots.get(op.operands[0]))
        elif op.name in ("tt.int_to_ptr", "tt.load", "tt.atomic_rmw", "tt.atomic_cas", "tt.call"):
            for r in op.results:
                self._set_slot(r, DYNAMIC)
        elif op.name in ("arith.select", "tt.join", "tt.cat"):
            for r in op.results:
                for v in op.operands[1:] if op.name == "arith.select" else op.operands:
                    self._set_slot(r, self.slots.get(v))
        elif op.name == "tt.split":
            for r in op.results:
                self._set_slot(r, self.slots.get(op.operands[0]))
        for region in op.regions:
            for b in region.blocks:
                self._block(b)

    def _op_scf_if(self, op: ir.Operation) -> None:
        divergent = op.operands[0] in self.varying
        for region in op.regions:
            for b in region.blocks:
                self._block(b)
                term = b.terminator
                if term is not None and term.name == "scf.yield":
                    for r, y in zip(op.results, term.operands):
                        self._flow(r, y, divergent)
        for r in op.results:
            self._mark(r, divergent)

    def _op_scf_for(self, op: ir.Operation) -> None:
        lb, ub, step, *inits = op.operands
        divergent = any(v in self.varying for v in (lb, ub, step))
        body = op.regions[0].blocks[0]
        iv, *iter_args = body.args
        self._mark(iv, lb in self.varying or step in self.varying)
        for a, init, r in zip(iter_args, inits, op.results):
            self._flow(a, init, divergent)
            self._flow(r, init, divergent)
        self._block(body)
        for a, y, r in zip(iter_args, body.terminator.operands, op.results):
            self._flow(a, y)
            self._flow(r, y)
            self._mark(r, a in self.varying)
            self._mark(a, r in self.varying)

    def _op_scf_while(self, op: ir.Operation) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        for a, init in zip(before.args, op.operands):
            self._flow(a, init)
        self._block(before)
        cond_op = before.terminator
        cond, *forwarded = cond_op.operands
        divergent = cond in self.varying
        for a, f, r in zip(after.args, forwarded, op.results):
            self._flow(a, f, divergent)
            self._flow(r, f, divergent)
        if divergent:
            for a in before.args:
                self._mark(a, True)
        self._block(after)
        for a, y in zip(before.args, after.terminator.operands):
            self._flow(a, y, divergent)

    def _op_tt_reduce(self, op: ir.Operation) -> None:
        # The combine region runs on plain arrays, outside the uniform/varying scheme.
        varying = any(v in self.varying for v in op.operands)
        for r in op.results:
            self._mark(r, varying)

    _op_tt_scan = _op_tt_reduce


def function_arg_slots(func: ir.Operation):
    """Slots of a kernel's pointer parameters: parameter index + 1 (slot 0 means no argument)."""
    entry = func.regions[0].blocks[0]
    return [i + 1 if is_pointerish(a.type) else None for i, a in enumerate(entry.args)]


def largest_tensor(func: ir.Operation) -> int:
    """Elements of the largest tensor value in the function (bounds the batch of programs)."""
    largest = 1
    for op in func.walk():
        values = list(op.results)
        for region in op.regions:
            for b in region.blocks:
                values.extend(b.args)
        for v in values:
            t = v.type
            if isinstance(t, ir.TensorType):
                largest = max(largest, t.numel)
            elif isinstance(t, ir.PointerType) and isinstance(t.pointee, ir.TensorType):
                largest = max(largest, t.pointee.numel)
    return largest


# Ops that write memory through their first operand (a pointer, block pointer or descriptor).
WRITING_OPS = {"tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.atomic_store", "tt.descriptor_store"}


def written_slots(func: ir.Operation, analysis: Analysis):
    """The slots the function may write, or None when that is not known (a write through a pointer
    of unknown slot, or a call: callees see only pointers of unknown slot)."""
    written = set()
    for op in func.walk():
        if op.name == "tt.call":
            return None
        if op.name in WRITING_OPS:
            slot = analysis.slot(op.operands[0])
            if slot < 0:
                return None
            written.add(slot)
    return written


# ------------------------------------------------------------------------------------------------
# programs that wait for each other

# Ops whose results come from memory that other programs may change while a loop spins on them.
_ATOMIC_OPS = {"tt.atomic_rmw", "tt.atomic_cas", "tt.atomic_load"}
_LOAD_OPS = {"tt.load", "tt.descriptor_load"}


def _callee(op: ir.Operation) -> str:
    return str(op.attrs.get("callee", "")).lstrip("@")


def reading_functions(module: ir.Module) -> Set[str]:
    """Names of the functions that read memory (a load or an atomic), directly or through a call."""
    reads = {f.attrs.get("sym_name") for f in module.functions
             if any(op.name in _ATOMIC_OPS or op.name in _LOAD_OPS for op in f.walk())}
    calls = {f.attrs.get("sym_name"): {_callee(op) for op in f.walk() if op.name == "tt.call"} for f in module.functions}
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in reads and callees & reads:
                reads.add(name)
                changed = True
    return reads


def waiting_loops(func: ir.Operation, analysis: Analysis, readers: Optional[Set[str]] = None) -> list:
    """The `scf.while` loops of `func` whose condition depends on memory that another program can
    change while the loop runs: an atomic's result, or a load of an argument the kernel writes (or
    of one it cannot name), made inside the loop (or by a function in `readers` it calls; every
    call when None). On a GPU such a loop ends when another program acts (a spin lock, a flag, a
    counter); run in lockstep with the other programs it never would."""
    written = written_slots(func, analysis)

    def reads_shared(op: ir.Operation) -> bool:
        if op.name in _ATOMIC_OPS:
            return True
        if op.name == "tt.call":
            return readers is None or _callee(op) in readers
        if op.name in _LOAD_OPS:
            slot = analysis.slot(op.operands[0])
            return written is None or slot < 0 or slot in written
        return False

    return [op for op in func.walk() if op.name == "scf.while" and _condition_depends_on(op, reads_shared)]


def _condition_depends_on(loop: ir.Operation, is_source) -> bool:
    """Whether the loop's condition depends (through data, control flow or loop-carried values) on
    a result of an op inside the loop for which `is_source` holds."""
    before, after = loop.regions[0].blocks[0], loop.regions[1].blocks[0]
    inner = [op for op in loop.walk() if op is not loop]
    tainted: Set[ir.Value] = set()

    def taint(values) -> bool:
        new = [v for v in values if v not in tainted]
        tainted.update(new)
        return bool(new)

    changed = True
    while changed:
        changed = False
        for op in inner:
            hit = is_source(op) or any(v in tainted for v in op.operands)
            if not hit and op.regions:
                # A value computed by nested control flow depends on everything used inside it.
                hit = any(is_source(x) or any(v in tainted for v in x.operands) for x in op.walk() if x is not op)
            if hit:
                values = list(op.results)
                for region in op.regions:
                    for block in region.blocks:
                        values.extend(block.args)
                changed |= taint(values)
        cond, *forwarded = before.terminator.operands
        changed |= taint(a for a, f in zip(after.args, forwarded) if f in tainted)
        changed |= taint(a for a, y in zip(before.args, after.terminator.operands) if y in tainted)
    return before.terminator.operands[0] in tainted


def suspending_functions(module: ir.Module, analyses: dict) -> Set[str]:
    """Names of the functions that contain a waiting loop or call one that does (transitively):
    their generated programs are generators that yield to the other programs while they wait."""
    calls = {f.attrs.get("sym_name"): {_callee(op) for op in f.walk() if op.name == "tt.call"} for f in module.functions}
    readers = reading_functions(module)
    suspending = {f.attrs.get("sym_name") for f in module.functions
                  if waiting_loops(f, analyses[f.attrs.get("sym_name")], readers)}
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in suspending and callees & suspending:
                suspending.add(name)
                changed = True
    return suspending
