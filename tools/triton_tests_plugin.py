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
- TRITON_TESTS_INTERNAL: "triton" (diagnostic only): use Triton's own `_internal_testing.py` from
  the support folder even where the alias provides the module.
- TRITON_TESTS_SUPPORT: a folder holding Triton's own `_internal_testing.py`, used for
  `triton._internal_testing` when the alias does not provide that module.

Nothing here edits Triton's files: the alias is an import hook, the selection a deselection.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest
from triton_alias import install_triton_alias

_OUT = None


def _write(record: dict) -> None:
    global _OUT
    path = os.environ.get("TRITON_TESTS_OUT")
    if not path:
        return
    if _OUT is None:
        _OUT = open(path, "a", encoding="utf-8")  # noqa: SIM115 (kept open for the process)
    _OUT.write(json.dumps(record) + "\n")
    _OUT.flush()


if os.environ.get("TRITON_TESTS_ALIAS") == "tilejit":
    _ALIAS_HOW = install_triton_alias(os.environ.get("TRITON_TESTS_SUPPORT"),
                                      lenient=os.environ.get("TRITON_TESTS_LENIENT") == "1",
                                      triton_internal_testing=os.environ.get("TRITON_TESTS_INTERNAL") == "triton")
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
    more = " | ".join(lines[1:4])[:400]  # e.g. pytest.raises' "Regex: ..." and "Input: ..." lines
    return {"exc": type(value).__name__, "msg": message[:400], "more": more, "where": where,
            "test_line": test_line}


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
