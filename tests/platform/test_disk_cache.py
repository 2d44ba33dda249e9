import json
import multiprocessing
import os

import pytest

from tilejit import plugins
from tilejit.hookspecs import hookimpl
from tilejit.runtime import cache
from tilejit.runtime.cache import CacheError, FileCacheManager

META = {"name": "add_kernel", "target": "cuda:90", "num_warps": 4, "shared": 0}


def artifacts_for(i=0):
    return {"ttir": f"module {{ // kernel {i}\n}}\n", "ptx": f"// ptx {i} ü\n", "cubin": bytes([i % 256]) * 64 + b"\x00\xff"}


def entry_path(key):
    return FileCacheManager(key).path


def test_round_trip_keeps_text_and_bytes():
    FileCacheManager("k1").store(META, artifacts_for(1))
    metadata, artifacts = FileCacheManager("k1").load()
    assert metadata == META and artifacts == artifacts_for(1)
    assert isinstance(artifacts["ptx"], str) and isinstance(artifacts["cubin"], bytes)
    manifest = json.load(open(os.path.join(entry_path("k1"), "manifest.json")))
    assert manifest["artifacts"]["cubin"]["kind"] == "bytes" and manifest["artifacts"]["ptx"]["kind"] == "text"
    with open(os.path.join(entry_path("k1"), "ptx"), encoding="utf-8") as f:
        assert f.read() == artifacts_for(1)["ptx"]  # raw files, readable with any tool


def test_metadata_keeps_the_order_of_its_keys():
    # The signature's order is the kernel's parameter order: a launcher built from a cached entry
    # packs arguments in that order, so the cache must not reorder it (sorted keys broke launches).
    signature = {"x_ptr": "*fp32", "n": "i32", "a_ptr": "*fp16", "BLOCK": "constexpr"}
    FileCacheManager("order").store({"name": "k", "signature": signature}, artifacts_for(2))
    metadata, _ = FileCacheManager("order").load()
    assert list(metadata["signature"]) == ["x_ptr", "n", "a_ptr", "BLOCK"]


def test_miss_and_no_leftovers():
    assert FileCacheManager("absent").load() is None
    FileCacheManager("k2").store(META, artifacts_for(2))
    kernels = os.path.dirname(entry_path("k2"))
    # the staging directory was renamed, nothing left behind (but the running total and its lock)
    assert sorted(os.listdir(kernels)) == [".usage.json", ".usage.lock", "k2"]


def test_second_store_of_the_same_entry_keeps_it():
    FileCacheManager("k").store(META, artifacts_for(1))
    inode = os.stat(entry_path("k")).st_ino
    FileCacheManager("k").store(dict(META), artifacts_for(1))  # a racing process publishing the same entry
    assert os.stat(entry_path("k")).st_ino == inode and FileCacheManager("k").load()[1] == artifacts_for(1)


def test_store_replaces_a_different_entry():
    FileCacheManager("k").store(META, artifacts_for(1))
    with pytest.warns(RuntimeWarning, match="replaced the cache entry 'k' \\(its artifacts differed\\)"):
        FileCacheManager("k").store(META, artifacts_for(2))
    assert FileCacheManager("k").load()[1] == artifacts_for(2)


def test_flipped_byte_is_detected_and_entry_removed():
    FileCacheManager("bad").store(META, artifacts_for(3))
    path = os.path.join(entry_path("bad"), "cubin")
    data = bytearray(open(path, "rb").read())
    data[5] ^= 0x01
    open(path, "wb").write(bytes(data))
    with pytest.warns(RuntimeWarning, match="damaged cache entry"):
        assert FileCacheManager("bad").load() is None
    assert not os.path.exists(entry_path("bad"))
    FileCacheManager("bad").store(META, artifacts_for(3))  # recompiled and stored again
    assert FileCacheManager("bad").load()[1] == artifacts_for(3)


def test_partial_entry_is_removed():
    FileCacheManager("partial").store(META, artifacts_for(4))
    os.unlink(os.path.join(entry_path("partial"), "ptx"))
    with pytest.warns(RuntimeWarning, match="missing"):
        assert FileCacheManager("partial").load() is None
    assert not os.path.exists(entry_path("partial"))


def test_garbage_manifest_is_removed():
    FileCacheManager("garbage").store(META, artifacts_for(5))
    with open(os.path.join(entry_path("garbage"), "manifest.json"), "w") as f:
        f.write("{not json")
    with pytest.warns(RuntimeWarning):
        assert FileCacheManager("garbage").load() is None
    assert not os.path.exists(entry_path("garbage"))


def test_bad_inputs_are_tilejit_errors():
    with pytest.raises(CacheError, match="JSON"):
        FileCacheManager("x").store({"f": object()}, {})
    with pytest.raises(CacheError, match="bad artifact name"):
        FileCacheManager("x").store(META, {"../escape": "x"})
    with pytest.raises(CacheError, match="must be str or bytes"):
        FileCacheManager("x").store(META, {"a": 3})


def test_unsafe_keys_are_hashed_into_the_directory():
    key = "../../etc/passwd\x00 weird"
    manager = FileCacheManager(key)
    assert os.path.dirname(manager.path) == manager.kernels_dir
    manager.store(META, artifacts_for(6))
    assert FileCacheManager(key).load()[1] == artifacts_for(6)
    assert cache.cache_entries()[0].key == key


def test_lru_eviction_keeps_recently_used(monkeypatch):
    for i, key in enumerate("ABC"):
        FileCacheManager(key).store(META, artifacts_for(i))
        os.utime(entry_path(key), (1000 + i, 1000 + i))  # A oldest, then B, then C
    one_entry = cache.cache_entries()[0].size_bytes
    assert FileCacheManager("A").load() is not None  # touching A makes B the least recently used
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", str(3 * one_entry + one_entry // 2))
    FileCacheManager("D").store(META, artifacts_for(7))
    assert [os.path.exists(entry_path(k)) for k in "ABCD"] == [True, False, True, True]
    assert cache.cache_stats()["total_bytes"] <= 3 * one_entry + one_entry // 2


def test_list_stats_clear():
    FileCacheManager("one").store(META, artifacts_for(1))
    FileCacheManager("two").store({"name": "mul"}, {"py": "x = 1\n"})
    cache.store_json("autotune-add", {"best": {"BLOCK": 128}})
    infos = {e.key: e for e in cache.cache_entries()}
    assert set(infos) == {"one", "two"}
    assert infos["one"].name == "add_kernel" and infos["one"].target == "cuda:90"
    assert infos["one"].artifacts == ("cubin", "ptx", "ttir") and infos["two"].target is None
    stats = cache.cache_stats()
    assert stats["entries"] == 2 and stats["json_documents"] == 1
    assert stats["total_bytes"] == sum(e.size_bytes for e in infos.values()) > 0
    assert cache.clear_cache() == 2
    assert cache.cache_entries() == [] and cache.load_json("autotune-add") is None


def test_json_documents_round_trip_and_replace():
    assert cache.load_json("tuning") is None
    cache.store_json("tuning", {"configs": [1, 2]})
    cache.store_json("tuning", {"configs": [3]})
    assert cache.load_json("tuning") == {"configs": [3]}
    with pytest.raises(CacheError):
        cache.store_json("tuning", {1, 2})
    assert cache.load_json("tuning") == {"configs": [3]}


def test_plugin_can_supply_the_cache_manager(fake_entry_points):
    fake_entry_points({})

    class MemoryCache:
        def __init__(self, key):
            self.key = key

    class Plugin:
        @hookimpl
        def tilejit_cache_manager(self, key):
            return MemoryCache(key) if key.startswith("mem-") else None

    assert isinstance(cache.get_cache_manager("mem-1"), FileCacheManager)  # no plugin yet
    plugins.register(Plugin())
    supplied = cache.get_cache_manager("mem-1")
    assert isinstance(supplied, MemoryCache) and supplied.key == "mem-1"
    assert isinstance(cache.get_cache_manager("disk-1"), FileCacheManager)


# ---- many processes at once ---------------------------------------------------------------------
def _hammer(cache_dir, keys, rounds, max_bytes):
    os.environ["TILEJIT_CACHE_MAX_BYTES"] = str(max_bytes)
    errors, hits = [], 0
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hits = _hammer_rounds(cache_dir, keys, rounds, errors)
    # Published entries are immutable, so no reader may ever see a half-written or damaged one.
    errors += [str(w.message) for w in caught]
    return errors, hits


def _hammer_rounds(cache_dir, keys, rounds, errors):
    hits = 0
    for _ in range(rounds):
        for i, key in enumerate(keys):
            expected = artifacts_for(i)
            manager = FileCacheManager(key, cache_dir)
            found = manager.load()
            if found is None:
                manager.store(dict(META, index=i), expected)
                found = manager.load()
            if found is not None:
                hits += 1
                if found != (dict(META, index=i), expected):
                    errors.append(f"{key}: wrong content")
    return hits


@pytest.mark.parametrize("max_bytes", [1 << 30, 2500], ids=["unbounded", "evicting"])
def test_many_processes_share_one_directory(tmp_path, max_bytes):
    cache_dir = str(tmp_path / "shared")
    keys = [f"key{i}" for i in range(12)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        results = pool.starmap(_hammer, [(cache_dir, keys, 3, max_bytes)] * 4)
    errors = [e for errs, _ in results for e in errs]
    assert errors == []
    assert sum(hits for _, hits in results) > 0
    kernels = os.path.join(cache_dir, "kernels")
    leftovers = [n for n in os.listdir(kernels) if n.startswith(".") and n not in (".usage.json", ".usage.lock")]
    assert not leftovers  # no staging or trash left (the running total and its lock stay)
    for entry in cache.cache_entries(cache_dir):  # whatever survived is intact
        assert FileCacheManager(entry.key, cache_dir).load() is not None
