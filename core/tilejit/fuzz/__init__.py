"""A differential fuzzer: random valid Triton kernels, checked against a NumPy model of Triton.

`generate(seed)` builds the same kernel on every machine; `run_seed(seed)` runs it on the interpreter
against the model and cross-compiles it for cuda:90 and hip:gfx942. `bench/fuzz.py` runs thousands of
seeds and, on a GPU, compares the CUDA backend and Triton on the same seeds. See docs/fuzzing.md.
"""
from tilejit.fuzz.case import Arg, Case, compare
from tilejit.fuzz.generator import ALL_FAMILIES, FAMILIES, generate
from tilejit.fuzz.runner import (
           DEFAULT_TARGETS,
           Outcome,
           cross_compile,
           load_kernel,
           run_interpreter,
           run_seed,
)

__all__ = [
           "DEFAULT_TARGETS",
           "FAMILIES", "ALL_FAMILIES",
           "Arg",
           "Case",
           "Outcome",
           "compare",
           "cross_compile",
           "generate",
           "load_kernel",
           "run_interpreter",
           "run_seed",
]
