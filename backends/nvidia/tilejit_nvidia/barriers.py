"""Barriers that order no conflicting shared-memory accesses are dropped from a lowered kernel.

The lowering fences every use of the shared scratch with a barrier before and after (a conversion:
barrier, stores, barrier, loads, barrier), so each use is correct on its own, and a pipelined loop
passes one barrier an iteration for its ring buffers. A barrier is only needed where an access
before it (back to the previous barrier, on some path) and one after it (up to the next barrier)
may touch the same bytes and one of them writes: Triton's membar analysis places barriers by that
rule. Accesses know their bytes where the lowering said (`FunctionLowering.shared_spans`: the
scratch, a loop's ring buffers); any other shared access may touch any byte.

fla's state loops passed eight barriers an iteration (Triton's: three): the ones before and after
each conversion also fenced the ring buffers' copies and reads, which never meet the scratch.

Only the lowering's own barriers are candidates: `tl.debug_barrier()`'s are the user's and stay
(they also order global memory, which this analysis does not look at).
"""
from __future__ import annotations

from typing import Dict, Optional, Set, Tuple

import llvmlite.ir as llir

BARRIER = "llvm.nvvm.barrier0"
USER_BARRIER = "tilejit.user_barrier"   # metadata kind on the barriers `tl.debug_barrier()` emits

# Inline PTX that touches shared memory or the async proxy reading it (or that waits for others).
_SHARED_ASM = ("shared", "ldmatrix", "stmatrix", "wgmma", "cp.async", "fence", "mbarrier", "bar.", "barrier",
               "atom", "red.")
# Calls that touch no shared memory: thread indices, shuffles, math, libdevice.
_PURE_CALLS = ("llvm.nvvm.read.ptx.sreg.", "llvm.nvvm.shfl.", "llvm.nvvm.ex2", "llvm.nvvm.rsqrt", "llvm.nvvm.sqrt",
               "llvm.nvvm.fma", "llvm.fma", "llvm.fabs", "llvm.exp", "llvm.log",
               "llvm.sqrt", "llvm.minnum", "llvm.maxnum", "llvm.minimum", "llvm.maximum", "llvm.smin", "llvm.smax",
               "llvm.umin", "llvm.umax", "llvm.abs", "llvm.ctpop", "llvm.ctlz", "llvm.cttz", "llvm.copysign",
               "llvm.floor", "llvm.ceil", "llvm.trunc", "llvm.rint", "llvm.round", "llvm.sin", "llvm.cos",
               "llvm.pow", "llvm.assume", "llvm.expect", "__nv_",
               "llvm.nvvm.mma.",              # mma.sync: registers only
               "llvm.nvvm.cp.async.commit", "llvm.nvvm.cp.async.wait")   # a copy counts where it is issued


def _callee_name(instr) -> str:
    return getattr(instr.callee, "name", "") or ""


def is_barrier(instr) -> bool:
    return isinstance(instr, llir.CallInstr) and _callee_name(instr) == BARRIER


def _is_user_barrier(instr) -> bool:
    return USER_BARRIER in getattr(instr, "metadata", {})


Access = Tuple[Optional[Tuple[int, int]], bool]   # (bytes [first, end) or None: any, writes?)


class _Accesses:
    """The shared-memory accesses of instructions, with the bytes they may touch."""

    def __init__(self, spans: Dict[int, tuple]):
        self.spans = spans
        self._memo: Dict[int, Optional[Access]] = {}   # each barrier's walks revisit the same code

    def span_of(self, value) -> Optional[Tuple[int, int]]:
        """The span tagged on `value` or on the pointer it was cast or offset from; None: unknown."""
        for _ in range(8):
            found = self.spans.get(id(value))
            if found is not None:
                return found
            if isinstance(value, llir.CastInstr) or isinstance(value, llir.GEPInstr):
                value = value.operands[0]
            else:
                return None
        return None

    def of(self, instr) -> Optional[Access]:
        """The access `instr` makes, or None when it touches no shared memory."""
        key = id(instr)
        if key not in self._memo:
            self._memo[key] = self._classify(instr)
        return self._memo[key]

    def _classify(self, instr) -> Optional[Access]:
        if isinstance(instr, llir.LoadInstr):
            ptr, write = instr.operands[0], False
        elif isinstance(instr, llir.StoreInstr):
            ptr, write = instr.operands[1], True
        elif isinstance(instr, (llir.AtomicRMW, llir.CmpXchg)):
            ptr, write = instr.operands[0], True
        elif isinstance(instr, llir.CallInstr):
            name = _callee_name(instr)
            if name.startswith("llvm.nvvm.ldmatrix"):
                return (self.span_of(instr.args[0]), False)
            if isinstance(instr.callee, llir.InlineAsm):
                text = instr.callee.asm
                if "cp.async" in text and "group" not in text:   # a copy into shared memory
                    return (self.span_of(instr.args[0]), True)
                if "cp.async" in text:
                    return None   # commit / wait: the copies count where they are issued
                return (None, True) if any(word in text for word in _SHARED_ASM) else None
            return None if name.startswith(_PURE_CALLS) else (None, True)
        else:
            return None
        if getattr(ptr.type, "addrspace", 0) == 1:
            return None   # global memory
        return (self.span_of(ptr), write)


def _conflict(a: Access, b: Access) -> bool:
    if not (a[1] or b[1]):
        return False
    if a[0] is None or b[0] is None:
        return True
    return a[0][0] < b[0][1] and b[0][0] < a[0][1]


def _successors(term):
    if isinstance(term, llir.Branch):
        return [term.operands[0]]
    if isinstance(term, llir.ConditionalBranch):
        return [term.operands[1], term.operands[2]]
    if isinstance(term, llir.SwitchInstr):
        return [term.default] + [block for _, block in term.cases]
    return []   # ret, unreachable


def _predecessors(func) -> Dict[int, list]:
    preds: Dict[int, list] = {id(b): [] for b in func.blocks}
    for block in func.blocks:
        for succ in _successors(block.terminator):
            preds[id(succ)].append(block)
    return preds


def _accesses_to_barriers(block, index: int, accesses: _Accesses, forward: bool, preds) -> Set[Access]:
    """The accesses on any path from instruction `index` of `block` to the nearest barriers: from it
    on (`forward`), or before it."""
    found, work, seen = set(), [(block, index)], set()
    while work:
        blk, at = work.pop()
        for instr in (blk.instructions[at:] if forward else reversed(blk.instructions[:at])):
            if is_barrier(instr):
                break
            access = accesses.of(instr)
            if access is not None:
                found.add(access)
        else:
            for nxt in (_successors(blk.terminator) if forward else preds[id(blk)]):
                if id(nxt) not in seen:
                    seen.add(id(nxt))
                    work.append((nxt, 0 if forward else len(nxt.instructions)))
    return found


def drop_unneeded_barriers(func: llir.Function, spans: Optional[Dict[int, tuple]] = None) -> int:
    """Remove the lowering's barriers that order no conflicting pair of shared-memory accesses,
    one at a time (each decided on the code with the earlier ones gone); returns how many."""
    accesses = _Accesses(spans or {})
    preds = _predecessors(func)
    removed = 0
    for block in func.blocks:
        index = 0
        while index < len(block.instructions):
            instr = block.instructions[index]
            if is_barrier(instr) and not _is_user_barrier(instr):
                before = _accesses_to_barriers(block, index, accesses, False, preds)
                after = _accesses_to_barriers(block, index + 1, accesses, True, preds)
                if not any(_conflict(a, b) for a in before for b in after):
                    del block.instructions[index]
                    removed += 1
                    continue
            index += 1
    return removed
