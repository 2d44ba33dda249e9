"""The disk cache is used only where nobody but the user (and root) can write (issue 11, item 5).

The interpreter executes a cached `py` program and its checksum sits beside it, so a cache that
another user can write is a way to run code in our process. "Another user" is simulated with write
bits for group/others, and, as root, with chown to another uid.
"""
import os
import stat
import warnings

import fakes
import pytest
from tilejit import compiler
from tilejit.cli import main
from tilejit.runtime import cache, cache_trust
from tilejit.runtime.cache import FileCacheManager

META = {"name": "k", "target": "interpreter"}
ARTIFACTS = {"py": "def kernel():\n    pass\n"}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.delenv("TILEJIT_CACHE_STRICT", raising=False)
    monkeypatch.setattr(cache_trust, "_warned", set())


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_cache_is_private(tmp_path):
    root = tmp_path / "a" / "cache"
    FileCacheManager("k1", str(root)).store(META, ARTIFACTS)
    cache.store_json("doc", {"x": 1}, str(root))
    assert mode(root) == 0o700 and mode(root / "kernels") == 0o700 and mode(root / "json") == 0o700
    assert FileCacheManager("k1", str(root)).load() == (META, ARTIFACTS)


@pytest.mark.parametrize("bits", [0o002, 0o020], ids=["others", "group"])
def test_a_cache_others_can_write_is_refused(tmp_path, bits):
    root = tmp_path / "shared"
    FileCacheManager("k1", str(root)).store(META, ARTIFACTS)
    os.chmod(root, 0o700 | bits)
    with pytest.warns(RuntimeWarning, match=r"not using the compilation cache .*writable by"):
        assert FileCacheManager("k1", str(root)).load() is None  # a planted program is never read
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per directory, not at every compilation
        FileCacheManager("k2", str(root)).store(META, ARTIFACTS)
        assert cache.load_json("doc", str(root)) is None
        cache.store_json("doc", {"x": 1}, str(root))
    entries = [n for n in os.listdir(root / "kernels") if n not in (".usage.json", ".usage.lock")]
    assert sorted(os.listdir(root)) == ["kernels"] and entries == ["k1"]


def test_a_writable_kernels_folder_is_refused(tmp_path):
    root = tmp_path / "c"
    FileCacheManager("k1", str(root)).store(META, ARTIFACTS)
    os.chmod(root / "kernels", 0o777)
    with pytest.warns(RuntimeWarning, match="kernels is writable by others"):
        assert FileCacheManager("k1", str(root)).load() is None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_a_cache_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "theirs"
    FileCacheManager("k1", str(root)).store(META, ARTIFACTS)
    os.chown(root, 12345, 12345)  # mode stays 0700: only the owner differs
    with pytest.warns(RuntimeWarning, match="owned by uid 12345"):
        assert FileCacheManager("k1", str(root)).load() is None


def test_ancestors_must_not_be_writable_by_others_unless_sticky(tmp_path):
    parent = tmp_path / "parent"
    root = parent / "cache"
    FileCacheManager("k1", str(root)).store(META, ARTIFACTS)
    os.chmod(parent, 0o777)  # anyone could rename `cache` away and put their own in its place
    with pytest.warns(RuntimeWarning, match="parent is writable by others"):
        assert FileCacheManager("k1", str(root)).load() is None
    os.chmod(parent, 0o1777)  # as /tmp: nobody else may rename what is ours
    assert FileCacheManager("k1", str(root)).load() == (META, ARTIFACTS)


def test_a_link_is_judged_by_its_target(tmp_path):
    target = tmp_path / "target"
    FileCacheManager("k1", str(target)).store(META, ARTIFACTS)
    os.chmod(target, 0o777)
    link = tmp_path / "link"
    os.symlink(target, link)
    with pytest.warns(RuntimeWarning, match="target is writable by others"):
        assert FileCacheManager("k1", str(link)).load() is None


def test_strict_mode_can_be_turned_off(tmp_path, monkeypatch):
    root = tmp_path / "team"
    FileCacheManager("k1", str(root)).store(META, ARTIFACTS)
    os.chmod(root, 0o770)
    monkeypatch.setenv("TILEJIT_CACHE_STRICT", "0")
    assert FileCacheManager("k1", str(root)).load() == (META, ARTIFACTS)


def test_compilation_falls_back_to_memory(fake, tmp_path):
    root = tmp_path / "cache"
    os.makedirs(root)
    os.chmod(root, 0o777)
    with pytest.warns(RuntimeWarning, match="compiled in memory"):
        first = compiler.compile(fakes.FakeSource("add_kernel", {"x_ptr": "*fp32"}), target="fake")
    assert fake.stage_calls == ["fakeasm", "fakebin"] and not os.path.exists(root / "kernels")
    compiler.clear_memory_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = compiler.compile(fakes.FakeSource("add_kernel", {"x_ptr": "*fp32"}), target="fake")
    assert again.asm == first.asm and fake.make_ir_calls == 2  # compiled again: nothing was cached


def test_cache_stats_tells_why_a_cache_is_not_used(tmp_path, capsys):
    root = tmp_path / "open"
    os.makedirs(root)
    os.chmod(root, 0o777)
    assert main(["cache", "stats", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "NOT USED" in out and "writable by others" in out
