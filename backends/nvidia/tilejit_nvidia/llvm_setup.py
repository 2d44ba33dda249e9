"""The few llvmlite calls every NVPTX step shares: target initialisation, parsing, target machines."""
from __future__ import annotations

import functools
import threading

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
    """One NVPTX target machine per (cpu, features), reused: creating one costs more than emitting."""
    _initialize_llvm()
    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    return target.create_target_machine(cpu=cpu, features=features, opt=3)
