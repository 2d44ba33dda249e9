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

import functools
import sys
import threading

from tilejit.backends import Launcher
from tilejit.errors import OutOfResources
from tilejit.runtime.launch_abi import normalize_grid, runtime_parameters as runtime_signature

from .arg_packing import ArgPacker, bf16_bits, pack_lines, pointer_of
from .cuda_calls import CudaCallError, check, cuda_driver
from .driver import CudaDriver, get_driver

# Above this much dynamic shared memory a kernel must opt in with
# CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024


def current_context() -> int:
    """Handle of the calling thread's current CUDA context (0 when none)."""
    return int(check(cuda_driver().cuCtxGetCurrent(), "cuCtxGetCurrent"))


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
    dict. Calling the launcher is `launch`: it takes any grid form, normalising only what is not
    already three ints (the JIT always passes three ints).
    """

    def __init__(self, cubin: bytes, kernel_name: str, signature, num_warps: int, shared_bytes: int = 0, *,
                 param_names=None, constants=None, compiled_kernel=None, driver: CudaDriver | None = None):
        super().__init__(compiled_kernel)
        if not isinstance(cubin, (bytes, bytearray)) or not cubin:
            raise ValueError(f"kernel '{kernel_name}': the cubin must be non-empty bytes")
        if isinstance(num_warps, bool) or not isinstance(num_warps, int) or num_warps < 1:
            raise ValueError(f"kernel '{kernel_name}': num_warps must be a positive int, got {num_warps!r}")
        if isinstance(shared_bytes, bool) or not isinstance(shared_bytes, int) or shared_bytes < 0:
            raise ValueError(f"kernel '{kernel_name}': shared memory must be a non-negative int, got {shared_bytes!r}")
        types, names = runtime_signature(signature, constants)
        self.cubin = bytes(cubin)
        self.name = kernel_name
        self.num_warps = num_warps
        self.shared_bytes = shared_bytes
        self.block_x = 32 * num_warps
        self._types, self._names = types, param_names or names
        self._packer = ArgPacker(types, self._names)   # checks the signature now, not at first launch
        self._local = threading.local()
        self._driver = driver or get_driver()
        self._functions: dict[int, object] = {}  # context handle -> CUfunction
        self._modules: dict[int, object] = {}
        self._load_lock = threading.Lock()
        self.n_regs: int | None = None
        self.static_shared: int | None = None
        # The hot path, generated per signature; `direct_call` is what `CompiledKernel` calls.
        self.launch, self.direct_call = _launch_functions(self)

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
    def launch(self, grid, args, stream=None):
        # The instance's generated `launch` (see `_launch_functions`) shadows this method; this
        # definition only documents it. Calling the class attribute still launches.
        return self.__dict__["launch"](grid, args, stream)

    def __call__(self, grid, args, stream=None):   # `launch`, one frame more (CompiledKernel calls
        return self.__dict__["launch"](grid, args, stream)   # `direct_call`, no frame more)

    def _launch_odd_grid(self, grid, args, stream):
        """The launch of a grid that is not three positive ints: checked (naming the kernel; a
        negative size raises), nothing launched when it is empty, else launched as three ints."""
        grid = normalize_grid(grid, self.name)
        if grid[0] == 0 or grid[1] == 0 or grid[2] == 0:
            return None  # an empty grid launches nothing
        return self.__dict__["launch"](grid, args, stream)

    def _new_thread_state(self) -> _ThreadState:
        self._driver.require_active()  # cuInit must have run before the first cuCtxGetCurrent
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
        function = self._functions.get(current_context()) or self._load_for_current_context()
        driver = cuda_driver()
        entry = (driver.cuLaunchKernel, function, state.packer.buffer, state.packer.params_address,
                 driver.CUresult.CUDA_SUCCESS)
        state.entries[key] = entry
        return entry

    # ---- the first launch in a context -----------------------------------------------------------
    def _load_for_current_context(self):
        with self._load_lock:
            context = current_context()
            if context == 0:
                self._driver.activate()  # no context on this thread yet: the device's primary one
                context = current_context()
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
            self._functions[context] = function
            return function

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


@functools.lru_cache(maxsize=256)
def _launch_code(type_strings: tuple[str, ...]):
    """The compiled `launch` and `launch_checked_grid` of one signature (see `_launch_functions`)."""
    source = launch_source(type_strings, "launch", True) + launch_source(type_strings, "launch_checked_grid", False)
    return compile(source, f"<tilejit cuda launch {','.join(type_strings)}>", "exec")


def launch_source(type_strings, name: str, check_grid: bool) -> str:
    """The Python source of `name(grid, args, stream=None)` for one signature. Without `check_grid`
    the grid must be three ints in [0, 2**31 - 1] (what `normalize_grid` returns): only an empty one
    is looked for."""
    unpack = "".join(f"a{i}, " for i in range(len(type_strings)))
    if check_grid:
        grid = ["    if type(grid) is tuple and len(grid) == 3:",
                "        gx, gy, gz = grid",
                "        if type(gx) is not int or type(gy) is not int or type(gz) is not int \\",
                "                or gx <= 0 or gy <= 0 or gz <= 0:",
                "            return self._launch_odd_grid(grid, args, stream)",
                "    else:",
                "        return self._launch_odd_grid(grid, args, stream)"]
    else:
        grid = ["    gx, gy, gz = grid",
                "    if gx == 0 or gy == 0 or gz == 0:",
                "        return None  # an empty grid launches nothing"]
    lines = [
        f"def {name}(grid, args, stream=None):",
        *grid,
        # Dimensions beyond CUDA's limits (y, z > 65535) are refused by cuLaunchKernel: CudaCallError.
        "    try:",
        "        state = local.state",
        "    except AttributeError:",
        "        state = self._new_thread_state()",
        "    calls = state.torch_calls",
        "    if calls is not None:",
        "        key = calls[0]()",
        "        if stream is None:",
        "            stream = calls[1](key)",
        "    else:",
        "        if stream is None:",
        "            stream = self._driver.get_current_stream()",
        "        key = ('context', current_context())",
        "    if type(stream) is not int:",
        "        stream = stream_handle(stream)",
        "    entry = state.entries.get(key)",
        "    if entry is None:",
        "        entry = self._prepare(state, key)",
        "    cu_launch, function, buffer, params, success = entry",
        "    try:",
        f"        ({unpack}) = args",
        *pack_lines(type_strings, "        "),
        "    except Exception:  # converted (fp16 overflow -> inf) or the error naming the parameter",
        "        state.packer.pack_checked(tuple(args), name)",
        "    code = cu_launch(function, gx, gy, gz, block_x, 1, 1, shared_bytes, stream, params, 0)[0]",
        # The bindings hand back their cached CUDA_SUCCESS member: an identity test is the cheap check.
        "    if code is not success and int(code) != 0:",
        "        raise CudaCallError('cuLaunchKernel', code, name)",
        "    return None",
    ]
    return "\n".join(lines) + "\n"


def _launch_functions(launcher: CudaLauncher):
    """(`launcher.launch`, `launcher.direct_call`): generated functions per launcher (the code is
    compiled once per signature) that check the grid (`direct_call`: only for an empty one, see
    `tilejit.backends.Launcher`), find this thread's state, resolve the device and stream, pack the
    arguments (the packing of `arg_packing.pack_lines`, inlined: no call per launch) and call
    cuLaunchKernel. The thread's own argument buffer comes with its prepared entry, so no lock is held.
    `block_x`, `shared_bytes` and `name` are read once: they are fixed when the launcher is built."""
    namespace = {"self": launcher, "local": launcher._local, "current_context": current_context,
                 "stream_handle": stream_handle, "CudaCallError": CudaCallError, "name": launcher.name,
                 "block_x": launcher.block_x, "shared_bytes": launcher.shared_bytes,
                 "pack_into": launcher._packer.pack_into, "pointer_of": pointer_of, "bf16_bits": bf16_bits}
    exec(_launch_code(tuple(launcher._types)), namespace)  # noqa: S102
    return namespace["launch"], namespace["launch_checked_grid"]
