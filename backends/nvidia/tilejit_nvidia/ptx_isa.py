"""Which PTX ISA version to ask LLVM for.

Two tools must agree on the `.version` line of the PTX we emit: LLVM's NVPTX back end (which knows a
range of PTX versions per `sm_NN`, and aborts the whole process with `LLVM ERROR` when asked for a
version below the minimum of an `sm`) and ptxas / nvJitLink (which accepts every PTX ISA up to the one
its CUDA release introduced). We pick the newest version inside both ranges, so the `.version` line
never needs patching after the fact.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import tempfile

from tilejit.errors import CompilationError

from .llvm_setup import NVPTX_TRIPLE

# CUDA release -> newest PTX ISA it understands, from the release history in NVIDIA's PTX ISA
# documentation ("PTX ISA Version N.M ... introduced in CUDA X.Y"). PTX versions are written as
# integers the way LLVM spells its features: PTX 8.5 is 85 (`+ptx85`).
_PTX_ISA_OF_CUDA = {
    (10, 0): 63, (10, 1): 64, (10, 2): 65,
    (11, 0): 70, (11, 1): 71, (11, 2): 72, (11, 3): 73, (11, 4): 74, (11, 5): 75,
    (11, 6): 76, (11, 7): 77, (11, 8): 78,
    (12, 0): 80, (12, 1): 81, (12, 2): 82, (12, 3): 83, (12, 4): 84, (12, 5): 85,
    (12, 6): 85, (12, 7): 86, (12, 8): 87, (12, 9): 88,
    (13, 0): 90, (13, 1): 91,
}

# Every PTX ISA version that exists, newest first; LLVM names each as a `+ptxNN` feature.
_KNOWN_PTX_VERSIONS = tuple(sorted({*_PTX_ISA_OF_CUDA.values(), *range(90, 100)}, reverse=True))


def ptx_isa_for_cuda(cuda_version: tuple[int, int]) -> int:
    """The newest PTX ISA (as `85` for 8.5) that the ptxas / nvJitLink of this CUDA release accepts.

    A CUDA release newer than the table accepts at least what the newest known release does, so it
    gets that (a safe lower bound: ptxas accepts every older PTX ISA too).
    """
    major, minor = cuda_version
    if (major, minor) in _PTX_ISA_OF_CUDA:
        return _PTX_ISA_OF_CUDA[(major, minor)]
    older = [v for k, v in _PTX_ISA_OF_CUDA.items() if k <= (major, minor)]
    if not older:
        raise CompilationError(f"CUDA {major}.{minor} is too old for tilejit: CUDA 11.0 or newer is needed")
    return max(older)


def cpu_name(arch: int) -> str:
    """LLVM / ptxas name of an NVIDIA architecture: `sm_80`, and `sm_90a` from Hopper on.

    The `a` variants unlock the architecture-specific instructions (wgmma, setmaxnreg, ...) that
    the lowering may use on sm_90 and later; their cubins run only on that exact architecture.
    """
    if not isinstance(arch, int) or isinstance(arch, bool) or arch < 50:
        raise CompilationError(f"invalid CUDA architecture {arch!r}: expected an int such as 80 or 90")
    return f"sm_{arch}{'a' if arch >= 90 else ''}"


@contextlib.contextmanager
def _native_stderr_captured():
    """Capture what native code writes to fd 2 meanwhile; yields a list that receives the text.

    LLVM reports an unknown `+ptxNN` feature or processor only by writing a warning straight to the
    process's stderr; the probes below ask for such features on purpose and read the warnings.
    """
    captured: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield captured
        return
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield captured
            finally:
                os.dup2(saved, 2)
                sink.seek(0)
                captured.append(sink.read().decode(errors="replace"))
    finally:
        os.close(saved)


def _emit_empty_kernel(cpu: str, features: str) -> tuple[int, str]:
    """(PTX ISA of the `.version` line, LLVM's warnings) for an empty kernel with this cpu/features."""
    from llvmlite import ir

    from .llvm_setup import nvptx_target_machine, parse_llvm_ir

    module = ir.Module(name="ptx_probe")
    module.triple = NVPTX_TRIPLE
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="probe")
    fn.calling_convention = "ptx_kernel"
    ir.IRBuilder(fn.append_basic_block("entry")).ret_void()
    parsed = parse_llvm_ir(str(module), "the PTX version probe")
    with _native_stderr_captured() as warnings:
        ptx = nvptx_target_machine(cpu, features).emit_assembly(parsed)
    version = re.search(r"^\.version\s+(\d+)\.(\d+)", ptx, re.M)
    if not version:
        raise CompilationError("LLVM emitted PTX without a .version line; the NVPTX back end is broken")
    return int(version.group(1)) * 10 + int(version.group(2)), "".join(warnings)


def _probe_document_name(cpu: str) -> str:
    """The name of the cache's JSON document that remembers the probe for this LLVM build and cpu."""
    import hashlib

    import llvmlite
    import llvmlite.binding as llvm
    library = os.path.dirname(os.path.abspath(llvmlite.__file__))
    try:
        stamp = os.stat(os.path.join(library, "binding")).st_mtime_ns
    except OSError:
        stamp = 0
    ident = repr((llvmlite.__version__, tuple(llvm.llvm_version_info), library, stamp, cpu))
    return "ptx-range-" + hashlib.sha256(ident.encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def llvm_ptx_range(cpu: str) -> tuple[int, int]:
    """(lowest, highest) PTX ISA that this LLVM emits for `cpu`.

    Probed rather than tabulated so that a newer llvmlite works unchanged: with no `+ptx` feature
    LLVM picks the lowest version the cpu allows, and an unknown `+ptxNN` is ignored (falling back
    to that lowest one), so the first `NN`, newest first, that comes back as `.version` is the
    highest. Asking for less than the lowest would abort the process, so the probe never does.
    The probe (a dozen target machines, ~0.1 s: part of every process's first compile, and of every
    compile worker's) is remembered in the cache's JSON documents per llvmlite build and cpu.
    """
    from tilejit.runtime import cache
    name = _probe_document_name(cpu)
    try:
        known = cache.load_json(name)
    except (OSError, ValueError):
        known = None
    if isinstance(known, list) and len(known) == 2 and all(type(v) is int for v in known) and known[0] <= known[1]:
        return known[0], known[1]
    found = _probe_ptx_range(cpu)
    try:
        cache.store_json(name, list(found))
    except (OSError, ValueError):
        pass  # a read-only cache: probed again next time
    return found


# LLVM warns about an unknown cpu once, when its target machine is made; the machines are cached, so
# the verdict is kept here for the next probe of the same cpu.
_unknown_cpus: set = set()


def _probe_ptx_range(cpu: str) -> tuple[int, int]:
    lowest, warnings = _emit_empty_kernel(cpu, "")
    if "not a recognized processor" in warnings:
        _unknown_cpus.add(cpu)
    if cpu in _unknown_cpus:
        raise CompilationError(f"this LLVM ({_llvm_version()}) does not know the NVIDIA target {cpu}; "
                               "a newer llvmlite is needed")
    for candidate in _KNOWN_PTX_VERSIONS:
        if candidate <= lowest:
            break
        emitted, _ = _emit_empty_kernel(cpu, f"+ptx{candidate}")
        if emitted == candidate:
            return lowest, candidate
    return lowest, lowest


def choose_ptx_version(cpu: str, assembler_cuda: tuple[int, int] | None) -> int:
    """The newest PTX ISA that both LLVM (for `cpu`) and the assembler of CUDA `assembler_cuda` accept.

    With no assembler known (PTX-only cross compilation) LLVM's newest is used.
    """
    lowest, highest = llvm_ptx_range(cpu)
    if assembler_cuda is None:
        return highest
    accepted = ptx_isa_for_cuda(assembler_cuda)
    if accepted < lowest:
        raise CompilationError(
            f"{cpu} needs PTX ISA {lowest // 10}.{lowest % 10} or newer, but the assembler found is from "
            f"CUDA {assembler_cuda[0]}.{assembler_cuda[1]} (PTX ISA up to {accepted // 10}.{accepted % 10}); "
            "install a newer one: pip install -U nvidia-cuda-nvcc, or set TILEJIT_PTXAS")
    return min(highest, accepted)


def _llvm_version() -> str:
    import llvmlite.binding as llvm
    return ".".join(map(str, llvm.llvm_version_info))
