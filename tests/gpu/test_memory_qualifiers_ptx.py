"""How the NVIDIA PTX spells Triton's memory qualifiers (compiled on the host, no GPU): atomics with
their memory semantics and scope, compare-and-swap, tl.atomic_poll's read, cache modifiers, eviction
policies and volatile loads. The spellings are Triton 3.9's for the same kernels on cuda:90."""
import re

import pytest

import tilejit
import tilejit.language as tl


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _ptx(kernel, *args, target="cuda:90", **kwargs):
    return kernel.warmup(*args, grid=(1,), target=target, **kwargs).asm["ptx"]


@tilejit.jit
def _rmw(X, Z, Old, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(X + pid)
    if OP == "add":
        old = tl.atomic_add(Z, x, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = tl.atomic_max(Z, x, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = tl.atomic_min(Z, x, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = tl.atomic_and(Z, x, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = tl.atomic_or(Z, x, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = tl.atomic_xor(Z, x, sem=SEM, scope=SCOPE)
    else:
        old = tl.atomic_xchg(Z, x, sem=SEM, scope=SCOPE)
    tl.store(Old + pid, old)


def _atoms(ptx):
    return re.findall(r"\batom\.[\w.:]+", ptx)


@pytest.mark.parametrize("op, dtype, instruction", [
    ("add", "i32", "add.u32"), ("add", "u32", "add.u32"), ("add", "i64", "add.u64"),
    ("add", "fp32", "add.f32"), ("add", "fp64", "add.f64"), ("add", "fp16", "add.noftz.f16"),
    ("add", "bf16", "add.noftz.bf16"),
    ("max", "i32", "max.s32"), ("max", "u32", "max.u32"), ("min", "i64", "min.s64"), ("min", "u64", "min.u64"),
    ("and", "i32", "and.b32"), ("or", "i64", "or.b64"), ("xor", "u32", "xor.b32"),
    ("xchg", "i32", "exch.b32"), ("xchg", "fp32", "exch.b32"), ("xchg", "i64", "exch.b64"),
])
@pytest.mark.parametrize("sem", [None, "acquire", "release", "acq_rel", "relaxed"])
def test_atomic_rmw_carries_semantics_and_scope(op, dtype, instruction, sem):
    """`atom.global.<scope>.<sem>.<op>.<type>`, one per atomic, acq_rel when no sem is given (LLVM's
    atomicrmw came out as a relaxed `atom.global.add.u32` whatever the order)."""
    ptx = _ptx(_rmw, f"*{dtype}", f"*{dtype}", f"*{dtype}", OP=op, SEM=sem, SCOPE="gpu")
    assert _atoms(ptx) == [f"atom.global.gpu.{sem or 'acq_rel'}.{instruction}"]


@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_atomic_rmw_scope(scope):
    ptx = _ptx(_rmw, "*i32", "*i32", "*i32", OP="add", SEM="relaxed", SCOPE=scope)
    assert _atoms(ptx) == [f"atom.global.{scope}.relaxed.add.u32"]


@pytest.mark.parametrize("op, first, second", [("max", "max.s32", "min.u32"), ("min", "min.s32", "max.u32")])
def test_float_min_max_are_two_integer_atomics_with_the_semantics(op, first, second):
    """fp32 max/min is a signed max (non-negative values) and an unsigned min (negative ones) on the
    bits, as Triton: both carry the requested order."""
    ptx = _ptx(_rmw, "*fp32", "*fp32", "*fp32", OP=op, SEM="release", SCOPE="gpu")
    assert sorted(_atoms(ptx)) == sorted([f"atom.global.gpu.release.{first}", f"atom.global.gpu.release.{second}"])


def test_bf16_add_before_hopper_is_a_cas_loop_with_the_semantics():
    """sm_80 has no atom.add.bf16: a compare-and-swap loop on the 16 bits, with the atomic's order."""
    ptx = _ptx(_rmw, "*bf16", "*bf16", "*bf16", OP="add", SEM="release", SCOPE="gpu", target="cuda:80")
    assert _atoms(ptx) == ["atom.global.release.gpu.cas.b16"]


@tilejit.jit
def _lock(Lock, data, SEM: tl.constexpr, SCOPE: tl.constexpr):
    ptrs = data + tl.arange(0, 128)
    while tl.atomic_cas(Lock, 0, 1, SEM, SCOPE) == 1:
        pass
    tl.store(ptrs, tl.load(ptrs) + 1.0)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@pytest.mark.parametrize("dtype, bits", [("i32", 32), ("i64", 64)])
@pytest.mark.parametrize("sem", [None, "acquire", "release", "acq_rel", "relaxed"])
@pytest.mark.parametrize("scope", ["gpu", "cta"])
def test_atomic_cas_spelling(dtype, bits, sem, scope):
    """Compare-and-swap puts the order before the scope (`atom.global.acq_rel.gpu.cas.b32`), as Triton."""
    ptx = _ptx(_lock, f"*{dtype}", "*fp32", SEM=sem, SCOPE=scope)
    assert _atoms(ptx) == [f"atom.global.{sem or 'acq_rel'}.{scope}.cas.b{bits}",
                           f"atom.global.gpu.acq_rel.exch.b{bits}"]


@tilejit.jit
def _poll(flag, out, expected, SEM: tl.constexpr, SCOPE: tl.constexpr):
    tl.atomic_poll(flag, expected, sem=SEM, scope=SCOPE)
    tl.store(out, 1)


@pytest.mark.parametrize("dtype, bits", [("i16", 16), ("i32", 32), ("i64", 64)])
@pytest.mark.parametrize("sem", ["relaxed", "acquire"])
@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_atomic_poll_is_a_relaxed_load_and_an_acquire_fence(dtype, bits, sem, scope):
    """Triton's poll: one `ld.relaxed.<scope>.global.b<N>` in the loop and, for acquire, one
    `fence.acquire.<scope>` (sm_90); no compare-and-swap and no timer."""
    ptx = _ptx(_poll, f"*{dtype}", f"*{dtype}", 5, SEM=sem, SCOPE=scope, num_warps=4)
    assert ptx.count(f"ld.relaxed.{scope}.global.b{bits}") == 1
    assert ptx.count(f"fence.acquire.{scope};") == (sem == "acquire")
    assert "atom." not in ptx and "%globaltimer" not in ptx


def test_atomic_poll_before_hopper_fences_with_acq_rel():
    ptx = _ptx(_poll, "*i32", "*i32", 5, SEM="acquire", SCOPE="gpu", target="cuda:80")
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1 and ptx.count("fence.acq_rel.gpu;") == 1


def test_atomic_poll_with_an_assembler_before_ptx_86_fences_with_acq_rel(monkeypatch):
    """fence.acquire needs PTX ISA 8.6: with CUDA 12.4's ptxas (PTX 8.4) sm_90 gets fence.acq_rel."""
    from tilejit_nvidia import toolchain
    monkeypatch.setattr(toolchain, "_assembler_cuda_version_or_none", lambda: (12, 4))
    # (num_warps=2: a specialization no other test compiled, so it is compiled under the patch)
    ptx = _ptx(_poll, "*i32", "*i32", 5, SEM="acquire", SCOPE="gpu", num_warps=2)
    assert ".version 8.4" in ptx
    assert ptx.count("fence.acq_rel.gpu;") == 1 and "fence.acquire" not in ptx


@tilejit.jit
def _poll_block(flag, out, expected, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out + offs, tl.atomic_poll(flag + offs, expected, sem="acquire").to(tl.int32))


def test_atomic_poll_of_a_block_acquires_once_per_thread():
    """Each thread reads its elements relaxed and fences once, after its last read."""
    ptx = _ptx(_poll_block, "*i32", "*i32", 5, N=512, num_warps=4)
    assert ptx.count("ld.relaxed.gpu.global.b32") == 4
    assert ptx.count("fence.acquire.gpu;") == 1


@tilejit.jit
def _cas_same(p, e_ptr, out, SEM: tl.constexpr):
    e = tl.load(e_ptr)
    tl.store(out, tl.atomic_cas(p, e, e, sem=SEM))


@pytest.mark.parametrize("sem, read", [("relaxed", True), ("acquire", True), ("release", False), ("acq_rel", False)])
def test_a_cas_writing_back_what_it_compares_is_a_read_unless_it_releases(sem, read):
    """cas(p, e, e) never changes memory: relaxed or acquire it is an atomic read; with release
    semantics it may publish, so it stays an atom.cas."""
    ptx = _ptx(_cas_same, "*i32", "*i32", "*i32", SEM=sem)
    assert ("ld.relaxed.gpu.global.b32" in ptx) == read
    assert _atoms(ptx) == ([] if read else [f"atom.global.{sem}.gpu.cas.b32"])


@tilejit.jit
def _copy(dst, src, LOAD_CACHE: tl.constexpr, STORE_CACHE: tl.constexpr, LOAD_EVICT: tl.constexpr,
          STORE_EVICT: tl.constexpr, VOLATILE: tl.constexpr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(src + offsets, cache_modifier=LOAD_CACHE, eviction_policy=LOAD_EVICT, volatile=VOLATILE)
    tl.store(dst + offsets, x, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)


def _copy_ptx(dtype="fp32", n=1024, load_cache="", store_cache="", load_evict="", store_evict="", volatile=False,
              target="cuda:90"):
    return _ptx(_copy, f"*{dtype}", f"*{dtype}", LOAD_CACHE=load_cache, STORE_CACHE=store_cache,
                LOAD_EVICT=load_evict, STORE_EVICT=store_evict, VOLATILE=volatile, N=n, target=target)


def _loads(ptx):
    return re.findall(r"\bld\.(?:volatile\.)?global[\w.:]*", ptx)


def _stores(ptx):
    return re.findall(r"\bst\.global[\w.:]*", ptx)


@pytest.mark.parametrize("cache", ["", ".ca", ".cg", ".cs", ".cv"])
def test_load_cache_modifier(cache):
    ptx = _copy_ptx(load_cache=cache)
    assert set(_loads(ptx)) == {f"ld.global{cache}.v4.b32"}
    for other in {".ca", ".cg", ".cs", ".cv"} - {cache}:
        assert f"ld.global{other}" not in ptx


@pytest.mark.parametrize("cache", ["", ".wb", ".cg", ".cs", ".wt"])
def test_store_cache_modifier(cache):
    ptx = _copy_ptx(store_cache=cache)
    assert set(_stores(ptx)) == {f"st.global{cache}.v4.b32"}
    for other in {".wb", ".cg", ".cs", ".wt"} - {cache}:
        assert f"st.global{other}" not in ptx


@pytest.mark.parametrize("policy", ["", "evict_first", "evict_last"])
def test_eviction_policy(policy):
    """An L2 policy from createpolicy and the L1 eviction priority, on loads and stores (Triton's)."""
    ptx = _copy_ptx(load_evict=policy, store_evict=policy)
    if not policy:
        assert "evict_" not in ptx and "createpolicy" not in ptx
        return
    loads, stores = _loads(ptx), _stores(ptx)
    assert set(loads) == {f"ld.global.L1::{policy}.L2::cache_hint.v4.b32"}
    assert set(stores) == {f"st.global.L1::{policy}.L2::cache_hint.v4.b32"}
    # (one policy register per access, made next to it: createpolicy is one cheap instruction)
    assert ptx.count(f"createpolicy.fractional.L2::{policy}.b64") == len(loads) + len(stores)


def test_cache_modifier_wins_over_an_eviction_policy():
    """PTX has no load with both (ptxas rejects what Triton emits for it): the cache operator stays."""
    ptx = _copy_ptx(load_cache=".cg", load_evict="evict_last")
    assert set(_loads(ptx)) == {"ld.global.cg.v4.b32"} and "evict_last" not in ptx


def test_volatile_load():
    ptx = _copy_ptx(dtype="i64", volatile=True, load_cache=".cg")
    assert set(_loads(ptx)) == {"ld.volatile.global.v2.b64"}


@pytest.mark.parametrize("dtype, n, load, store", [
    ("i8", 128, "ld.global.cg.b8", "st.global.cs.b8"),         # one byte a thread
    ("fp16", 256, "ld.global.cg.b32", "st.global.cs.b32"),     # two halves in one word
    ("fp16", 1024, "ld.global.cg.v4.b32", "st.global.cs.v4.b32"),
    ("fp64", 1024, "ld.global.cg.v2.b64", "st.global.cs.v2.b64"),
])
def test_qualified_accesses_pack_elements_into_words(dtype, n, load, store):
    ptx = _copy_ptx(dtype=dtype, n=n, load_cache=".cg", store_cache=".cs")
    assert set(_loads(ptx)) == {load} and set(_stores(ptx)) == {store}


def test_eviction_before_sm80_has_no_l2_policy():
    ptx = _copy_ptx(load_evict="evict_first", target="cuda:75")
    assert set(_loads(ptx)) == {"ld.global.L1::evict_first.v4.b32"} and "createpolicy" not in ptx


@tilejit.jit
def _pointer_chase(pp, out):
    p = tl.load(pp, cache_modifier=".cg")
    tl.store(out, tl.load(p, volatile=True), cache_modifier=".cs")


def test_a_loaded_pointer_keeps_a_plain_load():
    """Pointers do not travel through the integer registers of the inline PTX: that load drops its
    hint (it stays an LLVM load); the others keep theirs."""
    ptx = _ptx(_pointer_chase, "**fp32", "*fp32")
    assert _loads(ptx) == ["ld.global.b64", "ld.volatile.global.b32"] and _stores(ptx) == ["st.global.cs.b32"]


def test_eviction_policy_is_dropped_before_ptx_74(monkeypatch):
    """Eviction priorities and createpolicy need PTX ISA 7.4: with CUDA 11.2's ptxas (PTX 7.2) the
    hint is dropped (plain accesses) rather than emitted for the assembler to reject."""
    from tilejit_nvidia import toolchain
    monkeypatch.setattr(toolchain, "_assembler_cuda_version_or_none", lambda: (11, 2))
    ptx = _copy_ptx(load_evict="evict_last", store_evict="evict_first", target="cuda:80", n=512)
    assert ".version 7.2" in ptx and "evict" not in ptx and "createpolicy" not in ptx
    assert set(_loads(ptx)) == {"ld.global.v4.b32"} and set(_stores(ptx)) == {"st.global.v4.b32"}
