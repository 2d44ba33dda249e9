#!/usr/bin/env python3
"""Run Triton's own language tests against tilejit (and Triton itself) and compare.

    python tools/triton_tests.py FOLDER [--reference /path/to/triton-venv/bin/python]
                                 [--sample N --seed S] [--timeout 120] [--json out.json]

FOLDER holds Triton's test files (python/test/unit/language/test_*.py with the conftest.py files
above them, as in Triton's repository; `_support/_internal_testing.py` may hold Triton's helper
module). Triton's files are read, never modified: `import triton` is redirected to tilejit by
`tilejit.alias_triton()` when tilejit has it, else by an import hook of the runner's pytest plugin
(tools/triton_tests_plugin.py).

The tilejit side runs under --python (default: this interpreter) with --pythonpath prepended to
PYTHONPATH (default: this checkout's core/ and backends/*/). The reference side runs Triton under
--reference. Both run the same node ids: the ids that the reference collects (or tilejit, without a
reference), optionally a seeded sample of them. With --device cpu (default) both run their
interpreters (TRITON_INTERPRET=1); with --device cuda both run on the GPU.

Each pytest process writes one JSON line per test; a test past --timeout is stopped (SIGALRM, and
the process is killed and the run resumed if that does not help), a crashed process is resumed after
the test that crashed it. This is a tool, not part of the test suite.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).resolve().parent

DEFAULT_FILES = ("test_core.py", "test_standard.py", "test_random.py", "test_tuple.py",
                 "test_block_pointer.py", "test_tensor_descriptor.py", "test_annotations.py",
                 "test_decorator.py", "test_libdevice.py")

PASS = ("passed", "xfailed", "xpassed")  # what counts as a pass; skips are counted apart


# ----------------------------------------------------------------------------------------------
# pure helpers


def default_pythonpath() -> list[str]:
    return [str(REPO / "core")] + sorted(str(p) for p in (REPO / "backends").glob("*") if p.is_dir())


def find_test_files(folder: Path, names) -> list[Path]:
    """The test files named `names` under `folder` (searched recursively), in the order of `names`."""
    found = {}
    for path in sorted(folder.rglob("test_*.py")):
        if path.name in names and path.name not in found:
            found[path.name] = path
    return [found[n] for n in names if n in found]


def sample_ids(ids, n: int | None, seed: int) -> list[str]:
    """A seeded sample of n ids (all of them when n is None or >= len), in sorted order, so that the
    same (ids, n, seed) always gives the same tests."""
    ids = sorted(set(ids))
    if n is None or n >= len(ids):
        return ids
    return sorted(random.Random(seed).sample(ids, n))


def file_of(nodeid: str) -> str:
    return os.path.basename(nodeid.split("::", 1)[0])


def function_of(nodeid: str) -> str:
    """`path/test_x.py::test_f[a-b]` -> `test_x.py::test_f` (parameters dropped)."""
    head = nodeid.split("[", 1)[0]
    path, _, rest = head.partition("::")
    return f"{os.path.basename(path)}::{rest}"


def first_error(rec: dict) -> str:
    if not rec:
        return "not run"
    text = f"{rec.get('exc', '')}: {rec.get('msg', '')}".strip(": ")
    return text or rec.get("outcome", "?")


_SIG_RULES = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x_"),
    (re.compile(r"(/[\w.\-]+)+\.py(:\d+)?"), "FILE"),
    (re.compile(r"\[[^\[\]]{0,200}\]"), "[_]"),
    (re.compile(r"\([^()]{0,200}\)"), "(_)"),
    (re.compile(r"\b\d+(\.\d+)?(e[+-]?\d+)?\b"), "N"),
    (re.compile(r"\s+"), " "),
]


def error_signature(rec: dict) -> str:
    """A normalized first error line (numbers, shapes, addresses, paths blanked) used to group
    failures that most likely share a cause."""
    if rec.get("outcome") in ("timeout", "crashed", "not-collected"):
        if rec.get("outcome") == "not-collected":
            return "not-collected: " + _normalize(rec.get("msg", ""))
        return rec["outcome"]
    return _normalize(first_error(rec))[:160]


def _normalize(text: str) -> str:
    for pattern, repl in _SIG_RULES:
        text = pattern.sub(repl, text)
    return text.strip()


def is_pass(rec) -> bool:
    return bool(rec) and rec.get("outcome") in PASS


# ----------------------------------------------------------------------------------------------
# running pytest


class Side:
    """One implementation under test: tilejit (aliased) or Triton."""

    def __init__(self, name: str, python: str, alias: bool, pythonpath: list[str], device: str,
                 lenient: bool = False, triton_internal_testing: bool = False):
        self.name, self.python, self.alias, self.device = name, python, alias, device
        self.pythonpath, self.lenient = pythonpath, lenient
        self.triton_internal_testing = triton_internal_testing

    cache_dir: str | None = None  # TILEJIT_CACHE_DIR for the tilejit side (None: leave as is)

    def env(self, support: Path | None) -> dict:
        env = dict(os.environ)
        if self.alias and self.cache_dir:
            env["TILEJIT_CACHE_DIR"] = self.cache_dir
        paths = [str(TOOLS)] + self.pythonpath
        env.pop("TRITON_TESTS_ALIAS", None)
        env.pop("TRITON_TESTS_LENIENT", None)
        env.pop("TRITON_TESTS_INTERNAL", None)
        if self.alias:
            env["TRITON_TESTS_ALIAS"] = "tilejit"
            if self.lenient:
                env["TRITON_TESTS_LENIENT"] = "1"
            if self.triton_internal_testing:
                env["TRITON_TESTS_INTERNAL"] = "triton"
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        if support is not None:
            env["TRITON_TESTS_SUPPORT"] = str(support)
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
            env.pop("TILEJIT_INTERPRET", None)
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        env["PYTHONFAULTHANDLER"] = "1"
        return env


def _pytest_cmd(side: Side, folder: Path, files: list[Path], extra: list[str]) -> list[str]:
    return [side.python, "-m", "pytest", "-p", "triton_tests_plugin", "-p", "no:cacheprovider",
            "-q", "--no-header", "--tb=no", "-o", "addopts=", "--rootdir", str(folder),
            "--continue-on-collection-errors",  # a file that fails to import must not stop the others
            "--device", side.device, *extra, *[str(f) for f in files]]


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by a killed process
    return out


def collect(side: Side, folder: Path, files: list[Path], support, log) -> tuple[dict, dict]:
    """{id: marks} and {file: collection error} as `side` collects them."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "collect.jsonl"
        env = side.env(support) | {"TRITON_TESTS_MODE": "collect", "TRITON_TESTS_OUT": str(out)}
        subprocess.run(_pytest_cmd(side, folder, files, []), cwd=folder, env=env,
                       stdout=log, stderr=subprocess.STDOUT, timeout=1800, check=False)
        ids, errors = {}, {}
        for rec in _read_jsonl(out):
            if rec["kind"] == "item":
                ids[rec["id"]] = rec["marks"]
            elif rec["kind"] == "collect_error":
                errors[file_of(rec["path"]) if rec["path"] else "?"] = rec["msg"]
            elif rec["kind"] == "session":
                log.write(f"[{side.name}] alias: {rec['alias']}\n".encode())
        return ids, errors


def _run_shard(side, folder, files, ids, support, timeout, log, progress) -> dict:
    """Runs `ids` in one process after another until each has a result (resuming after crashes
    and hard hangs). Returns {id: record}."""
    results: dict[str, dict] = {}
    remaining = list(ids)
    grace = max(30.0, timeout * 0.5)
    with tempfile.TemporaryDirectory() as tmp:
        attempt = 0
        while remaining:
            attempt += 1
            ids_file, out = Path(tmp) / f"ids{attempt}.txt", Path(tmp) / f"out{attempt}.jsonl"
            ids_file.write_text("\n".join(remaining) + "\n", encoding="utf-8")
            env = side.env(support) | {"TRITON_TESTS_MODE": "run", "TRITON_TESTS_OUT": str(out),
                                       "TRITON_TESTS_IDS": str(ids_file),
                                       "TRITON_TESTS_TIMEOUT": str(timeout)}
            wanted = {function_of(i).split("::", 1)[0] for i in remaining}
            run_files = [f for f in files if f.name in wanted]
            proc = subprocess.Popen(
                _pytest_cmd(side, folder, run_files, []), cwd=folder, env=env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            seen = 0
            last_change = time.time()
            current = None
            killed = False
            while proc.poll() is None:
                time.sleep(0.5)
                records = _read_jsonl(out)
                if len(records) != seen:
                    for rec in records[seen:]:
                        if rec["kind"] == "start":
                            current = rec["id"]
                        elif rec["kind"] == "result":
                            results[rec["id"]] = rec
                            current = None
                            progress(side.name)
                    seen = len(records)
                    last_change = time.time()
                elif current is not None and time.time() - last_change > timeout + grace:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    killed = True
            records = _read_jsonl(out)
            collect_errors = {}
            for rec in records[seen:]:
                if rec["kind"] == "start":
                    current = rec["id"]
                elif rec["kind"] == "result":
                    results[rec["id"]] = rec
                    current = None
                    progress(side.name)
            for rec in records:
                if rec["kind"] == "collect_error":
                    collect_errors[file_of(rec["path"])] = rec["msg"]
            if current is not None and current not in results:
                outcome = "timeout" if killed else "crashed"
                results[current] = {"id": current, "outcome": outcome,
                                    "msg": f"process {'killed' if killed else 'died'} "
                                           f"(exit {proc.returncode})"}
            started = {r["id"] for r in records if r["kind"] == "start"}
            if not started:
                for i in remaining:  # pytest never reached these ids: they were not collected
                    results.setdefault(i, {"id": i, "outcome": "not-collected",
                                           "msg": collect_errors.get(file_of(i), "id not collected")})
            remaining = [i for i in remaining if i not in results]
    return results


def run_side(side, folder, files, ids, support, timeout, jobs, log, progress) -> dict:
    if jobs <= 1 or len(ids) < 2 * jobs:
        return _run_shard(side, folder, files, ids, support, timeout, log, progress)
    import concurrent.futures
    shards = [ids[k::jobs] for k in range(jobs)]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(_run_shard, side, folder, files, s, support, timeout, log, progress)
                   for s in shards]
        for fut in futures:
            results.update(fut.result())
    return results


# ----------------------------------------------------------------------------------------------
# reporting


def summarize(tests: dict, has_ref: bool) -> dict:
    """Per file: ids, reference passes, tilejit passes, tilejit passes among reference passes."""
    table = collections.OrderedDict()
    for tid, t in sorted(tests.items()):
        row = table.setdefault(file_of(tid), collections.Counter())
        row["ids"] += 1
        ref, tj = t.get("reference"), t.get("tilejit")
        row["tilejit_pass"] += is_pass(tj)
        row["tilejit_skip"] += bool(tj) and tj.get("outcome") == "skipped"
        if has_ref:
            row["ref_pass"] += is_pass(ref)
            row["ref_skip"] += bool(ref) and ref.get("outcome") == "skipped"
            row["both_pass"] += is_pass(ref) and is_pass(tj)
            row["tilejit_only"] += is_pass(tj) and not is_pass(ref)
    total = collections.Counter()
    for row in table.values():
        total.update(row)
    table["TOTAL"] = total
    return table


def regressions(tests: dict, has_ref: bool) -> dict:
    """Ids that tilejit fails (and the reference passes, when there is one)."""
    return {tid: t for tid, t in tests.items()
            if t.get("tilejit") and not is_pass(t["tilejit"]) and t["tilejit"].get("outcome") != "skipped"
            and (not has_ref or is_pass(t.get("reference")))}


def format_report(tests: dict, has_ref: bool, top: int = 40) -> str:
    lines = []
    table = summarize(tests, has_ref)
    if has_ref:
        lines.append(f"{'file':28} {'ids':>6} {'ref pass':>8} {'tj pass':>8} {'both':>6} {'tj/ref':>7}"
                     f" {'ref skip':>8} {'tj skip':>8}")
        for name, r in table.items():
            pct = 100.0 * r["both_pass"] / r["ref_pass"] if r["ref_pass"] else 0.0
            lines.append(f"{name:28} {r['ids']:6} {r['ref_pass']:8} {r['tilejit_pass']:8} "
                         f"{r['both_pass']:6} {pct:6.1f}% {r['ref_skip']:8} {r['tilejit_skip']:8}")
    else:
        lines.append(f"{'file':28} {'ids':>6} {'pass':>6} {'skip':>6}")
        for name, r in table.items():
            lines.append(f"{name:28} {r['ids']:6} {r['tilejit_pass']:6} {r['tilejit_skip']:6}")
    durations = collections.Counter()
    for t in tests.values():
        for side in ("reference", "tilejit"):
            durations[side] += (t.get(side) or {}).get("dur", 0.0)
    lines.append("time in tests (sum of per-test durations): " +
                 ", ".join(f"{k} {v:.0f}s" for k, v in durations.items() if v))
    bad = regressions(tests, has_ref)
    what = "tilejit fails, reference passes" if has_ref else "tilejit fails"
    lines.append(f"\n{len(bad)} ids: {what}. By test function (first error line):")
    by_fn = collections.defaultdict(list)
    for tid in sorted(bad):
        by_fn[function_of(tid)].append(tid)
    for fn, tids in sorted(by_fn.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(tids):5}  {fn}: {first_error(bad[tids[0]]['tilejit'])[:200]}")
    lines.append("\nBy error signature (count, signature, one test id, where):")
    by_sig = collections.defaultdict(list)
    for tid in sorted(bad):
        by_sig[error_signature(bad[tid]["tilejit"])].append(tid)
    for sig, tids in sorted(by_sig.items(), key=lambda kv: -len(kv[1]))[:top]:
        rec = bad[tids[0]]["tilejit"]
        lines.append(f"  {len(tids):5}  {sig}\n         e.g. {tids[0]}  @ {rec.get('where')}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="folder holding Triton's test files")
    ap.add_argument("--files", nargs="+", default=list(DEFAULT_FILES), help="test file names to run")
    ap.add_argument("--reference", help="python of a Triton installation to compare with")
    ap.add_argument("--reuse-reference", type=Path,
                    help="take ids and reference results from an earlier --json file")
    ap.add_argument("--python", default=sys.executable, help="python that runs tilejit")
    ap.add_argument("--pythonpath", default=None,
                    help="os.pathsep-separated paths for tilejit (default: this checkout)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--sample", type=int, help="run a seeded sample of N ids")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--select", help="regex on node ids: run only matching ids")
    ap.add_argument("--marked", help="only ids with this pytest mark (e.g. interpreter)")
    ap.add_argument("--only-ref-passed", action="store_true",
                    help="with --reuse-reference: run tilejit only on ids the reference passed")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    ap.add_argument("--jobs", type=int, default=1, help="pytest processes per side at once")
    ap.add_argument("--no-tilejit", action="store_true", help="run only the reference")
    ap.add_argument("--lenient", action="store_true",
                    help="diagnostic: Triton names tilejit lacks become placeholders that raise when "
                         "used, so files still collect; not for pass counts")
    ap.add_argument("--triton-internal-testing", action="store_true",
                    help="diagnostic: Triton's own _internal_testing.py (FOLDER/_support) in place of "
                         "the alias's; not for pass counts")
    ap.add_argument("--cache-dir", default=None,
                    help="TILEJIT_CACHE_DIR for tilejit (default: a fresh folder for this run, removed "
                         "after it; 'keep' uses the environment's): the thousands of kernels the tests "
                         "compile stay out of the user's cache")
    ap.add_argument("--json", type=Path, help="write all results here")
    ap.add_argument("--log", type=Path, help="pytest output of all runs (default: discarded)")
    args = ap.parse_args(argv)

    folder = args.folder.resolve()
    files = find_test_files(folder, args.files)
    if not files:
        ap.error(f"none of {args.files} under {folder}")
    support = folder / "_support" if (folder / "_support" / "_internal_testing.py").exists() else None
    pythonpath = args.pythonpath.split(os.pathsep) if args.pythonpath else default_pythonpath()
    tj = Side("tilejit", args.python, True, pythonpath, args.device, lenient=args.lenient,
              triton_internal_testing=args.triton_internal_testing)
    ref = Side("reference", args.reference, False, [], args.device) if args.reference else None
    log = open(args.log if args.log else os.devnull, "ab")  # noqa: SIM115 (open for the whole run)
    cache_tmp = None
    if args.cache_dir is None:
        cache_tmp = tempfile.TemporaryDirectory(prefix="triton-tests-cache-")
        tj.cache_dir = cache_tmp.name
    elif args.cache_dir != "keep":
        tj.cache_dir = args.cache_dir
    t0 = time.time()

    tests: dict[str, dict] = {}
    collect_errors: dict[str, dict] = {}
    if args.reuse_reference:
        old = json.loads(args.reuse_reference.read_text())
        for tid, t in old["tests"].items():
            tests[tid] = {"marks": t.get("marks", []), "reference": t.get("reference")}
        has_ref = any(t.get("reference") for t in tests.values())
        ref = None
    else:
        has_ref = ref is not None
        source = ref or tj
        ids, errs = collect(source, folder, files, support, log)
        collect_errors[source.name] = errs
        for tid, marks in ids.items():
            tests[tid] = {"marks": marks}
        if ref is not None and not args.no_tilejit:
            tj_ids, tj_errs = collect(tj, folder, files, support, log)
            collect_errors["tilejit"] = tj_errs
            print(f"collected: reference {len(ids)}, tilejit {len(tj_ids)} "
                  f"({len(set(ids) - set(tj_ids))} reference ids missing under tilejit)")
    chosen = sorted(tests)
    if args.select:
        chosen = [t for t in chosen if re.search(args.select, t)]
    if args.marked:
        chosen = [t for t in chosen if args.marked in tests[t]["marks"]]
    if args.only_ref_passed:
        chosen = [t for t in chosen if is_pass(tests[t].get("reference"))]
    chosen = sample_ids(chosen, args.sample, args.seed)
    tests = {t: tests[t] for t in chosen}
    print(f"{len(chosen)} ids from {len(files)} files; timeout {args.timeout:g}s; device {args.device}",
          flush=True)

    done = collections.Counter()
    last_print = [time.time()]

    def progress(name):
        done[name] += 1
        if time.time() - last_print[0] > 60:
            last_print[0] = time.time()
            print(f"  {dict(done)} of {len(chosen)} ({time.time() - t0:.0f}s)", flush=True)

    sides = ([ref] if ref else []) + ([] if args.no_tilejit else [tj])
    for side in sides:
        res = run_side(side, folder, files, chosen, support, args.timeout, args.jobs, log, progress)
        for tid in chosen:
            tests[tid][side.name] = res.get(tid, {"outcome": "not-run"})

    if args.json:  # written before the report, so that a report bug cannot lose a long run
        meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "folder": str(folder), "files": [f.name for f in files], "device": args.device,
                "sample": args.sample, "seed": args.seed, "select": args.select, "timeout": args.timeout,
                "lenient": args.lenient, "triton_internal_testing": args.triton_internal_testing,
                "tilejit_python": args.python, "tilejit_pythonpath": pythonpath,
                "reference_python": args.reference, "reused_reference": str(args.reuse_reference or ""),
                "collect_errors": collect_errors, "seconds": round(time.time() - t0)}
        args.json.write_text(json.dumps({"meta": meta, "tests": tests}, indent=1))
    if cache_tmp is not None:
        cache_tmp.cleanup()
    print(format_report(tests, has_ref))
    print(f"\n{time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
