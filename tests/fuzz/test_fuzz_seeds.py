"""CI's share of the differential fuzzer (issue 11, item 9): a few hundred generated kernels on the
interpreter against the NumPy model of Triton, and a sample cross-compiled for cuda:90 and hip:gfx942.
`bench/fuzz.py` runs thousands; docs/fuzzing.md tells how."""
import numpy as np
import pytest
from known import known_class
from tilejit.fuzz import ALL_FAMILIES, compare, cross_compile, generate, run_interpreter

SEEDS = range(200)
CROSS_SEEDS = range(0, 200, 10)


@pytest.mark.parametrize("seed", SEEDS)
def test_interpreter_matches_the_model(seed):
    case = generate(seed)
    outcome = run_interpreter(case)
    known = known_class(case)
    if known and outcome.failed:
        pytest.xfail(f"known mismatch class {known}: {outcome.detail}")
    assert outcome.status == "ok", f"seed {seed} ({case.family}): {outcome.detail}\n{case.source('triton')}"


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_cross_compilation_raises_nothing_but_compilation_errors(target):
    _require_toolchain(target)
    failures, compiled = [], 0
    for seed in CROSS_SEEDS:
        case = generate(seed)
        if case.family.startswith("dot-float8"):
            continue  # ~2 minutes of LLVM each (a finding of the fuzzer); bench/fuzz.py covers them
        outcome = cross_compile(case, target)
        if outcome.failed:
            failures.append(f"seed {seed} ({case.family}): {outcome.detail}")
        compiled += outcome.status == "ok"
    assert failures == []
    assert compiled >= len(CROSS_SEEDS) // 2  # most kernels reach the binary: the test tests something


def _require_toolchain(target):
    if target.startswith("cuda"):
        from tilejit_nvidia.toolchain import find_ptxas
        if find_ptxas() is None:
            pytest.skip("no ptxas")
    else:
        from tilejit_amd.toolchain import find_lld
        if find_lld() is None:
            pytest.skip("no ld.lld")


def test_generation_is_deterministic():
    for seed in (0, 7, 123):
        a, b = generate(seed), generate(seed)
        assert a.body == b.body and a.grid == b.grid and a.num_warps == b.num_warps
        for x, y in zip(a.args, b.args):
            assert x.name == y.name and np.array_equal(np.asarray(x.value), np.asarray(y.value))


def test_the_seeds_cover_every_family_and_type():
    cases = [generate(seed) for seed in SEEDS]
    families = {case.family.split("-")[0] for case in cases}
    assert families == set(ALL_FAMILIES)
    text = "\n".join(case.body for case in cases)
    for needle in ("tl.int8", "tl.uint64", "tl.float16", "tl.bfloat16", "tl.float64", " // ", " % ", " >> ",
                   " << ", "tl.where(", "tl.cumsum(", "tl.argmax(", "while k < K", "tl.atomic_add(", "tl.dot(",
                   "input_precision='tf32'", "input_precision='ieee'", "tl.float8e5"):
        assert needle in text, needle


def test_a_wrong_result_is_caught():
    case = generate(3)
    out = case.outputs()[0]
    wrong = np.array(out.expected, copy=True)
    wrong.flat[0] = wrong.flat[0] + 1 if wrong.dtype.kind in "iu" else wrong.flat[0] + 1.0
    assert compare(out.expected, wrong, out.tolerance) is not None
    assert compare(out.expected, out.expected, out.tolerance) is None
