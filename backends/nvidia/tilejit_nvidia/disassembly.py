"""A cubin's SASS, for `CompiledKernel.asm["sass"]` (Triton's tests read it, e.g. test_histogram's
`ATOMS.POPC.INC`): `cuobjdump -sass`, found next to the ptxas in use, on PATH, in the NVIDIA wheels,
under CUDA_HOME, or in an installed Triton's bundle. Only asked for on demand: compiling needs none."""
from __future__ import annotations

import os
import subprocess
import tempfile

from tilejit.errors import CompilationError

from . import toolchain

HINT = "pip install nvidia-cuda-cuobjdump, or put the CUDA toolkit's bin/ on PATH"


def find_cuobjdump() -> str | None:
    """The cuobjdump beside the ptxas in use (the same toolkit), else `toolchain.find_cuda_tool`'s."""
    ptxas = toolchain.find_ptxas_or_none()
    if ptxas:
        beside = os.path.join(os.path.dirname(os.path.realpath(ptxas)), "cuobjdump")
        if toolchain._is_executable(beside):
            return beside
    return toolchain.find_cuda_tool("cuobjdump")


def disassemble_cubin(cubin: bytes) -> str:
    """The SASS listing of `cubin`; a CompilationError when no cuobjdump is found or it fails."""
    tool = find_cuobjdump()
    if tool is None:
        raise CompilationError(f"asm['sass'] needs cuobjdump, which was not found ({HINT})")
    with tempfile.TemporaryDirectory(prefix="tilejit-sass-") as folder:
        path = os.path.join(folder, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        try:
            done = subprocess.run([tool, "-sass", path], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CompilationError(f"could not run cuobjdump ({tool}): {exc}") from None
    if done.returncode != 0:
        raise CompilationError(f"cuobjdump failed (exit code {done.returncode}): {done.stderr.strip()[:2000]}")
    return done.stdout
