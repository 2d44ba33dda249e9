"""Runs a generated NumPy program on a grid: argument conversion, batching of programs, memory.

The program text is compiled once per launcher; a launch converts the arguments (views, never
copies, except CUDA tensors which go to the host and back like TRITON_INTERPRET=1), then calls the
program once per batch of at most `batch` programs.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from tilejit.backends import Launcher
from tilejit.errors import InterpreterError
from tilejit.runtime.tensor_wrapper import TensorWrapper

from . import numerics as nx
from .memory import Memory, slot_base

DEFAULT_MAX_BATCH_ELEMENTS = 1 << 22


def _raw_bytes(address: int, nbytes: int) -> np.ndarray:
    """A writable uint8 view of `nbytes` of host memory at `address` (kept alive by the caller)."""
    if nbytes == 0:
        return np.zeros(0, np.uint8)
    return np.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=np.uint8)


def _array_extent(address: int, shape, strides, itemsize: int):
    """(lowest address, bytes) spanned by a strided array whose first element is at `address`."""
    if any(s == 0 for s in shape):
        return address, 0
    low = high = 0
    for n, st in zip(shape, strides):
        if st < 0:
            low += (n - 1) * st
        else:
            high += (n - 1) * st
    return address + low, high - low + itemsize


class _Argument:
    """One pointer argument prepared for a launch: its bytes, where it starts, how to write back."""
    __slots__ = ("buffer", "start", "keep", "writeback")

    def __init__(self, buffer, start, keep=None, writeback=None):
        self.buffer, self.start, self.keep, self.writeback = buffer, start, keep, writeback


def _torch_argument(t, name: str, interpret_cuda: bool) -> _Argument:
    writeback = None
    if t.device.type != "cpu":
        if not interpret_cuda and t.device.type != "cuda":
            raise ValueError(f"argument '{name}' lives on device '{t.device}', which the interpreter cannot "
                             "read")
        host = t.detach().cpu()
        original = t

        def writeback(host=host, original=original):
            original.copy_(host.to(original.device))
        t = host
    storage = t.untyped_storage()
    base = storage.data_ptr()
    buffer = _raw_bytes(base, storage.nbytes())
    return _Argument(buffer, t.data_ptr() - base, keep=t, writeback=writeback)


def prepare_pointer(arg, name: str) -> _Argument:
    if isinstance(arg, np.ndarray):
        if arg.flags.c_contiguous:
            return _Argument(arg.reshape(-1).view(np.uint8), 0, keep=arg)
        address = arg.__array_interface__["data"][0]
        low, nbytes = _array_extent(address, arg.shape, arg.strides, arg.itemsize)
        if not arg.flags.writeable:
            raise ValueError(f"argument '{name}' is a read-only NumPy array; kernels may write through it")
        return _Argument(_raw_bytes(low, nbytes), address - low, keep=arg)
    module = type(arg).__module__
    if module.startswith("torch"):
        return _torch_argument(arg, name, True)
    if isinstance(arg, TensorWrapper):  # `tilejit.reinterpret`: the base's bytes, read as the signature says
        return prepare_pointer(arg.base, name)
    if hasattr(arg, "__array_interface__"):
        return prepare_pointer(np.asarray(arg), name)
    if hasattr(arg, "__cuda_array_interface__") or hasattr(arg, "__dlpack__"):
        try:
            import torch
            return _torch_argument(torch.from_dlpack(arg), name, True)
        except Exception as exc:  # no torch, or not a DLPack producer torch understands
            raise ValueError(f"argument '{name}': cannot read this device array on the host "
                             f"({type(arg).__name__}): {exc}") from None
    raise TypeError(f"argument '{name}' must be an array or tensor for a pointer parameter, "
                    f"got {type(arg).__name__}")


def _scalar_converter(name: str, ir_type: str, dtype):
    if ir_type.startswith("i"):
        width = int(ir_type[1:])

        def convert(value):
            if isinstance(value, (np.ndarray, np.generic)) and np.ndim(value) == 0:
                value = value.item()
            if not isinstance(value, (int, bool, np.integer)):
                raise TypeError(f"argument '{name}' must be an integer ({ir_type}), got {type(value).__name__}")
            v = nx.wrap_int(int(value), width)
            return np.bool_(v) if width == 1 else dtype(v)
        return convert
    if ir_type in nx.EMULATED_FLOATS:
        return lambda value: nx.encode_float(np.float64(value), ir_type)[()]

    def convert_float(value):
        if not isinstance(value, (int, float, np.number, bool)):
            raise TypeError(f"argument '{name}' must be a number ({ir_type}), got {type(value).__name__}")
        return dtype(value)
    return convert_float


def _ignore_float_errors():
    """(enter, exit) functions that silence NumPy's floating-point warnings for one launch. NumPy 2
    keeps that state in a context variable: setting a prepared value costs ~0.1 us where building an
    `np.errstate` costs ~2 us per launch. Older layouts fall back to `np.errstate`."""
    try:
        from numpy._core._ufunc_config import _extobj_contextvar as var
        with np.errstate(all="ignore"):
            ignore = var.get()
        return (lambda: var.set(ignore)), var.reset
    except (ImportError, AttributeError):  # pragma: no cover - other NumPy layouts
        def enter():
            state = np.errstate(all="ignore")
            state.__enter__()
            return state
        return enter, (lambda state: state.__exit__(None, None, None))


_ENTER_QUIET, _EXIT_QUIET = _ignore_float_errors()
_NDARRAY = np.ndarray
_INT64 = np.int64
_UNIT_PIDS = (np.zeros(1, np.int32),) * 3
_UNIT_NPROG = (np.int32(1),) * 3


class InterpreterLauncher(Launcher):
    def __init__(self, compiled_kernel):
        super().__init__(compiled_kernel)
        source = compiled_kernel.asm["py"]
        metadata = getattr(compiled_kernel, "metadata", {}) or {}
        namespace: dict = {}
        name = metadata.get("name", "kernel")
        exec(compile(source, f"<tilejit-interpreter {name}>", "exec"), namespace)
        self.program = namespace["kernel"]
        self.sites = namespace["SITES"]
        self.name = namespace["KERNEL_NAME"]
        self.params = namespace["PARAMS"]
        budget = int(metadata.get("max_batch_elements", DEFAULT_MAX_BATCH_ELEMENTS))
        self.batch = max(1, budget // max(1, int(namespace["LARGEST_TENSOR"])))
        self.converters = [None if kind == "pointer" else _scalar_converter(pname, kind, dtype)
                           for pname, kind, dtype in self.params]
        # Per parameter: (name, scalar converter or None for a pointer, pointee dtype of a pointer).
        self.plan = tuple((pname, convert, np.dtype(dtype) if kind == "pointer" else None)
                          for (pname, kind, dtype), convert in zip(self.params, self.converters))
        self._pid_cache: dict = {}

    def __call__(self, grid, args, stream=None):
        # CompiledKernel.run fires the plugin launch hooks; here only the grid is normalised.
        if type(grid) is not tuple or len(grid) != 3:
            from tilejit.backends import normalize_grid
            grid = normalize_grid(grid)
        if 0 in grid:
            return None
        return self.launch(grid, args, stream)

    def _pids(self, grid, start: int, count: int):
        key = (grid, start, count)
        cached = self._pid_cache.get(key)
        if cached is None:
            gx, gy, _ = grid
            linear = np.arange(start, start + count, dtype=np.int64)
            cached = ((linear % gx).astype(np.int32), ((linear // gx) % gy).astype(np.int32),
                      (linear // (gx * gy)).astype(np.int32))
            if len(self._pid_cache) > 64:
                self._pid_cache.clear()
            self._pid_cache[key] = cached
        return cached

    def _arguments(self, mem: Memory, args):
        """Kernel argument values (scalars converted, pointers registered in `mem`) and write-backs."""
        values = []
        writebacks = None
        for arg, (pname, convert, pointee) in zip(args, self.plan):
            if convert is not None:
                values.append(convert(arg))
                mem.add_scalar(pname)
            elif type(arg) is _NDARRAY and arg.flags.contiguous and arg.dtype == pointee:
                # The common case, kept to a few attribute reads: the array itself, flattened.
                values.append(_INT64(mem.add(pname, arg.reshape(-1), 0)))
            elif arg is None:
                mem.add_scalar(pname)
                values.append(_INT64(slot_base(0)))
            else:
                prepared = prepare_pointer(arg, pname)
                values.append(_INT64(mem.add(pname, prepared.buffer, prepared.start)))
                if prepared.writeback is not None:
                    writebacks = (writebacks or []) + [prepared.writeback]
        return values, writebacks

    def launch(self, grid, args, stream=None):
        if len(args) != len(self.plan):
            raise TypeError(f"kernel '{self.name}' takes {len(self.params)} runtime arguments "
                            f"({', '.join(p[0] for p in self.params)}), got {len(args)}")
        mem = Memory(self.name, self.sites)
        values, writebacks = self._arguments(mem, args)
        mem.grid = grid
        total = grid[0] * grid[1] * grid[2]
        if total == 1:
            nprog, batches = _UNIT_NPROG, ((1, _UNIT_PIDS),)
        else:
            nprog = (np.int32(grid[0]), np.int32(grid[1]), np.int32(grid[2]))
            batches = ((min(self.batch, total - start), self._pids(grid, start, min(self.batch, total - start)))
                       for start in range(0, total, self.batch))
        token = _ENTER_QUIET()
        try:
            for count, pids in batches:
                mem.pids = pids
                self.program(mem, count, pids[0], pids[1], pids[2], *nprog, None, *values)
        except InterpreterError:
            raise
        except RecursionError:
            raise
        except (ArithmeticError, ValueError, IndexError, TypeError, MemoryError) as exc:
            tb = sys.exc_info()[2]
            raise InterpreterError(f"the interpreter failed: {type(exc).__name__}: {exc}",
                                   kernel=self.name) from exc.with_traceback(tb)
        finally:
            _EXIT_QUIET(token)
        if writebacks:
            for writeback in writebacks:
                writeback()
        return None
