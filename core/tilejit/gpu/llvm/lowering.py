"""TTGIR -> LLVM IR (llvmlite.ir): the driver, index math, shared memory and control flow.

Each tensor value becomes the list of LLVM scalars this thread holds, in its layout's register order
(a scalar is a list of one). Elementwise ops map over the lists; ops that move data between threads
(layout conversions, reductions, dots, memory) live in `tensor_ops.py`. Everything target-specific is
asked of the target description (`gpu/target.py`).
"""
from __future__ import annotations

import functools

from typing import Dict, List, Optional, Tuple

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError, TilejitError
from ..axis_info import AxisAnalysis
from ..isa import I32
from ..target import TargetDescription
from ..linear_layout import LinearLayout
from .float_formats import constant_bits
from .folding_builder import FoldingBuilder, appending_to
from .scalar_ops import ScalarLowering, is_storage_float, llvm_type
from .tensor_ops import TensorOps

_SMEM_NAME = "global_smem"


_SCALAR_LAYOUT = LinearLayout((), (), (), ())
# (encoding, shape) -> its LinearLayout: the lowering asks for the layout of every tensor it touches,
# and one encoding serves most of a kernel's tensors. Encodings are frozen dataclasses and a
# LinearLayout is immutable, so a layout computed once is the layout.
_linear_layouts: Dict[tuple, LinearLayout] = {}


def layout_of(t: ir.Type) -> LinearLayout:
    """The linear layout of a TTGIR tensor type; scalars hold their one value in register 0."""
    if not isinstance(t, ir.TensorType):
        return _SCALAR_LAYOUT
    if t.encoding is None:
        raise CompilationError(f"tensor {t} has no layout: run the TTGIR passes first")
    key = (t.encoding, t.shape)
    try:
        layout = _linear_layouts.get(key)
    except TypeError:  # an encoding that cannot be hashed: computed every time
        return t.encoding.to_linear(t.shape)
    if layout is None:
        layout = t.encoding.to_linear(t.shape)
        if len(_linear_layouts) >= 4096:
            _linear_layouts.clear()
        _linear_layouts[key] = layout
    return layout


_equal_registers_cache: Dict[tuple, Optional[Tuple[int, ...]]] = {}


def equal_registers(layout: LinearLayout, constancy) -> Optional[Tuple[int, ...]]:
    """Per register, the first register whose element lies in the same run of equal values.

    Runs are aligned blocks of `constancy[d]` elements along each dim d (their power-of-two part is
    enough: an aligned block of 16 lies inside an aligned run of 48). A register's element and the
    run's first element differ only in the low bits of each dim's coordinate; bits that a lane or warp
    basis moves are kept (another thread holds those elements), the others are cleared: the element
    with the cleared coordinates is in the same run, and it is this thread's when some register holds
    the cleared register offset."""
    key = (layout, tuple(constancy))
    if key in _equal_registers_cache:
        return _equal_registers_cache[key]
    thread_bits = [0] * layout.rank
    for basis in layout.lanes + layout.warps:
        for d, b in enumerate(basis):
            thread_bits[d] |= b
    clear = [((c & -c) - 1) & ~thread_bits[d] for d, c in enumerate(constancy)]
    leaders = None
    if any(clear):
        offsets = layout.register_offsets()
        first = {}
        for r, off in enumerate(offsets):
            first.setdefault(off, r)
        leaders = tuple(first.get(tuple(o & ~m for o, m in zip(off, clear)), r) for r, off in enumerate(offsets))
        if all(leader == r for r, leader in enumerate(leaders)):
            leaders = None
    if len(_equal_registers_cache) >= 4096:
        _equal_registers_cache.clear()
    _equal_registers_cache[key] = leaders
    return leaders


# The scratch's end in `shared_spans`: a use of the scratch may reach any byte above where it starts.
SCRATCH_END = 1 << 40


class FunctionLowering(TensorOps):
    def __init__(self, module: llir.Module, func: ir.Operation, isa: TargetDescription, num_warps: int, ir_module,
                 fp_fusion: bool = True):
        self.module = module
        self.func = func
        self.ir_module = ir_module
        self.isa = isa
        self.num_warps = num_warps
        self.warp_size = isa.warp_size
        self.scalar = ScalarLowering(isa, fp_fusion)
        self.vals: Dict[int, List] = {}
        # Values a target's lowering reads lazily (dot operands in shared memory that the dot reads
        # k-step by k-step): `get` reads them whole for any other user.
        self.lazy_operands: Dict[int, object] = {}
        # Renamed tensors (`tl.trans`, `tl.reshape`, ...) whose conversions read their operand's
        # registers: id -> (registers, layout). `get` converts one for any other user.
        self.renamed: Dict[int, tuple] = {}
        self.pipelined_mma = False   # set by lower_pipelined_for: the target may add occupancy hints
        self.pipelined_carried_registers = 0   # the most a pipelined loop carries (set there too)
        self.analysis = AxisAnalysis(func)
        self.smem_bytes = 0
        # Where the scratch of conversions and reductions starts: after the ring buffers of the
        # pipelined loop being lowered (those stay live across the whole loop), else at 0.
        self.scratch_offset = 0
        # id(shared pointer) -> (first byte, end byte) of the shared memory accesses through it may
        # touch, where known: a target's barrier placement may tell the scratch from ring buffers.
        self.shared_spans: Dict[int, tuple] = {}
        # Thread-index arithmetic (per layout), emitted once in the entry block: see `_in_prologue`.
        self._prologue_values: Dict[tuple, object] = {}
        self.prologue: llir.Block = None
        self.b: llir.IRBuilder = None

    # --- entry ---------------------------------------------------------------------------------
    def lower(self) -> llir.Function:
        entry = self.func.regions[0].blocks[0]
        params = [llvm_type(a.type) for a in entry.args]
        fn = llir.Function(self.module, llir.FunctionType(llir.VoidType(), params), self.func.attrs["sym_name"])
        self.isa.mark_kernel(fn, self.num_warps * self.warp_size)
        for arg, attrs, p in zip(entry.args, self.func.attrs.get("arg_attrs") or [{}] * len(params), fn.args):
            if isinstance(arg.type, ir.PointerType):
                p.add_attribute("noalias") if (attrs or {}).get("tt.noalias") else None
            self.vals[id(arg)] = [p]
        self.b = FoldingBuilder(fn.append_basic_block("entry"))
        tid = self.isa.thread_id_x(self.b)
        ws_bits = self.warp_size.bit_length() - 1
        self.lane = self.b.and_(tid, llir.Constant(I32, self.warp_size - 1), name="lane")
        self.warp = self.isa.warp_uniform(self.b, self.b.lshr(tid, llir.Constant(I32, ws_bits), name="warp"))
        # The entry block stays open while the body is lowered, so that thread-index values land
        # at its end (see `_in_prologue`); its branch to the body comes last.
        self.prologue = self.b.block
        body = fn.append_basic_block("body")
        self.b.position_at_end(body)
        self.lower_block(entry)
        if not self.b.block.is_terminated:
            self.b.ret_void()
        self.b.position_at_end(self.prologue)
        self.b.branch(body)
        return fn

    # --- values --------------------------------------------------------------------------------
    def get(self, v: ir.Value) -> List:
        try:
            return self.vals[id(v)]
        except KeyError:
            lazy = self.lazy_operands.get(id(v))
            if lazy is not None:   # a user other than the dot: every fragment, read here
                return lazy.all_values()
            if id(v) in self.renamed:   # left to its conversions (`_relayout`), read by another user
                values, layout = self.renamed.pop(id(v))
                self.set(v, self.convert_registers(values, layout, v.type))
                return self.vals[id(v)]
            raise CompilationError("internal: value used before it was lowered") from None

    def set(self, v: ir.Value, values: List) -> None:
        self.vals[id(v)] = list(values)

    def const(self, t, value):
        ty = llvm_type(t)
        if is_storage_float(t):   # bf16 / fp8 are integers here: the constant is the number's bits
            return llir.Constant(ty, constant_bits(value, ir.element_type(t).name))
        if isinstance(ty, llir.IntType):
            if isinstance(value, bool):
                value = int(value)
            if isinstance(value, float):
                value = int(value)
            return llir.Constant(ty, value)
        if isinstance(ty, llir.PointerType):
            return llir.Constant(ty, None)
        return llir.Constant(ty, float(value))

    # --- index math ----------------------------------------------------------------------------
    def _in_prologue(self, key, compute):
        """`compute()`, emitted once at the end of the entry block and reused by every later caller
        (appended, so the builder's same-block reuse works there too). What it computes from the
        thread's lane and warp alone is the same everywhere and the entry block dominates every use:
        one copy instead of one per block that needs it (the builder reuses within a block only),
        which LLVM would otherwise parse, combine and hoist out of loops itself. The bench layer
        norm (three loops): 474 -> 418 lines of IR, 33 -> 24 ms in LLVM (CPU), 472 -> 456 SASS
        instructions."""
        found = self._prologue_values.get(key)
        if found is None:
            with appending_to(self.b, self.prologue):
                found = self._prologue_values[key] = compute()
        return found

    def _bit_combination(self, bases, index_value, dim):
        """XOR of the `dim` components of the bases selected by the bits of `index_value` (i32)."""
        acc = None
        for bit, basis in enumerate(bases):
            if basis[dim] == 0:
                continue
            picked = self.b.and_(self.b.lshr(index_value, llir.Constant(I32, bit)), llir.Constant(I32, 1))
            term = self.b.mul(picked, llir.Constant(I32, basis[dim]))
            acc = term if acc is None else self.b.xor(acc, term)
        return acc if acc is not None else llir.Constant(I32, 0)

    def thread_base(self, layout: LinearLayout):
        """Per dim, the coordinate offset the thread's lane and warp contribute."""
        return self._in_prologue(("thread_base", layout), lambda: self._thread_base(layout))

    def _thread_base(self, layout: LinearLayout):
        out = []
        for d in range(layout.rank):
            lane_part = self._bit_combination(layout.lanes, self.lane, d)
            warp_part = self._bit_combination(layout.warps, self.warp, d)
            out.append(self.b.xor(lane_part, warp_part))
        return out

    def element_coords(self, layout: LinearLayout):
        """coords[r][d]: i32 coordinate along d of register r (register offsets XOR thread base).
        The XORs are emitted where they are used, not in the prologue: LLVM then sees each
        coordinate as the thread base plus a constant in the block of the address arithmetic, and
        folds the constant into the access's immediate offset (the bench softmax: 296 SASS
        instructions and 30 registers, against 304 and 32 with the XORs in the entry block)."""
        base = self.thread_base(layout)
        thread_bits = _thread_bits(layout)
        return [[self._offset_coord(base[d], off[d], thread_bits[d]) if off[d] else base[d]
                 for d in range(layout.rank)] for off in layout.register_offsets()]

    def _offset_coord(self, base, offset: int, thread_bits: int):
        """`base XOR offset`. Where the register's offset and the thread's bits cannot overlap (every
        blocked layout), that is `add nuw nsw`, which LLVM carries through a widening: the i64
        offsets of fla's `(i_t * BT + tl.arange(0, BT)).to(tl.int64) * stride` loads become one
        base plus constants (immediate offsets in the loads) instead of one 64-bit address a load
        (fla's gla state loop at one warp: 255 registers and spills, Triton 107)."""
        if offset & thread_bits:
            return self.b.xor(base, llir.Constant(I32, offset))
        return self.b.add(base, llir.Constant(I32, offset), flags=("nuw", "nsw"))

    def is_owner(self, layout: LinearLayout):
        """i1: this thread holds the canonical copy of its elements (replicas skip side effects)."""
        return self._in_prologue(("is_owner", layout), lambda: self._is_owner(layout))

    def _is_owner(self, layout: LinearLayout):
        cond = llir.Constant(llir.IntType(1), 1)
        for bases, idx in ((layout.lanes, self.lane), (layout.warps, self.warp)):
            for bit, basis in enumerate(bases):
                if not any(basis):
                    bitv = self.b.and_(idx, llir.Constant(I32, 1 << bit))
                    cond = self.b.and_(cond, self.b.icmp_unsigned("==", bitv, llir.Constant(I32, 0)))
        return cond

    # --- shared memory -------------------------------------------------------------------------
    def smem_base(self, nbytes: int):
        """The CTA's shared scratch (dynamic shared memory). Every user starts at `scratch_offset`
        and is fenced by barriers before and after, so the size needed is the largest single use."""
        self.smem_bytes = max(self.smem_bytes, nbytes + self.scratch_offset)
        glob = self.module.globals.get(_SMEM_NAME)
        if glob is None:
            glob = llir.GlobalVariable(self.module, llir.ArrayType(llir.IntType(8), 0), _SMEM_NAME,
                                       addrspace=self.isa.shared_address_space)
            glob.linkage = "external"
            glob.align = 16
            # llvmlite gives globals typed pointers, which store/gep then check against the pointee;
            # the kernel indexes it with many element types, so make it an opaque pointer.
            glob.type = llir.PointerType(addrspace=self.isa.shared_address_space)
        return glob

    def smem_ptr(self, elem_ty, index):
        """Element `index` (i32) of the scratch, as `elem_ty`."""
        base = self.smem_base(0)
        if self.scratch_offset:
            base = self.b.gep(base, [llir.Constant(I32, self.scratch_offset)], source_etype=llir.IntType(8))
        ptr = self.b.gep(base, [index], source_etype=elem_ty)
        self.shared_spans[id(ptr)] = (self.scratch_offset, SCRATCH_END)
        return ptr

    def smem_region_ptr(self, elem_ty, index, span=None):
        """Element `index` (i32) counted from the start of shared memory (the pipeline's buffers);
        `span`: the bytes [first, end) its accesses stay in, where the caller knows them."""
        ptr = self.b.gep(self.smem_base(0), [index], source_etype=elem_ty)
        if span is not None:
            self.shared_spans[id(ptr)] = span
        return ptr

    # --- blocks and control flow -----------------------------------------------------------------
    def lower_block(self, block: ir.Block) -> None:
        for op in block.ops:
            self.lower_op(op)

    def lower_op(self, op: ir.Operation) -> None:
        try:
            handler = self.HANDLERS.get(op.name)
            if handler is not None:
                getattr(self, handler)(op)
            elif ir.op_info(op.name).elementwise:
                self.lower_elementwise(op)
            else:
                raise CompilationError.at(op.loc, f"the GPU backends do not support {op.name} yet")
        except TilejitError as exc:
            if isinstance(exc, CompilationError) and exc.line is None and op.loc.file:
                raise CompilationError.at(op.loc, exc.message) from None
            raise
        except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
            raise CompilationError.at(op.loc, f"internal error lowering {op.name} to LLVM: "
                                              f"{type(exc).__name__}: {exc}") from None

    def lower_elementwise(self, op: ir.Operation) -> None:
        lists = [self.get(v) for v in op.operands]
        n = max(len(v) for v in lists) if lists else 1
        leaders = self._equal_registers(op.result) if n > 1 else None
        out = []
        for i in range(n):
            if leaders is not None and leaders[i] != i:
                out.append(out[leaders[i]])
                continue
            out.append(self.scalar.lower(self.b, op, [v[i] if len(v) > 1 else v[0] for v in lists]))
        self.set(op.result, out)

    def _equal_registers(self, v: ir.Value):
        """Per register of `v`, the register that holds the same value (itself when none is known
        earlier), from the axis analysis' constancy; None when no two registers share a value.

        Elementwise ops are pure, so a value computed once serves every register of its run: a mask
        `offs < n` is one compare per vector of 4, as Triton's (its `maybeDeduplicate`). Fewer
        compares and predicates are less for LLVM and ptxas to do; LLVM cannot merge them itself, it
        does not know that n is a multiple of 4."""
        if not isinstance(v.type, ir.TensorType):
            return None
        constancy = self.analysis.info(v).constancy
        if all(c == 1 for c in constancy) or len(constancy) != len(v.type.shape):
            return None
        return equal_registers(layout_of(v.type), constancy)

    def _phis(self, values_per_result, types):
        return [[self.b.phi(v.type) for v in vals] for vals in values_per_result]

    def open_loop(self, prefix: str, lb, inits):
        """Start a counted loop: header, body and exit blocks, the builder placed in the header
        with the induction variable's phi and one phi per carried value (incoming from the block
        before the loop). Returns (pre, header, body, exit, iv phi, carried phis per value)."""
        pre = self.b.block
        fn = pre.function
        header = fn.append_basic_block(f"{prefix}.header")
        body_bb = fn.append_basic_block(f"{prefix}.body")
        exit_bb = fn.append_basic_block(f"{prefix}.exit")
        self.b.branch(header)
        self.b.position_at_end(header)
        iv = self.b.phi(lb.type, name="iv")
        iv.add_incoming(lb, pre)
        carried = []
        for vals in inits:
            phis = [self.b.phi(v.type) for v in vals]
            for p, v in zip(phis, vals):
                p.add_incoming(v, pre)
            carried.append(phis)
        return pre, header, body_bb, exit_bb, iv, carried

    def lower_for(self, op: ir.Operation) -> None:
        if self.lower_pipelined_for(op):
            return
        lb, ub, step = (self.get(v)[0] for v in op.operands[:3])
        inits = [self.get(v) for v in op.operand_group("inits")]
        body = op.regions[0].blocks[0]
        pre, header, body_bb, exit_bb, iv, carried = self.open_loop("for", lb, inits)
        self.b.cbranch(self.b.icmp_signed("<", iv, ub), body_bb, exit_bb)
        self.b.position_at_end(body_bb)
        self.set(body.args[0], [iv])
        for arg, phis in zip(body.args[1:], carried):
            self.set(arg, phis)
        for inner in body.ops[:-1]:
            self.lower_op(inner)
        yielded = [self.get(v) for v in body.ops[-1].operands]
        latch = self.b.block
        iv.add_incoming(self.b.add(iv, step), latch)
        for phis, vals in zip(carried, yielded):
            for p, v in zip(phis, vals):
                p.add_incoming(v, latch)
        self.b.branch(header)
        self.b.position_at_end(exit_bb)
        for r, phis in zip(op.results, carried):
            self.set(r, phis)

    def lower_if(self, op: ir.Operation) -> None:
        cond = self.get(op.operands[0])[0]
        fn = self.b.block.function
        then_bb = fn.append_basic_block("if.then")
        else_bb = fn.append_basic_block("if.else")
        merge = fn.append_basic_block("if.end")
        self.b.cbranch(cond, then_bb, else_bb)
        arms = []
        for region, bb in zip(list(op.regions) + [None] * (2 - len(op.regions)), (then_bb, else_bb)):
            self.b.position_at_end(bb)
            yielded = []
            if region is not None and region.blocks:
                block = region.blocks[0]
                for inner in block.ops[:-1]:
                    self.lower_op(inner)
                if block.ops and block.ops[-1].name == "scf.yield":
                    yielded = [self.get(v) for v in block.ops[-1].operands]
                elif block.ops:
                    self.lower_op(block.ops[-1])
            if not self.b.block.is_terminated:
                arms.append((self.b.block, yielded))
                self.b.branch(merge)
        self.b.position_at_end(merge)
        if not arms:   # both arms returned
            self.b.unreachable()
            fn_rest = fn.append_basic_block("if.after_return")
            self.b.position_at_end(fn_rest)
            for r in op.results:
                self.set(r, [llir.Constant(llvm_type(r.type), None)] * layout_of(r.type).num_registers)
            return
        for k, r in enumerate(op.results):
            phis = []
            for i, v in enumerate(arms[0][1][k]):
                p = self.b.phi(v.type)
                for bb, yielded in arms:
                    p.add_incoming(yielded[k][i], bb)
                phis.append(p)
            self.set(r, phis)

    def lower_while(self, op: ir.Operation) -> None:
        inits = [self.get(v) for v in op.operands]
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        pre = self.b.block
        fn = pre.function
        header = fn.append_basic_block("while.before")
        body_bb = fn.append_basic_block("while.after")
        exit_bb = fn.append_basic_block("while.exit")
        self.b.branch(header)
        self.b.position_at_end(header)
        carried = []
        for arg, vals in zip(before.args, inits):
            phis = [self.b.phi(v.type) for v in vals]
            for p, v in zip(phis, vals):
                p.add_incoming(v, pre)
            carried.append(phis)
            self.set(arg, phis)
        for inner in before.ops[:-1]:
            self.lower_op(inner)
        cond_op = before.ops[-1]
        forwarded = [self.get(v) for v in cond_op.operands[1:]]
        self.b.cbranch(self.get(cond_op.operands[0])[0], body_bb, exit_bb)
        self.b.position_at_end(body_bb)
        for arg, vals in zip(after.args, forwarded):
            self.set(arg, vals)
        for inner in after.ops[:-1]:
            self.lower_op(inner)
        yielded = [self.get(v) for v in after.ops[-1].operands]
        latch = self.b.block
        for phis, vals in zip(carried, yielded):
            for p, v in zip(phis, vals):
                p.add_incoming(v, latch)
        self.b.branch(header)
        self.b.position_at_end(exit_bb)
        for r, vals in zip(op.results, forwarded):
            self.set(r, vals)

    def lower_return(self, op: ir.Operation) -> None:
        # Also an early return inside scf.if: the threads that take it leave the kernel (as in Triton,
        # a later barrier must not wait for them; the frontend keeps returns uniform per program).
        self.b.ret_void()

    def lower_call(self, op: ir.Operation) -> None:
        """Device functions are inlined: their body is lowered with the call's operands as arguments."""
        callee = self.ir_module.get(op.attrs.get("callee", ""))
        if callee is None:
            raise CompilationError.at(op.loc, f"call to unknown function {op.attrs.get('callee')!r}")
        body = callee.regions[0].blocks[0]
        for arg, v in zip(body.args, op.operands):
            self.set(arg, self.get(v))
        for inner in body.ops[:-1]:
            self.lower_op(inner)
        ret = body.ops[-1]
        if ret.name != "tt.return":
            raise CompilationError.at(op.loc, "the called function does not end with tt.return")
        for r, v in zip(op.results, ret.operands):
            self.set(r, self.get(v))

    HANDLERS = {
        "scf.for": "lower_for", "scf.if": "lower_if", "scf.while": "lower_while",
        "tt.return": "lower_return", "tt.call": "lower_call",
        **TensorOps.TENSOR_HANDLERS,
    }


def lower_module(ttgir: ir.Module, isa: TargetDescription, num_warps: int, fp_fusion: bool = True) -> tuple:
    """TTGIR module -> (LLVM IR text, metadata). The kernel is the module's first function;
    `fp_fusion` lets float add/sub/mul contract into fma (the `enable_fp_fusion` option)."""
    # Its own context: the identified types a backend names belong to this module alone (llvmlite's
    # global context would print every earlier module's types too).
    module = llir.Module(name="tilejit", context=llir.Context())
    module.triple = isa.triple
    module.data_layout = isa.data_layout
    kernel = ttgir.functions[0] if ttgir.functions else None
    if kernel is None:
        raise CompilationError("the module has no kernel function")
    mixin = isa.lowering_mixin   # the target's own hooks (pipelined loops, shared-memory operands)
    cls = FunctionLowering if mixin is None else type(f"{mixin.__name__}Lowering", (mixin, FunctionLowering), {})
    lowering = cls(module, kernel, isa, num_warps, ttgir, fp_fusion)
    fn = lowering.lower()
    lowering.isa.finish_kernel(fn, num_warps * isa.warp_size, lowering.smem_bytes, lowering.pipelined_mma,
                               lowering.pipelined_carried_registers)
    text = str(module)
    metadata = {
        "name": kernel.attrs["sym_name"],
        "shared": lowering.smem_bytes,
        "num_warps": num_warps,
        "threads_per_block": num_warps * isa.warp_size,
        "warp_size": isa.warp_size,
    }
    return text, metadata


@functools.lru_cache(maxsize=1024)
def _thread_bits(layout: LinearLayout):
    """Per dim, the bits a thread's base coordinate can have set (every lane and warp basis OR-ed);
    asked at every `element_coords`, computed once a layout."""
    bits = [0] * layout.rank
    for basis in list(layout.lanes) + list(layout.warps):
        for d in range(layout.rank):
            bits[d] |= basis[d]
    return tuple(bits)
