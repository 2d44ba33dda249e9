"""Python's cyclic GC is paused while a kernel compiles and resumed after (core/tilejit/runtime/gc_pause.py)."""
import gc
import threading

import pytest

import tilejit
import tilejit.language as tl
from tilejit import compiler
from tilejit.runtime.gc_pause import cyclic_gc_paused


@tilejit.jit
def _scale(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


@pytest.fixture
def gc_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_a_compile_runs_with_the_collector_paused(gc_enabled, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    seen = []
    real = compiler._compile_uncached
    monkeypatch.setattr(compiler, "_compile_uncached", lambda *a: (seen.append(gc.isenabled()), real(*a))[1])
    kernel = _scale.warmup("*fp32", N=64, grid=(1,), target="cuda:90")
    assert kernel.asm["ptx"] and seen == [False]
    assert gc.isenabled()


def test_a_failed_compile_resumes_the_collector(gc_enabled, monkeypatch):
    monkeypatch.setattr(compiler, "_compile_uncached", lambda *a: 1 / 0)
    src = tilejit.ASTSource(_scale, {"x_ptr": "*fp32", "N": "constexpr"}, constexprs={"N": 32})
    with pytest.raises(ZeroDivisionError):
        compiler.compile(src, target="cuda:90")
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled(gc_enabled):
    gc.disable()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_compiles_resume_when_the_last_ends(gc_enabled):
    first_in, second_out, done = threading.Event(), threading.Event(), []

    def second():
        first_in.wait()
        with cyclic_gc_paused():
            pass
        done.append(gc.isenabled())   # the first compile still runs: still paused
        second_out.set()

    thread = threading.Thread(target=second)
    thread.start()
    with cyclic_gc_paused():
        first_in.set()
        second_out.wait()
    thread.join()
    assert done == [False] and gc.isenabled()
