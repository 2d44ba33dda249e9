"""A damaged cache entry is repaired by the next process that meets it (issue 11, item 6).

For each kind of damage: this process compiles and stores, the entry is damaged, a second process
recompiles (with a warning) and stores a good entry, and a third process loads it without compiling.
Eviction ranks entries by the last use tilejit wrote, so a future-dated entry cannot pin itself.
"""
import json
import os
import shutil
import subprocess
import sys

import fakes
import pytest
from tilejit import compiler
from tilejit.runtime import cache
from tilejit.runtime.cache import FileCacheManager

HERE = os.path.dirname(os.path.abspath(__file__))
DAMAGES = ["wrong_hash", "other_key", "no_manifest", "no_artifact_list", "file_in_place", "flipped_byte"]

_CHILD = """
import json, sys, warnings
sys.path.insert(0, {tests!r})
import fakes
from tilejit import compiler
counters = fakes.install()
report = {{}}
for name in {names!r}:
    before = len(counters.stage_calls)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiler.compile(fakes.FakeSource(name, {{"x_ptr": "*fp32"}}), target="fake")
    report[name] = {{"compiled": len(counters.stage_calls) > before,
                    "warnings": [str(w.message) for w in caught]}}
print(json.dumps(report))
"""


def _run_child(names):
    core = os.path.join(HERE, "..", "..", "core")
    # Only this test's cache directory among tilejit's knobs: a size bound or trust setting left in
    # the environment would evict or refuse the damaged entries before the child meets them.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEJIT_") or k == "TILEJIT_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([core, os.environ.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", _CHILD.format(tests=HERE, names=names)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def _manifest(path):
    with open(os.path.join(path, "manifest.json")) as f:
        return json.load(f)


def _write_manifest(path, manifest):
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(manifest, f)


def _damage(kind, path, other_path):
    if kind == "wrong_hash":  # the manifest's checksums cover the artifacts, not the metadata
        manifest = _manifest(path)
        manifest["metadata"]["hash"] = "0" * 64
        _write_manifest(path, manifest)
    elif kind == "other_key":  # an entry copied over from another kernel's key
        shutil.rmtree(path)
        shutil.copytree(other_path, path)
    elif kind == "no_manifest":
        os.unlink(os.path.join(path, "manifest.json"))
    elif kind == "no_artifact_list":
        manifest = _manifest(path)
        del manifest["metadata"]["artifacts"]
        _write_manifest(path, manifest)
    elif kind == "file_in_place":
        shutil.rmtree(path)
        with open(path, "w") as f:
            f.write("not an entry")
    elif kind == "flipped_byte":
        with open(os.path.join(path, "fakebin"), "r+b") as f:
            data = bytearray(f.read())
            data[0] ^= 1
            f.seek(0)
            f.write(data)


def test_each_damage_is_repaired_by_the_next_process(fake, tmp_path):
    names = [f"kernel_{kind}" for kind in DAMAGES]
    paths = {}
    for name in names + ["donor"]:
        kernel = compiler.compile(fakes.FakeSource(name, {"x_ptr": "*fp32"}), target="fake")
        paths[name] = str(tmp_path / "cache" / "kernels" / kernel.hash)
        assert os.path.isdir(paths[name])
    for kind, name in zip(DAMAGES, names):
        _damage(kind, paths[name], paths["donor"])

    second = _run_child(names)
    for name in names:
        assert second[name]["compiled"], name
        assert any("cache entry" in w for w in second[name]["warnings"]), (name, second[name]["warnings"])
    third = _run_child(names)
    assert {name: third[name]["compiled"] for name in names} == {name: False for name in names}
    assert all(third[name]["warnings"] == [] for name in names)
    assert _manifest(paths["kernel_other_key"])["key"] != _manifest(paths["donor"])["key"]


# ---- eviction by tilejit's own clock -------------------------------------------------------------
META = {"name": "k"}


def _artifacts(i):
    return {"bin": bytes([i]) * 1000}


def test_a_future_dated_entry_is_evicted_before_new_ones(tmp_path, monkeypatch):
    root = str(tmp_path / "c")
    for key in ("old", "future", "recent"):
        FileCacheManager(key, root).store(META, _artifacts(len(key)))
    path = FileCacheManager("future", root).path
    os.utime(path, (4102444800, 4102444800))  # 2100-01-01: an mtime no tilejit process wrote
    size = cache.cache_entries(root)[0].size_bytes
    monkeypatch.setenv("TILEJIT_CACHE_MAX_BYTES", str(3 * size + size // 2))
    FileCacheManager("new", root).store(META, _artifacts(9))
    assert {os.path.basename(e.path) for e in cache.cache_entries(root)} == {"old", "recent", "new"}


def test_load_stamps_the_last_use_with_this_clock(tmp_path):
    root = str(tmp_path / "c")
    FileCacheManager("k", root).store(META, _artifacts(1))
    path = FileCacheManager("k", root).path
    os.utime(path, (4102444800, 4102444800))
    assert FileCacheManager("k", root).load() is not None
    import time
    assert abs(os.stat(path).st_mtime - time.time()) < 60  # a used entry gets a real time back


def test_a_file_in_an_entrys_place_is_replaced_by_store(tmp_path):
    root = str(tmp_path / "c")
    manager = FileCacheManager("k", root)
    os.makedirs(manager.kernels_dir)
    with open(manager.path, "w") as f:
        f.write("junk")
    with pytest.warns(RuntimeWarning, match="replaced the cache entry 'k' .*not a directory"):
        manager.store(META, _artifacts(2))
    assert FileCacheManager("k", root).load() == (META, _artifacts(2))
