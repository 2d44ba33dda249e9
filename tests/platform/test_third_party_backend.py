"""The toy backend in tests/third_party_backend: a package outside tilejit, found only by its entry point."""
import os
import shutil
import subprocess
import sys
import warnings

import pytest

from tilejit.backends import BACKEND_GROUP, GPUTarget, available_backends, backend_for_target, select_target, target

TOY_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "third_party_backend")
sys.path.insert(0, os.path.abspath(TOY_DIR))

import tilejit_toy  # noqa: E402

TTIR = """module {
  tt.func public @add_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %arg1: i32) {
    %0 = tt.get_program_id x : i32
    %c1024_i32 = arith.constant 1024 : i32
    %1 = arith.muli %0, %c1024_i32 : i32
    %2 = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
    %3 = tt.splat %1 : i32 -> tensor<1024xi32>
    %4 = arith.addi %3, %2 : tensor<1024xi32>
    tt.return
  } loc(#loc)
} loc(#loc)
#loc = loc("add.py":3:0)
"""


class Compiled:
    name = "add_kernel"


def test_toy_stage_describes_the_ttir():
    backend = tilejit_toy.ToyBackend(GPUTarget.parse("toy"))
    options = backend.parse_options({"num_warps": 2})
    stages = {"ttir": lambda src, md: TTIR}
    backend.add_stages(stages, options)
    assert list(stages) == ["ttir", "toy"]
    metadata = {"name": "add_kernel"}
    description = stages["toy"](stages["ttir"](None, metadata), metadata)
    assert description.splitlines()[:3] == ["toy kernel add_kernel", "functions: add_kernel", "ops: 8"]
    assert "  arith.addi: 1" in description and "  tt.make_range: 1" in description
    assert metadata["toy_op_count"] == 8
    assert "ttir:" not in description
    verbose = backend.parse_options({"include_ttir": True})
    stages = {}
    backend.add_stages(stages, verbose)
    assert "tt.splat %1" in stages["toy"](TTIR, {})


def test_toy_launcher_records_launches():
    launcher = tilejit_toy.ToyBackend(GPUTarget.parse("toy")).make_launcher(Compiled())
    before = len(tilejit_toy.LAUNCHES)
    launcher((3,), [1, 2])
    assert tilejit_toy.LAUNCHES[before:] == [("add_kernel", (3, 1, 1), 2)]


def test_toy_is_chosen_only_explicitly(fake_entry_points):
    fake_entry_points({BACKEND_GROUP: [("toy", "tilejit_toy:ToyBackend")]})
    assert isinstance(backend_for_target("toy"), tilejit_toy.ToyBackend)
    with target("toy"):
        assert select_target([]) == tilejit_toy.TOY_TARGET
    with pytest.raises(Exception, match="toy: inactive"):
        select_target([])


def _can_build_wheels_offline() -> bool:
    # --no-build-isolation builds with this environment's setuptools: it needs `wheel`, or a
    # setuptools new enough (70.1+) to carry bdist_wheel itself. `make test`'s venv has both.
    import importlib.util
    import setuptools
    major_minor = tuple(int(p) for p in setuptools.__version__.split(".")[:2])
    return importlib.util.find_spec("wheel") is not None or major_minor >= (70, 1)


@pytest.mark.skipif(not _can_build_wheels_offline(), reason="needs `wheel` or setuptools>=70.1 installed")
def test_pip_installed_toy_backend_is_discovered(tmp_path):
    # Installed with pip into its own directory, so the test never changes the running environment.
    source = tmp_path / "src"
    shutil.copytree(TOY_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(site), str(source)],
        capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    assert list(site.glob("tilejit_toy_backend-*.dist-info"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site)] + [p for p in sys.path if p and "third_party" not in p])
    probe = ("import warnings; warnings.simplefilter('ignore')\n"
             "from tilejit.backends import available_backends, backend_for_target\n"
             "print(sorted(available_backends()))\n"
             "print(type(backend_for_target('toy')).__module__)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names, module = result.stdout.splitlines()
    assert "toy" in eval(names) and module == "tilejit_toy"
    # Without the install directory on the path the toy backend is gone again.
    with warnings.catch_warnings():  # other, unfinished backends may warn here
        warnings.simplefilter("ignore")
        assert "toy" not in available_backends()


KERNEL_SOURCE = '''
import tilejit
import tilejit.language as tl

@tilejit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
'''


def test_toy_target_through_the_compiler_and_cli(fake_entry_points, tmp_path, capsys):
    import json

    from tilejit.cli import main
    fake_entry_points({BACKEND_GROUP: [("toy", "tilejit_toy:ToyBackend")]})
    source = tmp_path / "kernels.py"
    source.write_text(KERNEL_SOURCE)
    out = tmp_path / "out"
    assert main(["compile", f"{source}:add_kernel", "-s", "*fp32:16,*fp32:16,*fp32:16,i32,256",
                 "-t", "toy", "-o", str(out), "--num-warps", "2"]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["add_kernel.json", "add_kernel.toy", "add_kernel.ttir"]
    description = (out / "add_kernel.toy").read_text()
    assert description.startswith("toy kernel add_kernel\nfunctions: add_kernel\n")
    assert "  tt.load: 2" in description and "  tt.store: 1" in description
    metadata = json.loads((out / "add_kernel.json").read_text())
    assert metadata["target"] == "toy" and metadata["num_warps"] == 2 and metadata["toy_op_count"] > 5

    # The same kernel compiled in-process launches through the toy launcher (which records it).
    from tilejit.cli import _load_kernel
    from tilejit.compiler import compile as compile_kernel
    from tilejit.frontend.source import ASTSource
    kernel = _load_kernel(f"{source}:add_kernel")
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    compiled = compile_kernel(ASTSource(kernel, signature, {"BLOCK": 256}, {}), target="toy")
    assert list(compiled.asm) == ["ttir", "toy"]
    before = len(tilejit_toy.LAUNCHES)
    compiled.run((4, 1, 1), [None, None, None, 1000])
    assert tilejit_toy.LAUNCHES[before:] == [("add_kernel", (4, 1, 1), 4)]
