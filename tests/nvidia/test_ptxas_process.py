"""ptxas started one assembly ahead (tilejit_nvidia.ptxas_process): same cubins, errors, fork, exit."""
from __future__ import annotations

import io
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from nv_kernels import build_vector_add
from tilejit.errors import CompilationError
from tilejit_nvidia import ptxas_process, toolchain
from tilejit_nvidia.toolchain import assemble_ptx, find_ptxas_or_none, llir_to_ptx

ELFFile = pytest.importorskip("elftools.elf.elffile", reason="pip install pyelftools").ELFFile

pytestmark = [
    pytest.mark.skipif(find_ptxas_or_none() is None, reason="ptxas not found: pip install nvidia-cuda-nvcc"),
    pytest.mark.skipif(not ptxas_process.AVAILABLE, reason="no /dev/stdin: every assembly starts its own ptxas"),
]


def _arguments(arch=90):
    return [find_ptxas_or_none(), "-lineinfo", "-v", f"-arch=sm_{arch}a" if arch == 90 else f"-arch=sm_{arch}"]


def _waiting_for(arguments):
    return [w for key, w in ptxas_process._waiting.items() if list(key[1:]) == arguments]


def _sections(cubin: bytes) -> dict[str, bytes]:
    return {section.name: section.data() for section in ELFFile(io.BytesIO(cubin)).iter_sections()}


def test_code_is_the_code_a_file_gives():
    ptx = llir_to_ptx(build_vector_add(), 90)
    arguments = _arguments()
    file_code, file_log, from_file = toolchain._run_ptxas_on_a_file(arguments, ptx)
    assert file_code == 0
    for _ in range(3):   # the first starts its own process, the next ones take the waiting one
        code, log, cubin = ptxas_process.run(arguments, ptx)
        assert code == 0
        assert toolchain.parse_resource_usage(log) == toolchain.parse_resource_usage(file_log)
        ours, theirs = _sections(cubin), _sections(from_file)
        # The same machine code, constants and SASS-to-PTX line table; only the copy of the PTX text
        # that -lineinfo embeds when the PTX has no .loc of its own is missing (a pipe is read once).
        for name in (".text.vector_add", ".nv.constant0.vector_add", ".nv_debug_line_sass"):
            assert ours[name] == theirs[name], name
        assert set(theirs) - set(ours) <= {".nv_debug_ptx_txt"}
    assert len(_waiting_for(arguments)) == 1


def test_the_waiting_process_is_the_one_used():
    ptx = llir_to_ptx(build_vector_add(), 80)
    arguments = _arguments(80)
    ptxas_process.run(arguments, ptx)
    (waiting,) = _waiting_for(arguments)
    ptxas_process.run(arguments, ptx)
    assert waiting.process.returncode == 0            # it assembled and exited
    assert not os.path.exists(waiting.folder)          # its output folder is gone
    assert _waiting_for(arguments)[0] is not waiting   # a new one waits


def test_a_dead_waiting_process_is_replaced():
    ptx = llir_to_ptx(build_vector_add(), 90)
    arguments = _arguments()
    ptxas_process.run(arguments, ptx)
    (waiting,) = _waiting_for(arguments)
    waiting.process.kill()
    waiting.process.wait()
    code, _, cubin = ptxas_process.run(arguments, ptx)
    assert code == 0 and cubin.startswith(b"\x7fELF")


def test_an_error_names_the_input_kernel_ptx():
    ptx = llir_to_ptx(build_vector_add(), 90).replace("ret;", "bogus.instruction %r1;")
    with pytest.raises(CompilationError, match=r"ptxas failed for sm_90a[\s\S]*kernel\.ptx[\s\S]*bogus") as info:
        assemble_ptx(ptx, 90)
    assert ptxas_process.STDIN not in str(info.value)


def _assemble_in_child(queue, ptx):
    queue.put((len(ptxas_process._waiting), toolchain.ptx_to_cubin(ptx, 90)[:4]))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_a_forked_child_leaves_the_parents_process_alone():
    ptx = llir_to_ptx(build_vector_add(), 90)
    ptxas_process.run(_arguments(), ptx)
    (waiting,) = _waiting_for(_arguments())
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_assemble_in_child, args=(queue, ptx))
    child.start()
    inherited, magic = queue.get(timeout=60)
    child.join(60)
    assert (inherited, magic, child.exitcode) == (0, b"\x7fELF", 0)
    assert waiting.process.poll() is None             # still waiting for the parent
    assert _waiting_for(_arguments())[0] is waiting
    code, _, cubin = ptxas_process.run(_arguments(), ptx)
    assert code == 0 and cubin.startswith(b"\x7fELF")


def test_exit_ends_the_waiting_process_and_removes_its_folder(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from nv_kernels import build_vector_add
        from tilejit_nvidia import ptxas_process, toolchain
        toolchain.ptx_to_cubin(toolchain.llir_to_ptx(build_vector_add(), 90), 90)
        print(next(iter(ptxas_process._waiting.values())).process.pid)
    """)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    assert not [p for p in os.listdir(tmp_path) if p.startswith("tilejit-ptxas-")]
    with pytest.raises(ProcessLookupError):   # reaped: no such process left
        os.kill(pid, 0)
