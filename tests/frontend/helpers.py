"""Shared helpers of the frontend tests: compile a kernel to TTIR text and FileCheck it."""
import os
import shutil
import subprocess
import tempfile

from tilejit import ir
from tilejit.frontend import ASTSource


def make_module(kernel, signature, constexprs=None, attrs=None, options=None):
    return ASTSource(kernel, signature, constexprs or {}, attrs).make_ir(None, options)


def ttir(kernel, signature, constexprs=None, attrs=None, options=None, locations=False) -> str:
    return ir.print_module(make_module(kernel, signature, constexprs, attrs, options), with_locations=locations)


def filecheck(text: str, checks: str) -> None:
    """Run the `filecheck` tool on `text` with the CHECK lines in `checks`; fail with its report."""
    exe = shutil.which("filecheck")
    assert exe, "the filecheck console script is not installed"
    with tempfile.NamedTemporaryFile("w", suffix=".checks", delete=False) as f:
        f.write(checks)
        path = f.name
    try:
        result = subprocess.run([exe, path], input=text, capture_output=True, text=True)
    finally:
        os.unlink(path)
    assert result.returncode == 0, f"FileCheck failed:\n{result.stderr}\n--- input ---\n{text}"
