"""A store does not scan the whole cache: a running total decides when eviction must look (issue 12).

Scanning every entry cost 5.3 s with 10,000 entries, on every compilation. These tests count the
scans of the entry directory (`cache._entry_dirs`), never time.
"""
import json
import os
import time

import pytest
from tilejit.runtime import cache
from tilejit.runtime.cache import FileCacheManager

META = {"name": "k"}


def _artifacts(i):
    return {"bin": bytes([i % 256]) * 1000}


@pytest.fixture
def scans(monkeypatch):
    calls = []
    real = cache._entry_dirs

    def counting(cache_dir):
        calls.append(cache_dir)
        return real(cache_dir)

    monkeypatch.setattr(cache, "_entry_dirs", counting)
    return calls


def _real_total(root):
    """Bytes of every entry, counted here (not through the scan the tests count)."""
    kernels = os.path.join(root, "kernels")
    return sum(os.path.getsize(os.path.join(kernels, d, f)) for d in os.listdir(kernels)
               if not d.startswith(".") for f in os.listdir(os.path.join(kernels, d)))


def _usage(root):
    return os.path.join(root, "kernels", ".usage.json")


def _total(root):
    with open(_usage(root)) as f:
        return json.load(f)["bytes"]


def test_stores_under_the_bound_scan_once(tmp_path, scans, monkeypatch):
    root = str(tmp_path / "c")
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", "1G")
    for i in range(40):
        FileCacheManager(f"k{i}", root).store(META, _artifacts(i))
    assert len(scans) == 1  # the first store: there was no running total yet
    assert _total(root) == _real_total(root)  # the running total is exact


def test_the_bound_is_still_kept(tmp_path, scans, monkeypatch):
    root = str(tmp_path / "c")
    FileCacheManager("first", root).store(META, _artifacts(0))
    os.utime(FileCacheManager("first", root).path, (999, 999))
    size = _real_total(root)
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", str(5 * size + size // 2))
    for i in range(1, 30):
        FileCacheManager(f"k{i}", root).store(META, _artifacts(i))
        os.utime(FileCacheManager(f"k{i}", root).path, (1000 + i, 1000 + i))
    # a scan only when the total passes the bound: the first store's, then one for each of the 25
    # stores that evict (k5 ... k29), none for k1 ... k4
    assert len(scans) == 1 + 25
    assert sorted(os.listdir(os.path.join(root, "kernels"))) == [".usage.json", ".usage.lock"] + sorted(
        f"k{i}" for i in range(25, 30))  # the five newest
    assert _total(root) == _real_total(root) <= 5 * size + size // 2


def test_a_missing_damaged_or_stale_total_is_recounted(tmp_path, scans):
    root = str(tmp_path / "c")
    for i in range(3):
        FileCacheManager(f"k{i}", root).store(META, _artifacts(i))
    assert len(scans) == 1
    real_total = _total(root)
    with open(_usage(root), "w") as f:
        f.write("{not json")
    FileCacheManager("k3", root).store(META, _artifacts(3))
    assert len(scans) == 2 and _total(root) == _real_total(root) > real_total
    os.unlink(_usage(root))
    FileCacheManager("k4", root).store(META, _artifacts(4))
    assert len(scans) == 3
    with open(_usage(root), "w") as f:
        json.dump({"bytes": 1, "scanned_at": time.time() - 2 * cache._RESCAN_SECONDS}, f)
    FileCacheManager("k5", root).store(META, _artifacts(5))
    assert len(scans) == 4 and _total(root) == _real_total(root)


def test_clear_forgets_the_total(tmp_path):
    root = str(tmp_path / "c")
    FileCacheManager("k", root).store(META, _artifacts(1))
    assert os.path.exists(_usage(root))
    assert cache.clear_cache(root) == 1
    assert not os.path.exists(_usage(root))


def test_the_total_is_rewritten_in_place(tmp_path, monkeypatch):
    # Replacing the file (a rename over it, or truncating it to nothing) makes ext4 write it out at
    # once, 1.3 ms a store; the total is rewritten where it is, under the lock.
    root = str(tmp_path / "c")
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", "1G")
    FileCacheManager("k0", root).store(META, _artifacts(0))
    inode = os.stat(_usage(root)).st_ino
    replaced = []
    monkeypatch.setattr(cache.os, "replace", lambda *a: replaced.append(a))
    for i in range(1, 4):
        FileCacheManager(f"k{i}", root).store(META, _artifacts(i))
    assert replaced == [] and os.stat(_usage(root)).st_ino == inode
    assert _total(root) == _real_total(root)


def test_a_longer_total_left_behind_is_cut_to_length(tmp_path, monkeypatch):
    root = str(tmp_path / "c")
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", "1G")
    FileCacheManager("k0", root).store(META, _artifacts(0))
    with open(_usage(root)) as f:
        usage = json.load(f)
    with open(_usage(root), "w") as f:  # the same total, written longer than the next one will be
        f.write(json.dumps(usage) + " " * 200)
    FileCacheManager("k1", root).store(META, _artifacts(1))
    with open(_usage(root)) as f:
        text = f.read()
    assert text == text.strip() and json.loads(text)["bytes"] == _real_total(root)


def test_a_link_in_place_of_the_total_is_not_followed(tmp_path, monkeypatch):
    root = str(tmp_path / "c")
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", "1G")
    FileCacheManager("k0", root).store(META, _artifacts(0))
    outside = tmp_path / "outside.json"
    outside.write_text(open(_usage(root)).read())
    os.unlink(_usage(root))
    os.symlink(outside, _usage(root))
    FileCacheManager("k1", root).store(META, _artifacts(1))
    assert not os.path.islink(_usage(root)) and _total(root) == _real_total(root)
    assert json.loads(outside.read_text())["bytes"] < _real_total(root)  # left as it was
