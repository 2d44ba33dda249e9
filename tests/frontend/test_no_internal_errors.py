"""DESIGN.md: no Python-internal exception reaches the user from inside the compiler.

Every kernel of the generated corpus (`malformed_corpus.py`: wrong arguments to every main builtin,
wrong arity and keywords, misuse of objects, unsupported statements, huge and empty shapes, type
changes in control flow) must either compile or raise a `CompilationError` that names the corpus
file and the mutated line; a message must not be a Python-internal one in disguise either."""
import re

import numpy as np
import pytest

import tilejit
from tilejit.errors import CompilationError, TilejitError
from tilejit.frontend import ASTSource
from tilejit_interpreter.backend import INTERPRETER_TARGET

from . import malformed_corpus as corpus

CORPUS_PATH, CASES = corpus.build_corpus()
HELPERS_END = corpus.PRELUDE.count("\n") + 1  # errors inside the corpus' own @jit helpers land here

# The error is at a later line of the same kernel: the mutated value is only wrong where it is used
# (`x = flag + p` makes `x` a pointer; storing it fails at the `tl.store` below). `x = 1 << 200` is
# reported where it is assigned: as in Triton, a Python number assigned to a name becomes a tensor,
# and this one fits no integer type. A list comprehension compiles (unrolled); the list is wrong where
# it is stored.
REPORTED_AT_USE = {"x = flag + p", "x = [i for i in range(3)]"}
# The error is in the called @jit helper (a line of the user's file too).
REPORTED_IN_HELPER = {"x = recursive(x, 3)", "x = helper_mismatched_return(x, n)"}

# Python's own wording for errors of its internals: a message like this means a value reached a
# Python operation unchecked, and the user learns nothing about the tl call they got wrong.
INTERNAL_WORDING = re.compile(r"object is not iterable|not supported between instances|int\(\) argument must be|"
                              r"invalid literal for int\(\)|BoundMember|Traceback|unhashable type|"
                              r"object is not subscriptable \(key|takes \d+ positional argument")


def test_corpus_is_large_enough():
    assert len(CASES) >= 150
    assert len({kernel.__name__ for _, kernel, _, _ in CASES}) == len(CASES)


def _compile(kernel):
    return ASTSource(kernel, corpus.SIGNATURE, corpus.CONSTEXPRS).make_ir()


@pytest.mark.parametrize("case, kernel, first, last", CASES, ids=[c[0] for c in CASES])
def test_compiles_or_names_the_users_line(case, kernel, first, last):
    try:
        _compile(kernel)
        return
    except CompilationError as exc:
        error = exc
    # Anything else (a raw KeyError, TypeError, ...) propagates and fails the test with its traceback.
    assert error.file == CORPUS_PATH, f"{case!r}: the error does not name the kernel's file:\n{error}"
    if case in REPORTED_IN_HELPER:
        # as Triton, an error at the call whose cause (the innermost of the chain) is in the helper
        inner = error
        while isinstance(inner.__cause__, CompilationError):
            inner = inner.__cause__
        assert inner.line < HELPERS_END, f"{case!r}: expected a line of the called helper:\n{inner}"
    elif case in REPORTED_AT_USE:
        assert last < error.line <= last + 2, f"{case!r}: expected the line that uses the value:\n{error}"
    else:
        assert first <= error.line <= last, f"{case!r}: expected line {first}..{last}:\n{error}"
    rendered = str(error)
    assert f"{CORPUS_PATH}:{error.line}" in rendered
    assert not INTERNAL_WORDING.search(rendered), f"{case!r}: a Python-internal message:\n{rendered}"


# Launching costs ~50 ms per kernel on the interpreter: launch the hand-written cases that compile
# (the builtin-slot cases that compile are plain valid calls).
LAUNCHED = [c for c in CASES if "<-" not in c[0]]


@pytest.mark.parametrize("case, kernel, first, last", LAUNCHED, ids=[c[0] for c in LAUNCHED])
def test_compiled_mutants_run_on_the_interpreter(case, kernel, first, last):
    source = ASTSource(kernel, corpus.SIGNATURE, corpus.CONSTEXPRS)
    try:
        source.make_ir()
    except CompilationError:
        return  # covered by the test above
    p = np.linspace(-1, 1, 256, dtype=np.float32)
    q = np.zeros(16, np.float32)
    try:
        tilejit.compile(source, target=INTERPRETER_TARGET).run((1, 1, 1), [p, q, 4])
    except TilejitError as exc:  # allowed (a failed device_assert, ...), as long as it is ours
        assert CORPUS_PATH in str(exc) or not getattr(exc, "file", None), str(exc)
