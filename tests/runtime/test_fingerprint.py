"""The disk-cache key covers the compiler's own sources, so edited compiler code never reuses old kernels."""
import importlib
import sys

from tilejit import compiler


def test_fingerprint_changes_when_a_source_file_changes(tmp_path, monkeypatch):
    pkg = tmp_path / "fp_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lowering.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setattr(compiler, "_fingerprints", {})
    before = compiler.compiler_fingerprint("fp_pkg")
    assert compiler.compiler_fingerprint("fp_pkg") == before  # memoised and stable
    (pkg / "lowering.py").write_text("X = 12\n")
    monkeypatch.setattr(compiler, "_fingerprints", {})
    assert compiler.compiler_fingerprint("fp_pkg") != before
    sys.modules.pop("fp_pkg", None)
