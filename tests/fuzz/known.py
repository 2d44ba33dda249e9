"""Mismatch classes the fuzzer found that are not fixed yet. A CI seed that fails and matches one is
an expected failure (xfail); the class's regression test in test_fuzz_regressions.py is a strict
xfail that flips when the fix lands -- then delete the class here. A predicate may match more seeds
than fail: only failing seeds are excused."""

KNOWN = [
    # (name, predicate on the generated case); none open now.
]


def known_class(case):
    """The name of the known mismatch class `case` belongs to, or None."""
    for name, matches in KNOWN:
        if matches(case):
            return name
    return None
