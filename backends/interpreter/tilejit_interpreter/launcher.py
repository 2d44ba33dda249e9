"""Runs a generated NumPy program on a grid: argument conversion, batching of programs, memory.

The program text is compiled once per launcher; a launch converts the arguments (views, never
copies, except CUDA tensors which go to the host and back like TRITON_INTERPRET=1), then calls the
program once per batch of at most `batch` programs.

Every pointer argument is bounded by its own extent, whatever its type: from the lowest to the
highest byte its elements occupy (a view of a larger tensor or array cannot reach the rest of it).
Memory that must not be written (a NumPy array that is not writeable, a torch tensor over a read-only
mapping such as `np.memmap(mode="r")` or over an immutable `bytes` object) is registered read-only:
loads work, and a store or atomic through it is an InterpreterError naming the argument and the line.
Scalars are checked and encoded by the launch ABI (`tilejit.runtime.launch_abi`), as on the GPUs.
"""
from __future__ import annotations

import ctypes
import sys
import weakref

import numpy as np

from tilejit.backends import Launcher
from tilejit.errors import ArgumentTypeError, ArgumentValueError, InterpreterError
from tilejit.runtime.launch_abi import normalize_grid, runtime_signature, scalar_value
from tilejit.runtime.tensor_wrapper import TensorWrapper

from . import numerics as nx
from .memory import Memory, slot_base

DEFAULT_MAX_BATCH_ELEMENTS = 1 << 22


def _raw_bytes(address: int, nbytes: int, writable: bool = True) -> np.ndarray:
    """A uint8 view of `nbytes` of host memory at `address` (kept alive by the caller)."""
    if nbytes == 0:
        return np.zeros(0, np.uint8)
    view = np.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=np.uint8)
    if not writable:
        view.flags.writeable = False
    return view


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


# --- read-only memory under torch tensors -------------------------------------------------------
# torch has no read-only tensors: `torch.from_numpy` of a read-only array or memmap and
# `torch.frombuffer` of a `bytes` object only warn, and writing through them crashes the process
# (SIGSEGV on a read-only mapping) or changes an immutable object. Memory torch allocated itself
# (a resizable storage) is writable; for the rest (external memory) the answer is found once per
# storage (its memory cannot change while it lives) and remembered.

_PAGE = 4096
_BYTES_HEADER = bytes.__basicsize__ - 1          # CPython: offset of a bytes object's first byte
_BYTES_TYPE = id(bytes)
_verdict_by_storage: dict = {}                  # id(storage) -> (weak reference, writable)


def _mappings() -> list:
    """(start, end, permissions) of every memory mapping of this process (Linux; else none)."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(None, 2)
        if len(fields) >= 2:
            start, _, end = fields[0].partition(b"-")
            found.append((int(start, 16), int(end, 16), fields[1]))
    return found


def _inside_bytes_object(address: int, nbytes: int, mappings: list) -> bool:
    """Is [address, address + nbytes) the contents of a CPython `bytes` object (which must never
    change)? Read from the object header just before the data. The header is read only when it is
    on the data's page or in a readable mapping: CPython's 16 KiB allocator pools let a small object
    straddle a 4 KiB page boundary, so "same page" alone misses some bytes objects."""
    if sys.implementation.name != "cpython" or address < _BYTES_HEADER:
        return False
    header = address - _BYTES_HEADER
    if address % _PAGE < _BYTES_HEADER and not any(
            start <= header < end and perms[:1] == b"r" for start, end, perms in mappings):
        return False
    type_address = ctypes.c_size_t.from_address(header + ctypes.sizeof(ctypes.c_ssize_t)).value
    size = ctypes.c_ssize_t.from_address(header + 2 * ctypes.sizeof(ctypes.c_ssize_t)).value
    return type_address == _BYTES_TYPE and 0 <= nbytes <= size


def _storage_writable(storage) -> bool:
    entry = _verdict_by_storage.get(id(storage))
    if entry is not None and entry[0]() is storage:
        return entry[1]
    if storage.resizable():
        writable = True
    else:
        address, nbytes = storage.data_ptr(), storage.nbytes()
        mappings = _mappings() if nbytes else []
        writable = not nbytes or not (
            _inside_bytes_object(address, nbytes, mappings)
            or any(start < address + nbytes and address < end and perms[1:2] != b"w"
                   for start, end, perms in mappings))
    if len(_verdict_by_storage) > 256:
        _verdict_by_storage.clear()
    _verdict_by_storage[id(storage)] = (weakref.ref(storage), writable)
    return writable


def _torch_argument(t, name: str) -> _Argument:
    writeback = None
    device = t.device.type
    if device != "cpu":
        if device == "meta":
            raise ArgumentValueError(f"argument '{name}' is a meta tensor: it has no data for a kernel to run "
                                     "on (meta tensors can be used to compile: `kernel.warmup(...)`)")
        host = t.detach().cpu()
        original = t.detach()  # a tensor that requires grad takes the copy back like any other

        def writeback(host=host, original=original):
            original.copy_(host.to(original.device))
        t = host
    address = t.data_ptr()
    size = t.element_size()
    if t.is_contiguous():
        low, nbytes = address, t.numel() * size
    else:
        low, nbytes = _array_extent(address, t.shape, [s * size for s in t.stride()], size)
    writable = writeback is not None or _storage_writable(t.untyped_storage())
    return _Argument(_raw_bytes(low, nbytes, writable), address - low, keep=t, writeback=writeback)


def prepare_pointer(arg, name: str) -> _Argument:
    if isinstance(arg, np.ndarray):
        if arg.flags.c_contiguous:
            return _Argument(arg.reshape(-1).view(np.uint8), 0, keep=arg)
        address = arg.__array_interface__["data"][0]
        low, nbytes = _array_extent(address, arg.shape, arg.strides, arg.itemsize)
        return _Argument(_raw_bytes(low, nbytes, bool(arg.flags.writeable)), address - low, keep=arg)
    module = type(arg).__module__
    if module.startswith("torch"):
        return _torch_argument(arg, name)
    if isinstance(arg, TensorWrapper):  # `tilejit.reinterpret`: the base's bytes, read as the signature says
        return prepare_pointer(arg.base, name)
    if hasattr(arg, "__array_interface__"):
        return prepare_pointer(np.asarray(arg), name)
    if hasattr(arg, "__cuda_array_interface__") or hasattr(arg, "__dlpack__"):
        try:
            import torch
            tensor = torch.from_dlpack(arg)
        except Exception as exc:  # no torch, or not a DLPack producer torch understands
            raise ArgumentValueError(f"argument '{name}': cannot read this device array on the host "
                                     f"({type(arg).__name__}): {exc}") from None
        return _torch_argument(tensor, name)
    raise ArgumentTypeError(f"argument '{name}' must be an array or tensor for a pointer parameter, "
                            f"got {type(arg).__name__}")


# The launch ABI's type string of each scalar IR type (the IR does not tell u64 from i64: the
# signature does, when it is at hand).
_TYPE_STRING_OF_IR = {"f16": "fp16", "f32": "fp32", "f64": "fp64"}


def _scalar_converter(name: str, ir_type: str, dtype, type_string: str | None = None):
    """`value -> NumPy scalar` of one scalar parameter, checked by the launch ABI (a bool, int or
    float of the right kind that fits the type; bf16 rounded as everywhere else)."""
    if ir_type in nx.EMULATED_FLOATS and ir_type != "bf16":  # fp8: no scalar ABI, encoded here
        return lambda value: nx.encode_float(np.float64(scalar_value(value, "fp32", name)), ir_type)[()]
    ts = type_string or _TYPE_STRING_OF_IR.get(ir_type, ir_type)
    if ir_type == "bf16":
        return lambda value: np.uint16(scalar_value(value, "bf16", name))
    if ir_type.startswith("i"):
        width = int(ir_type[1:])
        low, high = (0, 1) if width == 1 else (-(1 << (width - 1)), (1 << (width - 1)) - 1)

        def convert(value):
            if type(value) is not int or not low <= value <= high:
                value = nx.wrap_int(int(scalar_value(value, ts, name)), width)
            return np.bool_(value) if width == 1 else dtype(value)
        return convert

    limit = 65504.0 if np.dtype(dtype).itemsize == 2 else 3.0e38   # past it: the ABI's infinity

    def convert_float(value):
        if type(value) is not float or not -limit <= value <= limit:
            value = scalar_value(value, ts, name)
        return dtype(value)
    return convert_float


def _signature_types(compiled_kernel, params) -> list:
    """The launch ABI's type string of each parameter where the kernel's signature gives one that
    matches the IR type (u64 for an i64 parameter), else None."""
    metadata = getattr(compiled_kernel, "metadata", None) or {}
    try:
        types = list(runtime_signature(metadata).values())
    except (AttributeError, TypeError):
        return [None] * len(params)
    if len(types) != len(params):
        return [None] * len(params)
    out = []
    for (_, kind, _), ts in zip(params, types):
        same = isinstance(ts, str) and not ts.startswith("*") and (
            ts == kind or _TYPE_STRING_OF_IR.get(kind) == ts or ts[0] == "u" and "i" + ts[1:] == kind)
        out.append(ts if same else None)
    return out


def _read_only_store(exc: ValueError, mem: Memory):
    """The InterpreterError for a store through read-only memory, naming the argument and the line, when
    `exc` is NumPy refusing such a store; else None. The memory helpers' frames hold `mem`, `site` and
    `slot` of the access."""
    if "read-only" not in str(exc):
        return None
    tb, found = exc.__traceback__, None
    while tb is not None:
        local = tb.tb_frame.f_locals
        if local.get("mem") is mem and isinstance(local.get("slot"), int) and isinstance(local.get("site"), int):
            if local["slot"] > 0:
                found = (local["site"], local["slot"])
        tb = tb.tb_next
    if found is None:
        names = [mem.names[i] for i, b in enumerate(mem.buffers) if b.size and not b.flags.writeable]
        return InterpreterError(f"store through read-only memory (argument {' or '.join(map(repr, names))})",
                                kernel=mem.kernel)
    site, slot = found
    return mem.error(site, f"store to argument '{mem.names[slot]}', whose memory is read-only (a NumPy array "
                           "that is not writeable, a read-only memory map or an immutable buffer); loads "
                           "from it are fine")


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
        self.converters = [None if kind == "pointer" else _scalar_converter(pname, kind, dtype, ts)
                           for (pname, kind, dtype), ts in zip(self.params, _signature_types(compiled_kernel,
                                                                                            self.params))]
        # Per parameter: (name, scalar converter or None for a pointer, pointee dtype of a pointer).
        self.plan = tuple((pname, convert, np.dtype(dtype) if kind == "pointer" else None)
                          for (pname, kind, dtype), convert in zip(self.params, self.converters))
        self._pid_cache: dict = {}

    def __call__(self, grid, args, stream=None):
        # CompiledKernel.run fires the plugin launch hooks; here only the grid is normalised.
        if type(grid) is not tuple or len(grid) != 3:
            grid = normalize_grid(grid, self.name)
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
                try:
                    prepared = prepare_pointer(arg, pname)
                except (ArgumentTypeError, ArgumentValueError) as exc:
                    raise type(exc)(f"kernel '{self.name}': {exc}") from None
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
        except ValueError as exc:
            error = _read_only_store(exc, mem)
            if error is None:
                raise InterpreterError(f"the interpreter failed: ValueError: {exc}", kernel=self.name) from exc
            raise error from None
        except (ArithmeticError, IndexError, TypeError, MemoryError) as exc:
            tb = sys.exc_info()[2]
            raise InterpreterError(f"the interpreter failed: {type(exc).__name__}: {exc}",
                                   kernel=self.name) from exc.with_traceback(tb)
        finally:
            _EXIT_QUIET(token)
        if writebacks:
            for writeback in writebacks:
                writeback()
        return None
