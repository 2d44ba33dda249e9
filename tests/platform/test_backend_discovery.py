import warnings

import numpy as np
import pytest

import tilejit.backends as tb
from tilejit.backends import (BACKEND_GROUP, BackendUnavailableError, GPUTarget, MixedDevicesError,
                              TargetError, available_backends, backend_for_target, broken_backends,
                              select_target, target)
from platform_fakes import FakeCPUBackend, FakeDeviceArray, FakeGPUBackend


def test_good_backends_load_and_broken_ones_are_reported(standard_fakes):
    with pytest.warns(RuntimeWarning, match="broken") as record:
        backends = available_backends()
    assert backends == {"fakegpu": FakeGPUBackend, "fakecpu": FakeCPUBackend}
    broken = broken_backends()
    assert set(broken) == {"missingmod", "notabackend", "future"}
    assert "ModuleNotFoundError" in broken["missingmod"] and "tilejit_no_such_module_xyz" in broken["missingmod"]
    assert "BaseBackend subclass" in broken["notabackend"]
    assert "API version 99" in broken["future"]
    assert len(record) == 3  # one warning per broken plugin


def test_discovery_runs_once_and_warns_once(standard_fakes):
    with pytest.warns(RuntimeWarning):
        available_backends()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        available_backends()
        broken_backends()


def test_class_name_must_match_entry_point(fake_entry_points):
    fake_entry_points({BACKEND_GROUP: [("gpu2", "platform_fakes:FakeGPUBackend")]})
    with pytest.warns(RuntimeWarning):
        assert available_backends() == {}
    assert "declares name = 'fakegpu'" in broken_backends()["gpu2"]


def test_backend_for_target_is_cached_per_target(standard_fakes):
    with pytest.warns(RuntimeWarning):
        first = backend_for_target("fakegpu:7:16")
    assert isinstance(first, FakeGPUBackend) and first.target == GPUTarget("fakegpu", 7, 16)
    assert backend_for_target(GPUTarget("fakegpu", 7, 16)) is first
    assert backend_for_target("fakegpu:8:16") is not first


def test_missing_backend_says_how_to_install(standard_fakes):
    with pytest.warns(RuntimeWarning):
        available_backends()
    with pytest.raises(BackendUnavailableError, match=r"pip install tilejit\[nvidia\]"):
        backend_for_target("cuda:90")
    with pytest.raises(BackendUnavailableError, match="plugin is broken"):
        backend_for_target("future")


# ---- target selection, in DESIGN.md's order -----------------------------------------------------
@pytest.fixture
def quiet_fakes(standard_fakes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        available_backends()
    yield


def test_explicit_beats_everything(quiet_fakes, monkeypatch):
    monkeypatch.setenv("TILEJIT_TARGET", "fakecpu")
    with target("hip:gfx942"):
        assert select_target([FakeDeviceArray(4)], explicit="cuda:80") == GPUTarget("cuda", 80, 32)


def test_context_manager_beats_env_and_args_and_nests(quiet_fakes, monkeypatch):
    monkeypatch.setenv("TILEJIT_TARGET", "fakecpu")
    with target("cuda:90") as outer:
        assert outer == GPUTarget("cuda", 90, 32)
        assert select_target([FakeDeviceArray(4)]) == outer
        with target("hip:gfx942"):
            assert select_target([]) == GPUTarget("hip", "gfx942", 64)
        assert select_target([]) == outer
    assert select_target([]) == GPUTarget("fakecpu", "default", 1)  # back to the environment


def test_context_manager_resets_on_error(quiet_fakes):
    with pytest.raises(RuntimeError):
        with target("cuda:90"):
            raise RuntimeError("boom")
    assert tb.current_explicit_target() is None


def test_env_beats_args(quiet_fakes, monkeypatch):
    monkeypatch.setenv("TILEJIT_TARGET", "hip:gfx90a")
    assert select_target([FakeDeviceArray(4)]) == GPUTarget("hip", "gfx90a", 64)
    monkeypatch.delenv("TILEJIT_TARGET")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # device tensors go to the interpreter, which copies them
    assert select_target([FakeDeviceArray(4)]) == GPUTarget("interpreter", "numpy", 1)


def test_bad_env_target_names_the_variable(quiet_fakes, monkeypatch):
    monkeypatch.setenv("TILEJIT_TARGET", "cuda:big")
    with pytest.raises(TargetError, match="TILEJIT_TARGET"):
        select_target([])


def test_arguments_choose_their_owner(quiet_fakes):
    assert select_target([FakeDeviceArray(4), 3, 1.5]) == GPUTarget("fakegpu", 7, 16)
    assert select_target([np.zeros(4), None, 7]) == GPUTarget("fakecpu", "numpy", 1)


def test_mixed_devices_name_the_arguments(quiet_fakes):
    with pytest.raises(MixedDevicesError) as info:
        select_target([np.zeros(2), 5, FakeDeviceArray(2)], names=["x", "n", "y"])
    message = str(info.value)
    assert "argument 0 ('x')" in message and "argument 2 ('y')" in message and "'n'" not in message
    assert isinstance(info.value, ValueError)


def test_single_active_backend_when_arguments_do_not_decide(quiet_fakes):
    # Two active backends, but the CPU one is a fallback: the device backend wins.
    assert select_target([1, 2.0]) == GPUTarget("fakegpu", 7, 16)
    FakeGPUBackend.ACTIVE = False
    assert select_target([1, 2.0]) == GPUTarget("fakegpu", 7, 16)  # the driver probe is cached...
    tb.reset_backends()
    with pytest.warns(RuntimeWarning):  # rediscovery reports the broken fakes again
        assert select_target([1, 2.0]) == GPUTarget("fakecpu", "numpy", 1)  # ...until discovery is reset


def test_no_active_backend_lists_installed_and_missing(fake_entry_points):
    fake_entry_points({BACKEND_GROUP: [("fakegpu", "platform_fakes:FakeGPUBackend")]})
    FakeGPUBackend.ACTIVE = False
    try:
        with pytest.raises(BackendUnavailableError) as info:
            select_target([np.zeros(1)])
    finally:
        FakeGPUBackend.ACTIVE = True
    message = str(info.value)
    assert "no backend is active" in message
    assert "fakegpu: inactive (no fake GPU plugged in)" in message
    assert "pip install tilejit[interpreter]" in message and "pip install tilejit[amd]" in message


def test_several_device_backends_are_ambiguous(fake_entry_points):
    fake_entry_points({BACKEND_GROUP: [("fakegpu", "platform_fakes:FakeGPUBackend"),
                                       ("exploding", "platform_fakes:ExplodingProbeBackend"),
                                       ("fakecpu", "platform_fakes:FakeCPUBackend")]})
    # A driver probe that raises counts as inactive, so fakegpu is still the only device backend.
    assert select_target([]) == GPUTarget("fakegpu", 7, 16)
    assert "driver check failed: OSError" in tb.registry.installation_summary()
