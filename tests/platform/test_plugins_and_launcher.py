import pluggy
import pytest

from tilejit import plugins
from tilejit.backends import GPUTarget, normalize_grid
from tilejit.hookspecs import hookimpl
from platform_fakes import FakeGPUBackend, StageRenamingPlugin

PLUGIN_GROUP = plugins.PLUGIN_GROUP


class LaunchLog:
    def __init__(self):
        self.events = []

    @hookimpl
    def tilejit_pre_launch(self, kernel_name, grid, args):
        self.events.append(("pre", kernel_name, grid, len(args)))

    @hookimpl
    def tilejit_post_launch(self, kernel_name, grid, args):
        self.events.append(("post", kernel_name, grid, len(args)))


class PassAdder:
    @hookimpl
    def tilejit_ttir_passes(self, passes, options):
        passes.append("my-pass")


class FakeCompiled:
    name = "add_kernel"


def test_entry_point_plugins_load_and_broken_ones_are_skipped(fake_entry_points):
    fake_entry_points({PLUGIN_GROUP: [
        ("stages", "platform_fakes:StageRenamingPlugin"),
        ("missing", "tilejit_no_such_plugin_xyz"),
        ("badsig", "platform_fakes:BadSignaturePlugin"),
    ]})
    with pytest.warns(RuntimeWarning) as record:
        manager = plugins.get_plugin_manager()
    assert sorted(str(w.message).split("'")[1] for w in record) == ["badsig", "missing"]
    broken = plugins.broken_plugins()
    assert set(broken) == {"missing", "badsig"}
    assert "ModuleNotFoundError" in broken["missing"] and "not_a_hook_argument" in broken["badsig"]
    stages = {"ttir": None, "fakebin": None}
    manager.hook.tilejit_add_stages(stages=stages, options=None, target=GPUTarget.parse("cuda:90"))
    assert list(stages) == ["ttir", "fakebin", "checksum"]


def test_register_rejects_mismatched_hooks_and_keeps_the_manager_usable(fake_entry_points):
    fake_entry_points({})
    from platform_fakes import BadSignaturePlugin
    with pytest.raises(pluggy.PluginValidationError):
        plugins.register(BadSignaturePlugin())
    adder = PassAdder()
    plugins.register(adder)
    passes = ["canonicalize"]
    plugins.get_plugin_manager().hook.tilejit_ttir_passes(passes=passes, options=None)
    assert passes == ["canonicalize", "my-pass"]
    plugins.unregister(adder)
    plugins.get_plugin_manager().hook.tilejit_ttir_passes(passes=passes, options=None)
    assert passes == ["canonicalize", "my-pass"]


def test_launcher_skips_empty_grids_and_leaves_hooks_to_the_compiled_kernel(fake_entry_points):
    # Hooks fire once per launch in CompiledKernel.run (tests/runtime); the launcher must not fire
    # them again.
    fake_entry_points({})
    log = LaunchLog()
    plugins.register(log, name="launch-log")
    launcher = FakeGPUBackend(GPUTarget("fakegpu", 7, 16)).make_launcher(FakeCompiled())
    launcher((4, 2), [1, 2, 3])
    launcher(0, [1])  # a zero dimension launches nothing
    assert launcher.launches == [((4, 2, 1), (1, 2, 3))]
    assert log.events == []


def test_normalize_grid():
    assert normalize_grid(5) == (5, 1, 1)
    assert normalize_grid((2, 3, 4)) == (2, 3, 4)
    with pytest.raises(ValueError):
        normalize_grid((1, 2, 3, 4))
    with pytest.raises(TypeError):
        normalize_grid((1.5,))
    with pytest.raises(ValueError):
        normalize_grid((-1,))
    assert StageRenamingPlugin  # imported from the fakes module used by entry points
