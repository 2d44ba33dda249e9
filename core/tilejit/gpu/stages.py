"""Stage functions every GPU backend shares: `ttgir` (its pass list) and `llir` (LLVM IR text)."""
from __future__ import annotations

from .. import ir
from ..runtime.launch_abi import runtime_signature  # the launch ABI owns the parameter order
from .llvm import lower_module
from .ttgir import GPUConfig, make_ttgir


def ttgir_stage(module, metadata: dict, options, target, passes) -> ir.Module:
    """Run the backend's TTGIR `passes` for `target` (a `TargetDescription`)."""
    if isinstance(module, str):
        module = ir.parse_module(module, context=ir.default_context().with_encodings(target.encoding_kinds))
    metadata.setdefault("num_warps", options.num_warps)
    metadata.setdefault("num_stages", options.num_stages)
    return make_ttgir(module, GPUConfig(options.num_warps, target), passes)


def llir_stage(module, metadata: dict, options, isa) -> str:
    if isinstance(module, str):
        module = ir.parse_module(module, context=ir.default_context().with_encodings(isa.encoding_kinds))
    text, info = lower_module(module, isa, options.num_warps, getattr(options, "enable_fp_fusion", True))
    metadata.update(info)
    # The parameter order, as a list: a JSON object (the disk cache writes sorted keys) loses it.
    metadata["arg_order"] = list(runtime_signature(metadata))
    return text

