"""Run a launch that must fail on the GPU in a child process.

A failed device assert traps the kernel, and CUDA then refuses every later call in that process
("device-side assert triggered"), so the suite cannot run it in its own process.
"""
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def run_failing_launch(module: str, body: str) -> subprocess.CompletedProcess:
    """Import test module `module` in a fresh interpreter and run `body` (which may use `m`, `np`,
    `torch`) followed by a device synchronisation; returns the finished process."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {HERE!r})
        import numpy as np
        import torch
        import {module} as m
    """) + textwrap.dedent(body) + "\ntorch.cuda.synchronize()\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
