"""Launching a cubin with cuda-bindings: no C compiler at run time.

A `CudaLauncher` loads its cubin lazily, once per CUDA context (cuModuleLoadData +
cuModuleGetFunction), checks the kernel's resources against the device the first time, and on every
launch does only: resolve the stream, look up the function for the current device, pack the
arguments (see `arg_packing`) and call cuLaunchKernel.

The hot path keeps per-thread state (`_ThreadState`): its own argument buffer (so no lock is taken
between packing and cuLaunchKernel) and, per device, the prepared (launch, function, pack, params).
When torch is in use the device and stream come straight from `torch._C` (as Triton does), with no
driver call; without torch the current context is asked of the driver on each launch.
"""
from __future__ import annotations

import sys
import threading

from tilejit.backends import Launcher
from tilejit.errors import OutOfResources

from .arg_packing import ArgPacker
from .cuda_calls import CudaCallError, RawEntryPoints, check, cuda_driver
from .driver import CudaDriver, get_driver

# Above this much dynamic shared memory a kernel must opt in with
# CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024

_ENTRY_POINTS: dict[str, RawEntryPoints] = {}
_ENTRY_POINTS_LOCK = threading.Lock()


def _entry_points(prefer: str) -> RawEntryPoints:
    with _ENTRY_POINTS_LOCK:
        if prefer not in _ENTRY_POINTS:
            _ENTRY_POINTS[prefer] = RawEntryPoints(prefer)
        return _ENTRY_POINTS[prefer]


def stream_handle(stream) -> int:
    """The CUstream handle of an int, a torch.cuda.Stream (`.cuda_stream`) or a cuda-bindings CUstream."""
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    raw = getattr(stream, "cuda_stream", None)
    if raw is not None:
        return int(raw)
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise TypeError(f"stream must be an int handle, a torch.cuda.Stream or a CUstream, "
                        f"got {type(stream).__name__}") from None


def runtime_signature(signature, constants=None) -> tuple[list[str], list[str] | None]:
    """(types, names) of the runtime parameters: a list of type strings (names unknown) or a
    `{name: type}` dict from which constexpr entries (and names listed in `constants`) are dropped."""
    if isinstance(signature, dict):
        constant_names = {k for k in (constants or {}) if isinstance(k, str)}
        kept = [(name, ty) for name, ty in signature.items() if ty != "constexpr" and name not in constant_names]
        return [ty for _, ty in kept], [name for name, _ in kept]
    types = list(signature)
    if "constexpr" in types:
        raise ValueError("a launcher signature lists runtime parameters only; remove the constexpr entries "
                         "(or pass the {name: type} dict, from which they are dropped)")
    return types, None


class _ThreadState:
    """One thread's argument buffer and prepared launches (keyed by torch device or context)."""
    __slots__ = ("packer", "entries", "torch_calls")

    def __init__(self, packer):
        self.packer = packer
        self.entries: dict = {}
        self.torch_calls = None   # (torch._C._cuda_getDevice, torch._C._cuda_getCurrentRawStream)


def _torch_fast_calls(driver):
    """torch's raw device and stream getters when torch (with CUDA) is in use, else None."""
    if sys.modules.get("torch") is None:
        return None
    torch = driver._bound_torch()
    if torch is None:
        return None
    get_device = getattr(torch._C, "_cuda_getDevice", None)
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get_device is None or raw_stream is None:
        return None
    torch.cuda.current_device()   # initialises torch's CUDA state once, so the raw getters are valid
    return get_device, raw_stream


class CudaLauncher(Launcher):
    """Runs one kernel of a cubin: `launcher.launch((gx, gy, gz), args, stream=None)`.

    `signature`: the runtime parameters' type strings (`["*fp32", "i32"]`) or a `{name: type}`
    dict. `entry_points`: "bindings" (default: the cuda-bindings wrappers, measured fastest) or
    "ctypes" (raw driver function pointers), kept selectable to measure one against the other.
    """

    def __init__(self, cubin: bytes, kernel_name: str, signature, num_warps: int, shared_bytes: int = 0, *,
                 param_names=None, constants=None, compiled_kernel=None, driver: CudaDriver | None = None,
                 entry_points: str = "bindings"):
        super().__init__(compiled_kernel)
        if not isinstance(cubin, (bytes, bytearray)) or not cubin:
            raise ValueError(f"kernel '{kernel_name}': the cubin must be non-empty bytes")
        if isinstance(num_warps, bool) or not isinstance(num_warps, int) or num_warps < 1:
            raise ValueError(f"kernel '{kernel_name}': num_warps must be a positive int, got {num_warps!r}")
        if isinstance(shared_bytes, bool) or not isinstance(shared_bytes, int) or shared_bytes < 0:
            raise ValueError(f"kernel '{kernel_name}': shared memory must be a non-negative int, got {shared_bytes!r}")
        if entry_points not in ("ctypes", "bindings"):
            raise ValueError(f"entry_points must be 'ctypes' or 'bindings', got {entry_points!r}")
        types, names = runtime_signature(signature, constants)
        self.cubin = bytes(cubin)
        self.name = kernel_name
        self.num_warps = num_warps
        self.shared_bytes = shared_bytes
        self.block_x = 32 * num_warps
        self.entry_points = entry_points
        self._types, self._names = types, param_names or names
        self._packer = ArgPacker(types, self._names)   # checks the signature now, not at first launch
        self._local = threading.local()
        self._driver = driver or get_driver()
        self._raw: RawEntryPoints | None = None
        self._functions: dict[int, tuple] = {}  # context handle -> (launch callable, function handle)
        self._modules: dict[int, object] = {}
        self._load_lock = threading.Lock()
        self.n_regs: int | None = None
        self.static_shared: int | None = None

    @classmethod
    def from_compiled_kernel(cls, compiled_kernel, **kwargs) -> "CudaLauncher":
        """Build from a `CompiledKernel`: `asm["cubin"]` and metadata `name`, `signature`, `constants`,
        `num_warps`, `shared`."""
        metadata = compiled_kernel.metadata
        return cls(compiled_kernel.asm["cubin"], metadata["name"], metadata["signature"], metadata["num_warps"],
                   metadata.get("shared", 0), constants=metadata.get("constants"),
                   compiled_kernel=compiled_kernel, **kwargs)

    @property
    def kernel_name(self) -> str:
        return self.name

    # ---- the hot path ---------------------------------------------------------------------------
    def __call__(self, grid, args, stream=None):
        # `CompiledKernel.run` (and so every JIT launch) passes a grid the JIT already normalised to
        # three ints: `launch` checks those itself, so the base class's normalisation is skipped.
        if type(grid) is tuple and len(grid) == 3 and type(grid[0]) is int and type(grid[1]) is int \
                and type(grid[2]) is int:
            return self.launch(grid, args, stream)
        return super().__call__(grid, args, stream)

    def launch(self, grid, args, stream=None):
        gx, gy, gz = grid
        if gx <= 0 or gy <= 0 or gz <= 0:
            if gx < 0 or gy < 0 or gz < 0:
                raise ValueError(f"kernel '{self.name}': grid dimensions must not be negative, got {tuple(grid)}")
            return None  # an empty grid launches nothing
        state = getattr(self._local, "state", None) or self._new_thread_state()
        calls = state.torch_calls
        if calls is not None:
            key = calls[0]()
            if stream is None:
                stream = calls[1](key)
        else:
            if stream is None:
                stream = self._driver.get_current_stream()
            raw = self._raw or self._bind_entry_points()
            key = ("context", raw.current_context())
        if type(stream) is not int:
            stream = stream_handle(stream)
        entry = state.entries.get(key)
        if entry is None:
            entry = self._prepare(state, key)
        launch, function, pack, params = entry
        try:
            pack(*args)
        except Exception:  # noqa: BLE001 - re-raised as the TypeError/ValueError naming the parameter
            raise state.packer.explain_failure(tuple(args), self.name) from None
        code = launch(function, gx, gy, gz, self.block_x, 1, 1, self.shared_bytes, stream, params, None)
        if code:
            raise CudaCallError("cuLaunchKernel", code, self.name)
        return None

    def _new_thread_state(self) -> _ThreadState:
        state = _ThreadState(ArgPacker(self._types, self._names))
        self._local.state = state
        return state

    def _prepare(self, state: _ThreadState, key) -> tuple:
        """The first launch of this thread on this device/context: load the module if needed and
        remember what the next launches need. Also picks up torch when it was imported late."""
        if state.torch_calls is None:
            state.torch_calls = _torch_fast_calls(self._driver)
            if state.torch_calls is not None:
                key = state.torch_calls[0]()
        raw = self._raw or self._bind_entry_points()
        launch, function = self._functions.get(raw.current_context()) or self._load_for_current_context()
        entry = (launch, function, state.packer.pack, state.packer.params_address)
        state.entries[key] = entry
        return entry

    # ---- the first launch in a context -----------------------------------------------------------
    def _bind_entry_points(self) -> RawEntryPoints:
        self._driver.require_active()  # cuInit must have run before cuGetProcAddress
        self._raw = _entry_points(self.entry_points)
        return self._raw

    def _load_for_current_context(self) -> tuple:
        with self._load_lock:
            raw = self._raw
            context = raw.current_context()
            if context == 0:
                self._driver.activate()  # no context on this thread yet: the device's primary one
                context = raw.current_context()
            if context in self._functions:
                return self._functions[context]
            driver = cuda_driver()
            module = check(driver.cuModuleLoadData(self.cubin), "cuModuleLoadData", self.name)
            try:
                function = check(driver.cuModuleGetFunction(module, self.name.encode()), "cuModuleGetFunction",
                                 self.name)
                self._check_resources(driver, function)
            except Exception:
                driver.cuModuleUnload(module)
                raise
            self._modules[context] = module
            self._functions[context] = raw.launch_entry(function)
            return self._functions[context]

    def _function_attribute(self, driver, function, name: str) -> int:
        attribute = getattr(driver.CUfunction_attribute, name)
        return int(check(driver.cuFuncGetAttribute(attribute, function), "cuFuncGetAttribute", self.name))

    def _check_resources(self, driver, function) -> None:
        """OutOfResources when the device cannot run this kernel; opt into >48 KiB shared memory."""
        device = int(check(driver.cuCtxGetDevice(), "cuCtxGetDevice", self.name))
        properties = self._driver.device_properties(device)
        self.n_regs = self._function_attribute(driver, function, "CU_FUNC_ATTRIBUTE_NUM_REGS")
        self.static_shared = self._function_attribute(driver, function, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")
        max_threads = self._function_attribute(driver, function, "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
        shared_total = self.shared_bytes + self.static_shared
        if shared_total > properties["max_shared_mem"]:
            raise OutOfResources(shared_total, properties["max_shared_mem"], "shared memory")
        if self.n_regs * self.block_x > properties["max_num_regs"]:
            raise OutOfResources(self.n_regs * self.block_x, properties["max_num_regs"], "registers")
        if self.block_x > max_threads:
            raise OutOfResources(self.block_x, max_threads, "threads per block")
        if self.shared_bytes > DEFAULT_DYNAMIC_SHARED_LIMIT:
            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(driver.cuFuncSetAttribute(function, attribute, properties["max_shared_mem"] - self.static_shared),
                  "cuFuncSetAttribute", self.name)

    def unload(self) -> None:
        """Unload the module from every context it was loaded into (the next launch loads it again)."""
        with self._load_lock:
            driver = cuda_driver() if self._modules else None
            for module in self._modules.values():
                driver.cuModuleUnload(module)
            self._modules.clear()
            self._functions.clear()
