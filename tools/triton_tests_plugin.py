"""pytest plugin that tools/triton_tests.py loads into each pytest run of Triton's test files.

It is loaded with `-p triton_tests_plugin` (tools/ on PYTHONPATH), so it is imported before any
conftest or test module. Configuration comes from environment variables set by the runner:

- TRITON_TESTS_MODE: "collect" (write the ids of the collected tests) or "run".
- TRITON_TESTS_OUT: a JSON-lines file; one record per collected id, per started test, per finished
  test and per collection error. Written and flushed line by line, so the runner still knows which
  test was running when a process dies or hangs.
- TRITON_TESTS_IDS: a file of node ids (one a line); only those are run.
- TRITON_TESTS_TIMEOUT: seconds per test (setup + call + teardown), enforced with SIGALRM.
- TRITON_TESTS_ALIAS: "tilejit" makes `import triton` resolve to tilejit (see install_triton_alias).
- TRITON_TESTS_LENIENT: "1" (diagnostic only): a `triton` name or submodule that tilejit lacks becomes
  a placeholder that raises TritonAPIMissing when it is used, so that a test file that imports it
  still collects and each test fails (or passes) on what it actually uses. Never for pass counts.
- TRITON_TESTS_SUPPORT: a folder holding Triton's own `_internal_testing.py`, used for
  `triton._internal_testing` when the alias does not provide that module.

Nothing here edits Triton's files: the alias is an import hook, the selection a deselection.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time

import pytest

_OUT = None


def _write(record: dict) -> None:
    global _OUT
    path = os.environ.get("TRITON_TESTS_OUT")
    if not path:
        return
    if _OUT is None:
        _OUT = open(path, "a", encoding="utf-8")
    _OUT.write(json.dumps(record) + "\n")
    _OUT.flush()


# ----------------------------------------------------------------------------------------------
# `import triton` -> tilejit


LENIENT = os.environ.get("TRITON_TESTS_LENIENT") == "1"


class TritonAPIMissing(Exception):
    """A Triton name that tilejit does not provide was used (lenient mode only)."""


class _MissingBase:
    _qualname = "triton.?"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return missing(f"{self._qualname}.{name}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _MissingBase):
            return args[0]  # a missing decorator (@triton.constexpr_function): pass the function on
        raise TritonAPIMissing(f"{self._qualname} is missing in tilejit")

    def __iter__(self):
        raise TritonAPIMissing(f"{self._qualname} is missing in tilejit")

    def __repr__(self):
        return f"<missing {self._qualname}>"


def missing(qualname: str):
    """A placeholder whose class name carries the missing name (so that messages such as pytest's
    'expected exception must be a BaseException type, not MISSING:triton.TritonError' name it)."""
    cls = type(f"MISSING:{qualname}", (_MissingBase,), {"_qualname": qualname})
    return cls()


def _lenient_module(module):
    """Let `module` answer a missing attribute with a placeholder (idempotent)."""
    old = module.__dict__.get("__getattr__")
    if getattr(old, "_tt_lenient", False):
        return module
    name = module.__name__.replace("tilejit", "triton", 1)

    def __getattr__(attr):
        if old is not None:
            try:
                return old(attr)
            except AttributeError:
                pass
        if attr.startswith("__"):
            raise AttributeError(attr)
        return missing(f"{name}.{attr}")

    __getattr__._tt_lenient = True
    module.__getattr__ = __getattr__
    return module


# Class attributes that Triton's tests read at import time (lenient mode fills them in when tilejit
# lacks them; values as in Triton 3.9's triton/language/core.py).
_LENIENT_CLASS_ATTRS = {("tilejit.language", "dtype", "STANDARD_FP_TYPES"): ["fp16", "bf16", "fp32", "fp64"]}


def _lenient_class_attrs(module):
    for (mod, cls, attr), value in _LENIENT_CLASS_ATTRS.items():
        if module.__name__ == mod and hasattr(module, cls) and not hasattr(getattr(module, cls), attr):
            setattr(getattr(module, cls), attr, value)


class _AliasLoader(importlib.abc.Loader):
    """Loads `triton.x.y` as the already-imported module `tilejit.x.y` (the same object)."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        if LENIENT:
            _lenient_class_attrs(module)
            _lenient_module(module)
        return module

    def exec_module(self, module):
        pass


class _MissingModuleLoader(importlib.abc.Loader):
    """Lenient mode: a `triton.x` submodule that tilejit lacks, every attribute a placeholder."""

    def create_module(self, spec):
        import types
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return missing(f"{spec.name}.{attr}")

        module.__getattr__ = __getattr__
        return module

    def exec_module(self, module):
        pass


class _TritonAliasFinder(importlib.abc.MetaPathFinder):
    """Maps every `triton[.sub]` import to `tilejit[.sub]`; `triton._internal_testing` falls back to
    Triton's own file from the support folder when tilejit has no such module."""

    def __init__(self, support_dir: str | None):
        self.support_dir = support_dir

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton" and not fullname.startswith("triton."):
            return None
        mapped = "tilejit" + fullname[len("triton"):]
        if _find_spec_safe(mapped) is not None:
            return importlib.util.spec_from_loader(fullname, _AliasLoader(mapped))
        if fullname == "triton._internal_testing" and self.support_dir:
            file = os.path.join(self.support_dir, "_internal_testing.py")
            if os.path.exists(file):
                return importlib.util.spec_from_file_location(fullname, file)
        if LENIENT:
            return importlib.util.spec_from_loader(fullname, _MissingModuleLoader(), is_package=True)
        return None  # a real ImportError names the missing triton submodule


def _find_spec_safe(name):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def install_triton_alias(support_dir: str | None) -> str:
    """Make `import triton` resolve to tilejit for this process. Prefers tilejit's own switch."""
    import tilejit

    support_needed = _find_spec_safe("tilejit._internal_testing") is None
    official = getattr(tilejit, "alias_triton", None)
    if official is not None:
        official()
        how = "tilejit.alias_triton()"
        if support_needed and support_dir:
            # the alias has no _internal_testing: add Triton's helper module under the alias
            sys.meta_path.insert(0, _InternalTestingOnly(support_dir))
            how += " + Triton's _internal_testing.py"
        return how
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _TritonAliasFinder(support_dir))
    how = "runner shim (sys.meta_path)" + (" + Triton's _internal_testing.py" if support_needed else "")
    return how + (" [LENIENT: missing names are placeholders]" if LENIENT else "")


class _InternalTestingOnly(importlib.abc.MetaPathFinder):
    def __init__(self, support_dir: str):
        self.support_dir = support_dir

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton._internal_testing":
            return None
        file = os.path.join(self.support_dir, "_internal_testing.py")
        return importlib.util.spec_from_file_location(fullname, file) if os.path.exists(file) else None


if os.environ.get("TRITON_TESTS_ALIAS") == "tilejit":
    _ALIAS_HOW = install_triton_alias(os.environ.get("TRITON_TESTS_SUPPORT"))
else:
    _ALIAS_HOW = "none (real triton)"


# ----------------------------------------------------------------------------------------------
# error description


def describe_exception(excinfo, test_root: str) -> dict:
    """Type, first message line, the innermost frame outside the test files (where the library
    failed) and the innermost frame inside them (which test line triggered it)."""
    value = excinfo.value
    lines = [ln.strip() for ln in str(value).splitlines() if ln.strip()]
    message = lines[0] if lines else ""
    where = test_line = None
    for entry in excinfo.traceback:
        file = str(entry.path)
        loc = f"{os.path.basename(file)}:{entry.lineno + 1}"
        if file.startswith(test_root):
            test_line = loc
        elif "/_pytest/" not in file and "/pluggy/" not in file:
            where = f"{file}:{entry.lineno + 1}"
    return {"exc": type(value).__name__, "msg": message[:400], "where": where, "test_line": test_line}


class _TestTimeout(BaseException):
    """Raised by SIGALRM inside a test that runs past TRITON_TESTS_TIMEOUT (BaseException, so that
    `except Exception` in the code under test does not swallow it)."""


def _on_alarm(signum, frame):
    raise _TestTimeout(f"test exceeded {os.environ.get('TRITON_TESTS_TIMEOUT')} s")


# ----------------------------------------------------------------------------------------------
# hooks


def pytest_configure(config):
    _write({"kind": "session", "alias": _ALIAS_HOW, "pid": os.getpid(), "python": sys.executable})


def pytest_collectreport(report):
    if report.failed:
        text = str(report.longrepr)
        lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
        lines = [ln for ln in lines if ln] or text.strip().splitlines()[-1:] or [""]
        _write({"kind": "collect_error", "path": report.nodeid, "msg": lines[0][:400]})


def pytest_collection_modifyitems(session, config, items):
    if os.environ.get("TRITON_TESTS_MODE") == "collect":
        for item in items:
            marks = sorted({m.name for m in item.iter_markers()})
            _write({"kind": "item", "id": item.nodeid, "marks": marks})
        items[:] = []
        return
    ids_file = os.environ.get("TRITON_TESTS_IDS")
    if not ids_file:
        return
    with open(ids_file, encoding="utf-8") as f:
        wanted = {line.rstrip("\n") for line in f if line.strip()}
    keep = [it for it in items if it.nodeid in wanted]
    dropped = [it for it in items if it.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _write({"kind": "start", "id": item.nodeid})
    item._tt_start = time.time()
    item._tt_result = {"outcome": None}
    timeout = float(os.environ.get("TRITON_TESTS_TIMEOUT", "0") or 0)
    if timeout > 0:
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        if timeout > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
        res = item._tt_result
        res.update({"kind": "result", "id": item.nodeid, "dur": round(time.time() - item._tt_start, 3)})
        if res["outcome"] is None:
            res["outcome"] = "passed"
        _write(res)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    res = getattr(item, "_tt_result", None)
    if res is None or res.get("outcome") not in (None, "passed"):
        return  # the first failure of a test is the one recorded
    if report.skipped:
        if hasattr(report, "wasxfail"):
            res["outcome"] = "xfailed"
        elif res["outcome"] is None:
            res["outcome"] = "skipped"
            lr = report.longrepr
            res["msg"] = str(lr[2] if isinstance(lr, tuple) and len(lr) == 3 else lr)[:200]
        return
    if report.failed:
        root = str(item.config.rootpath)
        if call.excinfo is not None and call.excinfo.errisinstance(_TestTimeout):
            res["outcome"] = "timeout"
        else:
            res["outcome"] = "failed" if report.when == "call" else f"error-{report.when}"
        if call.excinfo is not None:
            res.update(describe_exception(call.excinfo, root))
        else:
            res["msg"] = str(report.longrepr).strip().splitlines()[-1][:400]
    elif report.when == "call" and hasattr(report, "wasxfail"):
        res["outcome"] = "xpassed"
