"""Mismatch classes the fuzzer found that are not fixed yet. A CI seed that fails and matches one is
an expected failure (xfail); the class's regression test in test_fuzz_regressions.py is a strict
xfail that flips when the fix lands -- then delete the class here. A predicate may match more seeds
than fail: only failing seeds are excused."""
import re

KNOWN = [
    # tl.cumprod of int8/int16/uint8/uint16 keeps the narrow type; Triton widens to int32/uint32.
    ("cumprod-narrow-int", lambda case: re.search(r"tl\.cumprod\(", case.body) is not None
     and case.args[0].value.dtype.itemsize < 4 and case.args[0].value.dtype.kind in "iu"),
    # tl.cumsum / tl.cumprod of bf16 give fp32; Triton keeps bf16.
    ("scan-bf16", lambda case: re.search(r"tl\.cum(sum|prod)\(", case.body) is not None and "bfloat16" in case.body),
    # `signed >> unsigned` (promoted to the unsigned type) shifts logically; Triton shifts arithmetically
    # because the left operand is signed (another helper changes this).
    ("signed-shr-unsigned", lambda case: case.family == "promotion" and " >> (" in case.body),
]


def known_class(case):
    """The name of the known mismatch class `case` belongs to, or None."""
    for name, matches in KNOWN:
        if matches(case):
            return name
    return None
