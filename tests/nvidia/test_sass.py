"""`CompiledKernel.asm["sass"]`: the cubin disassembled on first use (Triton's tests read it)."""
import os
import stat
import sys

import pytest

import tilejit
import tilejit.language as tl
from tilejit import compiler
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit_nvidia import disassembly
from toolchain_paths import needs_ptxas


@tilejit.jit
def _histogram(x_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    z = tl.histogram(tl.load(x_ptr + tl.arange(0, M)), N)
    tl.store(z_ptr + tl.arange(0, N), z)


@pytest.fixture(autouse=True)
def _fresh_kernels():
    # a kernel keeps the SASS it derived: each test starts from a kernel object of its own
    compiler.clear_memory_cache()
    yield
    compiler.clear_memory_cache()


def _compile():
    src = ASTSource(_histogram, {"x_ptr": "*i32", "z_ptr": "*i32", "M": "constexpr", "N": "constexpr"},
                    {"M": 2048, "N": 2})
    return tilejit.compile(src, target=GPUTarget.parse("cuda:90"))


@needs_ptxas
def test_sass_comes_from_cuobjdump_once_and_other_names_stay_key_errors(tmp_path, monkeypatch):
    log = tmp_path / "calls.txt"
    fake = tmp_path / "cuobjdump"
    fake.write_text(f"#!{sys.executable}\nimport sys\nopen({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                    "data = open(sys.argv[-1], 'rb').read()\nprint('SASS of', len(data), 'bytes', data[:4])\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(disassembly, "find_cuobjdump", lambda: str(fake))
    kernel = _compile()
    assert "sass" not in kernel.asm                      # derived on demand, not a stage
    text = kernel.asm["sass"]
    assert text == f"SASS of {len(kernel.asm['cubin'])} bytes {kernel.asm['cubin'][:4]}\n"
    assert kernel.asm["sass"] is text and len(log.read_text().splitlines()) == 1   # kept once made
    with pytest.raises(KeyError):
        kernel.asm["sgpr_count"]


def _fake_tool(folder, name):
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(tool)


def test_cuobjdump_is_looked_for_beside_ptxas_then_where_ptxas_is(tmp_path, monkeypatch):
    from tilejit_nvidia import toolchain
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(toolchain, "_cuda_home_dirs", lambda: [])
    monkeypatch.setattr(toolchain, "_triton_bundle_dir", lambda: None)
    monkeypatch.setattr(toolchain, "_nvidia_wheel_dirs", lambda: [str(tmp_path / "wheel")])
    monkeypatch.setattr(toolchain, "find_ptxas_or_none", lambda: None)
    assert disassembly.find_cuobjdump() is None
    in_wheel = _fake_tool(tmp_path / "wheel" / "bin", "cuobjdump")
    assert disassembly.find_cuobjdump() == in_wheel == toolchain.find_cuda_tool("cuobjdump")
    ptxas = _fake_tool(tmp_path / "toolkit" / "bin", "ptxas")
    monkeypatch.setattr(toolchain, "find_ptxas_or_none", lambda: ptxas)
    assert disassembly.find_cuobjdump() == in_wheel        # none beside this ptxas
    beside = _fake_tool(tmp_path / "toolkit" / "bin", "cuobjdump")
    assert disassembly.find_cuobjdump() == beside          # the same toolkit's first


@needs_ptxas
def test_sass_without_cuobjdump_says_what_to_install(monkeypatch):
    monkeypatch.setattr(disassembly, "find_cuobjdump", lambda: None)
    with pytest.raises(tilejit.CompilationError, match="cuobjdump"):
        _compile().asm["sass"]


@needs_ptxas
@pytest.mark.skipif(disassembly.find_cuobjdump() is None, reason="no cuobjdump (CUDA toolkit or nvidia-cuda-cuobjdump)")
def test_histogram_counts_with_shared_atomics_in_sass():
    """What Triton's test_histogram asserts on sm_90: counting by warp-aggregated shared atomics."""
    sass = _compile().asm["sass"]
    assert "ATOMS.POPC.INC" in sass and os.linesep in sass
