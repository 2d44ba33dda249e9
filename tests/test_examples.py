"""Every script in examples/ runs and checks its own result against NumPy."""
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py") and not f.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script, tmp_path):
    env = dict(os.environ, TILEJIT_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], cwd=EXAMPLES, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "matches NumPy" in proc.stdout
