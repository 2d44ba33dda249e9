"""`triton._internal_testing` under the alias: the helpers Triton's own unit tests import (dtype
lists, target predicates, `numpy_random`, `to_triton`, `to_numpy`, TMA support), answered for tilejit.

The predicates describe the backend tilejit runs on: `is_interpreter()` is true when the interpreter
is the active backend (no GPU, or `TRITON_INTERPRET=1` / `TILEJIT_INTERPRET=1`), `is_cuda()` /
`is_hip()` when that GPU backend is active.
"""
from __future__ import annotations

import contextlib
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numpy.random import RandomState

import tilejit.language as tl
from tilejit.runtime.tensor_wrapper import TensorWrapper, reinterpret, type_canonicalisation_dict

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})


def _active():
    from tilejit.runtime.driver import driver
    return driver.active


def is_interpreter() -> bool:
    if any(os.environ.get(v, "0") == "1" for v in ("TRITON_INTERPRET", "TILEJIT_INTERPRET")):
        return True
    return _active().is_interpreter


def is_compile_warmup() -> bool:
    """Triton can run a test once only to compile its kernels; tilejit always runs tests for real."""
    return False


def random_int(low, high, *, warmup_value=None, **kwargs):
    import torch
    return int(torch.randint(low, high, size=(), **kwargs).item())


def random_float(*, warmup_value=0.5, **kwargs):
    import torch
    return float(torch.rand((), **kwargs).item())


def get_current_target():
    return None if is_interpreter() else _active().get_current_target()


def _backend_is(name: str) -> bool:
    target = get_current_target()
    return target is not None and target.backend == name


def is_cuda():
    return _backend_is("cuda")


def is_hip():
    return _backend_is("hip")


def is_xpu():
    return False


def _cuda_major() -> int:
    import torch
    return torch.cuda.get_device_capability()[0]


def is_ampere_or_newer():
    return is_cuda() and _cuda_major() >= 8


def is_hopper_or_newer():
    return is_cuda() and _cuda_major() >= 9


def is_hopper():
    return is_cuda() and _cuda_major() == 9


def is_blackwell():
    return is_cuda() and _cuda_major() == 10


def is_sm12x():
    return is_cuda() and _cuda_major() == 12


def _hip_arch_matches(predicate) -> bool:
    target = get_current_target()
    return target is not None and target.backend == "hip" and predicate(str(target.arch))


def is_hip_cdna2():
    return _hip_arch_matches(lambda a: a == "gfx90a")


def is_hip_cdna3():
    return _hip_arch_matches(lambda a: a == "gfx942")


def is_hip_cdna4():
    return _hip_arch_matches(lambda a: a == "gfx950")


def is_hip_rdna3():
    return _hip_arch_matches(lambda a: "gfx11" in a)


def is_hip_rdna4():
    return _hip_arch_matches(lambda a: "gfx12" in a)


def is_hip_gfx1250():
    return _hip_arch_matches(lambda a: "gfx1250" in a)


def is_hip_rdna4m():
    return _hip_arch_matches(lambda a: "gfx117" in a)


def is_hip_cdna3_or_newer():
    return is_hip_cdna3() or is_hip_cdna4()


def is_blackwell_ultra():
    return False


def is_rubin():
    return False


def supports_clc():
    return False


def skip_if_unsupported_cluster_size(num_ctas):
    import pytest
    if num_ctas > 1:
        pytest.skip("tilejit launches one CTA per program (num_ctas > 1 is not supported)")


def is_hip_cdna():
    return is_hip_cdna2() or is_hip_cdna3() or is_hip_cdna4()


def is_hip_rdna():
    return is_hip_rdna3() or is_hip_rdna4()


def get_hip_lds_size():
    return 163840 if is_hip_cdna4() else 65536


def get_arch():
    target = get_current_target()
    return "" if target is None else str(target.arch)


def numpy_random(shape, dtype_str, rs: RandomState | None = None, low=None, high=None):
    """Seeded random test data of `dtype_str` (integers never 0, so divisions are defined)."""
    shape = (shape,) if isinstance(shape, int) else shape
    rs = RandomState(seed=17) if rs is None else rs
    if dtype_str in integral_dtypes:
        info = np.iinfo(getattr(np, dtype_str))
        low = info.min if low is None else max(low, info.min)
        high = info.max if high is None else min(high, info.max)
        values = rs.randint(low, high, shape, dtype=getattr(np, dtype_str))
        values[values == 0] = 1
        return values
    if dtype_str and "float8" in dtype_str:
        return rs.randint(20, 40, shape, dtype=np.int8)
    if dtype_str in float_dtypes:
        return rs.normal(0, 1, shape).astype(dtype_str)
    if dtype_str == "bfloat16":  # float32 values that bfloat16 holds exactly
        return (rs.normal(0, 1, shape).astype("float32").view("uint32") & np.uint32(0xFFFF0000)).view("float32")
    if dtype_str in ("bool", "int1", "bool_"):
        return rs.normal(0, 1, shape) > 0.0
    raise RuntimeError(f"Unknown dtype {dtype_str}")


def to_triton(x: np.ndarray, device, dst_type=None):
    """A torch tensor on `device` holding `x` (unsigned and fp8 data as a reinterpreted wrapper)."""
    import torch

    name = x.dtype.name
    if name in uint_dtypes:
        signed = x.astype(getattr(np, name[1:]))
        return reinterpret(torch.tensor(signed, device=device), getattr(tl, name))
    if dst_type and "float8" in dst_type:
        return reinterpret(torch.tensor(x, device=device), getattr(tl, dst_type))
    if name == "float32" and dst_type == "bfloat16":
        return torch.tensor(x, device=device).bfloat16()
    return torch.tensor(x, device=device)


def str_to_triton_dtype(x: str):
    return tl.str_to_ty(type_canonicalisation_dict[x], None)


def torch_dtype_name(dtype) -> str:
    if isinstance(dtype, tl.dtype):
        return dtype.name
    match = re.match(r"^torch\.(\w+)$", str(dtype))
    if match is None:
        raise TypeError(f"not a triton or torch dtype: {type(dtype)}")
    return match.group(1)


def to_numpy(x):
    import torch

    if isinstance(x, TensorWrapper):
        return x.base.cpu().numpy().astype(getattr(np, torch_dtype_name(x.dtype)))
    if isinstance(x, torch.Tensor):
        return x.cpu().float().numpy() if x.dtype is torch.bfloat16 else x.cpu().numpy()
    raise ValueError(f"Not a triton-compatible tensor: {x}")


def supports_tma(byval_only=False):
    """tilejit lowers tensor descriptors on every backend (plain loads/stores where there is no TMA)."""
    return is_interpreter() or is_hopper_or_newer()


def supports_ws():
    return is_interpreter() or is_hopper_or_newer()


def tma_skip_msg(byval_only=False):
    return "Requires tensor-descriptor support (the interpreter, or NVIDIA Hopper or newer)"


def _requires_tma():
    import pytest
    return pytest.mark.skipif(not supports_tma(), reason=tma_skip_msg())


def default_alloc_fn(size: int, align: int, _):
    import torch
    return torch.empty(size, dtype=torch.int8, device=_active().get_active_torch_device())


def unwrap_tensor(t):
    return t.base if isinstance(t, TensorWrapper) else t


@dataclass
class ProcessResult:
    exc: object
    driver_stderr_output: str


@contextmanager
def use_process_pool(preload_module):
    """Triton runs GPU tests in worker processes; tilejit runs them in this process."""
    yield None


def run_in_process(client_fn, args=(), kwargs=None, env=None):
    """Run `client_fn` here and report its exception the way Triton's worker does."""
    try:
        client_fn(*args, **(kwargs or {}))
    except Exception as exc:  # noqa: BLE001 - the caller inspects it
        return ProcessResult(exc, "")
    return ProcessResult(None, "")


def _fresh_knobs_impl(skipped_attr=None):
    """Triton's fixture helper: `fresh()` gives `triton.knobs` with every namespace (but those in
    `skipped_attr`) at its defaults, `reset()` puts back what was set before."""
    from . import knobs

    names = [n for n in ("cache", "compilation", "runtime", "language", "autotuning", "build", "nvidia", "amd")
             if n not in (skipped_attr or set())]
    stack = contextlib.ExitStack()

    def fresh_function():
        for name in names:
            stack.enter_context(getattr(knobs, name).scope())
            getattr(knobs, name).reset()
        return knobs

    def reset_function():
        stack.close()

    return fresh_function, reset_function


def __getattr__(name):
    if name == "requires_tma":
        return _requires_tma()
    raise AttributeError(f"module 'triton._internal_testing' has no attribute '{name}'")
