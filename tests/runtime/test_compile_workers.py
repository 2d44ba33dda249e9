"""Pure stages run in worker processes (`tilejit.runtime.compile_workers`), for the autotuner.

The same outputs as in this process, the parent's knobs seen by the child, errors raised as they
would have been here, and a fallback to this process when a worker cannot serve.
"""
import contextvars
import json
import os
import re
import textwrap

import pytest

import tilejit
import tilejit.language as tl
from tilejit import compiler
from tilejit.compiler import PureStage
from tilejit.errors import CompilationError
from tilejit.runtime import compile_workers


@pytest.fixture
def pool():
    p = compile_workers.WorkerPool(2)
    yield p
    p.close()


def test_stages_run_in_turn_in_a_worker(pool):
    outputs, seconds = pool.run([PureStage(textwrap.dedent), PureStage(textwrap.indent, "> ")], "    a\n    b\n")
    assert outputs == ["a\nb\n", "> a\n> b\n"] and len(seconds) == 2
    assert pool._started == 1 and len(pool._idle) == 1  # kept for the next job


def test_an_error_comes_back_as_itself_with_its_stage(pool):
    with pytest.raises(compile_workers.StageFailed) as failed:
        pool.run([PureStage(textwrap.dedent), PureStage(json.loads)], "{not json")
    assert failed.value.index == 1 and isinstance(failed.value.error, json.JSONDecodeError)


def test_a_worker_that_cannot_start_leaves_the_work_here(monkeypatch):
    p = compile_workers.WorkerPool(1)
    monkeypatch.setattr(compile_workers.sys, "executable", "/nonexistent/python")
    assert p.run([PureStage(textwrap.dedent)], "  x") is None and p.broken


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_gets_a_pool_of_its_own():
    parent = compile_workers.pool(1)
    assert compile_workers.pool(1) is parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its pool must not be the parent's (whose pipes lead to the parent's workers)
        os.write(write, b"1" if compile_workers.pool(1) is not parent else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"


def _ptxas():
    try:
        from tilejit_nvidia.toolchain import find_ptxas_or_none
    except ImportError:
        return None
    return find_ptxas_or_none()


@tilejit.jit
def _double(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.sqrt(tl.load(x_ptr + offs, mask=offs < n)) * 2.0, mask=offs < n)


def _compile_in(pool):
    context = contextvars.copy_context()
    context.run(compiler.offload_pure_stages, pool)
    return context.run(_double.warmup, "*fp32", "i32", BLOCK=256, target="cuda:90")


@pytest.mark.skipif(_ptxas() is None, reason="no ptxas (pip install nvidia-cuda-nvcc)")
def test_a_cross_compilation_in_workers_matches_this_process(pool, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "a"))
    remote = _compile_in(pool)
    assert pool._started == 1 and set(remote.stage_times) >= {"ptx", "cubin"}
    _double.clear_cache()
    compiler.clear_memory_cache()
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "b"))
    local = _double.warmup("*fp32", "i32", BLOCK=256, target="cuda:90")
    strip = lambda ptx: re.sub(r"// callseq \d+(, \d+)?", "", ptx)  # noqa: E731 - a per-process counter
    assert strip(remote.asm["ptx"]) == strip(local.asm["ptx"]) and remote.asm["cubin"][:4] == b"\x7fELF"
    _double.clear_cache()
    compiler.clear_memory_cache()


@pytest.mark.skipif(_ptxas() is None, reason="no ptxas (pip install nvidia-cuda-nvcc)")
def test_the_worker_sees_the_knobs_and_its_errors_are_compilation_errors(pool, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_PTXAS", str(tmp_path / "no-ptxas"))  # set after the worker may have started
    with pytest.raises(CompilationError, match="TILEJIT_PTXAS=.*no-ptxas"):
        _compile_in(pool)
    assert pool._started == 1  # raised by the worker's cubin stage, not before it here
    _double.clear_cache()
    compiler.clear_memory_cache()
