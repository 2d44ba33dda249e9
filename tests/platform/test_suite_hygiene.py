"""The suite must pass on a fresh clone, where only the project's own set-up has installed anything.

A tool looked up on PATH (`shutil.which("filecheck")`, `subprocess.run(["ptxas", ...])`) is found on a
developer's machine and missing in CI's clean venv, so tests resolve tools through
tests/toolchain_paths.py instead; this test keeps it that way.
"""
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PATH_LOOKUP = re.compile(r"shutil\.which\(|subprocess\.\w+\(\s*\[\s*[\"'](?!-)[\w.+-]+[\"']")


def test_no_test_looks_a_tool_up_on_path():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == "toolchain_paths.py" or path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PATH_LOOKUP.search(line):
                offenders.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert not offenders, "resolve tools through tests/toolchain_paths.py:\n" + "\n".join(offenders)
