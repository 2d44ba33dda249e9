"""Whether a cache directory may be trusted: the rules of ssh's StrictModes, applied to the cache.

The interpreter executes the `py` program of a cache entry and a GPU backend loads its binary; the
checksums sit beside them. So whoever can write into the cache runs code in the process of every user
of it. tilejit uses a cache directory only when nobody but the user (and root) can change what is in
it:

* the cache root and its `kernels/` and `json/` folders are owned by the user (or by root) and are
  writable by neither group nor others;
* every directory above the root, up to `/`, is owned by the user or by root, and is writable by
  neither group nor others -- unless it has the sticky bit (as `/tmp` has): there nobody else can
  rename or delete what the user owns;
* the path is resolved first (`os.path.realpath`), so a symbolic link is judged by its target.

A directory that breaks a rule is not used: tilejit warns once and compiles in memory. New folders
are created private (0700). `TILEJIT_CACHE_STRICT=0` turns the checks off (a cache deliberately
shared by a group, at the group's risk), as `StrictModes no` does for ssh.
"""
from __future__ import annotations

import os
import stat
import warnings

from tilejit.config import knobs

_PRIVATE = 0o700
_warned: set = set()


def untrusted_reason(cache_dir: str, subdirs=("kernels", "json")) -> str | None:
    """Why `cache_dir` must not be used, or None when it may be (see the module's rules)."""
    if not hasattr(os, "geteuid") or not knobs.cache_strict:
        return None  # no POSIX owners here (Windows), or the user turned the checks off
    uid = os.geteuid()
    root = os.path.realpath(cache_dir)
    for path in [os.path.join(root, sub) for sub in subdirs] + [root]:
        problem = _check(path, uid, allow_sticky=False)
        if problem:
            return problem
    path = os.path.dirname(root)
    while True:
        problem = _check(path, uid, allow_sticky=True)
        if problem:
            return problem
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _check(path: str, uid: int, allow_sticky: bool) -> str | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None  # made later, by us, private
    except OSError as exc:
        return f"cannot inspect {path}: {exc.strerror}"
    if st.st_uid not in (uid, 0):
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {uid}) or root"
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and not (allow_sticky and st.st_mode & stat.S_ISVTX and stat.S_ISDIR(st.st_mode)):
        who = "others" if st.st_mode & stat.S_IWOTH else "its group"
        return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def trusted(cache_dir: str) -> bool:
    """True when `cache_dir` may be used; else warns (once per directory and reason) and returns False."""
    reason = untrusted_reason(cache_dir)
    if reason is None:
        return True
    if (cache_dir, reason) not in _warned:
        _warned.add((cache_dir, reason))
        warnings.warn(f"tilejit: not using the compilation cache {cache_dir}: {reason}; anyone who can write "
                      "there could run code in this process. Kernels are compiled in memory instead. Make it "
                      "yours and private (chmod 700), or set TILEJIT_CACHE_DIR to a directory of your own.",
                      RuntimeWarning, stacklevel=3)
    return False


def make_private_dirs(path: str) -> None:
    """Create `path` (and missing parents) as needed; the folders tilejit creates get mode 0700."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        make_private_dirs(parent)
    try:
        os.mkdir(path, _PRIVATE)
    except FileExistsError:
        return  # made by another process meanwhile
    os.chmod(path, _PRIVATE)  # mkdir's mode is masked by the umask; 0700 is what we mean
