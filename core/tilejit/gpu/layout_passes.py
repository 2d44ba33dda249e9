"""The layout passes of TTGIR, each a pass of its own (run by the `PassManager`, dumped one file each).

What one pass learns and the next one needs is written into the IR, never kept aside:
- an encoding in a value's type is a decided layout (`coalesce-anchors` decides the loads' layouts,
  `accelerate-matmul` the dots' results and their loop-carried accumulators);
- hints are attributes that `assign-layouts` reads and then removes: `ttg.access_layout` on each
  global access (the layout coalescing wants for it), `ttg.default_layouts` on the function (per rank,
  the layout of values nobody asks for; index = rank), `ttg.flow` (per result) and `ttg.flow.region0`
  (per block argument of the op's first region) for the matrix layouts flowing forward from dots.
See `ttgir.py` for the order and docs/internals.md for what each pass does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from .. import ir
from .axis_info import AxisAnalysis, access_order, vector_width
from .layouts import BlockedEncoding, DotOperandEncoding, SliceEncoding, transposed_blocked
from .target import DotSite

ACCESS = "ttg.access_layout"
DEFAULTS = "ttg.default_layouts"
FLOW = "ttg.flow"
HINTS = (ACCESS, DEFAULTS, FLOW)


def default_blocked(shape, cfg, order=None, vec: int = 1) -> BlockedEncoding:
    """The blocked layout that spreads `shape` over the CTA with `vec` contiguous elements a thread."""
    rank = len(shape)
    order = tuple(order) if order is not None else tuple(reversed(range(rank)))
    spt = [1] * rank
    spt[order[0]] = max(1, min(vec, shape[order[0]]))
    tpw, wpc = [1] * rank, [1] * rank
    left = cfg.warp_size
    for d in order:
        t = min(left, max(1, shape[d] // spt[d]))
        tpw[d], left = t, left // t
    tpw[order[-1] if rank > 1 else order[0]] *= left   # leftover lanes replicate
    left = cfg.num_warps
    for d in reversed(order):   # warps along the slow dims first, keeping rows whole within warps
        w = min(left, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d], left = w, left // w
    wpc[order[0]] *= left
    return BlockedEncoding(tuple(spt), tuple(tpw), tuple(wpc), order)


def _is_tensor(v) -> bool:
    return isinstance(v.type, ir.TensorType)


def _kept_in_registers(enc) -> bool:
    """A matrix layout that `keeps_in_registers` or a slice of one: layouts worth keeping (leaving one
    costs a trip through shared memory; blocked layouts of loads are cheap to recreate)."""
    while isinstance(enc, SliceEncoding):
        enc = enc.parent
    return getattr(enc, "keeps_in_registers", False)



# --- hints in the IR ------------------------------------------------------------------------------

def _all_values(func: ir.Operation):
    for block in [func.regions[0].blocks[0]] + [b for op in func.walk() for r in op.regions for b in r.blocks]:
        yield from block.args
    for op in func.walk():
        yield from op.results


def value_hint(v: ir.Value, key: str):
    """The hint `key` of value `v` (None when it has none): a result's is in its op's attribute `key`
    (one entry per result), a block argument's in its region's owner, `key.regionN`."""
    if isinstance(v, ir.BlockArgument):
        owner = v.block.parent_op
        if owner is None:
            return None
        region = next((i for i, r in enumerate(owner.regions) if v.block in r.blocks), 0)
        hints = owner.attrs.get(f"{key}.region{region}")
    else:
        hints = v.owner.attrs.get(key) if isinstance(v.owner, ir.Operation) else None
    return hints[v.index] if hints is not None and v.index < len(hints) else None


def set_value_hint(v: ir.Value, key: str, value) -> None:
    if isinstance(v, ir.BlockArgument):
        owner = v.block.parent_op
        region = next(i for i, r in enumerate(owner.regions) if v.block in r.blocks)
        attr, count = f"{key}.region{region}", len(v.block.args)
    else:
        owner, attr, count = v.owner, key, len(v.owner.results)
    hints = list(owner.attrs.get(attr) or [None] * count)
    hints[v.index] = value
    owner.attrs[attr] = hints


def strip_hints(func: ir.Operation) -> None:
    for op in [func] + list(func.walk()):
        for key in [k for k in op.attrs if k.split(".region")[0] in HINTS]:
            del op.attrs[key]


_NEUTRAL = "neutral"   # `_source_layout`: built from constants only, free in any layout

# Ops whose operands after the pointer (values, masks) take the pointer's layout.
_ACCESS_OPS = ("tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.atomic_load", "tt.atomic_store")


def _register_layout_of_loads(enc) -> bool:
    """`enc` is a layout `_source_layout` found: a load's blocked layout or a slice of one."""
    return isinstance(enc, BlockedEncoding) or (isinstance(enc, SliceEncoding)
                                                and isinstance(enc.parent, BlockedEncoding))


class _Layouts:
    """What the passes know about one function, read from its IR: decided layouts (`fixed`, from the
    types), access layouts, default layouts per rank and flowing matrix layouts (from the hints)."""

    def __init__(self, func: ir.Operation, cfg):
        self.func = func
        self.cfg = cfg
        self.fixed: Dict[int, object] = {}
        self.flowing: Dict[int, object] = {}
        for v in _all_values(func):
            if _is_tensor(v) and v.type.encoding is not None:
                self.fixed[id(v)] = v.type.encoding
            hint = value_hint(v, FLOW)
            if hint is not None:
                self.flowing[id(v)] = hint
        self.access_layouts: Dict[int, BlockedEncoding] = {
            id(op): op.attrs[ACCESS] for op in func.walk() if op.attrs.get(ACCESS) is not None}
        self.rank_layout: Dict[int, BlockedEncoding] = {
            rank: enc for rank, enc in enumerate(func.attrs.get(DEFAULTS) or ()) if enc is not None}
        self.wanted: Dict[int, object] = {}

    def fix(self, v: ir.Value, enc) -> None:
        """Decide `v`'s layout: written into its type."""
        self.fixed[id(v)] = enc
        v.type = ir.TensorType(v.type.shape, v.type.element, enc)

    def save_defaults(self) -> None:
        ranks = max(self.rank_layout, default=0)
        self.func.attrs[DEFAULTS] = [self.rank_layout.get(r) for r in range(ranks + 1)]

    def access_layout(self, shape, order, vec: int) -> BlockedEncoding:
        """The blocked layout one global access wants: `vec` contiguous elements a thread along its
        most contiguous dim, no more than the tile holds per thread."""
        threads = self.cfg.warp_size * self.cfg.num_warps
        numel = ir.TensorType(shape, ir.i8).numel
        vec = max(1, min(vec, numel // threads, shape[order[0]]))
        return default_blocked(shape, self.cfg, order, vec)

    def layout_for(self, t: ir.TensorType):
        enc = self.rank_layout.get(t.rank)
        if enc is None:
            enc = default_blocked(t.shape, self.cfg)
            self.rank_layout[t.rank] = enc
        return enc


class _CoalesceAnchors(_Layouts):
    def __init__(self, func, cfg):
        super().__init__(func, cfg)
        self.analysis = AxisAnalysis(func)

    def coalesce_anchors(self) -> None:
        best: Dict[int, tuple] = {}
        anchors: Dict[int, list] = {}
        accesses = {}   # id(op) -> (op, shape, order, vec, the pointer's vec without the mask)
        threads = self.cfg.warp_size * self.cfg.num_warps
        for op in self.func.walk():
            if op.name not in ("tt.load", "tt.store", "tt.atomic_rmw", "tt.atomic_load", "tt.atomic_store") \
                    or not op.operands:
                continue
            ptr = op.operands[0]
            if not _is_tensor(ptr) or ir.is_block_ptr(ptr.type):
                continue
            shape = ptr.type.shape
            if op.name == "tt.load" and max(self.analysis.info(ptr).contiguity) <= 1:
                # A gather (no two neighbours adjacent in memory, e.g. a per-group weight read at
                # offs // group) loads element by element in any layout: it takes the layout its
                # users want, as in Triton, instead of one of its own and a conversion after it
                # (Liger's fp32 group norm converted two 65536-element blocks per iteration).
                continue
            order = access_order(self.analysis, ptr)
            cap = max(1, ir.TensorType(shape, ir.i8).numel // threads)
            vec = min(vector_width(self.analysis, ptr, order[0], op.operand("mask")), cap)
            accesses[id(op)] = (op, tuple(shape), tuple(order), vec, min(vector_width(self.analysis, ptr, order[0]), cap))
        self._widen_loads_for_their_stores(accesses)
        for op, shape, order, vec, _ in accesses.values():
            self.access_layouts[id(op)] = op.attrs[ACCESS] = self.access_layout(shape, order, vec)
            key = (ir.TensorType(shape, ir.i8).numel, vec)
            anchors.setdefault(len(shape), []).append((tuple(shape), tuple(order)))
            if len(shape) not in best or key > best[len(shape)][0]:
                best[len(shape)] = (key, shape, order, vec)
        for rank, (_, shape, order, vec) in best.items():
            # The default layout's footprint must fit every anchor of this rank that runs along the
            # same order (matmul's A is 128x64 and B 64x128): fitted to the largest, the smaller one
            # would be replicated over lanes, which wastes half the loads or copies.
            for other in anchors.get(rank, ()):
                if other[1] == order:
                    shape = tuple(min(x, y) for x, y in zip(shape, other[0]))
            vec = max(1, min(vec, shape[order[0]]))
            self.rank_layout[rank] = default_blocked(shape, self.cfg, order, vec)
        self.save_defaults()
        # Loads (and atomics) produce their values in their own access layout; users that want
        # another layout get a conversion (stores ask for theirs in `_want_operands`).
        for op in self.func.walk():
            enc = self.access_layouts.get(id(op))
            if enc is not None and op.name != "tt.store" and op.results and _is_tensor(op.results[0]):
                self.fix(op.results[0], enc)

    @staticmethod
    def _widen_loads_for_their_stores(accesses: dict) -> None:
        """A load whose mask, not its pointer, keeps it narrower than a store its value is stored by
        (elementwise, same shape and order) takes that store's width: its layout is the store's, and
        the mask narrows only its instructions (scalar loads, several a thread), as Triton lays out
        accesses by their pointers alone. Liger's multi-token attention masks the future with
        `col > row` (a mask of single elements) on the load and bounds only on the store: the 512x512
        tile went through a 130 KiB layout conversion between them. A load whose stores are as
        narrow (softmax over a row length that is not a multiple of the vector) keeps its layout,
        coalesced element by element."""
        stores = {}
        for key, (op, shape, order, vec, _) in accesses.items():
            if op.name == "tt.store":
                stores[key] = (shape, order, vec)
        for key, (op, shape, order, vec, ptr_vec) in list(accesses.items()):
            if op.name != "tt.load" or vec >= ptr_vec:
                continue
            widest = max((w for st_shape, st_order, w in (stores[id(s)] for s in _stores_of(op.results[0]) if id(s) in stores)
                          if st_shape == shape and st_order == order), default=vec)
            if widest > vec:
                accesses[key] = (op, shape, order, min(widest, ptr_vec), ptr_vec)


def _stores_of(v: ir.Value, limit: int = 64) -> list:
    """The `tt.store` ops storing `v`, or values computed from it by elementwise ops of its shape."""
    found, seen, work = [], set(), [v]
    while work and len(seen) < limit:
        value = work.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        for user, index in value.uses:
            if user.name == "tt.store" and index == 1:
                found.append(user)
            elif (ir.op_info(user.name).elementwise and not user.regions and user.results
                  and _is_tensor(user.results[0]) and user.results[0].type.shape == value.type.shape):
                work.extend(user.results)
    return found


class _AccelerateMatmul(_Layouts):
    def accelerate_matmul(self) -> None:
        for op in self.func.walk():
            if op.name != "tt.dot":
                continue
            a, b = op.operand("a").type, op.operand("b").type
            out = op.result.type
            M, N = out.shape[-2:]
            K = a.shape[-1]
            site = DotSite(op, (M, N, K), len(out.shape), str(a.element), str(b.element), str(out.element),
                           self.cfg.num_warps, self.cfg.warp_size,
                           lambda op=op, M=M, N=N: self._chained_dot_warps(op, M, N),
                           str(op.attrs.get("inputPrecision", "ieee")))
            enc = next((e for e in (unit.layout(site) for unit in self.cfg.target.matrix_units) if e is not None),
                       None)
            if enc is None:   # no matrix unit takes it: the FMA dot, in the default layout
                enc = self.layout_for(out)
            self.fix(op.result, enc)
            self._fix_accumulator(op.operand("c"), enc)
        self.save_defaults()   # an FMA dot may have chosen the default layout of its rank

    def _chained_dot_warps(self, dot: ir.Operation, M: int, N: int):
        """As Triton: a dot connected to another dot of the same block (attention's QK^T feeding PV)
        puts all warps along M (or N), so that the first result becomes the second's operand by a
        register permutation only; a chained dot that already has a matrix layout that stays in
        registers (`keeps_in_registers`) lends its warps."""
        block = dot.parent
        seen, work, chained = {id(dot)}, [dot], False
        while work:
            op = work.pop()
            for v in op.operands:
                # A loop's accumulator result (fla's dq after its loop of dots, scaled, then the
                # accumulator of one more dot): its layout stays in registers, so the next dot
                # takes its warps and the accumulator needs no conversion.
                enc = self.fixed.get(id(v))
                if (getattr(v.owner, "name", None) == "scf.for" and v.owner.parent is block
                        and getattr(enc, "keeps_in_registers", False) and enc.rank == 2):
                    return enc.warps_per_cta
            neighbours = [v.owner for v in op.operands if isinstance(v.owner, ir.Operation)]
            neighbours += [user for r in op.results for user, _ in r.uses]
            for other in neighbours:
                if other.parent is not block or id(other) in seen:
                    continue
                seen.add(id(other))
                work.append(other)
                if other.name == "tt.dot" and len(other.results[0].type.shape) == 2:
                    enc = self.fixed.get(id(other.results[0]))
                    if getattr(enc, "keeps_in_registers", False):
                        return enc.warps_per_cta
                    chained = True
        if not chained:
            return None
        return (self.cfg.num_warps, 1) if M >= N else (1, self.cfg.num_warps)

    def _fix_accumulator(self, acc: ir.Value, enc) -> None:
        """A loop-carried accumulator keeps the dot's layout (no conversion in each iteration); that
        it enters the loop in this layout is `assign-layouts`' part (`seed_wants`)."""
        if isinstance(acc, ir.BlockArgument):
            loop = acc.block.parent_op
            if loop is not None and loop.name == "scf.for" and acc.index >= 1:
                self.fix(acc, enc)
                self.fix(loop.results[acc.index - 1], enc)


class _PropagateDotLayouts(_Layouts):
    def propagate_dot_layouts(self) -> None:
        """Let each MMA result's layout flow forward to the values computed from it; loop-carried
        values take it from what the loop yields, so the walk repeats until nothing new flows (each
        round only adds, and there are finitely many values: it converges)."""
        while True:
            before = len(self.flowing)
            self._flow_block(self.func.regions[0].blocks[0])
            if len(self.flowing) == before:
                return

    def _flowing_of(self, v: ir.Value):
        enc = self.fixed.get(id(v)) or self.flowing.get(id(v))
        return enc if _kept_in_registers(enc) else None

    def _flow_into(self, v: ir.Value, enc) -> None:
        if enc is not None and _is_tensor(v) and id(v) not in self.fixed and enc.rank == v.type.rank:
            if id(v) not in self.flowing:
                self.flowing[id(v)] = enc
                set_value_hint(v, FLOW, enc)

    def _flow_block(self, block: ir.Block) -> None:
        for op in block.ops:
            if op.name == "scf.for":
                body = op.regions[0].blocks[0]
                for k, init in enumerate(op.operand_group("inits")):
                    enc = self._flowing_of(init) or self._flowing_of(body.ops[-1].operands[k])
                    self._flow_into(body.args[k + 1], enc)
                    self._flow_into(op.results[k], enc)
            for region in op.regions:
                for inner in region.blocks:
                    self._flow_block(inner)
            if not op.results or not _is_tensor(op.results[0]):
                continue
            res = op.results[0]
            if op.name == "tt.reduce":
                src = self._flowing_of(op.operands[0])
                for r in op.results:
                    self._flow_into(r, SliceEncoding(op.attrs["axis"], src) if src is not None else None)
            elif op.name == "tt.expand_dims":
                src = self._flowing_of(op.operands[0])
                if isinstance(src, SliceEncoding) and src.dim == op.attrs["axis"]:
                    self._flow_into(res, src.parent)
            elif op.name == "tt.broadcast":
                self._flow_into(res, self._flowing_of(op.operands[0]))
            elif ir.op_info(op.name).elementwise:
                for v in op.operands:
                    if _is_tensor(v) and v.type.shape == res.type.shape and self._flowing_of(v) is not None:
                        self._flow_into(res, self._flowing_of(v))
                        break


class _AssignLayouts(_Layouts):
    _source_memo: dict
    _disagreeing: dict

    def seed_wants(self) -> None:
        """The wishes the earlier passes' decisions imply, as they stood before the walks: a pointer
        carried by a loop lives in its access's layout, a loop-carried accumulator enters the loop in
        its dot's layout."""
        for op in self.func.walk():
            enc = self.access_layouts.get(id(op))
            ptr = op.operands[0] if enc is not None else None
            if isinstance(ptr, ir.BlockArgument) and ptr.index >= 1:
                loop = ptr.block.parent_op
                if loop is not None and loop.name == "scf.for":
                    self.want(loop.results[ptr.index - 1], enc)
        for op in self.func.walk():
            if op.name == "tt.dot" and op.result.type.encoding is not None:
                acc, enc = op.operand("c"), op.result.type.encoding
                if isinstance(acc, ir.BlockArgument):
                    loop = acc.block.parent_op
                    if loop is not None and loop.name == "scf.for" and acc.index >= 1:
                        self.wanted[id(loop.operand_group("inits")[acc.index - 1])] = enc
                self.wanted.setdefault(id(acc), enc)

    def decide(self, v: ir.Value):
        if not _is_tensor(v):
            return None
        if id(v) in self.fixed:
            return self.fixed[id(v)]
        enc = self.flowing.get(id(v)) or self._loop_result_layout(v) or self.wanted.get(id(v))
        if enc is None and v.type.rank >= 2:
            # Nobody asked (a dot operand's chain: the dot takes any layout through a conversion). A
            # value computed elementwise from loads that agree on a layout stays in theirs, so the
            # other operands come to it: fla's `b_v * exp2(g_last - g)[:, None]` converted the loaded
            # [64, 32] tile every iteration into the default layout of the [64] gate vector.
            source = self._source_layout(v, self._source_memo)
            enc = source if isinstance(source, BlockedEncoding) else None
            if source is None:
                # Loads that disagree: compute in the layout of the one reading the widest vectors
                # (the first of those), as Triton resolves such conflicts; the rank's default layout
                # converted them all (fla's gla `intra_sub_intra` computed its [16, 128] tiles in the
                # default fitted to a [16, 16] store, 64 columns a thread: every broadcast row was
                # read 64 values a thread from shared memory).
                loaded = self._disagreeing.get(id(v.owner), ())
                enc = max(loaded, key=lambda e: e.size_per_thread[e.order[0]]) if loaded else None
        if enc is None or enc.rank != v.type.rank:
            enc = self.layout_for(v.type)
        self.fixed[id(v)] = enc
        return enc

    def _loop_result_layout(self, v: ir.Value):
        """The layout a loop's result is computed in by its body when that is a load's layout (or a
        reduction of one): users after the loop convert the result once, where deciding it by their
        wish converted the body's loaded tiles every iteration. fla's gla backward carried
        `b_dgk += tl.sum(b_h * b_dh, axis=0)` in the slice of the MMA layout its epilogue uses, and
        converted both [64, 64] fp32 tiles into that layout in every iteration (Triton converts the
        [64] sum after the loop)."""
        owner = v.owner
        if not isinstance(owner, ir.Operation) or owner.name != "scf.for":
            return None
        source = self._source_layout(v, self._source_memo)
        return source if _register_layout_of_loads(source) and source.rank == v.type.rank else None

    def want(self, v: ir.Value, enc) -> None:
        if _is_tensor(v) and enc is not None and id(v) not in self.wanted:
            self.wanted[id(v)] = enc

    def backward(self, block: ir.Block) -> None:
        for op in reversed(block.ops):
            for region in reversed(op.regions):
                for inner in reversed(region.blocks):
                    self.backward(inner)
            self._want_operands(op)

    def _want_operands(self, op: ir.Operation) -> None:
        name = op.name
        if name == "tt.reduce" and op.results and _is_tensor(op.results[0]):
            # A reduction's result layout is, by construction, its operand's layout sliced along the
            # axis; users that want another layout get a conversion. A slice already wanted by a
            # user (expand_dims) picks the operand's layout, so that no conversion is needed.
            axis = op.attrs["axis"]
            asked = self.fixed.get(id(op.results[0])) or self.wanted.get(id(op.results[0]))
            source = self._operands_source(op, op.operands[0].type.shape, self._source_memo, 0)
            if isinstance(source, BlockedEncoding) and isinstance(asked, SliceEncoding) and asked.parent != source:
                # Operands computed from loads that agree on a layout are reduced in theirs: the
                # result, a dimension smaller, is what gets converted (as Triton).
                asked = None
            if isinstance(asked, SliceEncoding) and asked.dim == axis:
                for v in op.operands:
                    self.want(v, asked.parent)
            src_enc = self.decide(op.operands[0])
            for v in op.operands[1:]:
                self.want(v, src_enc)
            for r in op.results:
                self.fixed[id(r)] = SliceEncoding(axis, src_enc)
            return
        if name == "tt.scan" and op.results and _is_tensor(op.results[0]):
            # A scan keeps every element in the thread that holds it: its operands and all its results
            # share one layout (a user that wants another gets a conversion after the scan). Each
            # result deciding on its own let a store's wish give the index of a (value, index) scan
            # another layout than the one the lowering wrote it in: wrong elements on the GPU.
            enc = next((self.fixed[id(r)] for r in op.results if id(r) in self.fixed), None)
            if enc is None:
                asked = next((self.wanted[id(r)] for r in op.results if id(r) in self.wanted), None)
                self.want(op.operands[0], asked)
                enc = self.decide(op.operands[0])
            for v in op.operands:
                self.want(v, enc)
            for r in op.results:
                self.fixed.setdefault(id(r), enc)
            return
        if name == "tt.elementwise_inline_asm" and op.results and _is_tensor(op.results[0]):
            # One asm call writes every result of a register group: the results share one layout,
            # and the arguments come in it.
            enc = next((self.fixed[id(r)] for r in op.results if id(r) in self.fixed), None) or self.decide(op.results[0])
            for r in op.results:
                self.fixed[id(r)] = enc
            for v in op.operands:
                self.want(v, enc)
            return
        res = self.decide(op.results[0]) if op.results and _is_tensor(op.results[0]) else None
        if name == "tt.expand_dims" and res is not None:
            self.want(op.operands[0], SliceEncoding(op.attrs["axis"], res))
        elif name == "tt.broadcast" and res is not None:
            self.want(op.operands[0], res)
        elif name == "tt.trans" and isinstance(res, BlockedEncoding):
            # born in the transposed layout, the operand's registers are the result's (a free trans)
            self.want(op.operands[0], transposed_blocked(res, op.attrs.get("order") or [1, 0]))
        elif name == "tt.reduce" and res is not None and isinstance(res, SliceEncoding):
            for v in op.operands:
                self.want(v, res.parent)
        elif name in _ACCESS_OPS and op.operands and _is_tensor(op.operands[0]):
            enc = (self.access_layouts.get(id(op)) or self.wanted.get(id(op.operands[0]))
                   or self.layout_for(op.operands[0].type))
            for i, v in enumerate(op.operands):
                # As Triton: a stored value computed elementwise from loads that agree on a layout is
                # computed in theirs and converted once, before the store; wishing the store's layout
                # up its chain converted the loaded inputs instead (Liger's JSD: four conversions).
                # So for the value an atomic adds or stores: Liger's attention-residual backward sums
                # two fp32 [4096] gradients over eight unrolled blocks of bf16 loads, then
                # atomic_adds them; the atomics' wish converted each block's tiles there and back
                # (26 conversions of 4096 values a token; now two, as Triton).
                source = (self._source_layout(v, {}) if name in ("tt.store", "tt.atomic_rmw", "tt.atomic_store")
                          and i == 1 else None)
                self.want(v, source if isinstance(source, BlockedEncoding) else enc)
        elif name == "scf.yield" and op.parent is not None and op.parent.parent_op is not None:
            owner = op.parent.parent_op
            for i, v in enumerate(op.operands):
                if owner.name in ("scf.for", "scf.if") and i < len(owner.results):
                    self.want(v, self.decide(owner.results[i]))
        elif name == "scf.for":
            body = op.regions[0].blocks[0]
            for k, r in enumerate(op.results):
                enc = self.decide(r)
                self.fixed.setdefault(id(body.args[k + 1]), enc)
                self.want(op.operand_group("inits")[k], enc)
        elif res is not None and name not in ("tt.dot", "tt.trans", "tt.reshape", "tt.join", "tt.split",
                                              "tt.cat", "tt.gather", "tt.histogram", "tt.scan", "tt.reduce"):
            same_shape = [v for v in op.operands if _is_tensor(v) and v.type.shape == op.results[0].type.shape]
            for v in same_shape:
                self.want(v, res)

    def _source_layout(self, v: ir.Value, memo: dict, depth: int = 0):
        """The layout of the loads that `v` is computed from by elementwise ops alone: a decided
        layout, `_NEUTRAL` (only constants, splats, ranges and broadcasts, whose smaller sources
        follow) or None (no single one: layouts disagree, or `v` depends on something else)."""
        key = id(v)
        if key in memo:
            return memo[key]
        memo[key] = None   # a cycle (none in SSA) or a chain too deep decides nothing
        result = None
        op = v.owner
        if not _is_tensor(v):
            result = _NEUTRAL
        elif key in self.fixed:
            result = self.fixed[key] if isinstance(op, ir.Operation) and op.name == "tt.load" else None
        elif isinstance(op, ir.Operation) and op.name == "tt.load":
            result = self.access_layouts.get(id(op))   # its coalesced layout, before the walk reaches it
        elif isinstance(op, ir.Operation) and depth < 64:
            if op.name == "scf.for":
                result = self._loop_result_source(op, v, memo, depth)
            elif op.name == "scf.if":
                result = self._if_result_source(op, v, memo, depth)
            elif op.name in ("arith.constant", "tt.splat", "tt.make_range", "tt.broadcast"):
                # a broadcast is as cheap in any layout: its smaller source follows
                result = _NEUTRAL
            elif op.name == "tt.reduce":
                # a reduction of tiles in a load's layout comes out in its slice
                parent = self._operands_source(op, op.operands[0].type.shape, memo, depth)
                result = SliceEncoding(op.attrs["axis"], parent) if isinstance(parent, BlockedEncoding) else None
            elif ir.op_info(op.name).elementwise and not op.regions:
                result = self._operands_source(op, v.type.shape, memo, depth)
        memo[key] = result
        return result

    def _operands_source(self, op: ir.Operation, shape, memo: dict, depth: int):
        """`_source_layout` common to `op`'s operands of `shape` (scalars are neutral; a tensor of
        another shape decides nothing)."""
        found, loaded = [], []   # in operand order: the sources, and the load layouts under them
        for o in op.operands:
            enc = (self._source_layout(o, memo, depth + 1) if _is_tensor(o) and o.type.shape == shape
                   else _NEUTRAL if not _is_tensor(o) else None)
            if enc != _NEUTRAL and enc not in found:
                found.append(enc)
            below = [enc] if isinstance(enc, BlockedEncoding) else self._disagreeing.get(id(o.owner), ())
            loaded += [e for e in below if e not in loaded]
        result = _NEUTRAL if not found else found[0] if len(found) == 1 else None
        if result is None and loaded:   # loads that disagree, here or under an operand: `decide` picks one
            self._disagreeing[id(op)] = loaded
        return result

    def _loop_result_source(self, loop: ir.Operation, v: ir.Value, memo: dict, depth: int):
        """`_source_layout` of a loop's result: that of the value the body yields for it, the loop's
        own carried value counting as neutral (a recurrence such as Liger's layer-norm backward's
        `dW_row += dy * x_hat` follows the loads it adds), and of the value it starts from. A store
        after the loop then converts the result once, instead of the body converting its loaded
        tiles into the store's layout every iteration (four conversions a row there, as Triton)."""
        k = loop.results.index(v)
        body = loop.regions[0].blocks[0]
        yielded = body.ops[-1].operands[k] if body.ops and body.ops[-1].name == "scf.yield" else None
        if yielded is None or not _is_tensor(yielded) or yielded.type.shape != v.type.shape:
            return None
        inner = {id(body.args[k + 1]): _NEUTRAL}   # the carried value: its own memo, not the caller's
        found = {self._source_layout(yielded, inner, depth + 1),
                 self._source_layout(loop.operand_group("inits")[k], memo, depth + 1)}
        found.discard(_NEUTRAL)
        return _NEUTRAL if not found else found.pop() if len(found) == 1 else None

    def _if_result_source(self, op: ir.Operation, v: ir.Value, memo: dict, depth: int):
        """`_source_layout` of an `if`'s result: the one its branches' yielded values share. Liger's
        attention-residual backward accumulates two gradients over `tl.static_range` blocks, each
        under `if i < n_blocks` (an `if` yielding the sum, or the sum so far), then atomic-adds them."""
        k = op.results.index(v)
        found = set()
        for region in op.regions:
            block = region.blocks[0] if region.blocks else None
            term = block.ops[-1] if block is not None and block.ops else None
            if term is None or term.name != "scf.yield":
                return None
            yielded = term.operands[k]
            if not _is_tensor(yielded) or yielded.type.shape != v.type.shape:
                return None
            found.add(self._source_layout(yielded, memo, depth + 1))
        found.discard(_NEUTRAL)
        return _NEUTRAL if not found else found.pop() if len(found) == 1 else None

    def forward(self, block: ir.Block) -> None:
        for arg in block.args:
            self._retype(arg)
        for op in list(block.ops):
            self._convert_operands(op)
            for region in op.regions:
                for inner in region.blocks:
                    self.forward(inner)
            for r in op.results:
                self._retype(r)

    def _retype(self, v: ir.Value) -> None:
        if _is_tensor(v) and v.type.encoding is None:
            v.type = ir.TensorType(v.type.shape, v.type.element, self.decide(v))

    def _required(self, op: ir.Operation, idx: int, v: ir.Value):
        """The layout operand `idx` of `op` must have, or None when any layout will do."""
        name = op.name
        res_enc = op.results[0].type.encoding if op.results and _is_tensor(op.results[0]) else None
        if res_enc is None and op.results and _is_tensor(op.results[0]):
            res_enc = self.decide(op.results[0])
        if name == "tt.dot":
            if idx == 2:
                return res_enc
            k_width = getattr(res_enc, "k_width", 0)
            return DotOperandEncoding(idx, res_enc, k_width)
        if name == "tt.expand_dims":
            return SliceEncoding(op.attrs["axis"], res_enc)
        if name == "tt.broadcast":
            return res_enc
        if name == "tt.gather":   # each thread reads the source elements its own indices name
            return res_enc if idx == 1 else None
        if name == "tt.scan":
            return res_enc
        if name == "tt.reduce":
            # The lowering reads the result in the operands' layout sliced along the axis: when the
            # backward walk fixed the result's slice before the operand (chained reductions decide
            # from the last one back), the operands are converted to that slice's parent.
            if isinstance(res_enc, SliceEncoding) and res_enc.dim == op.attrs["axis"]:
                return res_enc.parent
            return self.decide(op.operands[0]) if idx else None
        if name in _ACCESS_OPS:
            return op.operands[0].type.encoding if idx else None
        if name == "scf.yield":
            owner = op.parent.parent_op
            if owner is not None and owner.name in ("scf.for", "scf.if") and idx < len(owner.results):
                return self.decide(owner.results[idx])
            if owner is not None and owner.name == "scf.while":
                return self.decide(owner.regions[0].blocks[0].args[idx])
            return None
        if name == "scf.condition":
            owner = op.parent.parent_op
            return self.decide(owner.regions[1].blocks[0].args[idx - 1]) if idx else None
        if name == "scf.for":
            first = op.operand_index("inits")
            return self.decide(op.results[idx - first]) if idx >= first else None
        if name == "scf.while":
            return self.decide(op.regions[0].blocks[0].args[idx])
        if name in ("tt.trans", "tt.reshape", "tt.join", "tt.split", "tt.cat", "tt.gather", "tt.histogram",
                    "tt.return", "tt.print", "tt.assert", "tt.call", "ttg.convert_layout"):
            return None
        if res_enc is not None and v.type.shape == op.results[0].type.shape:
            return res_enc
        return None

    def _convert_operands(self, op: ir.Operation) -> None:
        for idx, v in enumerate(list(op.operands)):
            if not _is_tensor(v):
                continue
            self._retype(v)
            need = self._required(op, idx, v)
            if need is None or v.type.encoding == need:
                continue
            conv = ir.Operation("ttg.convert_layout", [v], [ir.TensorType(v.type.shape, v.type.element, need)],
                                loc=op.loc)
            op.parent.insert(op.parent.ops.index(op), conv)
            op.set_operand(idx, conv.result)

    def run(self) -> None:
        self._source_memo = {}
        self._disagreeing = {}   # id(op) -> the load layouts its value is computed from, when they differ
        self.seed_wants()
        entry = self.func.regions[0].blocks[0]
        self.backward(entry)
        self.forward(entry)
        strip_hints(self.func)
        self.func.attrs["ttg.num_warps"] = self.cfg.num_warps
        self.func.attrs["ttg.threads_per_warp"] = self.cfg.warp_size


# --- the passes -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CoalesceAnchors:
    """Each global load, store and atomic gets the blocked layout of its widest access
    (`ttg.access_layout`); loads produce their value in it; the widest access of each rank gives the
    function's default layout for that rank (`ttg.default_layouts`)."""
    cfg: object
    name: str = "tritongpu-coalesce-anchors"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            _CoalesceAnchors(func, self.cfg).coalesce_anchors()


@dataclass(frozen=True)
class AccelerateMatmul:
    """Each `tt.dot` gets its result layout: a matrix instruction's where one fits, else blocked (FMA);
    a loop-carried accumulator keeps it across iterations."""
    cfg: object
    name: str = "tritongpu-accelerate-matmul"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            _AccelerateMatmul(func, self.cfg).accelerate_matmul()


@dataclass(frozen=True)
class PropagateDotLayouts:
    """Matrix layouts flow forward from the dots (as hints `ttg.flow`) through elementwise ops,
    reductions, expand_dims/broadcast and loop-carried values (as Triton's RemoveLayoutConversions)."""
    cfg: object
    name: str = "tritongpu-propagate-dot-layouts"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            _PropagateDotLayouts(func, self.cfg).propagate_dot_layouts()


@dataclass(frozen=True)
class AssignLayouts:
    """Every tensor gets its layout: a backward walk gives each value the layout its users want, a
    forward walk writes them into the types and inserts `ttg.convert_layout` where a use disagrees.
    Removes the hints of the passes before."""
    cfg: object
    name: str = "tritongpu-assign-layouts"

    def apply(self, module: ir.Module) -> None:
        for func in module.functions:
            _AssignLayouts(func, self.cfg).run()
