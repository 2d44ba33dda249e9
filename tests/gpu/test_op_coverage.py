"""Ops beyond the basic three kernels: each compiles to a cubin / hsaco, and the layouts are right."""
import shutil

import pytest

import tilejit
import tilejit.language as tl

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")


@tilejit.jit
def _row_sums(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, M), tl.sum(x, axis=1))


def test_reduction_result_is_a_slice_converted_for_its_user(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    ttgir = _row_sums.warmup("*fp32", "*fp32", grid=(1,), target="cuda:90", M=8, N=16).asm["ttgir"]
    reduce_line = next(line for line in ttgir.splitlines() if "tt.reduce %" in line or ") : (tensor<8x16xf32" in line)
    del reduce_line
    store = next(line for line in ttgir.splitlines() if line.strip().startswith("tt.store"))
    value = store.split("tt.store")[1].split(",")[1].strip().split()[0]
    producer = next(line for line in ttgir.splitlines() if line.strip().startswith(value + " ="))
    assert "ttg.convert_layout" in producer and "#ttg.slice<{dim = 1" in producer


@tilejit.jit
def _block_ptr_loop(src, out, M, K, BM: tl.constexpr, BK: tl.constexpr):
    p = tl.make_block_ptr(src, shape=(M, K), strides=(K, 1), offsets=(0, 0), block_shape=(BM, BK), order=(1, 0))
    acc = tl.zeros((BM,), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc += tl.sum(tl.load(p, boundary_check=(0, 1), padding_option="zero"), axis=1)
        p = tl.advance(p, (0, BK))
    q = tl.make_tensor_descriptor(out, shape=[M], strides=[1], block_shape=[BM])
    q.store([0], acc)


@tilejit.jit
def _misc_ops(x_ptr, i_ptr, h_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    i = tl.load(i_ptr + offs)
    tl.store(h_ptr + tl.arange(0, 16), tl.histogram(i, 16))
    g = tl.gather(x, i, 0)
    f8 = g.to(tl.float8e4nv).to(tl.float32) + g.to(tl.float8e5).to(tl.float32)
    tl.atomic_add(o_ptr + offs, f8)
    tl.atomic_max(o_ptr + offs, f8)
    tl.atomic_cas(i_ptr, 0, 1)


@pytest.mark.parametrize("target", ["cuda:90", "cuda:80", "hip:gfx942"])
@pytest.mark.parametrize("kernel,sig,meta", [
    (_block_ptr_loop, ("*fp32", "*fp32", "i32", "i32"), dict(BM=8, BK=16)),
    (_misc_ops, ("*fp32", "*i32", "*i32", "*fp32"), dict(BLOCK=128)),
], ids=["block_ptr_descriptor", "histogram_gather_fp8_atomics"])
def test_compiles_to_binary(kernel, sig, meta, target, tmp_path, monkeypatch):
    if target.startswith("cuda") and shutil.which("ptxas") is None:
        pytest.skip("ptxas not installed")
    if target.startswith("hip"):
        from tilejit_amd.toolchain import find_lld
        if find_lld() is None:   # ld.lld, ld.lld-NN, or TILEJIT_LLD
            pytest.skip("ld.lld not installed")
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    compiled = kernel.warmup(*sig, grid=(1,), target=target, **meta)
    binary = compiled.asm["cubin" if target.startswith("cuda") else "hsaco"]
    assert binary[:4] == b"\x7fELF"
    assert "make_block_ptr" not in compiled.asm["ttgir"] and "descriptor" not in compiled.asm["ttgir"]


def test_print_uses_vprintf_on_nvidia(tmp_path, monkeypatch):
    @tilejit.jit
    def _print_kernel(x_ptr):
        tl.device_print("x", tl.load(x_ptr + tl.arange(0, 4)))
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    ptx = _print_kernel.warmup("*fp32", grid=(1,), target="cuda:90").asm["ptx"]
    assert "call.uni" in ptx and "vprintf" in ptx
