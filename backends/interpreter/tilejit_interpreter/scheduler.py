"""Runs the programs of a kernel whose programs wait for each other, one program at a time.

A kernel with a loop that spins on memory another program changes (a lock taken with
`atomic_cas`, a flag, an arrival counter: analysis.waiting_loops) cannot run its programs in
lockstep: the program holding the lock would wait for the spinning ones to leave their loop, and
they wait for it. The generator makes such a kernel's program a Python generator (P = 1) that
yields at the end of every iteration of a waiting loop; this scheduler runs the programs of a batch
round-robin in program order, resuming each until it yields again or ends, as a GPU keeps its
resident programs going. The result is one interleaving a GPU could produce.

A round in which no program ends, starts or changes its loop's carried values, twice in a row
with the same memory, would repeat forever (the programs are deterministic): that is a deadlock,
reported as an InterpreterError instead of a hang.
"""
from __future__ import annotations

import hashlib
import types

import numpy as np

from .launcher import DEFAULT_MAX_BATCH_ELEMENTS
from .sanitizer import Sanitizer

_GENERATOR = types.GeneratorType


def run_programs(program, mem, P: int, pids, nprog, args, program_elements: int, sanitize: bool = False) -> None:
    """Run programs 0..P-1 of the batch (`pids`: three (P,) arrays) one at a time; `program` is the
    generated per-program function (a generator function when it may wait). `sanitize`: every
    access is checked by a sanitizer.Sanitizer, one per launch."""
    if sanitize and mem.sanitizer is None:
        mem.sanitizer = Sanitizer(mem)
    checker = mem.sanitizer
    pid0, pid1, pid2 = pids
    resident = max(1, DEFAULT_MAX_BATCH_ELEMENTS // max(1, program_elements))
    running = []  # [generator, program index, last yielded state]
    next_program = 0
    stuck_memory = None
    while running or next_program < P:
        progress = False
        while next_program < P and len(running) < resident:
            p = next_program
            next_program += 1
            progress = True
            mem.pids = (pid0[p:p + 1], pid1[p:p + 1], pid2[p:p + 1])
            if checker is not None:
                checker.enter(mem.pids)
            started = program(mem, 1, *mem.pids, *nprog, None, *args)
            state = _resume(started) if type(started) is _GENERATOR else None
            if state is not None:
                running.append([started, p, state])
            elif checker is not None:
                checker.leave(mem.pids)
        for entry in list(running):
            generator, p, state = entry
            mem.pids = (pid0[p:p + 1], pid1[p:p + 1], pid2[p:p + 1])
            if checker is not None:
                checker.switch(mem.pids)
            new_state = _resume(generator)
            if new_state is None:
                running.remove(entry)
                progress = True
                if checker is not None:
                    checker.leave(mem.pids)
            elif not _same(new_state, state):
                entry[2] = new_state
                progress = True
        if progress or not running:
            stuck_memory = None
            continue
        memory = _digest(mem)
        if memory == stuck_memory:
            raise _deadlock(mem, running, pids)
        stuck_memory = memory


def _resume(generator):
    """The state the program yields next, or None once it has ended."""
    try:
        return next(generator)
    except StopIteration:
        return None


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) or a is None:
        return a == b
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _digest(mem) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for buffer in mem.buffers:
        digest.update(np.ascontiguousarray(buffer).view(np.uint8).data)
    return digest.digest()


def _deadlock(mem, running, pids):
    generator, p, state = running[0]
    waiting = ", ".join(str(tuple(int(axis[q]) for axis in pids)) for _, q, _ in running[:4])
    more = f" and {len(running) - 4} more" if len(running) > 4 else ""
    program = tuple(int(axis[p]) for axis in pids)
    return mem.error(state[0], f"deadlock: programs {waiting}{more} wait in this loop for memory that no "
                     "running program will change", program)
