"""Every package imports first, in a fresh interpreter: a backend imported before `tilejit` (as pytest
does when it loads a backend's conftest) must not meet a half-initialised core module (an import
cycle went unnoticed because the usual first import is `tilejit`)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIRST_IMPORTS = ["tilejit", "tilejit_interpreter", "tilejit_nvidia", "tilejit_amd", "tilejit.backends",
                 "tilejit.runtime", "tilejit.runtime.launch_abi", "tilejit.compiler", "tilejit.language",
                 "tilejit.ir", "tilejit.gpu"]


@pytest.mark.parametrize("module", FIRST_IMPORTS)
def test_module_imports_first(module):
    env = dict(os.environ)
    paths = [os.path.join(ROOT, p) for p in ("core", "backends/interpreter", "backends/nvidia", "backends/amd")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
