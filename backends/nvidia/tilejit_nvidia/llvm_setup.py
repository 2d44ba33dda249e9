"""The few llvmlite calls every NVPTX step shares: target initialisation, parsing, target machines."""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager

import llvmlite.binding as llvm

from tilejit.errors import CompilationError

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"


_init_lock = threading.Lock()


def _initialize_llvm() -> None:
    """Once per process; a lock, as compilations in threads (the autotuner's) may arrive together."""
    if not _initialized:
        with _init_lock:
            if not _initialized:
                _set_up_llvm()
                _initialized.append(True)


_initialized: list = []


def _set_up_llvm() -> None:
    # NVPTX is not the host target, so the "native" initialisers do not register it.
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # 32-bit shared-memory pointers (as Triton): without this NVPTX keeps every shared address in a
    # 64-bit register pair, which doubles the registers of the pipelined loops' copy and ldmatrix
    # addresses (matmul's main loop held 16 of them) and adds 64-bit arithmetic. Read when a target
    # machine is created, so it is set before the first one.
    llvm.set_option("tilejit", "--nvptx-short-ptr")


def parse_llvm_ir(text: str, what: str = "kernel"):
    """Parse and verify LLVM IR text; a malformed module is a CompilationError, not a RuntimeError."""
    _initialize_llvm()
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as exc:
        raise CompilationError(f"invalid LLVM IR for {what}: {exc}") from None
    return module


@functools.lru_cache(maxsize=None)
def nvptx_target_machine(cpu: str, features: str):
    """One NVPTX target machine per (cpu, features), reused: creating one costs more than emitting.

    Code generation runs at LLVM's default level (2); the module was optimised at O3 before. At the
    aggressive level (3) NVPTX's IR passes run GVN twice (after straight-line strength reduction and
    after LSR) where level 2 runs EarlyCSE: on the bench attention kernel that is 100-120 ms of a
    470 ms stage, for byte-identical PTX (the bench matmul's too; 637 of 664 test-suite kernels are
    identical, the others differ by a few address instructions, mostly fewer)."""
    _initialize_llvm()
    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    return target.create_target_machine(cpu=cpu, features=features, opt=2)


# Options that hold while NVPTX emits code, set back after each emission (the AMD back end shares
# the process, and LLVM's options are global; one emission at a time, under a lock: llvmlite runs one
# LLVM call at a time per process anyway):
#
# - LLVM 22's straight-line strength reduction (SLSR, run by NVPTX code generation) asks, for every
#   candidate pair of address computations with the same stride, whether an existing instruction can
#   be reused as their difference (`ScalarEvolution::canReuseInstruction`, which scans the following
#   instructions for one that would make poison undefined behaviour). On tilejit's unrolled address
#   arithmetic that check was 80% of SLSR and SLSR about 60% of code generation (matmul: 158 of 271
#   ms, attention: 235 of 389 ms; 30 and 28 ms without it). The check guards against reusing an
#   instruction whose poison-generating flags (nsw, nuw, disjoint, exact) the source asserted without
#   their holding; tilejit's lowering emits no such flag, and those LLVM's optimisations infer hold
#   wherever the instruction runs, which a reused instruction does (it dominates its new user). The
#   option exists in LLVM 22 (llvmlite 0.50); LLVM exits the process on an unknown option, so other
#   versions keep the default.
# - Loop strength reduction (LSR) is off for kernels that read global memory only through
#   software-pipelined copies (cp.async; `toolchain._wants_loop_strength_reduction`). Their loops carry
#   one global pointer per copied chunk, each advanced by a constant; LSR rewrote them as one base
#   plus per-row offsets, so every iteration formed each address again (64-bit IMAD.WIDE in the
#   SASS, issued between the wgmmas, where ncu counted most of the kernel's "dispatch" stalls).
#   Without it, on an H100 beside Triton 3.6 (two runs each, docs/benchmarks.md): matmul 4096^3 0.91
#   -> 1.09-1.11x Triton, 8192^3 0.98 -> 1.07, 2048^3 0.98-1.05 -> 1.12-1.15, the 128x256 tile
#   0.97-0.99 -> 1.02-1.04, fp8 e5m2 1.02 -> 1.04-1.07. Kernels that also load into registers keep
#   it: with many pointers LSR folds them into a base and immediate offsets (a matmul with unaligned
#   A rows spilled 568 bytes without it: 0.40x Triton), and it turns index multiplies into adds (the
#   bench attention, `cols * stride`, 1.24x Triton with LSR, 1.20-1.22x without). In the language
#   suite's chunked elementwise loops it saves 3 of 24 instructions.
_SLSR_GUARD_OPTION = "-enable-poison-reuse-guard"
_codegen_lock = threading.Lock()


def _codegen_options(loop_strength_reduction: bool) -> list[tuple[str, str]]:
    """(while emitting, after) values of the options set around one NVPTX code generation."""
    options = [] if loop_strength_reduction else [("-disable-lsr=true", "-disable-lsr=false")]
    if llvm.llvm_version_info[0] == 22:
        options.append((f"{_SLSR_GUARD_OPTION}=false", f"{_SLSR_GUARD_OPTION}=true"))
    return options


@contextmanager
def nvptx_codegen_options(loop_strength_reduction: bool = True):
    """While NVPTX emits code: SLSR without its poison-reuse check, and loop strength reduction only
    when `loop_strength_reduction` (see above). Not reentrant."""
    options = _codegen_options(loop_strength_reduction)
    with _codegen_lock:
        for during, _ in options:
            llvm.set_option("tilejit", during)
        try:
            yield
        finally:
            for _, after in options:
                llvm.set_option("tilejit", after)
