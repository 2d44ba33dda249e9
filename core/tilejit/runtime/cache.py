"""The on-disk compilation cache.

Layout under the cache directory (`TILEJIT_CACHE_DIR`, default `~/.cache/tilejit`):

    kernels/<key>/manifest.json   metadata + one record per artifact (file, kind, size, sha256)
    kernels/<key>/<artifact>      raw artifact: text as utf-8, bytes as they are
    kernels/.stage-*              an entry being written by some process
    kernels/.trash-*              an entry being deleted
    kernels/.usage.json, .lock    the running total of the entries' bytes (see "Eviction" below)
    json/<name>.json              small JSON documents (the autotuner's tuned configs)

Never pickle: the metadata is JSON and the artifacts are plain files, so a cache entry can be read,
diffed and trusted. Many processes may share one directory without locks, because a published entry is
never modified: a writer fills a private staging directory and `os.rename`s it into place (the loser of
a race discards its copy); a deleter renames the entry away before removing it. Every load checks the
sha256 of every artifact; a damaged or partial entry is removed and reported as a miss, and `store`
replaces whatever occupies an entry's place unless it is that very entry, so a damaged entry is
repaired by the next compilation (see "Repairs" below).

Trust: the cache is used only when nobody but the user and root can write into it (see cache_trust);
otherwise tilejit warns once and compiles in memory.

Repairs: a manifest that does not parse, names another key, or lists a file that is missing or whose
checksum differs; an entry without a manifest; a file or a link where an entry's directory belongs --
each is removed when `load` finds it (with a warning), and `store` replaces an entry whose content is
not what is being stored (the compiler stores only after rejecting what it loaded: wrong hash, no
artifact list). Eviction ranks entries by the last-use time tilejit itself writes (the entry's mtime,
set from this process's clock on every load); a time in the future was not written by tilejit (or
comes from a clock far ahead) and ranks as the oldest, so it cannot pin an entry forever.

Eviction: scanning every entry costs seconds in a large cache (5.3 s for 10,000 entries), so a store
does not scan. It adds the new entry's bytes to a running total in `kernels/.usage.json` (a
read-modify-write under an advisory lock where the platform has `fcntl`, published by rename) and
scans, evicting least recently used entries, only when that total passes the size bound, when the
file is missing or unreadable, or when its last scan is a day old. Between scans the total drifts
upwards (removed damaged entries, entries deleted by hand: an early scan), or, rarely, down (a store
that races with a scan, or with another store where there is no lock, can lose its addition: the daily
scan catches it); a scan sets it to what is really there.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
import warnings
from typing import Any

from tilejit.config import knobs
from tilejit.errors import TilejitError
from tilejit.runtime import cache_trust

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
KERNELS_DIR = "kernels"
JSON_DIR = "json"
_STAGE_PREFIX = ".stage-"
_TRASH_PREFIX = ".trash-"
# A staging or trash directory this old belongs to a process that died; eviction sweeps it.
_STALE_SECONDS = 3600
# A last-use time this far ahead of our clock was not written by tilejit: it ranks as oldest.
_FUTURE_SLACK_SECONDS = 300
_USAGE_FILE = ".usage.json"  # a leading dot: never an entry's name (see _SAFE_NAME)
_USAGE_LOCK = ".usage.lock"
# The running total is checked against the disk by a full scan at least this often.
_RESCAN_SECONDS = 24 * 3600
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}\Z")


class CacheError(TilejitError, ValueError):
    """A value that cannot be put into the cache (bad artifact name, non-JSON metadata, ...)."""


class _Damaged(Exception):
    """An entry that exists but cannot be used: it is removed (load) or replaced (store)."""


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
    except OSError:  # FileNotFoundError: another process removed it first
        return False
    if os.path.isdir(trash) and not os.path.islink(trash):
        shutil.rmtree(trash, ignore_errors=True)
    else:  # a file or a link where an entry belongs
        try:
            os.unlink(trash)
        except OSError:
            pass
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
        """`(metadata, artifacts)` when a verified entry exists, else None (compile and `store`).

        Whatever damaged thing occupies the entry's place is removed, with a warning.
        """
        if not cache_trust.trusted(self.cache_dir):
            return None
        try:
            entry = self._read()
        except FileNotFoundError:
            return None  # no entry, or removed by another process while we read it: a plain miss
        except _Damaged as exc:
            self._discard(str(exc))
            return None
        except OSError:
            return None  # unreadable (permissions, I/O): leave it alone
        try:
            now = time.time()
            os.utime(self.path, (now, now))  # the last use, on our clock, for LRU eviction
        except OSError:
            pass
        return entry

    def _read(self) -> tuple[dict, dict[str, bytes | str]]:
        """The verified entry; FileNotFoundError when there is none, _Damaged when it is damaged.

        Every file is read through one open descriptor of the entry's directory, so an entry that
        another process replaces meanwhile is read whole or found gone, never mixed with its successor.
        """
        st = os.lstat(self.path)  # FileNotFoundError: no entry
        if not stat.S_ISDIR(st.st_mode):
            raise _Damaged("the entry is not a directory")
        try:
            dir_fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
        except NotADirectoryError:
            raise FileNotFoundError(self.path) from None  # replaced by a file meanwhile: next call sees it
        try:
            return self._read_in(dir_fd)
        except (FileNotFoundError, _Damaged):
            if not self._still_at_path(dir_fd):
                raise FileNotFoundError(self.path) from None  # removed or replaced while we read it
            raise
        finally:
            os.close(dir_fd)

    def _still_at_path(self, dir_fd: int) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        here = os.fstat(dir_fd)
        return (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)

    def _read_in(self, dir_fd: int) -> tuple[dict, dict[str, bytes | str]]:
        def read(name: str) -> bytes:
            if os.open in os.supports_dir_fd:
                fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
            else:  # no openat (Windows): by path
                fd = os.open(os.path.join(self.path, name), os.O_RDONLY | getattr(os, "O_BINARY", 0))
            with os.fdopen(fd, "rb") as f:
                return f.read()

        try:
            raw_manifest = read(MANIFEST)
        except FileNotFoundError:
            raise _Damaged("the entry has no manifest") from None
        try:
            manifest = json.loads(raw_manifest)
            metadata, records = self._check_manifest(manifest)
            if manifest.get("key") != self.key:
                raise ValueError("the manifest belongs to another key")
            artifacts = {}
            for name, record in records.items():
                data = read(record["file"])
                if len(data) != record["size"] or _sha256(data) != record["sha256"]:
                    raise ValueError(f"checksum mismatch in artifact {name!r}")
                artifacts[name] = data.decode("utf-8") if record["kind"] == "text" else data
        except FileNotFoundError:
            raise _Damaged("an artifact file is missing") from None  # a partial entry
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise _Damaged(str(exc) or type(exc).__name__) from None
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
        """Publish an entry atomically, replacing a damaged or different one in its place.

        A failure of the disk only warns: the compilation still works.
        """
        records, payloads = self._prepare(metadata, artifacts)
        if not cache_trust.trusted(self.cache_dir):
            return
        replaced = self._same_entry_or_why(metadata, artifacts)
        if replaced is None:
            return  # another process (or an earlier call) published this very entry already
        staging = None
        try:
            cache_trust.make_private_dirs(self.kernels_dir)
            staging = tempfile.mkdtemp(prefix=_STAGE_PREFIX, dir=self.kernels_dir)
            for file_name, data in payloads.items():
                with open(os.path.join(staging, file_name), "wb") as f:
                    f.write(data)
            manifest = {"format": FORMAT_VERSION, "key": self.key, "created": time.time(),
                        "metadata": metadata, "artifacts": records}
            manifest_text = json.dumps(manifest, indent=1)
            with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
                f.write(manifest_text)
            manifest_bytes = len(manifest_text.encode("utf-8"))
            if replaced and _remove_tree(self.path, self.kernels_dir):
                warnings.warn(f"tilejit: replaced the cache entry {self.key!r} ({replaced})", RuntimeWarning,
                              stacklevel=2)
            try:
                os.rename(staging, self.path)
                staging = None
            except OSError as exc:
                # ENOTEMPTY/EEXIST: we lost the race, an entry was published meanwhile (it may even have
                # been evicted since). Ours goes; anything else is a real disk problem.
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        except OSError as exc:
            warnings.warn(f"tilejit: could not write cache entry {self.key!r} in {self.cache_dir}: {exc}",
                          RuntimeWarning, stacklevel=2)
            return
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
        _count_stored(self.cache_dir, sum(len(data) for data in payloads.values()) + manifest_bytes,
                      knobs.cache_max_bytes)

    def _same_entry_or_why(self, metadata: dict, artifacts: dict) -> str | None:
        """None when this very entry is published already; "" when nothing is there; else what is wrong."""
        try:
            found_metadata, found_artifacts = self._read()
        except FileNotFoundError:
            return ""
        except _Damaged as exc:
            return f"it was damaged: {exc}"
        except OSError as exc:
            return f"it was unreadable: {exc}"
        if found_metadata != json.loads(json.dumps(metadata)):
            return "its metadata differed"
        if {k: v.encode() if isinstance(v, str) else bytes(v) for k, v in found_artifacts.items()} != \
                {k: v.encode() if isinstance(v, str) else bytes(v) for k, v in artifacts.items()}:
            return "its artifacts differed"
        return None

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
    """Directory, number of entries, bytes used, the size bound, the number of JSON documents, and why
    the directory is not used (`untrusted`: None when it is)."""
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    dirs = _entry_dirs(cache_dir)
    json_dir = os.path.join(cache_dir, JSON_DIR)
    json_files = [n for n in os.listdir(json_dir) if n.endswith(".json")] if os.path.isdir(json_dir) else []
    return {"cache_dir": cache_dir, "entries": len(dirs), "total_bytes": sum(_dir_size(d.path) for d in dirs),
            "max_bytes": knobs.cache_max_bytes, "json_documents": len(json_files),
            "untrusted": cache_trust.untrusted_reason(cache_dir)}


# ---- the running total (see "Eviction" in the module's docstring) ----------------------------------
@contextlib.contextmanager
def _usage_lock(kernels: str):
    """An advisory lock around a read-modify-write of the usage file (none where there is no fcntl);
    yields whether the lock is held."""
    try:
        import fcntl
    except ImportError:
        yield False
        return
    try:
        fd = os.open(os.path.join(kernels, _USAGE_LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # closing releases the lock


def _read_usage(kernels: str) -> tuple[int, float] | None:
    """(bytes, time of the last full scan) from the usage file, or None when absent or unreadable."""
    try:
        with open(os.path.join(kernels, _USAGE_FILE), "r", encoding="utf-8") as f:
            usage = json.load(f)
        total, scanned_at = usage["bytes"], usage["scanned_at"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(total, int) or isinstance(total, bool) or total < 0 or not isinstance(scanned_at, (int, float)):
        return None
    return total, float(scanned_at)


def _write_usage(kernels: str, total: int, scanned_at: float, locked: bool = False) -> None:
    """Write the running total. Under the lock it is rewritten in place: every reader holds the same
    lock, and a file torn by a crash reads as unreadable, which only costs a scan. Replacing the file
    (by rename, or by truncating it to nothing) instead makes ext4 write it out at once (its
    `auto_da_alloc` guard for replaced files), 1.3 ms on every store, the most of a small kernel's."""
    data = json.dumps({"bytes": total, "scanned_at": scanned_at}).encode("utf-8")
    if locked and hasattr(os, "pwrite") and _rewrite_in_place(os.path.join(kernels, _USAGE_FILE), data):
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=_STAGE_PREFIX + "usage-", dir=kernels)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(kernels, _USAGE_FILE))
        tmp = None
    except OSError:
        pass  # the next store scans instead
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _rewrite_in_place(path: str, data: bytes) -> bool:
    """Overwrite `path` (a plain file, created if missing) with `data`; False when it cannot be."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return False  # a link or a folder in its place: the replacing write puts a file there
    try:
        # Written, then cut to length (never truncated to nothing first: see `_write_usage`).
        if os.pwrite(fd, data, 0) != len(data):
            return False
        os.ftruncate(fd, len(data))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _count_stored(cache_dir: str, added_bytes: int, max_bytes: int) -> None:
    """Add a stored entry's bytes to the running total; scan and evict only when needed."""
    kernels = os.path.join(cache_dir, KERNELS_DIR)
    with _usage_lock(kernels) as locked:
        usage = _read_usage(kernels)
        now = time.time()
        if usage is not None and 0 <= now - usage[1] <= _RESCAN_SECONDS and usage[0] + added_bytes <= max_bytes:
            _write_usage(kernels, usage[0] + added_bytes, usage[1], locked)
            return
    evict(max_bytes, cache_dir)


def evict(max_bytes: int, cache_dir: str | None = None) -> int:
    """Remove least recently used entries until the cache holds at most `max_bytes`; returns how many.

    Scans every entry, and sets the running total to what remains."""
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    kernels = os.path.join(cache_dir, KERNELS_DIR)
    _sweep_stale(kernels)
    sized = []
    now = time.time()
    for entry in _entry_dirs(cache_dir):
        try:
            last_used = entry.stat(follow_symlinks=False).st_mtime
        except FileNotFoundError:
            continue
        if last_used > now + _FUTURE_SLACK_SECONDS:
            last_used = float("-inf")  # not a time tilejit wrote: it must not pin the entry
        sized.append((last_used, entry.path, _dir_size(entry.path)))
    total = sum(size for _, _, size in sized)
    removed = 0
    for _, path, size in sorted(sized, key=lambda item: item[0]):
        if total <= max_bytes:
            break
        if _remove_tree(path, kernels):
            removed += 1
        total -= size  # gone either way: by us or by a concurrent evictor
    if os.path.isdir(kernels):
        with _usage_lock(kernels) as locked:
            _write_usage(kernels, max(total, 0), now, locked)
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
            if abs(now - entry.stat(follow_symlinks=False).st_mtime) > _STALE_SECONDS:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:  # a usage total's temporary file
                    os.unlink(entry.path)
        except OSError:
            pass


def clear_cache(cache_dir: str | None = None, include_json: bool = True) -> int:
    """Remove every entry (and, by default, the JSON documents); returns the number of entries removed."""
    cache_dir = os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir
    kernels = os.path.join(cache_dir, KERNELS_DIR)
    removed = sum(1 for entry in _entry_dirs(cache_dir) if _remove_tree(entry.path, kernels))
    if os.path.isdir(kernels):
        for name in os.listdir(kernels):  # staging and trash directories of dead processes, the total
            path = os.path.join(kernels, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
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
    """The document stored under `name`, or None when missing, unreadable or in an untrusted cache."""
    if not cache_trust.trusted(os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir):
        return None
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
    if not cache_trust.trusted(os.path.abspath(cache_dir) if cache_dir else knobs.cache_dir):
        return
    cache_trust.make_private_dirs(os.path.dirname(path))
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
