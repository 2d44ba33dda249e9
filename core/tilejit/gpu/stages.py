"""Stage functions both GPU backends share: `ttgir` (layouts) and `llir` (LLVM IR text)."""
from __future__ import annotations

from .. import ir
from ..runtime.launch_abi import runtime_signature  # the launch ABI owns the parameter order
from .llvm import lower_module
from .ttgir import GPUConfig, make_ttgir


def ttgir_stage(module, metadata: dict, options, warp_size: int, mma_version: int, amd_arch: str = "") -> ir.Module:
    """The TTGIR passes; `amd_arch` (a gfx name) lets `tt.dot` use that arch's MFMA/WMMA."""
    if isinstance(module, str):
        module = ir.parse_module(module)
    cfg = GPUConfig(options.num_warps, warp_size, options.num_stages, mma_version, amd_arch=amd_arch)
    metadata.setdefault("num_warps", options.num_warps)
    metadata.setdefault("num_stages", options.num_stages)
    return make_ttgir(module, cfg)


def llir_stage(module, metadata: dict, options, isa) -> str:
    if isinstance(module, str):
        module = ir.parse_module(module)
    text, info = lower_module(module, isa, options.num_warps, getattr(options, "enable_fp_fusion", True))
    metadata.update(info)
    # The parameter order, as a list: a JSON object (the disk cache writes sorted keys) loses it.
    metadata["arg_order"] = list(runtime_signature(metadata))
    return text

