"""Worker processes that run a compilation's pure stages (`tilejit.compiler.PureStage`) in parallel.

llvmlite serialises every LLVM call of a process behind one lock, so threads overlap only the
assembler subprocesses; the autotuner's configs get their LLVM work done in parallel only in other
processes. These are plain `python -m tilejit.runtime.compile_workers` children talking over their
pipes, not `multiprocessing`: that would import the user's `__main__` module again in every child
(re-running a script without a `__main__` guard) or fork a process that may hold CUDA state and
threads. A child imports only what the stages name (the backend's toolchain module).

A job is a list of `(module, function qualname, extra args)` and the input text; the child applies
the parent's `TILEJIT_*` environment, runs the functions in turn and sends every output back (with
the seconds each took). An exception comes back as itself where it pickles, else as a
CompilationError with its text. A child that dies or cannot start makes the job run in the parent.
"""
from __future__ import annotations

import atexit
import importlib
import os
import pickle
import struct
import subprocess
import sys
import threading
import time

_HEADER = struct.Struct("<Q")


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("compile worker closed its pipe")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("compile worker closed its pipe")
    return pickle.loads(data)


def _environment_for_job() -> dict:
    """The knobs as this process sees them now (a test or user may have changed them since the
    child started)."""
    return {k: v for k, v in os.environ.items() if k.startswith(("TILEJIT_", "TRITON_"))}


class _Worker:
    def __init__(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.process = subprocess.Popen([sys.executable, "-m", "tilejit.runtime.compile_workers"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def run(self, job):
        _send(self.process.stdin, job)
        return _receive(self.process.stdout)

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


class StageFailed(Exception):
    """The stage at `index` of a job raised `error` in the worker."""

    def __init__(self, index: int, error: BaseException):
        super().__init__(index, error)
        self.index = index
        self.error = error


class WorkerPool:
    """Up to `size` worker processes, started on demand and kept for the life of this process."""

    def __init__(self, size: int):
        self.size = size
        self.broken = False
        self._idle: list = []
        self._started = 0
        self._cond = threading.Condition()

    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and self._started >= self.size:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._started += 1
        try:
            return _Worker()
        except OSError:
            with self._cond:
                self._started -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker | None) -> None:
        with self._cond:
            if worker is None:
                self._started -= 1  # it died: a new one may start
            else:
                self._idle.append(worker)
            self._cond.notify()

    def run(self, stages: list, text):
        """(outputs, seconds) of `stages` (PureStages) applied in turn to `text`, in a worker; None
        when no worker could do it (the caller runs the stages itself). A stage's exception is raised
        as `StageFailed(index, exception)`."""
        if self.broken:
            return None
        job = {"env": _environment_for_job(),
               "stages": [(s.fn.__module__, s.fn.__qualname__, s.args) for s in stages], "input": text}
        try:
            worker = self._acquire()
        except OSError:
            self.broken = True
            return None
        try:
            reply = worker.run(job)
        except (OSError, EOFError, pickle.PickleError):
            worker.close()
            self._release(None)
            self.broken = True  # a child that cannot serve (an embedded Python, ...): stop trying
            return None
        self._release(worker)
        if reply[0] == "ok":
            return reply[1], reply[2]
        _, exc_bytes, type_name, message, index = reply
        try:
            exc = pickle.loads(exc_bytes) if exc_bytes is not None else None
        except Exception:  # noqa: BLE001 - an exception that does not unpickle: its text is kept
            exc = None
        if not isinstance(exc, BaseException):
            exc = RuntimeError(f"{type_name}: {message}")
        raise StageFailed(index, exc)

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


_pools: dict = {}
_pools_lock = threading.Lock()


def pool(size: int) -> WorkerPool:
    """The process's pool of (at least) `size` workers. A forked child gets a pool of its own: the
    workers it inherited talk to its parent."""
    with _pools_lock:
        existing = _pools.get(os.getpid())
        if existing is None or existing.size < size:
            if existing is not None:
                existing.size = size  # grow in place: its running workers stay useful
            else:
                existing = _pools[os.getpid()] = WorkerPool(size)
        return existing


@atexit.register
def _close_pools() -> None:
    mine = _pools.get(os.getpid())
    if mine is not None:
        mine.close()


# ---- the child ---------------------------------------------------------------------------------

def _apply_environment(env: dict) -> None:
    for key in [k for k in os.environ if k.startswith(("TILEJIT_", "TRITON_")) and k not in env]:
        del os.environ[key]
    os.environ.update(env)


def _resolve(module: str, qualname: str):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _serve(stdin, stdout) -> None:
    while True:
        try:
            job = _receive(stdin)
        except EOFError:
            return
        index = 0
        try:
            _apply_environment(job["env"])
            value, outputs, seconds = job["input"], [], []
            for index, (module, qualname, args) in enumerate(job["stages"]):
                started = time.perf_counter()
                value = _resolve(module, qualname)(value, *args)
                outputs.append(value)
                seconds.append(time.perf_counter() - started)
            reply = ("ok", outputs, seconds)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent
            try:
                exc_bytes = pickle.dumps(exc)
                pickle.loads(exc_bytes)
            except Exception:  # noqa: BLE001
                exc_bytes = None
            reply = ("error", exc_bytes, type(exc).__name__, str(exc), index)
        _send(stdout, reply)


def _main() -> None:
    # The replies own the real stdout; whatever a stage prints goes to stderr, not into the protocol.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    _main()
