"""The language suite runs every test body on every backend present.

`backend` is "interpreter" always, plus "cuda"/"hip" when that backend package is installed and its
driver reports an active device. `device` creates and reads back arrays on that backend: NumPy arrays
for the interpreter, torch tensors on the GPU. Kernels pick their backend from where their arguments
live (DESIGN.md, "Choosing a backend", rule 3), exactly as a Triton user's kernels do.
"""
from __future__ import annotations

import numpy as np
import pytest


def _active_gpu_backends() -> list:
    # No try around the registry: if the core cannot be imported, the suite must fail, not quietly
    # run on the interpreter alone (a GPU machine once collected 2 cuda tests instead of 560).
    from tilejit.backends.registry import active_state, available_backends
    names = []
    backends = available_backends()
    for name in ("cuda", "hip"):
        cls = backends.get(name)
        if cls is None:
            continue
        try:
            active, _why = active_state(cls)
        except Exception:
            active = False
        if active:
            names.append(name)
    return names


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


# "interpreter-torch" runs the interpreter on torch CPU tensors (used in place, like NumPy arrays),
# the way a Triton user tests GPU code on the CPU.
BACKENDS = ["interpreter"] + (["interpreter-torch"] if _torch_available() else []) + _active_gpu_backends()


class NumpyDevice:
    """Arrays of the interpreter: plain NumPy, in host memory."""

    name = "interpreter"
    is_gpu = False

    def tensor(self, array):
        return np.array(array, copy=True, order="C")

    def empty(self, shape, dtype):
        return np.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype=dtype)

    def full(self, shape, value, dtype):
        return np.full(shape, value, dtype=dtype)

    def numpy(self, x):
        return np.asarray(x)

    def synchronize(self):
        """The interpreter runs a launch to completion before returning."""


class TorchCPUDevice(NumpyDevice):
    """torch tensors in host memory: the interpreter reads and writes them in place."""

    name = "interpreter"

    def __init__(self):
        import torch
        self.torch = torch

    def tensor(self, array):
        return self.torch.from_numpy(np.array(array, copy=True, order="C"))

    def empty(self, shape, dtype):
        return self.tensor(np.empty(shape, dtype=dtype))

    def zeros(self, shape, dtype):
        return self.tensor(np.zeros(shape, dtype=dtype))

    def full(self, shape, value, dtype):
        return self.tensor(np.full(shape, value, dtype=dtype))

    def numpy(self, x):
        return x.numpy() if isinstance(x, self.torch.Tensor) else np.asarray(x)


class TorchGPUDevice:
    """Arrays of a GPU backend: torch tensors on "cuda" (ROCm torch also calls its device "cuda")."""

    is_gpu = True

    def __init__(self, name):
        import torch
        self.torch = torch
        self.name = name

    def tensor(self, array):
        array = np.ascontiguousarray(array)
        return self.torch.from_numpy(array.copy()).to("cuda")

    def empty(self, shape, dtype):
        return self.tensor(np.empty(shape, dtype=dtype))

    def zeros(self, shape, dtype):
        return self.tensor(np.zeros(shape, dtype=dtype))

    def full(self, shape, value, dtype):
        return self.tensor(np.full(shape, value, dtype=dtype))

    def numpy(self, x):
        self.synchronize()
        return x.cpu().numpy()

    def synchronize(self):
        """Wait for the launched kernels (device printf output is flushed here too)."""
        self.torch.cuda.synchronize()


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def device(backend):
    if backend == "interpreter":
        return NumpyDevice()
    if backend == "interpreter-torch":
        return TorchCPUDevice()
    pytest.importorskip("torch", reason=f"the {backend} tests create their tensors with torch")
    return TorchGPUDevice(backend)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch, tmp_path):
    """Each test chooses its backend from its arguments: no target forced through the environment,
    and a private cache so that no test sees another's compiled kernels on disk."""
    for knob in ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET", "TILEJIT_DUMP_DIR"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
