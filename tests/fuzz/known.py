"""Mismatch classes the fuzzer found that are not fixed yet: a seed that hits one is expected to fail
(its regression test in test_fuzz_regressions.py is a strict xfail that flips when the fix lands;
then delete the class here)."""
import re

KNOWN = [
    # tl.cumprod of int8/int16/uint8/uint16 keeps the narrow type; Triton widens to int32/uint32.
    ("cumprod-narrow-int", lambda case: re.search(r"tl\.cumprod\(", case.body) is not None
     and case.args[0].value.dtype.itemsize < 4 and case.args[0].value.dtype.kind in "iu"),
    # tl.cumsum / tl.cumprod of bf16 give fp32; Triton keeps bf16.
    ("scan-bf16", lambda case: re.search(r"tl\.cum(sum|prod)\(", case.body) is not None and "bfloat16" in case.body),
]


def known_class(case):
    """The name of the known mismatch class `case` belongs to, or None."""
    for name, matches in KNOWN:
        if matches(case):
            return name
    return None
