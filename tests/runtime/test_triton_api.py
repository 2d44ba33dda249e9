"""Triton API surface: TritonError, set_allocator, reinterpret, driver.active, tools, TensorDescriptor,
Autotuner.base_fn, launch_cooperative_grid, and autotuning that skips configs which do not compile and,
on the interpreter, uses the first valid config instead of timing every one."""
import warnings

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.runtime.driver import driver


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    for knob in ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET", "TILEJIT_AUTOTUNE_INTERPRETER"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))


def test_triton_error_is_the_common_base():
    for cls in (tilejit.CompilationError, tilejit.OutOfResources, tilejit.InterpreterError, tilejit.PTXASError,
                tilejit.LaunchError, tilejit.TilejitError):
        assert issubclass(cls, tilejit.TritonError)

    @tilejit.jit
    def bad(x_ptr, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK > 64, "BLOCK too small")

    with pytest.raises(tilejit.TritonError, match="BLOCK too small"):
        bad[(1,)](np.zeros(4, np.float32), BLOCK=16)


def test_set_allocator_is_stored_and_used_for_scratch():
    from tilejit.runtime import allocation

    with pytest.raises(RuntimeError, match="set_allocator"):
        allocation.allocate_scratch(128, 16, None)
    calls = []

    def alloc(size, align, stream):
        calls.append((size, align, stream))
        return np.empty(size, np.int8)

    tilejit.set_allocator(alloc)
    try:
        buffer = allocation.allocate_scratch(256, 128, None)
        assert buffer.nbytes == 256 and calls == [(256, 128, None)]
        with pytest.raises(TypeError):
            tilejit.set_allocator(42)
    finally:
        tilejit.set_allocator(None)
    with pytest.raises(RuntimeError):
        allocation.allocate_scratch(1, 1, None)


@tilejit.jit
def _widen(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.float32), mask=mask)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_reinterpret_as_fp8_and_unsigned(kind):
    raw = np.array([0x38, 0x40, 0xB8, 0x3C, 0x00, 0xC4], np.uint8)  # e4m3: 1, 2, -1, 1.5, 0, -3
    if kind == "torch":
        torch = pytest.importorskip("torch")
        base = torch.from_numpy(raw.view(np.int8).copy())
    else:
        base = raw.copy()
    out = np.zeros(6, np.float32)
    wrapped = tilejit.reinterpret(base, tl.float8e4nv)
    assert wrapped.dtype is tl.float8e4nv and wrapped.base is base
    _widen[(1,)](wrapped, out, 6, BLOCK=8)
    np.testing.assert_array_equal(out, [1, 2, -1, 1.5, 0, -3])
    _widen[(1,)](tilejit.reinterpret(base, tl.uint8), out, 6, BLOCK=8)
    np.testing.assert_array_equal(out, raw.astype(np.float32))
    assert tilejit.reinterpret(wrapped, base.dtype) is base
    with pytest.raises(TypeError):
        tilejit.reinterpret(3, tl.uint8)


def test_driver_active_on_the_interpreter(monkeypatch):
    monkeypatch.setenv("TILEJIT_INTERPRET", "1")  # the interpreter, also on a machine with a GPU
    driver.reset_active()
    active = driver.active
    assert active.get_current_target().backend == "interpreter"
    assert active.get_current_device() == 0 and active.get_current_stream() == 0
    assert callable(active.get_benchmarker())
    assert "multiprocessor_count" in active.utils.get_device_properties(0)
    torch = pytest.importorskip("torch")
    assert active.get_active_torch_device() == torch.device("cpu")
    import tilejit.runtime.driver as driver_module
    assert driver_module.active is active


def test_tensor_descriptor_host_object():
    from tilejit.tools.tensor_descriptor import TensorDescriptor

    x = np.zeros((64, 32), np.float32)
    desc = TensorDescriptor.from_tensor(x, [16, 16])
    assert desc.shape == [64, 32] and desc.strides == [32, 1] and desc.block_shape == [16, 16] and desc.base is x
    with pytest.raises(ValueError, match="power of 2"):
        TensorDescriptor.from_tensor(x, [16, 3])
    with pytest.raises(ValueError, match="16-byte aligned"):
        TensorDescriptor(x, [64, 3], [3, 1], [16, 4])
    with pytest.raises(ValueError, match="round_f32_to_tf32"):
        TensorDescriptor.from_tensor(x, [16, 16], round_f32_to_tf32=True)
    with pytest.raises(ValueError, match="contiguous"):
        TensorDescriptor(x, [64, 32], [1, 64], [16, 16])
    assert tilejit.tools.tensor_descriptor.TensorDescriptor is TensorDescriptor


def test_launch_cooperative_grid_is_accepted():
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    _widen[(1,)](x, out, 4, BLOCK=4, launch_cooperative_grid=True)
    np.testing.assert_array_equal(out, x)


# --- autotuning -------------------------------------------------------------------------------

def _tuned(runs):
    @tilejit.autotune(configs=[tilejit.Config({"BLOCK": 8}), tilejit.Config({"BLOCK": 16}),
                               tilejit.Config({"BLOCK": 32}), tilejit.Config({"BLOCK": 64})], key=["n"])
    @tilejit.jit
    def copy(x_ptr, out_ptr, counter_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK >= 16, "BLOCK must be at least 16")
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
        tl.atomic_add(counter_ptr, 1)  # one per program: counts the programs that ran

    def launch(n):
        x = np.arange(n, dtype=np.float32)
        out = np.zeros(n, np.float32)
        counter = np.zeros(1, np.int32)
        copy[lambda meta: (tilejit.cdiv(n, meta["BLOCK"]),)](x, out, counter, n)
        runs.append(int(counter[0]))
        np.testing.assert_array_equal(out, x)
        return copy

    return copy, launch


def test_autotune_on_the_interpreter_takes_the_first_valid_config():
    runs = []
    tuned, launch = _tuned(runs)
    with pytest.warns(RuntimeWarning, match=r"BLOCK: 8.*skipped.*BLOCK must be at least 16"):
        launch(100)
    # BLOCK=8 fails its static_assert and is skipped; BLOCK=16 is the first valid one. Nothing is timed:
    # the kernel ran once (7 programs), not once per config.
    assert tuned.best_config.kwargs == {"BLOCK": 16}
    assert runs == [7] and tuned.configs_timings is None
    assert tuned.base_fn.__name__ == "copy" and callable(tuned.base_fn)


def test_autotune_on_the_interpreter_can_time_every_config(monkeypatch):
    monkeypatch.setattr(tilejit.runtime.autotuner.Autotuner, "bench_on_interpreter", True)
    runs = []
    tuned, launch = _tuned(runs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launch(100)
    assert any("BLOCK: 8" in str(w.message) for w in caught)
    timings = tuned.configs_timings
    assert timings[tuned.configs[0]][0] == float("inf")
    assert all(t[0] < float("inf") for c, t in timings.items() if c.kwargs["BLOCK"] > 8)
    assert tuned.best_config.kwargs["BLOCK"] in (16, 32, 64)


def test_autotune_fails_when_no_config_compiles():
    @tilejit.autotune(configs=[tilejit.Config({"BLOCK": 4}), tilejit.Config({"BLOCK": 8})], key=[])
    @tilejit.jit
    def never(x_ptr, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK > 100, "no BLOCK fits")

    with pytest.warns(RuntimeWarning), pytest.raises(tilejit.CompilationError, match="no BLOCK fits"):
        never[(1,)](np.zeros(4, np.float32))


def test_mxfp_helpers():
    torch = pytest.importorskip("torch")
    from tilejit.tools.mxfp import MXFP4Tensor, MXScaleTensor, fp8e8m0_to_float32

    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.3, float("inf"), -2.9, 0.0])
    # round to nearest, ties to the even code; saturate beyond 6
    expected = torch.tensor([0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, -0.5, 6.0, -3.0, 0.0])
    assert torch.equal(MXFP4Tensor(data=x).to(torch.float32), expected)
    codes = MXFP4Tensor(size=(3, 5)).random()
    values = codes.to(torch.float32)
    assert set(values.abs().unique().tolist()) <= {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0}
    for dim in (0, 1):
        packed = codes.to_packed_tensor(dim)
        assert packed.shape[dim] == (codes.data.shape[dim] + 1) // 2
        assert torch.equal(codes.unpack_packed_tensor(packed, dim, (3, 5)), codes.data)
    packed = codes.to_packed_tensor(1)
    assert int(packed[0, 0]) == int(codes.data[0, 0]) | (int(codes.data[0, 1]) << 4)
    scales = MXScaleTensor(data=torch.tensor([1.0, 3.0, 0.1, -1.0, float("nan")]))
    assert scales.data.tolist() == [127, 128, 123, 255, 255]
    decoded = scales.to(torch.float32)
    assert decoded[:3].tolist() == [1.0, 2.0, 0.0625] and torch.isnan(decoded[3:]).all()
    random_scales = MXScaleTensor(size=(4, 4)).random(high=64.0)
    assert int(random_scales.data.max()) <= 127 + 6
    assert fp8e8m0_to_float32(torch.tensor([0], dtype=torch.uint8)).item() == 2.0 ** -127


def _launch_quietly(runs, *sizes):
    """`_tuned`'s kernel launched for each size, its skipped-config warnings silenced; the tuner."""
    tuned, launch = _tuned(runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in sizes:
            launch(n)
    return tuned


def test_autotune_interpreter_knob_times_every_config(monkeypatch):
    monkeypatch.setenv("TILEJIT_AUTOTUNE_INTERPRETER", "1")
    runs = []
    tuned = _launch_quietly(runs, 100)
    assert tuned.configs_timings is not None and len(tuned.configs_timings) == 4
    assert runs[0] > 7 and tilejit.knobs.autotune_interpreter  # the timed runs launched it many times


def test_print_autotuning_knob_reports_the_choice_once_per_key(monkeypatch, capsys):
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    # 100 twice: the same key, the cached choice, nothing printed; 300: a new key, tuned and printed
    tuned = _launch_quietly([], 100, 100, 300)
    lines = capsys.readouterr().out.splitlines()
    chosen = [line for line in lines if line.startswith("best config selected:")]
    assert chosen == [f"best config selected: {tuned.best_config};"] * 2
    assert "BLOCK: 16" in chosen[0]
    assert lines.count("Triton autotuning for function copy,") == 2


def test_print_autotuning_is_triton_knobs_autotuning_print(monkeypatch):
    monkeypatch.delenv("TRITON_PRINT_AUTOTUNING", raising=False)
    monkeypatch.delenv("TILEJIT_PRINT_AUTOTUNING", raising=False)
    from tilejit.compat.knobs import autotuning
    with autotuning.scope():
        assert autotuning.print is False
        autotuning.print = True
        assert tilejit.knobs.print_autotuning and autotuning.print is True
    assert not tilejit.knobs.print_autotuning
