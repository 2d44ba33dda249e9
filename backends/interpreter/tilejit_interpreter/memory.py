"""Checked memory for interpreted kernels: pointers, loads, stores, atomics, block pointers.

A pointer is an int64 that encodes which kernel argument it points into (its *slot*, 1-based) and a
byte offset into that argument's allocation:

    pointer = slot << 40 | 2**39 + byte_offset          (offsets in [-2**39, 2**39))

so pointer arithmetic is plain integer arithmetic, `pointer >> 40` recovers the slot even for
offsets before the start, and no pointer ever aliases host memory. The generator knows the slot of
almost every pointer statically and passes it; `DYNAMIC` asks the helper to decode it per element.

Provenance: the slot bits of a pointer are the argument it was derived from, never the result of
an offset. A pointer with a static slot is checked against that slot whatever its bits say. Where a
pointer's slot becomes dynamic (chosen per lane, merged by control flow, passed to a function), the
generator pins it (`pin`) and every later move keeps its slot bits (`addptr_keeping_slot`): an
offset that would carry into the slot bits clamps the pointer to the edge of its own slot's window,
2**39 bytes outside the argument, so it reads as out of bounds of its own argument instead of
pointing into the next one. Only an integer turned into a pointer (`tt.int_to_ptr`) is decoded
from its value, as a GPU would use the address.

Every access is checked against the allocation before it touches memory; masked-off lanes are never
read or written. A violation raises `InterpreterError` naming the kernel, the parameter, the program
id, the element offset and the kernel's source line.
"""
from __future__ import annotations

import numpy as np

from tilejit.errors import InterpreterError

from . import numerics

SLOT_SHIFT = 40
OFFSET_BIAS = 1 << 39
DYNAMIC = -1
_EMPTY = np.zeros(0, np.uint8)
_INT64 = np.int64
_NO_PIDS = (np.zeros(1, np.int32),) * 3


def slot_base(slot: int) -> int:
    """The pointer value of byte 0 of slot `slot`'s allocation."""
    return (slot << SLOT_SHIFT) + OFFSET_BIAS


_WINDOW_TOP = (1 << SLOT_SHIFT) - 1


def pin(ptr, slot: int):
    """Pointers of static slot `slot` about to lose it (merged with others, passed to a function):
    lanes an offset moved out of the slot's window are clamped to its edge. A block pointer or
    descriptor (a tuple) pins its base."""
    if isinstance(ptr, tuple):
        return (pin(ptr[0], slot),) + ptr[1:]
    low = slot << SLOT_SHIFT
    if type(ptr) is _INT64:
        return ptr if low <= ptr <= low + _WINDOW_TOP else _INT64(min(max(int(ptr), low), low + _WINDOW_TOP))
    ptr = np.asarray(ptr)
    if ptr.size and (ptr.min() < low or ptr.max() > low + _WINDOW_TOP):
        return np.clip(ptr, low, low + _WINDOW_TOP)
    return ptr


def keep_slot(moved, origin):
    """`moved` (pointers computed from `origin` by an offset) with the slot bits of `origin`."""
    moved = np.asarray(moved)
    if not np.any(np.bitwise_xor(moved, origin) >> SLOT_SHIFT):
        return moved
    low = (np.asarray(origin) >> SLOT_SHIFT) << SLOT_SHIFT
    return np.clip(moved, low, low + _WINDOW_TOP)


def addptr_keeping_slot(ptr, offset, size: int):
    """tt.addptr of a pointer whose slot is dynamic: the offset never changes the slot."""
    return keep_slot(np.multiply(offset, size, dtype=np.int64) + ptr, ptr)


class Memory:
    """The arguments of one launch as flat buffers, plus what error messages need.

    A buffer is a flat array over the argument's whole allocation: bytes (uint8), or, for a
    C-contiguous NumPy array, the array itself flattened (no byte round trip on the launch path).
    """

    __slots__ = ("kernel", "names", "buffers", "nbytes", "starts", "views", "sites", "pids", "grid",
                 "_disjoint", "sanitizer")

    def __init__(self, kernel: str, sites):
        self.kernel = kernel
        self.sites = sites          # site index -> (Location, what)
        self.names = ["<null>"]     # slot -> parameter name; slot 0 means "no argument"
        self.buffers = [_EMPTY]
        self.nbytes = [0]
        self.starts = [0]           # byte offset of the argument's first element in its allocation
        self.views = {}
        self.pids = _NO_PIDS
        self.grid = (1, 1, 1)
        self._disjoint = None
        self.sanitizer = None       # sanitizer.Sanitizer of a sanitized launch: sees every access

    def disjoint(self) -> bool:
        """No two arguments share memory (computed on first use; most launches never ask)."""
        if self._disjoint is None:
            live = [b for b in self.buffers if b.size]
            self._disjoint = not any(np.may_share_memory(a, b) for i, a in enumerate(live) for b in live[i + 1:])
        return self._disjoint

    def add(self, name: str, buffer: np.ndarray, start: int) -> int:
        """Register an allocation (a flat array); return the pointer the kernel receives."""
        self.names.append(name)
        self.buffers.append(buffer)
        self.nbytes.append(buffer.nbytes)
        self.starts.append(start)
        slot = len(self.names) - 1
        # The typed view most accesses ask for is the buffer itself.
        self.views[(slot, buffer.dtype.type)] = buffer
        return slot_base(slot) + start

    def add_scalar(self, name: str) -> None:
        """Hold the slot of a scalar parameter (or of a None pointer): slots are parameter index + 1,
        as the generator numbers them. It has no bytes, so any access through it is out of bounds."""
        self.names.append(name)
        self.buffers.append(_EMPTY)
        self.nbytes.append(0)
        self.starts.append(0)

    def view(self, slot: int, dtype) -> np.ndarray:
        key = (slot, dtype)
        view = self.views.get(key)
        if view is None:
            buf = self.buffers[slot]
            if buf.dtype != np.uint8:
                buf = buf.view(np.uint8)
            size = np.dtype(dtype).itemsize
            view = buf[: buf.shape[0] - buf.shape[0] % size].view(dtype)
            self.views[key] = view
        return view

    # -- errors ---------------------------------------------------------------------------------
    def program_of(self, lane: int, shape, rank: int):
        """The program id of flat lane `lane` of an array of `shape` (program axis first when its
        rank exceeds the IR rank `rank`; else every program did the same, so report the first)."""
        p = 0
        if len(shape) > rank:
            lanes_per_program = int(np.prod(shape[1:], dtype=np.int64))
            p = lane // max(lanes_per_program, 1)
        return tuple(int(pid[p]) if np.ndim(pid) else int(pid) for pid in self.pids)

    def error(self, site: int, message: str, program=None) -> InterpreterError:
        loc, what = self.sites[site]
        return InterpreterError(f"{message} ({what})", kernel=self.kernel, file=loc.file or None,
                                line=loc.line or None, col=loc.col or None, program_id=program)


# ------------------------------------------------------------------------------------------------
# address checks

def _first_lane(bad: np.ndarray) -> int:
    return int(np.argmax(bad.reshape(-1)))


def element_index(mem: Memory, site: int, slot: int, ptr, mask, size: int, rank: int, aligned: bool = False):
    """Check every active lane of `ptr` against slot `slot` and return element indices into
    `mem.view(slot, ...)`; masked-off lanes get a valid index. Raises InterpreterError on a bad access."""
    base = slot_base(slot)
    shift = size.bit_length() - 1
    if type(ptr) is _INT64 and mask is None:
        # One scalar pointer (a one-program launch touching one element): Python integer checks.
        off = int(ptr) - base
        if 0 <= off <= mem.nbytes[slot] - size and not off & (size - 1):
            return off >> shift, None
    ptr = np.asarray(ptr)
    if ptr.size == 0:
        return ptr - base, mask
    # Fast path: every lane (masked or not) is inside and aligned, the common case: no masking needed.
    low, high = ptr.min(), ptr.max()
    if low >= base and high <= base + mem.nbytes[slot] - size:
        index = np.subtract(ptr, base)
        # `aligned`: the generator proved the pointer moved by whole elements from the argument.
        if size > 1 and (mem.starts[slot] & (size - 1) or not aligned) and (index & (size - 1)).any():
            _misaligned(mem, site, slot, index, mask, size, rank)
        if shift:
            index >>= shift
        return index, mask
    off = ptr - base
    if mask is not None:
        mask = np.broadcast_to(mask, np.broadcast_shapes(off.shape, np.shape(mask)))
        off = np.where(mask, off, 0)
    limit = mem.nbytes[slot] - size
    if off.min() < 0 or off.max() > limit:
        bad = (off < 0) | (off > limit)
        if mask is not None:
            bad &= mask
            if not bad.any():
                # Only masked-off lanes are outside (they were set to offset 0, itself outside an
                # allocation smaller than one element): nothing active is touched.
                return np.zeros(off.shape, np.intp), mask
        lane = _first_lane(bad)
        byte = int(off.reshape(-1)[lane])
        elem = (byte - mem.starts[slot]) // size
        count = (mem.nbytes[slot] - mem.starts[slot]) // size
        where = (f"element offset {elem}" if -OFFSET_BIAS < byte < OFFSET_BIAS - 1
                 else "a pointer 2**39 bytes or more outside it")
        raise mem.error(site, f"out-of-bounds access to argument '{mem.names[slot]}' at {where} "
                        f"(it holds {count} elements)", mem.program_of(lane, off.shape, rank))
    if size > 1 and (off & (size - 1)).any():
        _misaligned(mem, site, slot, off, mask, size, rank)
    return off >> shift, mask


def _misaligned(mem, site, slot, off, mask, size, rank):
    bad = (off & (size - 1)) != 0
    if mask is not None:
        bad &= mask
    if not bad.any():
        return
    lane = _first_lane(bad)
    raise mem.error(site, f"misaligned {size}-byte access to argument '{mem.names[slot]}' at byte "
                    f"offset {int(off.reshape(-1)[lane]) - mem.starts[slot]}", mem.program_of(lane, off.shape, rank))


def _slots_of(mem, site, ptr, mask, rank):
    """The distinct slots the active lanes of a dynamically-based pointer point into."""
    slots = np.asarray(ptr) >> SLOT_SHIFT
    active = slots if mask is None else slots[np.broadcast_to(mask, slots.shape)]
    found = np.unique(active)
    for s in found:
        if s < 1 or s >= len(mem.names):
            bad = slots == s
            if mask is not None:
                bad = bad & mask
            raise mem.error(site, "access through a pointer that does not point into any argument",
                            mem.program_of(_first_lane(bad), np.shape(bad), rank))
    return slots, [int(s) for s in found]


def _split_dynamic(mem, site, ptr, mask, rank):
    """(slot, lane mask) pairs covering the active lanes of a pointer with a per-element slot."""
    slots, found = _slots_of(mem, site, ptr, mask, rank)
    for s in found:
        sub = slots == s
        yield s, (sub if mask is None else sub & mask)


# ------------------------------------------------------------------------------------------------
# loads and stores

def load(mem, site, slot, ptr, mask, other, dtype, rank, aligned=False):
    """Gather `dtype` elements at `ptr` (masked lanes give `other`, or 0)."""
    if slot == DYNAMIC:
        shape = np.broadcast_shapes(np.shape(ptr), np.shape(mask) if mask is not None else ())
        out = np.zeros(shape, dtype)
        for s, lanes in _split_dynamic(mem, site, ptr, mask, rank):
            part = load(mem, site, s, ptr, lanes, None, dtype, rank)
            out = np.where(lanes, part, out)
        return out if other is None or mask is None else np.where(mask, out, other).astype(dtype)
    size = np.dtype(dtype).itemsize
    index, mask = element_index(mem, site, slot, ptr, mask, size, rank, aligned)
    if mem.sanitizer is not None:
        mem.sanitizer.access(site, slot, index, mask, size, "read")
    return _gather(mem.view(slot, dtype), index, mask, other, dtype)


def _gather(view, index, mask, other, dtype):
    # Every index is checked (masked-off lanes point at a valid element), so 'clip' never clips;
    # it only skips NumPy's own per-element bounds check.
    if not view.shape[0]:
        # An empty argument: every lane is masked off (an active one was reported as out of bounds).
        shape = np.broadcast_shapes(np.shape(index), np.shape(mask))
        return np.full(shape, other if other is not None else dtype(0), dtype)
    values = view.take(index, mode="clip")
    if mask is None or (mask.all() if isinstance(mask, np.ndarray) else bool(mask)):
        return values
    return np.where(mask, values, other if other is not None else dtype(0)).astype(dtype, copy=False)


def store(mem, site, slot, ptr, value, mask, dtype, rank, aligned=False):
    if slot == DYNAMIC:
        for s, lanes in _split_dynamic(mem, site, ptr, mask, rank):
            store(mem, site, s, ptr, value, lanes, dtype, rank)
        return
    size = np.dtype(dtype).itemsize
    index, mask = element_index(mem, site, slot, ptr, mask, size, rank, aligned)
    if mem.sanitizer is not None:
        mem.sanitizer.access(site, slot, index, mask, size, "write")
    _scatter(mem.view(slot, dtype), index, value, mask, dtype)


def _scatter(view, index, value, mask, dtype):
    if type(index) is int:
        # One address (checked above, unmasked): every program writes it, the last one wins.
        value = np.asarray(value, dtype)
        view[index] = value.reshape(-1)[-1] if value.ndim else value
        return
    value = np.asarray(value, dtype)
    if mask is not None and np.all(mask):
        mask = None
    vshape, ishape = value.shape, index.shape
    if mask is None and vshape == ishape:
        # Fancy assignment writes in lane order, so the last program writing an address wins.
        view[index] = value
        return
    if mask is None and len(vshape) <= len(ishape) and vshape == ishape[len(ishape) - len(vshape):]:
        # The value broadcasts along leading axes only: np.put repeats it cyclically over the
        # row-major lanes, which is exactly that broadcast, without materialising it.
        np.put(view, index, value)
        return
    # The mask joins the broadcast: a scalar store under a per-program branch mask (P,) is P stores.
    shape = np.broadcast_shapes(ishape, vshape, np.shape(mask) if mask is not None else ())
    value = np.broadcast_to(value, shape)
    index = np.broadcast_to(index, shape)
    if mask is None:
        # Fancy assignment writes in lane order, so the last program writing an address wins:
        # the result of running the programs one after another.
        view[index.reshape(-1)] = value.reshape(-1)
    else:
        lanes = np.broadcast_to(mask, shape)
        view[index[lanes]] = value[lanes]


# ------------------------------------------------------------------------------------------------
# `base + offsets`: a scalar pointer (uniform, or one per program) plus a tensor of element offsets,
# the shape of nearly every Triton access (`tl.load(ptr + offs)`). The generator passes the two
# parts instead of the int64 pointer tensor, so the common access costs no int64 address arithmetic:
# the bounds are checked on the offsets' minimum and maximum, and the offsets index the argument's
# typed view directly. Anything unusual takes the general path through the materialised pointers.

def offsets_index(mem, site, slot, base, offsets, mask, size, rank):
    """(element indices into `mem.view(slot, ...)`, mask) for the pointers `base + offsets * size`."""
    offsets = np.asarray(offsets)
    if offsets.size and slot != DYNAMIC:
        limit = mem.nbytes[slot] // size  # elements in the view
        if type(base) is _INT64:
            byte = int(base) - slot_base(slot)
            if not byte % size:
                first = byte // size
                if first + int(offsets.min()) >= 0 and first + int(offsets.max()) < limit:
                    # The offsets index the typed view directly; shifted only for an interior base.
                    if first == 0:
                        return offsets, mask
                    return np.add(offsets, first, dtype=np.intp), mask
        else:
            byte = np.asarray(base).astype(np.int64) - slot_base(slot)
            if not (byte & (size - 1)).any():
                first = byte // size
                if int(first.min()) + int(offsets.min()) >= 0 and int(first.max()) + int(offsets.max()) < limit:
                    return first.reshape(first.shape + (1,) * rank) + offsets, mask
    pointers = _combine_pointer(base, offsets, size, rank)
    return element_index(mem, site, slot, pointers, mask, size, rank, True)


def _combine_pointer(base, offsets, size, rank):
    base = np.asarray(base)
    if base.ndim:
        base = base.reshape(base.shape + (1,) * rank)
    return np.multiply(offsets, size, dtype=np.int64) + base


def row_view(mem, slot, base, rows, n, dtype, for_store, offsets_dtype=np.int32):
    """The memory that `base + (lead + make_range(first, first + n))` addresses, as a view: (n,) when
    every program reads the same run, (P, n) rows a constant number of elements apart otherwise.
    None when the access is not such a view entirely inside the argument (the caller then takes
    the general path, which also reports any error). A store needs rows that do not overlap (then
    the order of the programs cannot matter)."""
    if slot == DYNAMIC:
        return None
    view = mem.view(slot, dtype)
    size, limit = view.itemsize, view.shape[0]
    if type(base) is _INT64:
        byte = int(base) - slot_base(slot)
        if byte % size:
            return None
        first_element = byte // size
    else:
        byte = np.asarray(base)
        if byte.ndim != 1:
            return None
        byte = byte.astype(np.int64) - slot_base(slot)
        if (byte % size).any():
            return None
        first_element = byte // size
    lead, first = rows
    lead = np.asarray(lead)
    if lead.size != 1 or lead.ndim:
        low_lead, high_lead = int(lead.min()), int(lead.max())
    else:
        low_lead = high_lead = int(lead)
    bounds = np.iinfo(offsets_dtype)
    if low_lead + first < bounds.min or high_lead + first + n - 1 > bounds.max:
        return None  # the kernel's offsets wrap around: only the general path computes them exactly
    start = first_element + lead.astype(np.int64) + first
    if start.ndim == 0:
        begin = int(start)
        if for_store or begin < 0 or begin + n > limit:
            return None
        return view[begin:begin + n]
    if start.ndim != 1:
        return None
    low, high = int(start.min()), int(start.max())
    if low < 0 or high + n > limit:
        return None
    programs = start.shape[0]
    step = int(start[1] - start[0]) if programs > 1 else n
    if step < 0 or (programs > 1 and not (np.diff(start) == step).all()):
        return None
    if for_store and step < n and programs > 1:
        return None
    return np.ndarray((programs, n), view.dtype, buffer=view, offset=int(start[0]) * size,
                      strides=(step * size, size))


def load_offsets(mem, site, slot, base, offsets, mask, other, dtype, rank, rows=None, fresh=True):
    """`fresh=False`: the kernel never writes this slot, so a view of the argument is the value
    unless another argument overlaps it (checked once per launch)."""
    if rows is not None and mem.sanitizer is None:
        offsets = np.asarray(offsets)
        window = row_view(mem, slot, base, rows, offsets.shape[-1], dtype, False, offsets.dtype)
        if window is not None:
            # Else a copy: the value must not change when the kernel later stores to the same memory.
            return _gather_window(window, mask, other, dtype, fresh or not mem.disjoint())
    if slot == DYNAMIC:
        pointers = keep_slot(_combine_pointer(base, offsets, np.dtype(dtype).itemsize, rank), per_program(base, rank))
        return load(mem, site, slot, pointers, mask, other, dtype, rank)
    index, mask = offsets_index(mem, site, slot, base, offsets, mask, np.dtype(dtype).itemsize, rank)
    if mem.sanitizer is not None:
        mem.sanitizer.access(site, slot, index, mask, np.dtype(dtype).itemsize, "read")
    return _gather(mem.view(slot, dtype), index, mask, other, dtype)


def _gather_window(window, mask, other, dtype, copy=True):
    if mask is None or (mask.all() if isinstance(mask, np.ndarray) else bool(mask)):
        return window.copy() if copy else window
    return np.where(mask, window, other if other is not None else dtype(0)).astype(dtype, copy=False)


def store_offsets(mem, site, slot, base, offsets, value, mask, dtype, rank, rows=None):
    if rows is not None and mem.sanitizer is None:
        offsets = np.asarray(offsets)
        window = row_view(mem, slot, base, rows, offsets.shape[-1], dtype, True, offsets.dtype)
        if window is not None:
            if mask is None or (mask.all() if isinstance(mask, np.ndarray) else bool(mask)):
                window[...] = value
            else:
                np.copyto(window, value, where=np.asarray(mask, np.bool_))
            return
    if slot == DYNAMIC:
        pointers = keep_slot(_combine_pointer(base, offsets, np.dtype(dtype).itemsize, rank), per_program(base, rank))
        return store(mem, site, slot, pointers, value, mask, dtype, rank)
    index, mask = offsets_index(mem, site, slot, base, offsets, mask, np.dtype(dtype).itemsize, rank)
    if mem.sanitizer is not None:
        mem.sanitizer.access(site, slot, index, mask, np.dtype(dtype).itemsize, "write")
    _scatter(mem.view(slot, dtype), index, value, mask, dtype)


# ------------------------------------------------------------------------------------------------
# atomics: the result of running the programs one after another, in program order

_UFUNC_AT = {"add": np.add, "fadd": np.add, "and": np.bitwise_and, "or": np.bitwise_or,
             "xor": np.bitwise_xor, "max": np.maximum, "min": np.minimum}


def _combine(kind: str, old, val, fmt: str):
    if fmt in numerics.EMULATED_FLOATS:
        a, b = numerics.decode_float(old, fmt), numerics.decode_float(val, fmt)
        return numerics.encode_float(_combine(kind, a, b, "f32"), fmt)
    if kind in ("add", "fadd"):
        return old + val
    if kind in ("max", "min"):
        return np.maximum(old, val) if kind == "max" else np.minimum(old, val)
    if kind in ("umax", "umin"):
        width = old.dtype.itemsize * 8
        ua, ub = numerics.unsigned(old, width), numerics.unsigned(val, width)
        res = np.maximum(ua, ub) if kind == "umax" else np.minimum(ua, ub)
        return res.view(old.dtype)
    if kind == "and":
        return old & val
    if kind == "or":
        return old | val
    if kind == "xor":
        return old ^ val
    if kind == "xchg":
        return val
    raise ValueError(kind)


def _rounds(index):
    """Lanes grouped into rounds: round r holds the r-th access (in lane order) to each address,
    so the addresses within a round are distinct and one round is one vectorised step."""
    order = np.argsort(index, kind="stable")
    sorted_index = index[order]
    n = index.shape[0]
    starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]]) if n else np.zeros(0, int)
    group_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    position = np.arange(n) - group_start
    by_round = order[np.argsort(position, kind="stable")]
    counts = np.bincount(position) if n else np.zeros(0, int)
    bounds = np.r_[0, np.cumsum(counts)]
    return [by_round[bounds[r]:bounds[r + 1]] for r in range(len(counts))]


def _atomic_lanes(mem, site, slot, ptr, mask, shapes, dtype, rank, sem):
    shape = np.broadcast_shapes(np.shape(ptr), *shapes, np.shape(mask) if mask is not None else ())
    index, mask = element_index(mem, site, slot, np.broadcast_to(ptr, shape), mask,
                                np.dtype(dtype).itemsize, rank)
    flat = np.broadcast_to(index, shape).reshape(-1)
    lanes = np.arange(flat.shape[0]) if mask is None else np.flatnonzero(np.broadcast_to(mask, shape))
    if mem.sanitizer is not None:
        mem.sanitizer.access(site, slot, flat[lanes], None, np.dtype(dtype).itemsize, "atomic", sem)
    return shape, lanes, flat[lanes]


def atomic_rmw(mem, site, slot, kind, ptr, value, mask, dtype, fmt, need_old, rank, sem="acq_rel"):
    if slot == DYNAMIC:
        shape = np.broadcast_shapes(np.shape(ptr), np.shape(value), np.shape(mask) if mask is not None else ())
        out = np.zeros(shape, dtype)
        for s, lanes in _split_dynamic(mem, site, np.broadcast_to(ptr, shape), mask, rank):
            part = atomic_rmw(mem, site, s, kind, ptr, value, lanes, dtype, fmt, need_old, rank, sem)
            out = np.where(lanes, part, out)
        return out
    shape, lanes, index = _atomic_lanes(mem, site, slot, ptr, mask, [np.shape(value)], dtype,
                                        rank, sem)
    view = mem.view(slot, dtype)
    if not view.flags.writeable:  # as a store would: `ufunc.at` writes read-only arrays (NumPy 2.x)
        raise ValueError("assignment destination is read-only")
    vals = np.broadcast_to(np.asarray(value, dtype), shape).reshape(-1)[lanes]
    emulated = fmt in numerics.EMULATED_FLOATS
    if not need_old and kind in _UFUNC_AT and not emulated:
        # ufunc.at applies the updates one after another in lane order: sequential semantics.
        _UFUNC_AT[kind].at(view, index, vals)
        return None
    old = np.zeros(int(np.prod(shape)), dtype)
    if kind == "add" and view.dtype.kind in "iu":
        # Integer addition is exactly associative: old values are an exclusive running sum per address.
        order = np.argsort(index, kind="stable")
        si, sv = index[order], vals[order]
        running = np.cumsum(sv, dtype=dtype) - sv
        starts = np.r_[True, si[1:] != si[:-1]] if si.size else np.zeros(0, bool)
        base = np.maximum.accumulate(np.where(starts, np.arange(si.size), 0)) if si.size else si
        old_sorted = view[si] + (running - running[base])
        result = np.empty_like(old_sorted)
        result[order] = old_sorted
        np.add.at(view, index, vals)
        old[lanes] = result
        return old.reshape(shape)
    for round_lanes in _rounds(index):
        at = index[round_lanes]
        previous = view[at]
        view[at] = _combine(kind, previous, vals[round_lanes], fmt)
        old[lanes[round_lanes]] = previous
    return old.reshape(shape)


def atomic_load(mem, site, slot, ptr, mask, dtype, rank, sem="acquire"):
    """`*ptr` where `mask` (0 elsewhere); an atomic access for the sanitizer, which never writes
    (so a read-only argument may be loaded atomically, as on a GPU)."""
    if slot == DYNAMIC:
        shape = np.broadcast_shapes(np.shape(ptr), np.shape(mask) if mask is not None else ())
        out = np.zeros(shape, dtype)
        for s, lanes in _split_dynamic(mem, site, np.broadcast_to(ptr, shape), mask, rank):
            part = atomic_load(mem, site, s, ptr, lanes, dtype, rank, sem)
            out = np.where(lanes, part, out)
        return out
    shape, lanes, index = _atomic_lanes(mem, site, slot, ptr, mask, [], dtype, rank, sem)
    view = mem.view(slot, dtype)
    out = np.zeros(int(np.prod(shape)), dtype)
    out[lanes] = view[index]
    return out.reshape(shape)


def atomic_cas(mem, site, slot, ptr, compare, value, mask, dtype, rank, sem="acq_rel"):
    if slot == DYNAMIC:
        shape = np.broadcast_shapes(np.shape(ptr), np.shape(value), np.shape(compare))
        out = np.zeros(shape, dtype)
        for s, lanes in _split_dynamic(mem, site, np.broadcast_to(ptr, shape), mask, rank):
            part = atomic_cas(mem, site, s, ptr, compare, value, lanes, dtype, rank, sem)
            out = np.where(lanes, part, out)
        return out
    shape, lanes, index = _atomic_lanes(mem, site, slot, ptr, mask, [np.shape(value), np.shape(compare)],
                                        dtype, rank, sem)
    view = mem.view(slot, dtype)
    bits = numerics.unsigned_dtype(np.dtype(dtype).itemsize * 8) if np.dtype(dtype).itemsize > 1 or \
        np.dtype(dtype) != np.bool_ else np.uint8
    vals = np.broadcast_to(np.asarray(value, dtype), shape).reshape(-1)[lanes]
    cmps = np.broadcast_to(np.asarray(compare, dtype), shape).reshape(-1)[lanes]
    old = np.zeros(int(np.prod(shape)), dtype)
    for round_lanes in _rounds(index):
        at = index[round_lanes]
        previous = view[at]
        # Compare-and-swap compares bits, as the hardware does (so NaN == NaN, -0.0 != 0.0).
        equal = previous.view(bits) == cmps[round_lanes].view(bits)
        view[at] = np.where(equal, vals[round_lanes], previous)
        old[lanes[round_lanes]] = previous
    return old.reshape(shape)


# ------------------------------------------------------------------------------------------------
# block pointers and tensor descriptors: (base pointer, shape, strides, offsets) of scalars

def per_program(x, rank):
    """A scalar component (uniform () or per-program (P,)) shaped to broadcast against (P, *block)."""
    x = np.asarray(x)
    return x.reshape(x.shape + (1,) * rank) if x.ndim else x


def block_addresses(base, shape, strides, offsets, block_shape, check_dims, size):
    """Pointers of every element of the block and the in-bounds mask over `check_dims`."""
    rank = len(block_shape)
    address = per_program(base, rank).astype(np.int64)
    mask = None
    for d, n in enumerate(block_shape):
        along = np.arange(n, dtype=np.int64).reshape([1] * d + [n] + [1] * (rank - 1 - d))
        coord = per_program(offsets[d], rank).astype(np.int64) + along
        address = address + coord * (per_program(strides[d], rank).astype(np.int64) * size)
        if d in check_dims:
            inside = (coord >= 0) & (coord < per_program(shape[d], rank).astype(np.int64))
            mask = inside if mask is None else mask & inside
    return address, mask


def combine_masks(mask, active, rank):
    """An element mask and the per-program active mask (P,) as one mask."""
    if active is None:
        return mask
    act = active.reshape(active.shape + (1,) * rank)
    return act if mask is None else mask & act
