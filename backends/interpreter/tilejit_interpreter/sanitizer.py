"""The interpreter's sanitizer: data races between the programs of one launch, and reads of memory
marked uninitialised. On with `TILEJIT_SANITIZE=1` or the launch option `sanitize=True`.

A sanitized kernel runs one program at a time (scheduler.py) and every access of an active lane
goes through `Sanitizer.access` with the program that makes it. Races are found with vector
clocks (the happens-before relation of the C++ memory model, as ThreadSanitizer does):

- each program has a clock; an atomic with acquire semantics joins into it the clock released at
  its address, one with release semantics joins the program's clock into the address's; Triton's
  default `acq_rel` does both. This is what orders the plain accesses of a lock's holders, or the
  partial results a split-K reduction reads after the arrival counter says all are written;
- per byte of every argument the shadow keeps the last plain write, the last plain read and the
  last atomic access (program, its clock then, source site). A plain access that conflicts with
  one by another program not ordered before it is a race: write/write, read/write, write/read, and
  plain/atomic. Atomics do not race with each other.

Only the last read of a byte is kept, so a read that is not the last one before a racing write may
go unreported, and a compare-and-swap that fails still counts as a release: the sanitizer can miss
a race, it does not report one that is not there. Arguments
are shadowed separately: two arguments over the same memory are not compared.

Uninitialised memory cannot be known for an arbitrary array (np.empty and torch.empty hand out
whatever was there). Memory allocated with `empty(...)` here, or passed to `mark_uninitialized`,
is tracked: a read of a byte no kernel has written since is reported; writes by sanitized kernels
mark bytes initialised (persisting across launches while the array lives). Host writes are not
seen: call `mark_initialized` after writing such an array from Python.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

# -- memory marked uninitialised ---------------------------------------------------------------------

_tracked: dict = {}  # key -> [address, bytes, initialised (bool per byte)]
_keys = itertools.count()


def _extent(array):
    if hasattr(array, "data_ptr") and hasattr(array, "element_size"):  # a torch tensor
        if not array.is_contiguous():
            raise ValueError("mark_uninitialized needs a contiguous tensor")
        return array.data_ptr(), array.numel() * array.element_size()
    array_interface = getattr(array, "__array_interface__", None)
    if array_interface is None:
        raise TypeError(f"cannot track the memory of a {type(array).__name__}")
    view = np.asarray(array)
    if not view.flags.c_contiguous:
        raise ValueError("mark_uninitialized needs a contiguous array")
    return view.__array_interface__["data"][0], view.nbytes


def mark_uninitialized(*arrays) -> None:
    """From now on, sanitized kernels report reads of these arrays' bytes until a kernel writes them."""
    for array in arrays:
        address, nbytes = _extent(array)
        key = next(_keys)
        _tracked[key] = [address, nbytes, np.zeros(nbytes, np.bool_)]
        # Forget it when the memory's owner is freed (its addresses may be reused), not a view's.
        owner = array
        while isinstance(owner, np.ndarray) and owner.base is not None:
            owner = owner.base
        weakref.finalize(owner, _tracked.pop, key, None)


def mark_initialized(*arrays) -> None:
    """The host wrote these arrays: every byte of them counts as initialised."""
    for array in arrays:
        low, nbytes = _extent(array)
        for address, size, initialised in _tracked.values():
            start, end = max(low, address), min(low + nbytes, address + size)
            if start < end:
                initialised[start - address:end - address] = True


def empty(shape, dtype=np.float32) -> np.ndarray:
    """`np.empty`, marked uninitialised for the sanitizer."""
    array = np.empty(shape, dtype)
    mark_uninitialized(array)
    return array


def _initialised_segments(buffer):
    """(first byte, end byte, initialised view) of the tracked memory inside `buffer`."""
    if not _tracked or not buffer.size:
        return []
    low = buffer.__array_interface__["data"][0]
    high = low + buffer.nbytes
    segments = []
    for address, size, initialised in _tracked.values():
        start, end = max(low, address), min(high, address + size)
        if start < end:
            segments.append((start - low, end - low, initialised[start - address:end - address]))
    return segments


# -- the per-launch shadow ---------------------------------------------------------------------------

_NONE = -1
_ACQUIRE = ("acquire", "acq_rel")
_RELEASE = ("release", "acq_rel")
_PAST = {"read": "read", "write": "wrote", "atomic": "updated atomically"}


class _Shadow:
    """Per byte of one argument: (program, clock, site) of the last write, read and atomic access,
    each made on first use (an input that is only read costs 12 bytes per byte, not 36)."""
    __slots__ = ("nbytes", "fields", "segments")

    def __init__(self, nbytes: int, buffer):
        self.nbytes = nbytes
        self.fields: dict = {}
        self.segments = _initialised_segments(buffer)

    def field(self, kind: str):
        found = self.fields.get(kind)
        if found is None:
            found = self.fields[kind] = (np.full(self.nbytes, _NONE, np.int32), np.zeros(self.nbytes, np.int32),
                                         np.zeros(self.nbytes, np.int32))
        return found

    def known(self, kind: str):
        return self.fields.get(kind)


class Sanitizer:
    def __init__(self, mem):
        self.mem = mem
        gx, gy, gz = mem.grid
        self.programs = gx * gy * gz
        self.shadows: dict = {}
        # Running program -> _Clock. A program's vector clock is made on its first acquire: until
        # then it knows only itself, and a kernel without atomics never allocates one.
        self.clocks: dict = {}
        self.released: dict = {}  # (slot, byte) -> the vector clock released there by atomics
        self.program = 0
        self.clock = None

    # -- programs -------------------------------------------------------------------------------
    def enter(self, pids) -> None:
        self.clocks[self._linear(pids)] = _Clock()
        self.switch(pids)

    def switch(self, pids) -> None:
        self.program = self._linear(pids)
        self.clock = self.clocks[self.program]

    def leave(self, pids) -> None:
        self.clocks.pop(self._linear(pids), None)

    def _linear(self, pids) -> int:
        gx, gy, _ = self.mem.grid
        x, y, z = (int(np.asarray(axis).reshape(-1)[0]) for axis in pids)
        return x + gx * (y + gy * z)

    def _coordinates(self, program: int):
        gx, gy, _ = self.mem.grid
        return program % gx, (program // gx) % gy, program // (gx * gy)

    # -- accesses -------------------------------------------------------------------------------
    def access(self, site: int, slot: int, index, mask, size: int, kind: str, sem: str = "acq_rel") -> None:
        """Active lanes of one access: element indices into `mem.view(slot, <size-byte type>)`."""
        index = np.asarray(index)
        if mask is not None:
            shape = np.broadcast_shapes(index.shape, np.shape(mask))
            index = np.broadcast_to(index, shape)[np.broadcast_to(mask, shape)]
        first = index.reshape(-1).astype(np.int64) * size
        if not first.size:
            return
        at = (first[:, None] + np.arange(size)).reshape(-1)
        # A run of consecutive bytes (most accesses) indexes the shadow as a slice: views, not copies.
        key = at
        if at.size > 1 and int(at[-1]) - int(at[0]) == at.size - 1 and (at[1:] > at[:-1]).all():
            key = slice(int(at[0]), int(at[-1]) + 1)
        shadow = self.shadows.get(slot)
        if shadow is None:
            shadow = self.shadows[slot] = _Shadow(self.mem.nbytes[slot], self.mem.buffers[slot])
        if kind == "atomic" and sem in _ACQUIRE:
            self._acquire(slot, first)
        if kind != "write":
            self._check_initialised(site, slot, shadow, at)
        verb = {"read": "reads", "write": "writes", "atomic": "updates atomically"}[kind]
        # What conflicts with what: plain writes with everything, plain reads with writes and atomics.
        against = {"read": ("write", "atomic"), "write": ("write", "read", "atomic"), "atomic": ("write", "read")}
        for other in against[kind]:
            field = shadow.known(other)
            if field is not None:
                self._check(site, slot, at, key, field, verb, _PAST[other])
        self._record(shadow.field(kind), key, site)
        if kind == "write" and shadow.known("read") is not None:
            shadow.known("read")[0][key] = _NONE  # later writes are ordered after those reads or raced above
        if kind != "read":
            for start, end, initialised in shadow.segments:
                inside = at[(at >= start) & (at < end)]
                initialised[inside - start] = True
        if kind == "atomic" and sem in _RELEASE:
            self._release(slot, first)

    def _record(self, field, key, site) -> None:
        field[0][key] = self.program
        field[1][key] = self.clock.own
        field[2][key] = site

    def _check(self, site, slot, at, key, field, verb, their_verb) -> None:
        """`at`: the bytes accessed; `key`: the same as an index (the array, or a slice of a run)."""
        owners = field[0][key]
        other = (owners != _NONE) & (owners != self.program)
        if not other.any():
            return
        vector = self.clock.vector
        known = vector[np.where(other, owners, 0)] if vector is not None else 0
        racing = other & (field[1][key] > known)
        if not racing.any():
            return
        k = int(np.argmax(racing))
        them, their_site = int(owners[k]), int(field[2][key][k])
        loc, _ = self.mem.sites[their_site]
        where = f"{loc.file}:{loc.line}" if loc.line else "an unknown line"
        element = (int(at[k]) - self.mem.starts[slot])
        raise self.mem.error(site, f"data race on argument '{self.mem.names[slot]}' at byte offset {element}: "
                             f"program {self._coordinates(self.program)} {verb} what program "
                             f"{self._coordinates(them)} {their_verb} at {where}, and nothing orders the "
                             "two (no atomic that releases one to the other)", self._coordinates(self.program))

    def _check_initialised(self, site, slot, shadow, at) -> None:
        for start, end, initialised in shadow.segments:
            inside = at[(at >= start) & (at < end)]
            unset = ~initialised[inside - start]
            if unset.any():
                byte = int(inside[int(np.argmax(unset))]) - self.mem.starts[slot]
                raise self.mem.error(site, f"read of uninitialised memory: argument '{self.mem.names[slot]}' at "
                                     f"byte offset {byte} was marked uninitialised and nothing has written it",
                                     self._coordinates(self.program))

    # -- synchronisation through atomics --------------------------------------------------------
    def _vector(self):
        clock = self.clock
        if clock.vector is None:
            clock.vector = np.zeros(self.programs, np.int32)
        clock.vector[self.program] = clock.own
        return clock.vector

    def _acquire(self, slot, first) -> None:
        for byte in np.unique(first).tolist():
            released = self.released.get((slot, byte))
            if released is not None:
                vector = self._vector()
                np.maximum(vector, released, out=vector)
                self.clock.own = int(vector[self.program])

    def _release(self, slot, first) -> None:
        vector = self._vector()
        for byte in np.unique(first).tolist():
            released = self.released.get((slot, byte))
            if released is None:
                self.released[(slot, byte)] = vector.copy()
            else:
                np.maximum(released, vector, out=released)
        self.clock.own += 1  # what the program does next is not covered by this release


class _Clock:
    """A program's own epoch, and its vector clock once it has acquired or released anything."""
    __slots__ = ("own", "vector")

    def __init__(self):
        self.own = 1
        self.vector = None
