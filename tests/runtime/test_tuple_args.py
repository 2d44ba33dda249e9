"""Tuple kernel parameters (Triton 3.x): specialization of each element, the nested signature the
frontend receives, the flattened launch, and results checked against NumPy on the interpreter."""
from collections import namedtuple

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.runtime.jit import _TUPLE


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch, tmp_path):
    for knob in ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    for kernel in (sum_of_pointers, mixed_tuple, nested_tuple):
        kernel.clear_cache()


@tilejit.jit
def sum_of_pointers(ptrs, out_ptr, n, BLOCK: tl.constexpr):
    """out = ptrs[0] + ptrs[1] + ptrs[2]."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.zeros([BLOCK], tl.float32)
    for i in tl.static_range(len(ptrs)):
        total += tl.load(ptrs[i] + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)


@tilejit.jit
def mixed_tuple(args, BLOCK: tl.constexpr):
    """args = (x_ptr, out_ptr, n, scale, SHIFT): out = x * scale + SHIFT, SHIFT a constexpr element."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < args[2]
    x = tl.load(args[0] + offsets, mask=mask)
    tl.store(args[1] + offsets, x * args[3] + args[4], mask=mask)


@tilejit.jit
def nested_tuple(pair_of_pairs, n, BLOCK: tl.constexpr):
    """((x, y), (out, factor)): out = (x - y) * factor."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    inputs = pair_of_pairs[0]
    outputs = pair_of_pairs[1]
    x = tl.load(inputs[0] + offsets, mask=mask)
    y = tl.load(inputs[1] + offsets, mask=mask)
    tl.store(outputs[0] + offsets, (x - y) * outputs[1], mask=mask)


def _only_kernel(jit_function):
    (per_target,) = jit_function.cache.values()
    (entry,) = per_target.values()
    return entry[0]


def test_tuple_of_pointers_matches_numpy():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(300).astype(np.float32) for _ in range(3))
    out = np.zeros(300, np.float32)
    sum_of_pointers[(3,)]((a, b, c), out, 300, BLOCK=128)
    np.testing.assert_allclose(out, a + b + c, rtol=1e-6)


def test_tuple_signature_metadata_and_runtime_names():
    a = np.zeros(32, np.float32)
    kernel = sum_of_pointers.warmup((a, a, a), a, 32, BLOCK=32, grid=(1,))
    assert kernel.metadata["param_types"][0] == ["ptrs", ["*fp32", "*fp32", "*fp32"]]
    # Launchers see one flat signature entry per element, in the kernel's argument order.
    assert kernel.runtime_arg_names == ["ptrs[0]", "ptrs[1]", "ptrs[2]", "out_ptr", "n"]
    # Every element is a 16-byte aligned pointer, and n = 32 is divisible by 16.
    assert kernel.asm["ttir"].count("tt.divisibility = 16") == 5


def test_tuple_elements_are_specialized_one_by_one():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(100).astype(np.float32)
    out = np.zeros(100, np.float32)
    mixed_tuple[(1,)]((x, out, 100, 2.5, 7), BLOCK=128)
    np.testing.assert_allclose(out, x * 2.5 + 7, rtol=1e-6)
    (per_target,) = mixed_tuple.cache.values()
    ((spec_key, _options, _target),) = per_target
    entry, block = spec_key
    assert block == 128
    assert entry[0] == _TUPLE
    types = [element[0] for element in entry[1]]
    assert types == ["*fp32", "*fp32", "i32", "fp32", "i32"]

    # An element equal to 1 becomes a constexpr (path key (0, 3)), another value a runtime argument.
    out2 = np.zeros(100, np.float32)
    kernel = mixed_tuple[(1,)]((x, out2, 100, 1, 7), BLOCK=128)
    np.testing.assert_allclose(out2, x + 7, rtol=1e-6)
    assert kernel.metadata["param_types"][0][1][3] == "constexpr"
    assert kernel.metadata["constants"]["0,3"] == 1
    assert kernel.runtime_arg_names == ["args[0]", "args[1]", "args[2]", "args[4]"]
    assert len(mixed_tuple.cache[kernel.target]) == 2


def test_constexpr_tuple_element_from_tl_constexpr():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    kernel = mixed_tuple[(1,)]((x, out, 64, 3.0, tl.constexpr(5)), BLOCK=64)
    np.testing.assert_allclose(out, x * 3 + 5)
    assert kernel.metadata["param_types"][0][1][4] == "constexpr"
    assert "args[4]" not in kernel.runtime_arg_names


def test_nested_tuples_and_named_tuples():
    Inputs = namedtuple("Inputs", ["x", "y"])
    x = np.arange(40, dtype=np.float32)
    y = np.ones(40, np.float32)
    out = np.zeros(40, np.float32)
    kernel = nested_tuple[(1,)]((Inputs(x, y), (out, 3.0)), 40, BLOCK=64)
    np.testing.assert_allclose(out, (x - y) * 3)
    assert kernel.runtime_arg_names == ["pair_of_pairs[0][0]", "pair_of_pairs[0][1]", "pair_of_pairs[1][0]",
                                        "pair_of_pairs[1][1]", "n"]


def test_compiled_kernel_accepts_tuples_or_flat_arguments():
    a, b, c = (np.full(16, v, np.float32) for v in (1, 2, 3))
    out = np.zeros(16, np.float32)
    kernel = sum_of_pointers.warmup((a, b, c), out, 16, BLOCK=16, grid=(1,))
    kernel[(1,)]((a, b, c), out, 16)  # runtime parameters, the tuple as a tuple
    np.testing.assert_allclose(out, 6)
    out[:] = 0
    kernel[(1,)]((a, b, c), out, 16, 16)  # every parameter, the constexpr included
    np.testing.assert_allclose(out, 6)
    out[:] = 0
    kernel[(1,)](a, b, c, out, 16)  # already flat, as launchers take them
    np.testing.assert_allclose(out, 6)
    with pytest.raises(TypeError, match="tuple of 3 elements"):
        kernel[(1,)]((a, b), out, 16)


def test_warmup_accepts_type_strings_inside_tuples():
    kernel = sum_of_pointers.warmup(("*fp32", "*fp32", "*fp32"), "*fp32", "i32", BLOCK=64, grid=(1,))
    assert kernel.runtime_arg_names == ["ptrs[0]", "ptrs[1]", "ptrs[2]", "out_ptr", "n"]
    assert "!tt.ptr<f32>" in kernel.asm["ttir"]


def test_a_bad_tuple_element_names_the_element():
    out = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"ptrs\[1\]"):
        sum_of_pointers[(1,)]((out, "not a tensor", out), out, 4, BLOCK=4)
