import json
import os
import subprocess
import sys

import pytest

import fakes
from tilejit import compiler
from tilejit.errors import CompilationError, OutOfResources


def _source(**kw):
    return fakes.FakeSource("add_kernel", {"x_ptr": "*fp32", "n": "i32"}, **kw)


def test_stages_run_in_order_and_asm_keeps_each_kind(fake):
    kernel = compiler.compile(_source(), target="fake")
    assert list(kernel.asm) == ["ttir", "fakeasm", "fakebin"]
    assert fake.stage_calls == ["fakeasm", "fakebin"]
    assert fake.make_ir_calls == 1 and fake.ttir_pass_runs == 1
    assert kernel.asm["ttir"].endswith("// passes ran")  # the TTIR pipeline ran on make_ir's output
    assert kernel.asm["fakeasm"].startswith("asm of add_kernel:\ntt.func @add_kernel(x_ptr: *fp32, n: i32)")
    assert isinstance(kernel.asm["fakebin"], bytes) and kernel.asm["fakebin"].endswith(b"\x00\xff")


def test_metadata_has_the_contract_fields(fake):
    kernel = compiler.compile(_source(constexprs={"BLOCK": 64}), target="fake", options={"num_warps": 8})
    md = kernel.metadata
    assert md["name"] == kernel.name == "add_kernel"
    assert md["target"] == "fake" and str(kernel.target) == "fake"
    assert (md["num_warps"], md["num_stages"]) == (8, 3)
    assert md["shared"] == 128  # set by the backend's last stage
    assert md["signature"] == {"x_ptr": "*fp32", "n": "i32"}
    assert md["constants"] == {"BLOCK": 64}
    assert md["hash"] == kernel.hash and len(kernel.hash) == 64
    json.dumps(md)


def test_options_and_source_change_the_key(fake):
    a = compiler.compile(_source(), target="fake")
    b = compiler.compile(_source(), target="fake", options={"num_warps": 2})
    c = compiler.compile(_source(constexprs={"BLOCK": 1}), target="fake")
    assert len({a.hash, b.hash, c.hash}) == 3


def test_memory_cache_returns_the_same_kernel(fake):
    first = compiler.compile(_source(), target="fake")
    assert compiler.compile(_source(), target="fake") is first
    assert fake.make_ir_calls == 1


def test_disk_cache_hit_runs_no_stage(fake):
    first = compiler.compile(_source(), target="fake")
    compiler.clear_memory_cache()
    second = compiler.compile(_source(), target="fake")
    assert second is not first
    assert fake.make_ir_calls == 1 and fake.stage_calls == ["fakeasm", "fakebin"]
    assert second.asm == first.asm
    assert isinstance(second.asm["fakebin"], bytes) and isinstance(second.asm["ttir"], str)
    assert second.metadata["shared"] == 128


def test_metadata_fields_are_attributes_too(fake):
    # Triton's metadata is a namedtuple: `kernel.metadata.shared`, `._asdict()`
    kernel = compiler.compile(_source(), target="fake")
    assert kernel.metadata.shared == kernel.metadata["shared"] == 128
    assert kernel.metadata._asdict()["shared"] == 128
    with pytest.raises(AttributeError, match="no field 'n_nothing'"):
        _ = kernel.metadata.n_nothing


def test_always_compile_ignores_both_caches(fake, monkeypatch):
    compiler.compile(_source(), target="fake")
    monkeypatch.setenv("TILEJIT_ALWAYS_COMPILE", "1")
    compiler.compile(_source(), target="fake")
    assert fake.make_ir_calls == 2


def test_corrupted_disk_entry_is_recompiled(fake, tmp_path):
    first = compiler.compile(_source(), target="fake")
    entry = tmp_path / "cache" / "kernels" / first.hash
    assert (entry / "fakebin").exists()
    (entry / "fakebin").write_bytes(b"garbage")
    compiler.clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="damaged"):
        again = compiler.compile(_source(), target="fake")
    assert fake.make_ir_calls == 2
    assert again.asm["fakebin"] == first.asm["fakebin"]


_CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
import fakes
from tilejit import compiler
counters = fakes.install()
kernel = compiler.compile(fakes.FakeSource("add_kernel", {{"x_ptr": "*fp32"}}), target="fake")
print(json.dumps({{"stages": counters.stage_calls, "make_ir": counters.make_ir_calls, "hash": kernel.hash,
                  "bin": kernel.asm["fakebin"].hex()}}))
"""


def test_second_process_loads_from_disk(fake, tmp_path):
    here = os.path.dirname(__file__)
    core = os.path.join(here, "..", "..", "core")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([core, os.environ.get("PYTHONPATH", "")]))
    code = _CHILD.format(tests=here)
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                      text=True).stdout) for _ in range(2)]
    assert runs[0]["stages"] == ["fakeasm", "fakebin"] and runs[0]["make_ir"] == 1
    assert runs[1]["stages"] == [] and runs[1]["make_ir"] == 0
    assert runs[0]["hash"] == runs[1]["hash"] and runs[0]["bin"] == runs[1]["bin"]


def test_dump_dir_gets_every_stage(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_DUMP_DIR", str(tmp_path / "dump"))
    kernel = compiler.compile(_source(), target="fake")
    folder = tmp_path / "dump" / f"add_kernel-{kernel.hash[:8]}"
    assert (folder / "add_kernel.ttir").read_text() == kernel.asm["ttir"]
    assert (folder / "add_kernel.fakeasm").read_text() == kernel.asm["fakeasm"]
    assert (folder / "add_kernel.fakebin").read_bytes() == kernel.asm["fakebin"]


def test_non_tilejit_exception_in_a_stage_is_wrapped(fake, monkeypatch):
    monkeypatch.setattr(fakes.FakeBackend, "fail_stage", "fakeasm")
    with pytest.raises(CompilationError, match="stage 'fakeasm'.*'add_kernel'.*KeyError") as info:
        compiler.compile(_source(), target="fake")
    assert isinstance(info.value.__cause__, KeyError)


def test_tilejit_errors_from_a_stage_pass_through(fake, monkeypatch):
    monkeypatch.setattr(fakes.FakeBackend, "fail_stage", "fakebin")
    monkeypatch.setattr(fakes.FakeBackend, "fail_with", lambda msg: OutOfResources(99999, 1000, "shared memory"))
    with pytest.raises(OutOfResources):
        compiler.compile(_source(), target="fake")


def test_make_ir_failure_is_wrapped_naming_ttir(fake, monkeypatch):
    def broken(self, target, options):
        raise AttributeError("no such thing")
    monkeypatch.setattr(fakes.FakeSource, "make_ir", broken)
    with pytest.raises(CompilationError, match="stage 'ttir'"):
        compiler.compile(_source(), target="fake")


def test_stage_returning_a_wrong_type_is_an_error(fake, monkeypatch):
    monkeypatch.setattr(fakes.FakeBackend, "add_stages", lambda self, stages, opts: stages.update(bad=lambda s, m: 42))
    with pytest.raises(CompilationError, match="stage 'bad' returned a int"):
        compiler.compile(_source(), target="fake")


def test_plugin_can_add_a_stage(fake):
    from tilejit import plugins
    from tilejit.hookspecs import hookimpl

    class AddCheck:
        @hookimpl
        def tilejit_add_stages(self, stages, options, target):
            stages["check"] = lambda src, md: b"checked:" + src

    plugin = AddCheck()
    plugins.register(plugin)
    try:
        kernel = compiler.compile(_source(), target="fake")
    finally:
        plugins.unregister(plugin)
    assert list(kernel.asm)[-1] == "check" and kernel.asm["check"].startswith(b"checked:")


def test_compile_ttir_runs_only_the_first_stage(fake):
    module = compiler.compile_ttir(_source(), target="fake")
    assert module.startswith("tt.func @add_kernel") and fake.stage_calls == []


def test_compiled_kernel_getitem_launches_with_runtime_args(fake):
    kernel = compiler.compile(fakes.FakeSource("k", {"x": "*fp32", "B": "constexpr", "n": "i32"}), target="fake")
    kernel[(4,)]("X", 10)
    kernel[2, 3]("X", 64, 10)  # every argument: the constexpr is dropped
    assert fake.launches == [("k", (4, 1, 1), ("X", 10), None), ("k", (2, 3, 1), ("X", 10), None)]
    with pytest.raises(TypeError, match="'k' takes 2 runtime arguments"):
        kernel[1]("X")
    with pytest.raises(ValueError, match="kernel 'k'"):
        kernel[(1, 2, 3, 4)]


def test_launch_hooks_fire_once_per_launch_when_a_plugin_has_them(fake):
    from tilejit import plugins
    from tilejit.hookspecs import hookimpl

    seen = []

    class Watch:
        @hookimpl
        def tilejit_pre_launch(self, kernel_name, grid, args):
            seen.append(("pre", kernel_name, grid))

    kernel = compiler.compile(_source(), target="fake")
    plugin = Watch()
    plugins.register(plugin)
    compiler.reset_launch_hooks()
    try:
        kernel[(2,)]("X", 3)
    finally:
        plugins.unregister(plugin)
        compiler.reset_launch_hooks()
    assert seen == [("pre", "add_kernel", (2, 1, 1))]


def test_launch_hooks_receive_the_launch_metadata(fake):
    from tilejit import plugins
    from tilejit.hookspecs import hookimpl

    seen = []

    class Profiler:
        @hookimpl
        def tilejit_post_launch(self, kernel_name, metadata):
            seen.append((kernel_name, metadata["name"], metadata["grid"], metadata["stream"]))

    kernel = compiler.compile(_source(), target="fake")
    plugin = Profiler()
    plugins.register(plugin)
    try:
        kernel[(5, 2)]("X", 3)
    finally:
        plugins.unregister(plugin)
    assert seen == [("add_kernel", "add_kernel", (5, 2, 1), None)]


def test_launch_hooks_fire_for_a_launcher_that_does_not_fire_them(fake, monkeypatch):
    from tilejit import plugins
    from tilejit.hookspecs import hookimpl

    class PlainLauncher:  # a launcher outside the `Launcher` base class
        def __init__(self, kernel):
            self.kernel = kernel

        def __call__(self, grid, args, stream=None):
            fake.launches.append((self.kernel.name, grid, tuple(args), stream))

    monkeypatch.setattr(fakes.FakeBackend, "make_launcher", lambda self, kernel: PlainLauncher(kernel))
    seen = []

    class Watch:
        @hookimpl
        def tilejit_pre_launch(self, kernel_name, grid, args):
            seen.append(("pre", kernel_name))

        @hookimpl
        def tilejit_post_launch(self, kernel_name, grid, args):
            seen.append(("post", kernel_name))

    kernel = compiler.compile(_source(), target="fake")
    kernel[(1,)]("X", 3)  # no plugin yet: nothing fires
    plugin = Watch()
    plugins.register(plugin)
    compiler.reset_launch_hooks()
    try:
        kernel[(1,)]("X", 3)
    finally:
        plugins.unregister(plugin)
        compiler.reset_launch_hooks()
    assert seen == [("pre", "add_kernel"), ("post", "add_kernel")]
    assert len(fake.launches) == 2


def test_real_ttir_pipeline_and_ir_module_are_printed(fake, monkeypatch):
    """With the core's real TTIR pipeline: an `ir.Module` output is stored as its printed text."""
    from tilejit import ir
    from tilejit.passes.pipeline import run_ttir_passes

    monkeypatch.setattr(compiler, "_run_ttir_passes", run_ttir_passes)
    monkeypatch.setattr(fakes.FakeSource, "make_ir", lambda self, target, options: ir.Module())
    monkeypatch.setattr(fakes.FakeBackend, "add_stages",
                        lambda self, stages, opts: stages.update(copy=lambda module, md: ir.Module()))
    kernel = compiler.compile(_source(), target="fake")
    assert kernel.asm["ttir"] == ir.print_module(ir.Module()) == kernel.asm["copy"]
