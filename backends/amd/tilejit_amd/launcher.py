"""Launching an hsaco on a ROCm GPU through hip-python.

`HipLauncher` reads the kernel's metadata from the code object itself (argument offsets, static LDS,
wavefront size), checks the launch fits the hardware, and launches with `hipModuleLaunchKernel`,
passing one packed kernarg buffer through `extra` (HIP_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END).

Why `extra` rather than `kernelParams`: the buffer is built from the code object's own offsets, so it is
exactly the segment the kernel reads, and it can be checked byte for byte without a GPU. The HIP
runtime treats both paths alike: it copies each explicit argument (from `kernelParams[i]`, or from the
buffer at the argument's metadata offset) and then writes the hidden arguments (block counts, group
sizes, heap, printf buffer...) itself at dispatch. So either path is correct; `kernelParams` would need
one host pointer per argument and tells nothing more.
"""
from __future__ import annotations

import ctypes

from tilejit.errors import GridError, LaunchError, OutOfResources
from tilejit.runtime.launch_abi import normalize_grid

from tilejit_amd.driver import hip_check, hip_runtime
from tilejit_amd.elf import inspect_hsaco
from tilejit_amd.kernargs import KernargLayout, KernelArgumentError  # noqa: F401 (re-exported)
from tilejit_amd.targets import KiB, SUPPORTED_ARCHS

HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02
HIP_LAUNCH_PARAM_END = 0x03
# HIP rejects a launch whose gridDim * blockDim reaches 2**32 in any dimension.
_MAX_WORK_ITEMS_PER_DIM = 2 ** 32 - 1
_DEFAULT_LDS_LIMIT = 64 * KiB


class HipLauncher:
    """Runs one kernel of an hsaco: `launcher(grid, args, stream=None)`."""

    def __init__(self, hsaco: bytes, kernel_name: str, signature, num_warps: int, shared: int = 0,
                 hip=None):
        self.hsaco = bytes(hsaco)
        self.kernel_name = kernel_name
        info = inspect_hsaco(self.hsaco)
        kernel = info.kernel(kernel_name)
        self.arch = info.arch
        self.kernel_info = kernel
        self.layout = KernargLayout.from_metadata(kernel, signature)
        warp = kernel.wavefront_size or (SUPPORTED_ARCHS[info.arch].wavefront_size
                                         if info.arch in SUPPORTED_ARCHS else 64)
        threads = int(num_warps) * warp
        if threads < 1:
            raise LaunchError(f"kernel '{kernel_name}': num_warps must be positive, got {num_warps}")
        max_threads = kernel.max_flat_workgroup_size or 1024
        if threads > max_threads:
            raise OutOfResources(threads, max_threads, "threads per block")
        self.block = (threads, 1, 1)
        # `shared` is all the LDS the kernel needs. Whatever the code object does not already reserve
        # statically (group_segment_fixed_size) is requested as dynamic LDS at launch, which serves a
        # lowering that addresses shared memory through an external, size-less LDS array.
        static_lds = kernel.group_segment_fixed_size
        self.dynamic_lds = max(0, int(shared or 0) - static_lds)
        limit = SUPPORTED_ARCHS[info.arch].lds_bytes if info.arch in SUPPORTED_ARCHS else _DEFAULT_LDS_LIMIT
        if static_lds + self.dynamic_lds > limit:
            raise OutOfResources(static_lds + self.dynamic_lds, limit, "shared memory")
        self._hip = hip
        self._module = None
        self._function = None

    # -- device side -------------------------------------------------------------------------------

    def _runtime(self):
        if self._hip is None:
            self._hip = hip_runtime()
        return self._hip

    def load(self):
        """Load the code object on the current device (done once, on first launch)."""
        if self._function is None:
            hip = self._runtime()
            module = hip_check(hip, hip.hipModuleLoadData(self.hsaco), "hipModuleLoadData", self.kernel_name)
            try:
                self._function = hip_check(hip, hip.hipModuleGetFunction(module, self.kernel_name.encode()),
                                           "hipModuleGetFunction", self.kernel_name)
            except LaunchError:
                hip.hipModuleUnload(module)
                raise
            self._module = module
        return self._function

    def kernargs(self, grid, args) -> bytes:
        """The kernarg bytes a launch of `grid` with `args` passes (no GPU needed)."""
        return self.layout.pack(args, normalize_grid(grid, self.kernel_name), self.block, self.dynamic_lds)

    def __call__(self, grid, args, stream=None):
        grid3 = normalize_grid(grid, self.kernel_name)
        if 0 in grid3:
            return  # an empty grid launches nothing, as in CUDA/Triton
        for dim, (blocks, threads) in enumerate(zip(grid3, self.block)):
            if blocks * threads > _MAX_WORK_ITEMS_PER_DIM:
                raise GridError(f"kernel '{self.kernel_name}': grid dimension {dim} has {blocks} blocks of "
                                  f"{threads} threads, more than HIP's {_MAX_WORK_ITEMS_PER_DIM} work-items")
        packed = self.layout.pack(args, grid3, self.block, self.dynamic_lds)
        function = self.load()
        hip = self._runtime()
        # The ctypes objects must outlive the call; HIP copies the arguments before it returns.
        buffer = ctypes.create_string_buffer(packed, max(len(packed), 1))
        size = ctypes.c_size_t(len(packed))
        config = (ctypes.c_void_p * 5)(HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(buffer),
                                       HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size),
                                       HIP_LAUNCH_PARAM_END)
        extra = ctypes.c_void_p(ctypes.addressof(config)) if packed else None
        hip_check(hip, hip.hipModuleLaunchKernel(function, *grid3, *self.block, self.dynamic_lds,
                                                 stream or None, None, extra),
                  "hipModuleLaunchKernel", self.kernel_name)

    def __del__(self):
        module, self._module = getattr(self, "_module", None), None
        if module is not None and self._hip is not None:
            try:
                self._hip.hipModuleUnload(module)
            except Exception:  # interpreter shutdown: the runtime may already be gone
                pass


def make_hip_launcher(compiled_kernel, hip=None) -> HipLauncher:
    """A launcher for a `CompiledKernel` of the AMD backend (asm['hsaco'] + its metadata)."""
    metadata = compiled_kernel.metadata
    hsaco = compiled_kernel.asm["hsaco"]
    try:
        return HipLauncher(hsaco, metadata["name"], metadata["signature"], metadata["num_warps"],
                           metadata.get("shared", 0), hip=hip)
    except KeyError as exc:
        raise LaunchError(f"compiled kernel metadata lacks {exc.args[0]!r}, needed to launch it") from None
