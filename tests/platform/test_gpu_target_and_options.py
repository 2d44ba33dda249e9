import dataclasses

import pytest

from tilejit.backends import BaseOptions, GPUTarget, OptionsError, TargetError
from tilejit.errors import TilejitError
from platform_fakes import FakeGPUBackend


@pytest.mark.parametrize("text, expected", [
    ("cuda:90", GPUTarget("cuda", 90, 32)),
    ("cuda:80", GPUTarget("cuda", 80, 32)),
    ("cuda:sm_90", GPUTarget("cuda", 90, 32)),
    ("hip:gfx942", GPUTarget("hip", "gfx942", 64)),
    ("hip:gfx90a", GPUTarget("hip", "gfx90a", 64)),
    ("hip:gfx1100", GPUTarget("hip", "gfx1100", 32)),
    ("interpreter", GPUTarget("interpreter", "numpy", 1)),
    ("toy", GPUTarget("toy", "default", 1)),
    ("toy:v2:8", GPUTarget("toy", "v2", 8)),
])
def test_parse(text, expected):
    assert GPUTarget.parse(text) == expected


@pytest.mark.parametrize("target", [
    GPUTarget("cuda", 90, 32), GPUTarget("hip", "gfx942", 64), GPUTarget("hip", "gfx1100", 32),
    GPUTarget("interpreter", "numpy", 1), GPUTarget("toy", "default", 1), GPUTarget("cuda", 90, 16),
    GPUTarget("toy", 3, 4),
])
def test_str_round_trips(target):
    assert GPUTarget.parse(str(target)) == target


def test_canonical_strings():
    assert str(GPUTarget("cuda", 90, 32)) == "cuda:90"
    assert str(GPUTarget("hip", "gfx942", 64)) == "hip:gfx942"
    assert str(GPUTarget("interpreter", "numpy", 1)) == "interpreter"


@pytest.mark.parametrize("bad", ["", "cuda", "cuda:ninety", "hip:942", "hip", "CUDA 90", "a:b:c:d", "cuda::90", 42])
def test_bad_strings_name_the_accepted_forms(bad):
    with pytest.raises(TargetError) as info:
        GPUTarget.parse(bad)
    assert "cuda:90" in str(info.value) and "hip:gfx942" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TilejitError)


def test_target_is_frozen_and_hashable():
    t = GPUTarget.parse("cuda:90")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.arch = 80
    assert {t: 1}[GPUTarget("cuda", 90, 32)] == 1


def test_unknown_option_names_the_key_and_the_allowed_ones():
    backend = FakeGPUBackend(GPUTarget.parse("fakegpu:7:16"))
    with pytest.raises(OptionsError) as info:
        backend.parse_options({"num_warps": 4, "num_wraps": 8})
    message = str(info.value)
    assert "'num_wraps'" in message and "num_warps" in message and "unroll" in message


def test_options_types_and_values_are_checked():
    backend = FakeGPUBackend(GPUTarget.parse("fakegpu:7:16"))
    with pytest.raises(OptionsError, match="num_warps must be of type int"):
        backend.parse_options({"num_warps": "4"})
    with pytest.raises(OptionsError, match="power of two"):
        backend.parse_options({"num_warps": 3})
    with pytest.raises(OptionsError, match="debug must be of type bool"):
        backend.parse_options({"debug": 1})


def test_options_hash_follows_the_fields():
    backend = FakeGPUBackend(GPUTarget.parse("fakegpu:7:16"))
    a = backend.parse_options({"num_warps": 8, "unroll": 2})
    assert a == backend.parse_options({"unroll": 2, "num_warps": 8})
    assert a.hash() == backend.parse_options({"unroll": 2, "num_warps": 8}).hash()
    assert a.hash() != backend.parse_options({"num_warps": 8, "unroll": 4}).hash()
    assert len(a.hash()) == 64 and backend.parse_options(a) is a
    assert BaseOptions().hash() != backend.parse_options({}).hash()  # the class is part of the hash


def test_debug_option_defaults_to_the_knob(monkeypatch):
    backend = FakeGPUBackend(GPUTarget.parse("fakegpu:7:16"))
    assert backend.parse_options({}).debug is False
    monkeypatch.setenv("TILEJIT_DEBUG", "1")
    assert backend.parse_options({}).debug is True
    assert backend.parse_options({"debug": False}).debug is False


def test_backend_refuses_foreign_target():
    with pytest.raises(TargetError, match="does not support target 'cuda:90'"):
        FakeGPUBackend(GPUTarget.parse("cuda:90"))
