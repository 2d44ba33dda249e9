"""`import triton` resolving to tilejit: `tilejit.alias_triton()`, `tilejit run`, and torch's Triton
probes with the alias on. Each case runs in a fresh interpreter (the alias changes `sys.modules`)."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _env(**extra):
    env = dict(os.environ)
    paths = [os.path.join(ROOT, p) for p in ("core", "backends/interpreter", "backends/nvidia", "backends/amd")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    for knob in ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET"):
        env.pop(knob, None)
    env.update(extra)
    return env


def run_python(code: str, *args, timeout=300, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=_env(**env), timeout=timeout)


SUBMODULES = [
    "triton.language", "triton.language.extra", "triton.language.extra.libdevice", "triton.language.extra.cuda",
    "triton.language.extra.cuda.libdevice", "triton.language.extra.hip", "triton.language.extra.hip.libdevice",
    "triton.language.math", "triton.language.core", "triton.language.standard", "triton.runtime",
    "triton.runtime.jit", "triton.runtime.autotuner", "triton.runtime.driver", "triton.runtime.errors",
    "triton.compiler", "triton.compiler.compiler", "triton.compiler.errors", "triton.backends",
    "triton.backends.compiler", "triton.tools", "triton.tools.tensor_descriptor", "triton.testing",
    "triton._internal_testing", "triton.errors", "triton.knobs",
]


def test_alias_resolves_every_submodule_libraries_import():
    result = run_python(f"""
        import importlib, tilejit
        triton = tilejit.alias_triton()
        import triton as again
        assert again is triton and triton.__version__ == tilejit.TRITON_API_VERSION == "3.6.0", triton.__version__
        assert tilejit.__version__ != triton.__version__
        import importlib.metadata
        assert importlib.metadata.version("triton") == "3.6.0"  # libraries that ask the installed version
        assert triton.jit is tilejit.jit and triton.Config is tilejit.Config and triton.cdiv(7, 2) == 4
        for name in {SUBMODULES!r}:
            importlib.import_module(name)
        import triton.language as tl
        from triton.language.extra import libdevice
        assert tl is tilejit.language and tl.extra.libdevice is libdevice and tl.extra.cuda.libdevice.tanh is libdevice.tanh
        from triton.compiler import ASTSource, CompiledKernel, compile
        from triton.compiler.compiler import triton_key
        from triton.backends.compiler import GPUTarget, BaseBackend
        from triton.runtime.jit import JITFunction, TensorWrapper, reinterpret, type_canonicalisation_dict
        from triton.runtime.autotuner import OutOfResources, PTXASError, Autotuner
        from triton.tools.tensor_descriptor import TensorDescriptor
        assert GPUTarget is tilejit.GPUTarget and JITFunction is tilejit.JITFunction and isinstance(triton_key(), str)
        assert triton.runtime.driver.active.get_current_target().backend == "interpreter"
        assert "interpreter" in triton.backends.backends and "cpu" not in triton.backends.backends
        try:
            import triton.no_such_module
        except ModuleNotFoundError as exc:
            assert "tilejit" in str(exc)
        else:
            raise AssertionError("expected ModuleNotFoundError")
        print("ok")
    """, TRITON_INTERPRET="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_alias_cannot_replace_an_imported_real_triton():
    result = run_python("""
        import sys, types, tilejit
        sys.modules["triton"] = types.ModuleType("triton")  # stands for a real Triton already imported
        try:
            tilejit.alias_triton()
        except RuntimeError as exc:
            print("refused:", "already imported" in str(exc))
    """)
    assert result.stdout.strip() == "refused: True", result.stderr


def test_internal_testing_helpers():
    pytest.importorskip("torch")
    result = run_python("""
        import numpy as np, tilejit
        tilejit.alias_triton()
        import triton.language as tl
        from triton._internal_testing import (is_interpreter, is_cuda, is_hip, numpy_random, to_triton, to_numpy,
                                              int_dtypes, float_dtypes, dtypes_with_bfloat16, supports_tma)
        assert is_interpreter() and not is_cuda() and not is_hip() and supports_tma()
        x = numpy_random((4, 5), "uint16")
        assert x.dtype == np.uint16 and (x != 0).all()
        t = to_triton(x, device="cpu")
        assert t.dtype is tl.uint16 and (to_numpy(t) == x).all()
        assert "bfloat16" in dtypes_with_bfloat16 and "int8" in int_dtypes and "float64" in float_dtypes
        print("ok")
    """, TRITON_INTERPRET="1")
    assert result.returncode == 0, result.stderr


def test_compiler_errors_after_a_bare_import_triton():
    """Triton's `import triton` imports `triton.compiler.errors`: tests write
    `pytest.raises(triton.compiler.errors.CompilationError)` after `import triton` alone."""
    result = run_python("""
        import tilejit
        tilejit.alias_triton()
        import triton
        errors = triton.compiler.errors
        assert errors.CompilationError is tilejit.CompilationError
        assert issubclass(errors.CompileTimeAssertionFailure, errors.CompilationError)
        assert issubclass(errors.CompilationError, triton.TritonError)
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_knobs_namespaces_and_scopes(tmp_path):
    """Triton 3.x's `triton.knobs.<namespace>` with `scope()`: knobs tilejit has are its environment
    variables (set inside the scope, restored after), the others keep what they are given."""
    result = run_python(f"""
        import os, tilejit
        tilejit.alias_triton()
        from triton import knobs
        import triton.knobs as same
        assert same is knobs
        with knobs.cache.scope(), knobs.runtime.scope():
            knobs.cache.dir = {str(tmp_path)!r}
            assert tilejit.knobs.cache_dir == knobs.cache.dir == {str(tmp_path)!r}
            knobs.runtime.override_arch = "sm80"
        assert not os.environ.get("TILEJIT_CACHE_DIR") and knobs.runtime.override_arch is None
        with knobs.amd.scope():
            knobs.amd.use_buffer_ops = False
            knobs.amd.lld_path = "/opt/ld.lld"
            assert tilejit.knobs.lld == "/opt/ld.lld" and knobs.amd.use_buffer_ops is False
        assert knobs.amd.use_buffer_ops is True and tilejit.knobs.lld is None
        with knobs.compilation.scope():
            knobs.compilation.always_compile = True
            assert tilejit.knobs.always_compile
        assert not tilejit.knobs.always_compile
        assert knobs.language.default_fp_fusion is True and knobs.cache_dir == tilejit.knobs.cache_dir
        from triton._internal_testing import _fresh_knobs_impl
        fresh, reset = _fresh_knobs_impl(skipped_attr={{"build", "nvidia", "amd"}})
        fresh().language.default_fp_fusion = False
        reset()
        assert knobs.language.default_fp_fusion is True
        print("ok")
    """, TILEJIT_CACHE_DIR="", TILEJIT_LLD="", TILEJIT_ALWAYS_COMPILE="")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_tilejit_run_script_with_arguments_and_exit_code(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import triton
        import triton.language as tl

        @triton.jit
        def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, tl.extra.libdevice.tanh(x) * 2, mask=mask)

        x = np.linspace(-2, 2, 10).astype(np.float32)
        out = np.zeros_like(x)
        scale[(1,)](x, out, 10, BLOCK=16)
        assert np.allclose(out, np.tanh(x) * 2, rtol=1e-5)
        print(triton.__version__, sys.argv[1:], __name__)
        sys.exit(int(sys.argv[2]))
    """))
    result = subprocess.run([sys.executable, "-m", "tilejit", "run", str(script), "--flag", "3"],
                            capture_output=True, text=True, env=_env(), timeout=300)
    assert result.returncode == 3, result.stderr
    assert result.stdout.strip() == "3.6.0 ['--flag', '3'] __main__"


def test_tilejit_run_module(tmp_path):
    (tmp_path / "tuned_pkg_mod.py").write_text("import sys, triton\nprint('module', triton.__version__, sys.argv[1:])\n")
    env = _env()
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    # the module's own options (-q, -k ...) are not the tilejit command's
    result = subprocess.run([sys.executable, "-m", "tilejit", "run", "-m", "tuned_pkg_mod", "-q", "-k", "x"],
                            capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "module 3.6.0 ['-q', '-k', 'x']"


def test_tilejit_run_reports_an_uncaught_exception(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import triton\nraise ValueError('boom')\n")
    result = subprocess.run([sys.executable, "-m", "tilejit", "run", str(script)], capture_output=True, text=True,
                            env=_env(), timeout=300)
    assert result.returncode == 1 and "ValueError: boom" in result.stderr


def test_torch_triton_probes_do_not_crash_with_the_alias():
    pytest.importorskip("torch")
    result = run_python("""
        import tilejit
        tilejit.alias_triton()
        import torch
        from torch.utils._triton import has_triton, has_triton_package, get_triton_version
        import torch._inductor.runtime.triton_compat as compat
        assert has_triton_package() and compat.HAS_TRITON
        assert compat.libdevice is tilejit.language.extra.libdevice
        assert get_triton_version() == (3, 6)
        # No CUDA device here, and the interpreter is not a Triton CPU backend: torch must not pick Triton.
        assert has_triton() == torch.cuda.is_available()
        compiled = torch.compile(lambda a: torch.sin(a) * 2)
        assert torch.allclose(compiled(torch.ones(4)), torch.sin(torch.ones(4)) * 2)
        print("ok")
    """, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_tilejit_run_gives_the_alias_to_child_processes(tmp_path):
    script = tmp_path / "spawns.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing, subprocess, sys

        def version(queue):
            import triton
            queue.put(triton.__version__)

        if __name__ == "__main__":
            child = subprocess.run([sys.executable, "-c", "import triton; print(triton.__version__)"],
                                   capture_output=True, text=True)
            context = multiprocessing.get_context("spawn")
            queue = context.Queue()
            worker = context.Process(target=version, args=(queue,))
            worker.start()
            spawned = queue.get(timeout=120)
            worker.join()
            print(child.stdout.strip(), spawned)
    """))
    result = subprocess.run([sys.executable, "-m", "tilejit", "run", str(script)], capture_output=True, text=True,
                            env=_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3.6.0 3.6.0"


def test_environment_switch_without_tilejit_run():
    from tilejit.run_alias import child_environment

    env = child_environment(_env())
    result = subprocess.run([sys.executable, "-c", "import triton, tilejit; print(triton.__version__, triton.jit is tilejit.jit)"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3.6.0 True"
    env["TILEJIT_ALIAS_TRITON"] = "0"  # the boot folder alone changes nothing
    result = subprocess.run([sys.executable, "-c", "import tilejit.alias as a, sys; print(a.is_aliased(), 'triton' in sys.modules)"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.stdout.strip() == "False False", result.stderr
