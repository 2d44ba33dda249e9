"""The on-disk compilation cache.

Layout under the cache directory (`TILEJIT_CACHE_DIR`, default `~/.cache/tilejit`):

    kernels/<key>/manifest.json   metadata + one record per artifact (file, kind, size, sha256)
    kernels/<key>/<artifact>      raw artifact: text as utf-8, bytes as they are
    kernels/.stage-*              an entry being written by some process
    kernels/.trash-*              an entry being deleted
    json/<name>.json              small JSON documents (the autotuner's tuned configs)

Never pickle: the metadata is JSON and the artifacts are plain files, so a cache entry can be read,
diffed and trusted. Many processes may share one directory without locks, because a published entry is
never modified: a writer fills a private staging directory and `os.rename`s it into place (the loser of
a race discards its copy); a deleter renames the entry away before removing it. Every load checks the
sha256 of every artifact; a damaged or partial entry is removed and reported as a miss.
"""
from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from typing import Any

from tilejit.config import knobs
from tilejit.errors import TilejitError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
KERNELS_DIR = "kernels"
JSON_DIR = "json"
_STAGE_PREFIX = ".stage-"
_TRASH_PREFIX = ".trash-"
# A staging or trash directory this old belongs to a process that died; eviction sweeps it.
_STALE_SECONDS = 3600
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}\Z")


class CacheError(TilejitError, ValueError):
    """A value that cannot be put into the cache (bad artifact name, non-JSON metadata, ...)."""


def _file_name_for(name: str) -> str:
    """A file-system-safe name for a key or JSON document: itself when harmless, else its sha256."""
    if _SAFE_NAME.match(name) and name != MANIFEST:
        return name
    return hashlib.sha256(name.encode()).hexdigest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _remove_tree(path: str, parent: str) -> bool:
    """Delete a published entry safely: rename it away first, so readers see it gone, never half gone.

    Returns False when another process removed it first.
    """
    trash = os.path.join(parent, f"{_TRASH_PREFIX}{os.path.basename(path)}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return False
    except OSError:
        return False
    shutil.rmtree(trash, ignore_errors=True)
    return True


class FileCacheManager:
    """The cache entry of one compilation key."""

    def __init__(self, key: str, cache_dir: str | None = None):
        if not isinstance(key, str) or not key:
            raise CacheError(f"a cache key must be a non-empty string, got {key!r}")
        self.key = key
        self.cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
        self.kernels_dir = os.path.join(self.cache_dir, KERNELS_DIR)
        self.path = os.path.join(self.kernels_dir, _file_name_for(key))

    # ---- reading ------------------------------------------------------------------------------
    def load(self) -> tuple[dict, dict[str, bytes | str]] | None:
        """`(metadata, artifacts)` when a verified entry exists, else None (compile and `store`)."""
        try:
            with open(os.path.join(self.path, MANIFEST), "rb") as f:
                raw_manifest = f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return None
        try:
            manifest = json.loads(raw_manifest)
            metadata, records = self._check_manifest(manifest)
            artifacts = {}
            for name, record in records.items():
                with open(os.path.join(self.path, record["file"]), "rb") as f:
                    data = f.read()
                if len(data) != record["size"] or _sha256(data) != record["sha256"]:
                    raise ValueError(f"checksum mismatch in artifact {name!r}")
                artifacts[name] = data.decode("utf-8") if record["kind"] == "text" else data
        except FileNotFoundError:
            if os.path.isdir(self.path):
                self._discard("an artifact file is missing")  # partial entry
            return None  # else: removed by another process while we read it; a plain miss
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, OSError) as exc:
            self._discard(str(exc))
            return None
        try:
            os.utime(self.path)  # the entry's mtime is its last use, for LRU eviction
        except OSError:
            pass
        return metadata, artifacts

    @staticmethod
    def _check_manifest(manifest) -> tuple[dict, dict]:
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
            raise ValueError("unknown manifest format")
        metadata, records = manifest["metadata"], manifest["artifacts"]
        if not isinstance(metadata, dict) or not isinstance(records, dict):
            raise ValueError("malformed manifest")
        for record in records.values():
            if record["kind"] not in ("text", "bytes") or not _SAFE_NAME.match(record["file"]):
                raise ValueError("malformed artifact record")
        return metadata, records

    def _discard(self, why: str) -> None:
        if _remove_tree(self.path, self.kernels_dir):
            warnings.warn(f"tilejit: removed a damaged cache entry {self.key!r} ({why}); recompiling",
                          RuntimeWarning, stacklevel=3)

    # ---- writing ------------------------------------------------------------------------------
    def store(self, metadata: dict, artifacts: dict[str, bytes | str]) -> None:
        """Publish an entry atomically. A failure of the disk only warns: the compilation still works."""
        records, payloads = self._prepare(metadata, artifacts)
        if os.path.isdir(self.path):
            return  # another process (or an earlier call) published this key already
        staging = None
        try:
            os.makedirs(self.kernels_dir, exist_ok=True)
            staging = tempfile.mkdtemp(prefix=_STAGE_PREFIX, dir=self.kernels_dir)
            for file_name, data in payloads.items():
                with open(os.path.join(staging, file_name), "wb") as f:
                    f.write(data)
            manifest = {"format": FORMAT_VERSION, "key": self.key, "created": time.time(),
                        "metadata": metadata, "artifacts": records}
            with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
            try:
                os.rename(staging, self.path)
                staging = None
            except OSError as exc:
                # ENOTEMPTY/EEXIST: we lost the race, an identical entry was published (it may even
                # have been evicted since). Ours goes; anything else is a real disk problem.
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        except OSError as exc:
            warnings.warn(f"tilejit: could not write cache entry {self.key!r} in {self.cache_dir}: {exc}",
                          RuntimeWarning, stacklevel=2)
            return
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
        evict(knobs.cache_max_bytes, self.cache_dir)

    @staticmethod
    def _prepare(metadata, artifacts) -> tuple[dict, dict[str, bytes]]:
        try:
            json.dumps(metadata)
        except (TypeError, ValueError) as exc:
            raise CacheError(f"cache metadata must be JSON-serialisable: {exc}") from None
        if not isinstance(metadata, dict):
            raise CacheError(f"cache metadata must be a dict, got {type(metadata).__name__}")
        records, payloads = {}, {}
        for name, value in artifacts.items():
            if not isinstance(name, str) or not _SAFE_NAME.match(name) or name == MANIFEST:
                raise CacheError(f"bad artifact name {name!r}: use letters, digits, '_', '.', '+', '-'")
            if isinstance(value, str):
                data, kind = value.encode("utf-8"), "text"
            elif isinstance(value, (bytes, bytearray, memoryview)):
                data, kind = bytes(value), "bytes"
            else:
                raise CacheError(f"artifact {name!r} must be str or bytes, got {type(value).__name__}")
            records[name] = {"file": name, "kind": kind, "size": len(data), "sha256": _sha256(data)}
            payloads[name] = data
        return records, payloads


# ---- whole-cache operations ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CacheEntryInfo:
    key: str
    path: str
    size_bytes: int
    last_used: float
    name: str | None  # the kernel name from the metadata, when readable
    target: str | None
    artifacts: tuple[str, ...]


def _entry_dirs(cache_dir: str):
    kernels = os.path.join(cache_dir, KERNELS_DIR)
    try:
        with os.scandir(kernels) as it:
            return [e for e in it if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _dir_size(path: str) -> int:
    total = 0
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    total += entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    pass
    except FileNotFoundError:
        pass
    return total


def cache_entries(cache_dir: str | None = None) -> list[CacheEntryInfo]:
    """Every published entry, most recently used first."""
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    infos = []
    for entry in _entry_dirs(cache_dir):
        try:
            last_used = entry.stat(follow_symlinks=False).st_mtime
            with open(os.path.join(entry.path, MANIFEST), "rb") as f:
                manifest = json.load(f)
            metadata = manifest.get("metadata", {})
            key, artifacts = manifest.get("key", entry.name), tuple(sorted(manifest.get("artifacts", {})))
        except (OSError, ValueError, AttributeError):
            metadata, key, artifacts, last_used = {}, entry.name, (), 0.0
        infos.append(CacheEntryInfo(key=key, path=entry.path, size_bytes=_dir_size(entry.path),
                                    last_used=last_used, name=_str_or_none(metadata, "name"),
                                    target=_str_or_none(metadata, "target"), artifacts=artifacts))
    infos.sort(key=lambda info: info.last_used, reverse=True)
    return infos


def _str_or_none(metadata: Any, field: str) -> str | None:
    value = metadata.get(field) if isinstance(metadata, dict) else None
    return None if value is None else str(value)


def cache_stats(cache_dir: str | None = None) -> dict[str, Any]:
    """Directory, number of entries, bytes used, the size bound and the number of JSON documents."""
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    dirs = _entry_dirs(cache_dir)
    json_dir = os.path.join(cache_dir, JSON_DIR)
    json_files = [n for n in os.listdir(json_dir) if n.endswith(".json")] if os.path.isdir(json_dir) else []
    return {"cache_dir": cache_dir, "entries": len(dirs), "total_bytes": sum(_dir_size(d.path) for d in dirs),
            "max_bytes": knobs.cache_max_bytes, "json_documents": len(json_files)}


def evict(max_bytes: int, cache_dir: str | None = None) -> int:
    """Remove least recently used entries until the cache holds at most `max_bytes`; returns how many."""
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    kernels = os.path.join(cache_dir, KERNELS_DIR)
    _sweep_stale(kernels)
    sized = []
    for entry in _entry_dirs(cache_dir):
        try:
            sized.append((entry.stat(follow_symlinks=False).st_mtime, entry.path, _dir_size(entry.path)))
        except FileNotFoundError:
            continue
    total = sum(size for _, _, size in sized)
    removed = 0
    for _, path, size in sorted(sized):
        if total <= max_bytes:
            break
        if _remove_tree(path, kernels):
            removed += 1
        total -= size  # gone either way: by us or by a concurrent evictor
    return removed


def _sweep_stale(kernels: str) -> None:
    now = time.time()
    try:
        with os.scandir(kernels) as it:
            leftovers = [e for e in it if e.name.startswith((_STAGE_PREFIX, _TRASH_PREFIX))]
    except FileNotFoundError:
        return
    for entry in leftovers:
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_SECONDS:
                shutil.rmtree(entry.path, ignore_errors=True)
        except FileNotFoundError:
            pass


def clear_cache(cache_dir: str | None = None, include_json: bool = True) -> int:
    """Remove every entry (and, by default, the JSON documents); returns the number of entries removed."""
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    kernels = os.path.join(cache_dir, KERNELS_DIR)
    removed = sum(1 for entry in _entry_dirs(cache_dir) if _remove_tree(entry.path, kernels))
    if os.path.isdir(kernels):
        for name in os.listdir(kernels):  # staging and trash directories of dead processes
            shutil.rmtree(os.path.join(kernels, name), ignore_errors=True)
    if include_json:
        shutil.rmtree(os.path.join(cache_dir, JSON_DIR), ignore_errors=True)
    return removed


def get_cache_manager(key: str):
    """The cache for `key`: one a plugin supplies through `tilejit_cache_manager`, else the disk cache."""
    from tilejit.plugins import get_plugin_manager
    supplied = get_plugin_manager().hook.tilejit_cache_manager(key=key)
    return supplied if supplied is not None else FileCacheManager(key)


# ---- small JSON documents (autotuner results) ---------------------------------------------------
def _json_path(name: str, cache_dir: str | None) -> str:
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    return os.path.join(cache_dir, JSON_DIR, _file_name_for(name) + ".json")


def load_json(name: str, cache_dir: str | None = None):
    """The document stored under `name`, or None when missing or unreadable."""
    try:
        with open(_json_path(name, cache_dir), "r", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def store_json(name: str, obj, cache_dir: str | None = None) -> None:
    """Write `obj` as JSON under `name`, atomically (temp file + `os.replace`)."""
    path = _json_path(name, cache_dir)
    try:
        text = json.dumps(obj, indent=1, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise CacheError(f"document {name!r} must be JSON-serialisable: {exc}") from None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
