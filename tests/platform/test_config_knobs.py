import os

import pytest

from tilejit.config import DEFAULT_CACHE_MAX_BYTES, KnobError, knobs


def test_defaults(monkeypatch):
    monkeypatch.delenv("TILEJIT_CACHE_DIR")
    assert knobs.cache_dir == os.path.join(os.path.expanduser("~"), ".cache", "tilejit")
    assert knobs.cache_max_bytes == DEFAULT_CACHE_MAX_BYTES == 1 << 30
    assert not knobs.always_compile and not knobs.interpret and not knobs.debug
    assert knobs.dump_dir is None and knobs.target is None and knobs.ptxas is None and knobs.lld is None


def test_values_are_read_live(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("TILEJIT_DUMP_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("TILEJIT_TARGET", "cuda:90")
    monkeypatch.setenv("TILEJIT_ALWAYS_COMPILE", "yes")
    monkeypatch.setenv("TILEJIT_PTXAS", "/opt/ptxas")
    assert knobs.cache_dir == str(tmp_path / "c")
    assert knobs.dump_dir == str(tmp_path / "d")
    assert knobs.target == "cuda:90" and knobs.always_compile and knobs.ptxas == "/opt/ptxas"


@pytest.mark.parametrize("raw, expected", [("4096", 4096), ("512M", 512 << 20), ("2g", 2 << 30), ("8KB", 8192)])
def test_cache_size_suffixes(monkeypatch, raw, expected):
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", raw)
    assert knobs.cache_max_bytes == expected


def test_bad_values_name_the_variable(monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", "lots")
    with pytest.raises(KnobError, match="TILEJIT_CACHE_MAX_BYTES"):
        knobs.cache_max_bytes  # noqa: B018
    monkeypatch.setenv("TILEJIT_DEBUG", "maybe")
    with pytest.raises(KnobError, match="TILEJIT_DEBUG"):
        knobs.debug  # noqa: B018


def test_triton_interpret_is_honoured(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert knobs.interpret
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setenv("TILEJIT_INTERPRET", "true")
    assert knobs.interpret


def test_cache_key_part_changes_with_code_changing_knobs(monkeypatch):
    base = knobs.cache_key_part()
    monkeypatch.setenv("TILEJIT_DEBUG", "1")
    debug = knobs.cache_key_part()
    monkeypatch.setenv("TILEJIT_LLD", "/usr/bin/ld.lld-18")
    assert len({base, debug, knobs.cache_key_part()}) == 3
    monkeypatch.setenv("TILEJIT_DUMP_DIR", "/tmp/x")  # dumping does not change the code
    assert knobs.cache_key_part() == knobs.cache_key_part()
    assert "/tmp/x" not in knobs.cache_key_part()
