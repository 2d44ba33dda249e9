"""ptxas runs, each started one assembly ahead: an idle ptxas waits on its standard input.

Of the 15-20 ms ptxas takes to assemble a small kernel, about 7 ms go to starting the process (exec,
loading a large binary, its own set-up) before it reads any PTX. So after each assembly the next
ptxas process for the same arguments is started at once, reading `/dev/stdin`; the next assembly
writes its PTX into that process, which has loaded in the meantime. The arguments, and therefore the
cubin, are exactly those of an assembly from a file (the input's name is not part of the cubin).

One waiting process per set of arguments and per Python process. A forked child forgets the parent's
waiting processes (they stay the parent's); at exit the waiting processes read end-of-file, fail on
the empty input and are reaped. Where there is no `/dev/stdin` (Windows) every assembly starts its own
process.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading

STDIN = "/dev/stdin"
AVAILABLE = os.name == "posix" and os.path.exists(STDIN)
_MAX_WAITING = 4   # distinct argument lists (archs, options) kept warm at once


class _Waiting:
    """A ptxas process started with its output file in a private folder, reading PTX on stdin."""

    def __init__(self, arguments: tuple[str, ...]):
        self.folder = tempfile.mkdtemp(prefix="tilejit-ptxas-")
        self.target = os.path.join(self.folder, "kernel.cubin")
        command = [*arguments, STDIN, "-o", self.target]
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self.owner = os.getpid()

    def finish(self, ptx: bytes, timeout: float) -> tuple[int, str, bytes | None]:
        """Feed the PTX, wait; (exit code, stdout + stderr, cubin or None). Removes the folder."""
        try:
            try:
                out, err = self.process.communicate(ptx, timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate()
                raise
            cubin = None
            if self.process.returncode == 0:
                with open(self.target, "rb") as f:
                    cubin = f.read()
            return self.process.returncode, (out + err).decode(errors="replace"), cubin
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def discard(self) -> None:
        """End a process that will not be used: end-of-file on its input makes it exit."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:   # its complaint about the empty input is a few bytes: the pipes cannot fill
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_lock = threading.Lock()
_waiting: dict[tuple[str, ...], _Waiting] = {}
_orphans: list[_Waiting] = []   # a forked child's copies of its parent's processes, never touched


def _take(key: tuple[str, ...]) -> _Waiting | None:
    with _lock:
        waiting = _waiting.pop(key, None)
    if waiting is not None and waiting.process.poll() is not None:   # it died while waiting
        waiting.discard()
        return None
    return waiting


def _start_next(key: tuple[str, ...], arguments: list[str]) -> None:
    try:
        fresh = _Waiting(arguments)
    except OSError:
        return   # the assembly at hand reports a ptxas that cannot start
    with _lock:
        old = _waiting.pop(key, None)
        _waiting[key] = fresh
        evicted = [_waiting.pop(oldest) for oldest in list(_waiting)[:-_MAX_WAITING]]
    for process in ([old] if old else []) + evicted:
        process.discard()


def run(arguments: list[str], ptx: str, timeout: float = 600) -> tuple[int, str, bytes | None]:
    """ptxas `arguments` (the program and its options, without input and output) on `ptx`.

    Returns (exit code, ptxas's stdout + stderr with the input named `kernel.ptx`, cubin or None).
    Raises OSError when ptxas cannot be started, subprocess.TimeoutExpired past `timeout` seconds.
    """
    try:   # a ptxas replaced on disk (an upgrade) must not be answered by the old one waiting
        stamp = str(os.stat(arguments[0]).st_mtime_ns)
    except OSError:
        stamp = ""
    key = (stamp, *arguments)
    waiting = _take(key) or _Waiting(arguments)
    _start_next(key, arguments)   # loads while this one assembles
    code, log, cubin = waiting.finish(ptx.encode(), timeout)
    return code, log.replace(STDIN, "kernel.ptx"), cubin


def _forget_in_child() -> None:
    """After fork: the waiting processes are the parent's; never write to or reap them here."""
    global _lock
    _lock = threading.Lock()
    for waiting in _waiting.values():
        for stream in (waiting.process.stdin, waiting.process.stdout, waiting.process.stderr):
            try:
                stream.close()
            except OSError:
                pass
        _orphans.append(waiting)
    _waiting.clear()


@atexit.register
def _end_all() -> None:
    with _lock:
        ending = [w for w in _waiting.values() if w.owner == os.getpid()]
        _waiting.clear()
    for waiting in ending:
        waiting.discard()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
