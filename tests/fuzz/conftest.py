import pytest


@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path):
    """Each fuzz test compiles into its own cache, with no target or interpreter forced from outside."""
    for name in ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET", "TILEJIT_ALWAYS_COMPILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    from tilejit import compiler
    compiler.clear_memory_cache()
