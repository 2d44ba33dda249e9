"""The generated launch function of `kernel[grid](...)` (tilejit.runtime.fast_launch): once a launch
key is cached, every launch goes through it, so everything `_run` decides must still be decided
there, or handed to `_run`: binding (positional, keyword, defaults, errors), launch options, the
grid forms, the selection knobs and the scoped target, hooks set after the first launch, `debug`."""
import numpy as np
import pytest

from tilejit import compiler
from tilejit.compiler import CompiledKernel
from tilejit.runtime.jit import jit
from tilejit.language import constexpr


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: constexpr):
    pass


@jit
def with_defaults(x_ptr, n, scale=2.0, BLOCK: constexpr = 16):
    pass


@jit
def no_parameters():
    pass


@pytest.fixture(autouse=True)
def _fresh_kernels(monkeypatch):
    monkeypatch.setattr(CompiledKernel, "launch_enter_hook", None)
    monkeypatch.setattr(CompiledKernel, "launch_exit_hook", None)
    for kernel in (add_kernel, with_defaults, no_parameters):
        kernel.clear_cache()
        monkeypatch.setattr(kernel, "debug", None)


def _warm(x):
    add_kernel[(1,)](x, x, x, 4, BLOCK=16)


@pytest.mark.parametrize("call", [
    lambda x, y: add_kernel[(3,)](x, y, x, 8, 16),
    lambda x, y: add_kernel[(3,)](x, y, x, 8, BLOCK=16),
    lambda x, y: add_kernel[(3,)](x, y, out_ptr=x, n=8, BLOCK=16),
    lambda x, y: add_kernel[(3,)](BLOCK=16, n=8, out_ptr=x, y_ptr=y, x_ptr=x),
    lambda x, y: add_kernel.run(x, y, x, 8, BLOCK=16, grid=(3,)),
    lambda x, y: add_kernel.run(x, y_ptr=y, out_ptr=x, n=8, BLOCK=16, grid=(3, 1, 1)),
])
def test_every_way_of_passing_arguments_launches_the_same(fake, call):
    x, y = np.zeros(8, np.float32), np.ones(8, np.float32)
    for _ in range(3):  # the first launch compiles (the general path), the others are cached
        kernel = call(x, y)
    assert [launch[1:] for launch in fake.launches] == [((3, 1, 1), (x, y, x, 8), None)] * 3
    assert kernel.metadata["constants"] == {"BLOCK": 16} and len(add_kernel._launch_cache) == 1


def test_defaults_on_the_cached_path(fake):
    x = np.zeros(8, np.float32)
    for _ in range(2):
        with_defaults[(1,)](x, 8)
    with_defaults[(1,)](x, 8, 3.0)
    with_defaults[(1,)](x, 8, scale=3.0, BLOCK=32)
    assert [launch[2] for launch in fake.launches] == [(x, 8, 2.0), (x, 8, 2.0), (x, 8, 3.0), (x, 8, 3.0)]
    no_parameters[(2,)]()
    no_parameters[(2,)]()
    assert fake.launches[-1][1:] == ((2, 1, 1), (), None)


@pytest.mark.parametrize("call, message", [
    (lambda x: add_kernel[(1,)](x, x, x), "missing 2 required positional arguments: 'n' and 'BLOCK'"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, 16, 99), "takes 5 positional arguments but 6 were given"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, BLOCK=16, blok=3), "unexpected keyword argument.*'blok'"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, 16, n=3), "multiple values for argument 'n'"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, 16, x_ptr=x), "multiple values for argument 'x_ptr'"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, BLOCK=[16]), "constexpr arguments must be hashable"),
    (lambda x: add_kernel.run(x, x, grid=(1,)), "missing 3 required positional arguments"),
])
def test_binding_errors_are_the_same_once_the_launch_is_cached(fake, call, message):
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=message) as cold:
        call(x)
    _warm(x)
    with pytest.raises(TypeError, match=message) as warm:
        call(x)
    assert str(warm.value) == str(cold.value) and "add_kernel" in str(warm.value)
    assert len(fake.launches) == 1


def test_launch_options_and_streams_take_the_general_path(fake):
    x = np.zeros(4, np.float32)
    _warm(x)
    add_kernel[(1,)](x, x, x, 4, BLOCK=16, stream=7)
    add_kernel[(1,)](x, x, x, 4, BLOCK=16, num_warps=2)
    assert [launch[3] for launch in fake.launches] == [None, 7, None]
    assert len(add_kernel._launch_cache) == 2  # num_warps is another compilation
    with pytest.raises(TypeError, match="unexpected keyword argument.*'num_wraps'"):
        add_kernel[(1,)](x, x, x, 4, BLOCK=16, num_wraps=2)


@pytest.mark.parametrize("grid, launched", [((2, 3), (2, 3, 1)), ((2, 3, 4), (2, 3, 4)), ([5], (5, 1, 1)),
                                            ((np.int64(6),), (6, 1, 1)), (7, (7, 1, 1)),
                                            (lambda meta: (meta["n"] // meta["BLOCK"],), (2, 1, 1))])
def test_grids_on_the_cached_path(fake, grid, launched):
    x = np.zeros(32, np.float32)
    _warm(x)
    add_kernel[grid](x, x, x, 32, BLOCK=16)
    assert fake.launches[-1][1] == launched


@pytest.mark.parametrize("grid", [(), (1, 2, 3, 4), (-1,), (1.5,), "abc", (True,), (2 ** 31,)])
def test_bad_grids_on_the_cached_path(fake, grid):
    x = np.zeros(4, np.float32)
    _warm(x)
    with pytest.raises(ValueError, match="kernel 'add_kernel'"):
        add_kernel[grid](x, x, x, 4, BLOCK=16)


def test_an_empty_grid_launches_nothing_on_the_cached_path(fake):
    x = np.zeros(4, np.float32)
    _warm(x)
    kernel = add_kernel[(0,)](x, x, x, 4, BLOCK=16)
    assert isinstance(kernel, CompiledKernel) and len(fake.launches) == 1


def test_environment_changes_after_the_first_launch_count(fake, monkeypatch):
    import tilejit.backends as backends
    from tilejit.config import knobs

    def select(args=(), explicit=None, names=None):  # as the real selection: the knob first
        return backends.GPUTarget.parse(explicit or knobs.target or "fake")

    monkeypatch.setattr(backends, "select_target", select)
    x = np.zeros(4, np.float32)
    _warm(x)
    monkeypatch.setenv("TILEJIT_TARGET", "fake:other")
    assert str(add_kernel[(1,)](x, x, x, 4, BLOCK=16).target) == "fake:other"
    with backends.target("fake:scoped"):
        assert str(add_kernel[(1,)](x, x, x, 4, BLOCK=16).target) == "fake:scoped"
    monkeypatch.delenv("TILEJIT_TARGET")
    assert str(add_kernel[(1,)](x, x, x, 4, BLOCK=16).target) == "fake"


def test_hooks_set_after_the_first_launch_fire(fake):
    from tilejit import plugins
    from tilejit.hookspecs import hookimpl

    x = np.zeros(4, np.float32)
    _warm(x)
    seen = []
    CompiledKernel.launch_enter_hook = lambda info: seen.append(("enter", info["grid"]))
    add_kernel[(2,)](x, x, x, 4, BLOCK=16)
    CompiledKernel.launch_enter_hook = None
    CompiledKernel.launch_exit_hook = lambda info: seen.append(("exit", info["name"]))
    add_kernel[(2,)](x, x, x, 4, BLOCK=16)
    CompiledKernel.launch_exit_hook = None

    class Watch:
        @hookimpl
        def tilejit_pre_launch(self, kernel_name, grid, args):
            seen.append(("plugin", kernel_name, grid))

    plugin = Watch()
    plugins.register(plugin)
    compiler.reset_launch_hooks()
    try:
        add_kernel[(3,)](x, x, x, 4, BLOCK=16)
    finally:
        plugins.unregister(plugin)
        compiler.reset_launch_hooks()
    add_kernel[(3,)](x, x, x, 4, BLOCK=16)
    assert seen == [("enter", (2, 1, 1)), ("exit", "add_kernel"), ("plugin", "add_kernel", (3, 1, 1))]
    assert len(fake.launches) == 5


def test_debug_set_after_the_first_launch_counts(fake):
    x = np.zeros(4, np.float32)
    _warm(x)
    add_kernel.debug = True
    add_kernel[(1,)](x, x, x, 4, BLOCK=16)
    options_keys = {key[len(add_kernel.params)] for key in add_kernel._launch_cache}
    assert options_keys == {(), (("debug", True),)}


def test_a_launcher_replaced_after_the_first_launch_is_called(fake):
    x = np.zeros(4, np.float32)
    _warm(x)
    kernel = add_kernel[(1,)](x, x, x, 4, BLOCK=16)
    calls = []
    kernel._launcher = lambda grid, args, stream=None: calls.append((grid, args))  # as measure_launch_cost.py
    add_kernel[(1,)](x, x, x, 4, BLOCK=16)
    assert calls == [((1, 1, 1), (x, x, x, 4))] and len(fake.launches) == 2


def test_a_launchers_direct_call_gets_checked_grids(fake, monkeypatch):
    """`Launcher.direct_call` takes the grid as three checked ints: the JIT passes its own, and
    `CompiledKernel.run` checks any other grid first (naming the kernel, as launchers do)."""
    import fakes

    grids = []

    class DirectLauncher(fakes.FakeLauncher):
        def __init__(self, kernel):
            super().__init__(kernel)
            self.direct_call = lambda grid, args, stream: grids.append(grid)

    monkeypatch.setattr(fakes.FakeBackend, "make_launcher", lambda self, kernel: DirectLauncher(kernel))
    x = np.zeros(4, np.float32)
    kernel = add_kernel[(2,)](x, x, x, 4, BLOCK=16)
    add_kernel[(2, 3)](x, x, x, 4, BLOCK=16)
    kernel.run([5], (x, x, x, 4))
    kernel.run((np.int64(6), 1, 1), (x, x, x, 4))
    kernel.run((0, 1, 1), (x, x, x, 4))
    with pytest.raises(ValueError, match="kernel 'add_kernel'.*negative"):
        kernel.run((1, -1, 1), (x, x, x, 4))
    with pytest.raises(ValueError, match="kernel 'add_kernel'.*at most"):
        kernel.run((2 ** 31, 1, 1), (x, x, x, 4))
    assert grids == [(2, 1, 1), (2, 3, 1), (5, 1, 1), (6, 1, 1), (0, 1, 1)]
    assert all(type(g) is tuple and all(type(d) is int for d in g) for g in grids)
    assert not fake.launches  # the launcher object itself was never called


@jit
def builtin_names(type, len, callable, tuple, int, os=None):  # noqa: A002 - the point of the test
    pass


def test_parameters_named_like_builtins(fake):
    x = np.zeros(4, np.float32)
    for _ in range(2):
        builtin_names[(2,)](x, x, 3, 2.5, int=7)
    builtin_names[lambda meta: (meta["len"].size,)](x, x, 3, 2.5, 7)
    assert [launch[1:3] for launch in fake.launches] == [((2, 1, 1), (x, x, 3, 2.5, 7))] * 2 + [
        ((4, 1, 1), (x, x, 3, 2.5, 7))]


def test_a_launcher_made_before_the_first_launch_generates_once(fake, monkeypatch):
    import tilejit.runtime.fast_launch as fast_launch

    made = []
    original = fast_launch.make_fast_launch
    monkeypatch.setattr(fast_launch, "make_fast_launch", lambda *a: made.append(1) or original(*a))
    kernel = jit(add_kernel.fn)  # a fresh JITFunction: no launch function yet
    x = np.zeros(4, np.float32)
    held = kernel[(1,)]
    for _ in range(3):
        held(x, x, x, 4, BLOCK=16)
        kernel[(1,)](x, x, x, 4, BLOCK=16)
    assert len(made) == 1 and len(fake.launches) == 6
