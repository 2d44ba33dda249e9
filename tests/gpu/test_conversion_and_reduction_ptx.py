"""NVIDIA code of the conversions and reductions that Liger-Kernel's losses and norms are made of
(compiled on the host down to PTX, compared with what Triton 3.9 emits for the same kernels):
bf16 results rounded by `cvt.rn.bf16.f32`, reductions across warps finished by shuffles."""
import re

import pytest

import tilejit
import tilejit.language as tl
from toolchain_paths import ptxas


@tilejit.jit
def _scale_to_bf16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * 3.0).to(tl.bfloat16), mask=mask)


@tilejit.jit
def _bf16_product(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x * x, mask=mask)   # bf16 * bf16: computed in f32, rounded to bf16


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _ptx(kernel, *args, target="cuda:90", **kwargs):
    return kernel.warmup(*args, grid=(1,), target=target, **kwargs).asm["ptx"]


@pytest.mark.parametrize("target", ["cuda:90", "cuda:80"])
@pytest.mark.parametrize("kernel", [_scale_to_bf16, _bf16_product])
def test_bf16_results_round_by_cvt(kernel, target):
    """f32 -> bf16 (a cast, or the rounding of bf16 arithmetic) is one `cvt.rn.bf16.f32` per element,
    as in Triton, not the integer rounding (shift, add 0x7FFF + lsb, NaN test, select) of targets
    without the instruction."""
    src = "*fp32" if kernel is _scale_to_bf16 else "*bf16"
    ptx = _ptx(kernel, src, "*bf16", 4096, BLOCK=1024, num_warps=4, target=target)
    per_thread = 1024 // 128
    assert len(re.findall(r"cvt\.rn\.bf16\.f32", ptx)) == per_thread
    assert "setp.nan" not in ptx   # the integer rounding tests for NaN
    if ptxas() is not None:   # and ptxas takes it for this target
        assert kernel.warmup(src, "*bf16", 4096, BLOCK=1024, num_warps=4, grid=(1,), target=target).asm["cubin"]
