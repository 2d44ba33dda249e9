import time

import numpy as np
import pytest

from tilejit.testing import Benchmark, assert_close, do_bench, perf_report


def test_assert_close_accepts_within_tolerance_and_rejects_beyond():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    assert_close(a, a + 0.005)
    assert_close(a, a * 1.1, atol=0, rtol=0.2)
    with pytest.raises(AssertionError, match="my message"):
        assert_close(a, a + 0.1, err_msg="my message")
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(a, np.zeros(4, np.float32))


def test_assert_close_bool_must_match_and_nan_equals_nan():
    assert_close(np.array([True, False]), np.array([True, False]))
    with pytest.raises(AssertionError):
        assert_close(np.array([True, False]), np.array([True, True]))
    assert_close(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))


def test_do_bench_measures_wall_clock_in_ms():
    ms = do_bench(lambda: time.sleep(0.002), warmup=5, rep=20)
    assert 1.5 < ms < 50
    low, mid, high = do_bench(lambda: None, warmup=1, rep=2, quantiles=[0.2, 0.5, 0.8])
    assert low <= mid <= high
    assert isinstance(do_bench(lambda: None, warmup=1, rep=2, return_mode="all"), list)
    with pytest.raises(ValueError, match="return_mode"):
        do_bench(lambda: None, return_mode="avg")


def test_perf_report_runs_every_point_and_prints_a_table(capsys, tmp_path):
    calls = []

    @perf_report(Benchmark(x_names=["size"], x_vals=[8, 16], line_arg="provider", line_vals=["a", "b"],
                           line_names=["A", "B"], plot_name="demo", args={"scale": 10}))
    def bench(size, provider, scale):
        calls.append((size, provider, scale))
        return size * scale + (1 if provider == "b" else 0)

    result = bench.run(print_data=True, return_df=True)
    assert calls == [(8, "a", 10), (8, "b", 10), (16, "a", 10), (16, "b", 10)]
    assert result["rows"] == [[8, 80, 81], [16, 160, 161]]
    out = capsys.readouterr().out
    assert "demo:" in out and "size" in out and "161" in out


def test_perf_report_saves_a_plot_and_a_csv(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")  # no display in CI

    @perf_report(Benchmark(x_names=["n"], x_vals=[1, 2, 4], line_arg="p", line_vals=["x", "y"],
                           line_names=["X", "Y"], styles=[("red", "-"), ("blue", "--")], ylabel="GB/s",
                           plot_name="bw", args={}))
    def bench(n, p):
        return n * (2 if p == "y" else 1)

    bench.run(save_path=str(tmp_path))
    png = (tmp_path / "bw.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert (tmp_path / "bw.csv").read_text().splitlines() == ["n,X,Y", "1,1,2", "2,2,4", "4,4,8"]
