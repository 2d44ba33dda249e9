"""A fake backend and a fake kernel source, to test the compile driver and the JIT without a frontend,
a toolchain or a device. Importable by a child process too (the disk-cache test runs one)."""
from __future__ import annotations

import hashlib

from tilejit import compiler
from tilejit.backends import BaseBackend, GPUTarget, Launcher
import tilejit.runtime.jit as jit_module

FAKE_TARGET = GPUTarget("fake", "default", 1)


class Counters:
    """What ran: every stage call by name, every make_ir, every pass-pipeline run, every launch."""

    def __init__(self):
        self.stage_calls: list = []
        self.make_ir_calls = 0
        self.ttir_pass_runs = 0
        self.launches: list = []


counters = Counters()


class FakeLauncher(Launcher):
    def launch(self, grid, args, stream):
        counters.launches.append((self.compiled_kernel.name, grid, tuple(args), stream))


class FakeBackend(BaseBackend):
    """Two stages after `ttir`: `fakeasm` (text) and `fakebin` (bytes); `fail_stage` makes one raise."""

    name = "fake"
    fail_stage = None
    fail_with = KeyError

    @staticmethod
    def supports_target(target):
        return target.backend == "fake"

    def add_stages(self, stages, options):
        stages["fakeasm"] = lambda src, md: self._stage("fakeasm", f"asm of {md['name']}:\n{src}", md)
        stages["fakebin"] = lambda src, md: self._stage("fakebin", src.encode() + b"\x00\xff", md)

    def _stage(self, name, output, metadata):
        counters.stage_calls.append(name)
        if FakeBackend.fail_stage == name:
            raise FakeBackend.fail_with("boom")
        if name == "fakebin":
            metadata["shared"] = 128
        return output

    def make_launcher(self, compiled_kernel):
        return FakeLauncher(compiled_kernel)


class FakeSource:
    """Stands for `ASTSource`: `make_ir` returns TTIR-like text naming the specialization."""

    def __init__(self, name, signature=None, constexprs=None, attrs=None, salt=""):
        self.name = name
        self.signature = dict(signature or {})
        self.constexprs = dict(constexprs or {})
        self.attrs = dict(attrs or {})
        self.salt = salt

    def hash(self):
        text = repr((self.name, sorted(self.signature.items()), sorted(map(repr, self.constexprs.items())),
                     sorted(map(repr, self.attrs.items())), self.salt))
        return hashlib.sha256(text.encode()).hexdigest()

    def make_ir(self, target, options):
        counters.make_ir_calls += 1
        body = ", ".join(f"{k}: {v}" for k, v in self.signature.items())
        return f"tt.func @{self.name}({body}) attrs={sorted(map(repr, self.attrs.items()))}"


def fake_ttir_passes(module, options):
    counters.ttir_pass_runs += 1
    return module + "\n// passes ran"


_backend_instances: dict = {}


def fake_backend_for_target(target):
    target = GPUTarget.parse(target)
    if target not in _backend_instances:
        _backend_instances[target] = FakeBackend(target)
    return _backend_instances[target]


def fake_select_target(args=(), explicit=None, names=None):
    return GPUTarget.parse(explicit) if explicit is not None else FAKE_TARGET


def make_source_for_jit(fn, signature, constexprs, attrs):
    return FakeSource(fn.__name__, signature, constexprs, attrs, salt=fn.cache_key)


def install(setattr_fn=setattr):
    """Route the driver and the JIT to the fakes (`setattr_fn` = monkeypatch.setattr in pytest)."""
    import tilejit.backends as backends

    counters.__init__()
    FakeBackend.fail_stage = None
    setattr_fn(backends, "backend_for_target", fake_backend_for_target)
    setattr_fn(backends, "select_target", fake_select_target)
    setattr_fn(compiler, "_run_ttir_passes", fake_ttir_passes)
    setattr_fn(jit_module, "_make_ast_source", make_source_for_jit)
    compiler.clear_memory_cache()
    compiler.reset_launch_hooks()
    return counters
