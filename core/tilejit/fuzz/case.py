"""What one fuzz seed is: a kernel's source, its arguments, its grid and the expected outputs."""
from __future__ import annotations

import dataclasses

import numpy as np

KERNEL_NAME = "fuzz_kernel"


@dataclasses.dataclass
class Arg:
    """One kernel parameter. `kind` is "ptr" (an array), "int" (a runtime i32) or "constexpr"."""

    name: str
    kind: str
    value: object
    # For an output array: the expected contents after the launch, and the allowed error per element
    # (0 where the result must be exact; an array of the output's shape otherwise).
    expected: np.ndarray | None = None
    tolerance: np.ndarray | float = 0.0

    @property
    def signature(self) -> str:
        if self.kind == "constexpr":
            return "constexpr"
        if self.kind == "int":
            return "i32"
        return "*" + _SIGNATURE_NAMES[np.dtype(self.value.dtype).name]


_SIGNATURE_NAMES = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                    "uint32": "u32", "uint64": "u64", "float16": "fp16", "float32": "fp32", "float64": "fp64"}


@dataclasses.dataclass
class Case:
    seed: int
    family: str
    body: str            # the kernel: `@triton.jit def fuzz_kernel(...)`, plain Triton
    args: list[Arg]
    grid: tuple
    num_warps: int = 4

    def source(self, module: str = "tilejit") -> str:
        """A complete module: the kernel under `import triton` (module="triton") or tilejit."""
        if module == "triton":
            header = "import triton\nimport triton.language as tl\n"
        else:
            header = "import tilejit as triton\nimport tilejit.language as tl\n"
        return f"# fuzz seed {self.seed} ({self.family})\n{header}\n\n{self.body}"

    @property
    def signature(self) -> dict:
        return {a.name: a.signature for a in self.args}

    @property
    def constexprs(self) -> dict:
        return {a.name: a.value for a in self.args if a.kind == "constexpr"}

    def outputs(self) -> list[Arg]:
        return [a for a in self.args if a.expected is not None]

    def fresh_arrays(self) -> dict:
        """A private copy of every array argument (the launch writes into outputs)."""
        return {a.name: np.array(a.value, copy=True) for a in self.args if a.kind == "ptr"}

    def launch_args(self, arrays: dict) -> tuple[list, dict]:
        """Positional runtime arguments and constexpr keywords, with `arrays` for the pointers."""
        positional = [arrays[a.name] if a.kind == "ptr" else a.value for a in self.args if a.kind != "constexpr"]
        return positional, dict(self.constexprs)


def compare(expected: np.ndarray, got: np.ndarray, tolerance) -> str | None:
    """None when `got` matches, else a short description of the first differing elements."""
    got = np.asarray(got)
    if got.shape != expected.shape:
        return f"shape {got.shape} != expected {expected.shape}"
    if expected.dtype.kind == "f":
        e64, g64 = expected.astype(np.float64), got.astype(np.float64)
        with np.errstate(all="ignore"):
            bad = ~((np.abs(e64 - g64) <= tolerance) | (e64 == g64) | (np.isnan(e64) & np.isnan(g64)))
    else:
        bad = expected != got
    if not bad.any():
        return None
    where = np.argwhere(bad)[:4]
    pairs = ", ".join(f"{tuple(int(i) for i in idx)}: expected {expected[tuple(idx)]!r} got {got[tuple(idx)]!r}"
                      for idx in where)
    return f"{int(bad.sum())} of {bad.size} elements differ ({pairs})"
