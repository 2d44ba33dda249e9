"""The PTX of atomics states the memory order and scope the kernel asked for, spelled as Triton spells
it (Triton's tests grep for `atom.global.gpu.acq_rel` and `atom.global.release`).

LLVM's NVPTX back end dropped an atomicrmw's order: the unlock `tl.atomic_xchg` of a spin lock came
out as the relaxed `atom.global.exch.b64`, and the H100 lost 1964 of 2000 increments made under the
lock (Triton's test_atomic_cas[int64-1-release]).
"""
import re

import pytest

import tilejit
import tilejit.language as tl


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@tilejit.jit
def _spin_lock_add(data, lock, DTYPE: tl.constexpr, SEM: tl.constexpr):
    zero = tl.full((1,), 0, dtype=DTYPE).item()
    one = tl.full((1,), 1, dtype=DTYPE).item()
    ptrs = data + tl.arange(0, 128)
    while tl.atomic_cas(lock, zero, one, SEM) == 1:
        pass
    tl.store(ptrs, tl.load(ptrs) + 1.0)
    tl.debug_barrier()
    tl.atomic_xchg(lock, zero)


@tilejit.jit
def _rmw(x_ptr, z_ptr, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    offs = tl.arange(0, 128)
    x = tl.load(x_ptr + offs)
    if OP == "add":
        old = tl.atomic_add(z_ptr + offs, x, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = tl.atomic_max(z_ptr + offs, x, sem=SEM, scope=SCOPE)
    else:
        old = tl.atomic_xchg(z_ptr + offs, x, sem=SEM, scope=SCOPE)
    tl.store(x_ptr + offs, old)


def _atoms(kernel, *args, target="cuda:90", **kwargs):
    ptx = kernel.warmup(*args, grid=(1,), target=target, **kwargs).asm["ptx"]
    return re.findall(r"atom\.global\.[a-z0-9._]+", ptx)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("sem", ["acquire", "release", "acq_rel", "relaxed"])
def test_spin_lock_orders(dtype, sem):
    bits = 32 if dtype == "int32" else 64
    atoms = _atoms(_spin_lock_add, "*fp32", "*i32" if bits == 32 else "*i64", DTYPE=getattr(tl, dtype), SEM=sem)
    assert atoms == [f"atom.global.{sem}.gpu.cas.b{bits}", f"atom.global.gpu.acq_rel.exch.b{bits}"], atoms


@pytest.mark.parametrize("sem", ["acquire", "release", "acq_rel", "relaxed"])
@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_rmw_order_and_scope(sem, scope):
    assert _atoms(_rmw, "*fp32", "*fp32", OP="add", SEM=sem, SCOPE=scope) == [f"atom.global.{scope}.{sem}.add.f32"]
    assert _atoms(_rmw, "*i64", "*i64", OP="max", SEM=sem, SCOPE=scope) == [f"atom.global.{scope}.{sem}.max.s64"]
    assert _atoms(_rmw, "*u32", "*u32", OP="max", SEM=sem, SCOPE=scope) == [f"atom.global.{scope}.{sem}.max.u32"]
    assert _atoms(_rmw, "*fp16", "*fp16", OP="add", SEM=sem, SCOPE=scope) == [
        f"atom.global.{scope}.{sem}.add.noftz.f16"]
    assert _atoms(_rmw, "*i32", "*i32", OP="xchg", SEM=sem, SCOPE=scope) == [f"atom.global.{scope}.{sem}.exch.b32"]


def test_bf16_add_is_sm90s_atom_else_an_ordered_cas_loop():
    atoms = _atoms(_rmw, "*bf16", "*bf16", OP="add", SEM="release", SCOPE="cta")
    assert atoms == ["atom.global.cta.release.add.noftz.bf16"], atoms
    atoms = _atoms(_rmw, "*bf16", "*bf16", OP="add", SEM="release", SCOPE="cta", target="cuda:80")
    assert atoms == ["atom.global.release.cta.cas.b16"], atoms
