"""The pure helpers of tools/triton_tests.py (the runner of Triton's own test files) and the import
hook of tools/triton_alias.py. The runner itself needs Triton's files and is not run here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import triton_tests as tt


def test_sample_is_seeded_sorted_and_a_subset():
    ids = [f"t.py::test_{i}[{i % 7}]" for i in range(500)]
    a = tt.sample_ids(ids, 50, seed=3)
    assert a == tt.sample_ids(list(reversed(ids)), 50, seed=3)  # input order does not matter
    assert a != tt.sample_ids(ids, 50, seed=4)
    assert len(a) == 50 and a == sorted(a) and set(a) <= set(ids)
    assert tt.sample_ids(ids, None, 0) == sorted(ids)
    assert tt.sample_ids(ids[:10], 50, 0) == sorted(ids[:10])


def test_node_id_parts():
    nid = "python/test/unit/language/test_core.py::test_bin_op[1-int8-uint16-%]"
    assert tt.file_of(nid) == "test_core.py"
    assert tt.function_of(nid) == "test_core.py::test_bin_op"
    assert tt.function_of("a/test_x.py::TestC::test_m[p::q]") == "test_x.py::TestC::test_m"


def test_error_signature_groups_messages_that_differ_in_numbers_and_shapes():
    a = {"outcome": "failed", "exc": "ValueError", "msg": "shape [16, 32] does not match 128 at 0x7f00ab"}
    b = {"outcome": "failed", "exc": "ValueError", "msg": "shape [4, 8] does not match 64 at 0x1234"}
    c = {"outcome": "failed", "exc": "TypeError", "msg": "shape [4, 8] does not match 64 at 0x1234"}
    assert tt.error_signature(a) == tt.error_signature(b) != tt.error_signature(c)
    assert tt.error_signature({"outcome": "timeout", "msg": "x"}) == "timeout"


def test_summary_counts_passes_against_the_reference():
    tests = {
        "d/test_a.py::t[1]": {"reference": {"outcome": "passed"}, "tilejit": {"outcome": "passed"}},
        "d/test_a.py::t[2]": {"reference": {"outcome": "passed"}, "tilejit": {"outcome": "failed", "exc": "E"}},
        "d/test_a.py::t[3]": {"reference": {"outcome": "skipped"}, "tilejit": {"outcome": "passed"}},
        "d/test_b.py::u": {"reference": {"outcome": "failed"}, "tilejit": {"outcome": "failed"}},
    }
    table = tt.summarize(tests, has_ref=True)
    assert table["test_a.py"]["ids"] == 3 and table["test_a.py"]["ref_pass"] == 2
    assert table["test_a.py"]["both_pass"] == 1 and table["test_a.py"]["tilejit_only"] == 1
    assert table["TOTAL"]["ids"] == 4 and table["TOTAL"]["tilejit_pass"] == 2
    assert list(tt.regressions(tests, has_ref=True)) == ["d/test_a.py::t[2]"]
    assert "test_a.py::t" in tt.format_report(tests, has_ref=True)
    reference_only = {tid: {"reference": t["reference"]} for tid, t in tests.items()}
    assert tt.regressions(reference_only, has_ref=True) == {}
    assert "0 ids" in tt.format_report(reference_only, has_ref=True)


@pytest.mark.parametrize("lenient", [False, True])
def test_alias_hook_makes_import_triton_resolve_to_tilejit(lenient):
    code = (
        "import sys, triton_alias\n"
        f"triton_alias.install_triton_alias(lenient={lenient})\n"
        "import tilejit, tilejit.language\n"
        "import triton, triton.language as tl\n"
        "assert triton.jit is tilejit.jit and tl is tilejit.language, (triton, tl)\n"
        "from triton.language import core\n"
        "import tilejit.language.core as c2\n"
        "assert core is c2\n"
        "try:\n"
        "    import triton.no_such_module_here as m\n"
        "    assert LENIENT, 'a missing module imports only in lenient mode'\n"
        "    try:\n"
        "        m.f()\n"
        "        raise AssertionError('a placeholder must raise when called')\n"
        "    except triton_alias.TritonAPIMissing as e:\n"
        "        assert 'triton.no_such_module_here.f' in str(e)\n"
        "except ImportError:\n"
        "    assert not LENIENT\n"
        "print('ok')\n"
    ).replace("LENIENT", str(lenient))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TOOLS)] + sys.path)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
