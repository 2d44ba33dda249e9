"""The TTIR pipeline: pass order, dumps, verification between passes, plugin hook, error wrapping."""
import sys
import types
from dataclasses import dataclass

import pytest

from passes_testlib import CALLS_FOR_PIPELINE, evaluate

from tilejit import ir
from tilejit.errors import CompilationError
from tilejit.passes import PassManager, default_ttir_passes, run_passes, run_ttir_passes, ttir_pass_manager

EXPECTED_ORDER = ["inline", "canonicalize", "cse", "dce", "unroll", "canonicalize", "cse", "dce"]


def test_default_order():
    assert [p.name for p in default_ttir_passes()] == EXPECTED_ORDER


def test_pipeline_runs_end_to_end_and_preserves_results(monkeypatch):
    monkeypatch.delenv("TILEJIT_DUMP_DIR", raising=False)
    module = ir.parse_module(CALLS_FOR_PIPELINE)
    before = [evaluate(module, args) for args in [(1, 2), (5, -3)]]
    out = run_ttir_passes(module, types.SimpleNamespace(debug=True))
    assert out is module
    assert [evaluate(module, args) for args in [(1, 2), (5, -3)]] == before
    text = ir.print_module(module)
    assert "tt.call" not in text and "scf.for" not in text and "@helper" not in text


def test_dump_dir_gets_one_file_per_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_DUMP_DIR", str(tmp_path))
    module = ir.parse_module(CALLS_FOR_PIPELINE)
    manager = ttir_pass_manager(None)
    manager.run(module)
    files = sorted(p.name for p in (tmp_path / "f").iterdir())
    assert files == ["00-input.ttir"] + [f"{i:02d}-{n}.ttir" for i, n in enumerate(EXPECTED_ORDER, 1)]
    assert [r.name for r in manager.records] == EXPECTED_ORDER
    assert "tt.call" in (tmp_path / "f" / "00-input.ttir").read_text()
    assert "tt.call" not in (tmp_path / "f" / "01-inline.ttir").read_text()
    # Each dump parses back.
    ir.parse_module((tmp_path / "f" / "08-dce.ttir").read_text())


@dataclass(frozen=True)
class BreakIR:
    """A deliberately wrong pass: drops the function's terminator."""
    name: str = "break-ir"

    def apply(self, module):
        module.functions[0].regions[0].blocks[0].ops[-1].erase()


def test_verification_names_the_pass_that_broke_the_ir():
    module = ir.parse_module(CALLS_FOR_PIPELINE)
    with pytest.raises(CompilationError, match="after pass 'break-ir'"):
        run_passes(module, [BreakIR()], dump=False, verify=True)


def test_python_errors_in_a_pass_become_compilation_errors():
    def crash(module):
        raise KeyError("oops")

    with pytest.raises(CompilationError, match="internal compiler error in pass 'crash'"):
        PassManager([crash], verify=False, dump_dir=False).run(ir.parse_module(CALLS_FOR_PIPELINE))


def test_plugins_can_append_passes(monkeypatch):
    seen = []

    class Hook:
        @staticmethod
        def tilejit_ttir_passes(passes, options):
            passes.append(lambda module: seen.append(options))

    plugins = types.ModuleType("tilejit.plugins")
    plugins.get_plugin_manager = lambda: types.SimpleNamespace(hook=Hook())
    monkeypatch.setitem(sys.modules, "tilejit.plugins", plugins)
    import tilejit
    monkeypatch.setattr(tilejit, "plugins", plugins, raising=False)
    options = types.SimpleNamespace(debug=False)
    manager = ttir_pass_manager(options)
    assert manager.pass_names[:-1] == EXPECTED_ORDER and manager.pass_names[-1] == "<lambda>"
    manager.run(ir.parse_module(CALLS_FOR_PIPELINE))
    assert seen == [options]
