"""Shared helpers of the frontend tests: compile a kernel to TTIR text and FileCheck it."""
from tilejit import ir
from tilejit.frontend import ASTSource
from toolchain_paths import filecheck  # noqa: F401  (re-exported for the frontend tests)


def make_module(kernel, signature, constexprs=None, attrs=None, options=None):
    return ASTSource(kernel, signature, constexprs or {}, attrs).make_ir(None, options)


def ttir(kernel, signature, constexprs=None, attrs=None, options=None, locations=False) -> str:
    return ir.print_module(make_module(kernel, signature, constexprs, attrs, options), with_locations=locations)
