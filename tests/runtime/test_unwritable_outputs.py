"""Unwritable output places are the user's to fix: a warning or a CLI message, never a failed
compilation or a traceback (issue 11, item 7: TILEJIT_DUMP_DIR and `tilejit compile -o`)."""
import os
import warnings

import numpy as np
import pytest
import tilejit
import tilejit.language as tl
from tilejit import compiler, config
from tilejit.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@tilejit.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    for name in ("TILEJIT_TARGET", "TILEJIT_ALWAYS_COMPILE", "TILEJIT_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "_dump_failures", set(), raising=False)
    compiler.clear_memory_cache()
    yield tmp_path
    compiler.clear_memory_cache()


def test_unwritable_dump_dir_warns_once_and_compiles(isolated, monkeypatch):
    blocker = isolated / "a_file"
    blocker.write_text("not a directory")  # no directory can be made below it, even by root
    monkeypatch.setenv("TILEJIT_DUMP_DIR", str(blocker / "dumps"))
    x = np.arange(10, dtype=np.float32)
    messages = []
    for n, block in ((10, 16), (7, 8)):  # two compilations, one warning
        y = np.zeros_like(x)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _double[(1,)](x, y, n, BLOCK=block)
        np.testing.assert_array_equal(y[:n], 2 * x[:n])
        messages += [str(w.message) for w in caught if "TILEJIT_DUMP_DIR" in str(w.message)]
    assert len(messages) == 1 and "compiling without dumps" in messages[0], messages

def test_compile_into_an_unwritable_place_is_a_clean_error(isolated, capsys):
    blocker = isolated / "a_file"
    blocker.write_text("x")
    kernel = os.path.join(ROOT, "examples", "vector_add.py") + ":add_kernel"
    code = main(["compile", kernel, "-s", "*fp32,*fp32,*fp32,i32,64", "-t", "interpreter",
                 "-o", str(blocker / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"tilejit: error: cannot write the output to {blocker / 'out'}: Not a directory")
