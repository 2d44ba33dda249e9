"""A tiny, real tilejit backend living outside the tilejit tree.

Target `toy`. Its one stage, `toy`, turns the TTIR into a plain-text description (the kernel's
functions and how many of each op they hold), and its launcher records every launch in `LAUNCHES`
instead of running anything. It shows the least a third-party backend has to implement.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from tilejit.backends import BaseBackend, BaseOptions, GPUTarget, Launcher

TOY_TARGET = GPUTarget("toy", "default", 1)

# Every launch of a toy kernel, oldest first: (kernel name, grid, number of arguments).
LAUNCHES: list[tuple[str, tuple[int, int, int], int]] = []

# `%0 = tt.load ...`, `tt.store ...`, `%1:2 = "scf.for"(...)`, `tt.func public @add(...)`
_OP = re.compile(r'^\s*(?:%[\w#:]+(?:\s*,\s*%[\w#:]+)*\s*=\s*)?"?([a-z_]+\.[a-z_.]+)"?')
_FUNC = re.compile(r"tt\.func\s+(?:public\s+|private\s+)?@([\w.$]+)")


@dataclass(frozen=True)
class ToyOptions(BaseOptions):
    # When set, the description also lists the TTIR text itself.
    include_ttir: bool = False


def count_ops(ttir: str) -> Counter:
    """How many times each op name occurs in a TTIR text."""
    counts = Counter()
    for line in ttir.splitlines():
        if line.lstrip().startswith(("#", "loc(", "//", "module", "}")):
            continue
        match = _OP.match(line)
        if match:
            counts[match.group(1)] += 1
    return counts


def describe_ttir(ttir: str, kernel_name: str = "", include_ttir: bool = False) -> str:
    """A text summary of a TTIR module: its functions and the count of every op name."""
    functions = _FUNC.findall(ttir)
    counts = count_ops(ttir)
    lines = [f"toy kernel {kernel_name or (functions[0] if functions else '?')}",
             f"functions: {', '.join(functions) or 'none'}",
             f"ops: {sum(counts.values())}"]
    lines += [f"  {name}: {count}" for name, count in sorted(counts.items())]
    if include_ttir:
        lines += ["ttir:", ttir]
    return "\n".join(lines) + "\n"


def _as_text(module) -> str:
    if isinstance(module, str):
        return module
    from tilejit.ir.printer import print_module
    return print_module(module)


class ToyLauncher(Launcher):
    def launch(self, grid, args, stream):
        LAUNCHES.append((self.kernel_name, grid, len(args)))


class ToyBackend(BaseBackend):
    name = "toy"
    api_version = 2
    options_class = ToyOptions

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "toy"

    def hash(self) -> str:
        return f"{super().hash()}:toy-describer-1"

    def add_stages(self, stages: dict, options: ToyOptions) -> None:
        def toy_stage(src, metadata):
            text = _as_text(src)
            metadata["toy_op_count"] = sum(count_ops(text).values())
            return describe_ttir(text, metadata.get("name", ""), options.include_ttir)
        stages["toy"] = toy_stage

    def make_launcher(self, compiled_kernel) -> ToyLauncher:
        return ToyLauncher(compiled_kernel)

    @classmethod
    def is_active(cls) -> bool:
        return False  # no device: the toy target is only ever chosen explicitly

    @classmethod
    def inactive_reason(cls) -> str:
        return "the toy backend has no device; choose it explicitly with target='toy'"

    @classmethod
    def get_current_target(cls) -> GPUTarget:
        return TOY_TARGET

    @classmethod
    def default_target(cls) -> GPUTarget:
        return TOY_TARGET

    @classmethod
    def toolchain_status(cls) -> dict[str, str]:
        return {"describer": "built in (pure Python)"}
