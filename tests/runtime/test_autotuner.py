import numpy as np
import pytest

from tilejit.errors import OutOfResources
from tilejit.runtime.autotuner import Config, autotune, heuristics
from tilejit.runtime.jit import jit

class constexpr:  # stands for tl.constexpr: the JIT recognises the annotation by name
    pass


# The fake benchmarker times a config by the BLOCK its launch used: this table says which is fastest.
FAKE_TIMES = {32: 3.0, 64: 1.0, 128: 2.0}


class FakeTimer:
    def __init__(self, fake_counters):
        self.fake = fake_counters
        self.calls = 0

    def __call__(self, fn, quantiles=None, **kwargs):
        self.calls += 1
        before = len(self.fake.launches)
        fn()
        (launch,) = self.fake.launches[before:]
        block = self.block_of(launch)
        return [FAKE_TIMES[block]] * len(quantiles)

    @staticmethod
    def block_of(launch):
        return launch[1][1]  # the grid's y dimension carries BLOCK in these tests


def make_kernel(fake, **tune):
    timer = FakeTimer(fake)

    @autotune(configs=[Config({"BLOCK": b}, num_warps=4) for b in (32, 64, 128)], key=["n"], do_bench=timer, **tune)
    @jit
    def tuned(x_ptr, n, BLOCK: constexpr):
        pass

    return tuned, timer


def grid(meta):
    return (1, meta["BLOCK"])


def test_autotune_picks_the_fastest_config(fake):
    tuned, timer = make_kernel(fake)
    x = np.zeros(16, np.float32)
    tuned[grid](x, 1000)
    assert tuned.best_config.kwargs == {"BLOCK": 64}
    assert timer.calls == 3
    assert FakeTimer.block_of(fake.launches[-1]) == 64  # the real run used the best config
    tuned[grid](x, 1000)  # same key: no re-tuning
    assert timer.calls == 3
    tuned[grid](x, 2000)  # a new key value tunes again
    assert timer.calls == 6
    assert set(tuned.cache) == {(1000, "float32"), (2000, "float32")}


def test_out_of_resources_config_is_skipped(fake, monkeypatch):
    tuned, timer = make_kernel(fake)
    original = timer.__call__

    def timing(fn, quantiles=None, **kwargs):
        result = original(fn, quantiles=quantiles)
        if FakeTimer.block_of(fake.launches[-1]) == 64:
            raise OutOfResources(1 << 20, 1 << 16, "shared memory")
        return result

    tuned.user_do_bench = timing
    tuned[grid](np.zeros(16, np.float32), 10)
    assert tuned.best_config.kwargs == {"BLOCK": 128}


def test_prune_configs_by_perf_model_and_early_prune(fake):
    seen = {}

    def early(configs, nargs, **kwargs):
        seen["nargs"] = sorted(nargs)
        return [c for c in configs if c.kwargs["BLOCK"] != 64]

    def perf_model(**meta):
        return -meta["BLOCK"]  # the model prefers large blocks

    tuned, timer = make_kernel(fake, prune_configs_by={"early_config_prune": early, "perf_model": perf_model,
                                                         "top_k": 1})
    tuned[grid](np.zeros(16, np.float32), 10)
    assert seen["nargs"] == ["n", "x_ptr"]
    assert timer.calls == 1 and tuned.best_config.kwargs == {"BLOCK": 128}


def test_reset_to_zero_and_restore_value(fake, monkeypatch):
    import fakes

    def accumulate(self, grid, args, stream):  # the "kernel" adds 1 to both of its arrays
        args[0][...] += 1
        args[1][...] += 1

    monkeypatch.setattr(fakes.FakeLauncher, "launch", accumulate)
    x = np.full(4, 5.0, np.float32)
    y = np.full(4, 7.0, np.float32)
    seen_by_timed_runs = []

    def timer(fn, quantiles=None, **kwargs):
        fn()
        fn()
        seen_by_timed_runs.append((x[0], y[0]))
        return [1.0] * len(quantiles)

    @autotune(configs=[Config({"BLOCK": 32}), Config({"BLOCK": 64})], key=[], do_bench=timer,
              reset_to_zero=["x_ptr"], restore_value=["y_ptr"])
    @jit
    def tuned(x_ptr, y_ptr, BLOCK: constexpr):
        pass

    tuned[(1,)](x, y)
    # Each timed run starts from x = 0 and from the saved y, so two runs leave x = 1 and y = 7.
    assert seen_by_timed_runs == [(1.0, 7.0), (1.0, 7.0)]
    # After tuning x is zeroed once more, then the real run adds 1; y only sees the real run.
    assert (x == 1).all() and (y == 8).all()


def test_subclass_replacing_the_hooks_as_tritons_autotuner_allows(fake, monkeypatch):
    """fla's CachedAutotuner subclasses Triton's Autotuner: it reads `user_defined_pre_hook` /
    `user_defined_post_hook` and installs its own `pre_hook` / `post_hook` attributes, which the
    timing loop must then call (here: hooks that skip None arguments)."""
    import fakes
    from tilejit.runtime.autotuner import Autotuner

    def accumulate(self, grid, args, stream):
        args[0][...] += 1

    monkeypatch.setattr(fakes.FakeLauncher, "launch", accumulate)
    calls = []

    class NoneSafeAutotuner(Autotuner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            assert self.user_defined_pre_hook is False and self.user_defined_post_hook is False
            if not self.user_defined_pre_hook and (self.reset_to_zero or self.restore_value):
                def _pre_hook(kw, reset_only=False):
                    calls.append(("pre", reset_only))
                    for name in self.reset_to_zero:
                        if kw[name] is not None:
                            kw[name][...] = 0
                    if not reset_only:
                        self.restore_copies = {n: kw[n].copy() for n in self.restore_value if kw[n] is not None}
                self.pre_hook = _pre_hook
            if not self.user_defined_post_hook and self.restore_value:
                def _post_hook(kw, exception):
                    calls.append(("post", exception))
                    for name, saved in self.restore_copies.items():
                        kw[name][...] = saved
                    self.restore_copies = {}
                self.post_hook = _post_hook

    def timer(fn, quantiles=None, **kwargs):
        fn()
        return [1.0] * len(quantiles)

    @jit
    def kernel(x_ptr, y_ptr, BLOCK: constexpr):
        pass

    tuned = NoneSafeAutotuner(kernel, kernel.arg_names, [Config({"BLOCK": 32}), Config({"BLOCK": 64})], [],
                              reset_to_zero=["y_ptr"], restore_value=["x_ptr"], do_bench=timer)
    x = np.full(4, 5.0, np.float32)
    tuned[(1,)](x, None)   # y_ptr is None: the subclass's hooks skip it
    assert calls == [("pre", False), ("post", None), ("pre", False), ("post", None), ("pre", True)]
    assert (x == 6).all()   # restored after each timed run, then the real run adds 1


def test_conflicting_meta_parameter_is_an_error(fake):
    tuned, _ = make_kernel(fake)
    with pytest.raises(ValueError, match="conflicting meta-parameters BLOCK"):
        tuned[grid](np.zeros(16, np.float32), 10, BLOCK=32)


def test_unknown_key_is_an_error():
    with pytest.raises(ValueError, match="'m' is not a parameter"):
        @autotune(configs=[Config({})], key=["m"])
        @jit
        def k(x_ptr, n):
            pass


def test_results_cached_on_disk(fake):
    tuned, timer = make_kernel(fake, cache_results=True)
    x = np.zeros(16, np.float32)
    tuned[grid](x, 77)
    assert timer.calls == 3
    again, timer2 = make_kernel(fake, cache_results=True)  # a new process would look the same
    again[grid](x, 77)
    assert timer2.calls == 0 and again.best_config.kwargs == {"BLOCK": 64}


def test_single_config_is_not_benchmarked(fake):
    calls = []

    @autotune(configs=[Config({"BLOCK": 16}, num_warps=2)], key=["n"], do_bench=lambda *a, **k: calls.append(1))
    @jit
    def one(x_ptr, n, BLOCK: constexpr):
        pass

    kernel = one[(1,)](np.zeros(4, np.float32), 3)
    assert calls == [] and kernel.metadata["num_warps"] == 2 and kernel.metadata["constants"]["BLOCK"] == 16


def test_heuristics_compute_meta_parameters(fake):
    @heuristics({"BLOCK": lambda args: 1 << (args["n"] - 1).bit_length()})
    @jit
    def kernel(x_ptr, n, BLOCK: constexpr):
        pass

    compiled = kernel[lambda meta: (1, meta["BLOCK"])](np.zeros(4, np.float32), 100)
    assert compiled.metadata["constants"]["BLOCK"] == 128
    assert fake.launches[-1][1] == (1, 128, 1)
    assert kernel.warmup(np.zeros(4, np.float32), 10, grid=(1,)).metadata["constants"]["BLOCK"] == 16


def test_autotune_uses_the_backend_benchmarker(fake, monkeypatch):
    import fakes

    timings = []

    def backend_bench(fn, quantiles=None, **kwargs):
        fn()
        block = FakeTimer.block_of(fake.launches[-1])
        timings.append(block)
        return [FAKE_TIMES[block]] * len(quantiles)

    monkeypatch.setattr(fakes.FakeBackend, "get_benchmarker", classmethod(lambda cls: backend_bench))

    @autotune(configs=[Config({"BLOCK": b}) for b in (32, 64, 128)], key=["n"])
    @jit
    def tuned(x_ptr, n, BLOCK: constexpr):
        pass

    tuned[grid](np.zeros(16, np.float32), 5)
    assert sorted(timings) == [32, 64, 128] and tuned.best_config.kwargs == {"BLOCK": 64}
