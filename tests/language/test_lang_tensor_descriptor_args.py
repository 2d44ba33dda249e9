"""Host-side `TensorDescriptor` objects (`triton.tools.tensor_descriptor`) passed as kernel arguments:
`desc.load`, `desc.store`, `desc.shape` inside the kernel, on every backend."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.tools.tensor_descriptor import TensorDescriptor
from descriptor_kernels import _abs_through_returned_descriptors, _copy_through_device_descriptors, _padded


@tilejit.jit
def _scale_tiles(in_desc, out_desc, M_BLOCK: tl.constexpr, N_BLOCK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    tile = in_desc.load([pid_m * M_BLOCK, pid_n * N_BLOCK])
    # out-of-bounds parts of the last tiles read as 0 and are not written (the descriptor's shape)
    out_desc.store([pid_m * M_BLOCK, pid_n * N_BLOCK], tile * 2 + in_desc.shape[1])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_descriptor_arguments_load_and_store_tiles(device, dtype):
    x = (np.arange(40 * 24) % 97).astype(dtype).reshape(40, 24)
    x_dev = device.tensor(x)
    out = device.zeros((40, 24), dtype)
    in_desc = TensorDescriptor.from_tensor(x_dev, [16, 16])
    out_desc = TensorDescriptor.from_tensor(out, [16, 16])
    _scale_tiles[(3, 2)](in_desc, out_desc, M_BLOCK=16, N_BLOCK=16)
    np.testing.assert_array_equal(device.numpy(out), (x * 2 + 24).astype(dtype))


@tilejit.jit
def _row_sums(desc, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = desc.load([pid, 0])  # a [1, BLOCK] tile: one row, zero-padded past the last column
    tl.store(out_ptr + pid, tl.sum(tl.sum(row, axis=1), axis=0))


def test_descriptor_of_a_strided_view_with_padding(device):
    x = np.arange(6 * 12, dtype=np.float32).reshape(6, 12)
    x_dev = device.tensor(x)
    view = x_dev[:, :10]  # strides (12, 1), shape (6, 10): the padding must hide columns 10 and 11
    desc = TensorDescriptor(view, [6, 10], [12, 1], [1, 16])
    out = device.zeros(6, "float32")
    _row_sums[(6,)](desc, out, BLOCK=16)
    np.testing.assert_array_equal(device.numpy(out), x[:, :10].sum(axis=1))


def test_descriptor_signature_is_tritons_and_compiles_ahead_of_time():
    src = tilejit.ASTSource(_scale_tiles, signature={"in_desc": "tensordesc<fp32[16, 16]>",
                                                     "out_desc": "tensordesc<fp32[16, 16]>"},
                            constexprs={"M_BLOCK": 16, "N_BLOCK": 16})
    kernel = tilejit.compile(src, target="interpreter")
    assert "tt.make_tensor_descriptor" in kernel.asm["ttir"]


@tilejit.jit
def _copy_through_host_descriptors(in_desc, out_desc):
    m, n = tl.program_id(0) * in_desc.block_shape[0], tl.program_id(1) * in_desc.block_shape[1]
    out_desc.store([m, n], in_desc.load([m, n]))




@pytest.mark.parametrize("padding", ["zero", "nan"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_out_of_bounds_reads_as_the_padding(device, dtype, padding):
    """Triton's test_tensor_descriptor_padding: a 48x48 tensor read in 32x32 blocks into a 64x64 one,
    through descriptors made in the kernel (padding_option) and on the host (padding=)."""
    x = np.arange(48 * 48, dtype=dtype).reshape(48, 48)
    x_dev = device.tensor(x)
    out = device.zeros((64, 64), dtype)
    _copy_through_device_descriptors[(2, 2)](x_dev, out, 48, 48, 64, 64, BM=32, BN=32, PADDING=padding)
    np.testing.assert_array_equal(device.numpy(out), _padded(x, (64, 64), padding))
    out2 = device.zeros((64, 64), dtype)
    _copy_through_host_descriptors[(2, 2)](TensorDescriptor(x_dev, [48, 48], [48, 1], [32, 32], padding=padding),
                                           TensorDescriptor(out2, [64, 64], [64, 1], [32, 32]))
    np.testing.assert_array_equal(device.numpy(out2), _padded(x, (64, 64), padding))


def test_nan_padding_of_bfloat16(backend):
    """bf16's NaN is a bit pattern on the interpreter (NumPy has no bf16): torch tensors only."""
    if backend == "interpreter":
        pytest.skip("NumPy has no bfloat16: the torch-backed runs cover it")
    torch = pytest.importorskip("torch")
    where = "cpu" if backend.startswith("interpreter") else "cuda"
    x = torch.arange(48 * 48, dtype=torch.float32).reshape(48, 48).to(torch.bfloat16).to(where)
    out = torch.zeros(64, 64, dtype=torch.bfloat16, device=where)
    _copy_through_device_descriptors[(2, 2)](x, out, 48, 48, 64, 64, BM=32, BN=32, PADDING="nan")
    expected = _padded(x.float().cpu().numpy(), (64, 64), "nan")
    np.testing.assert_array_equal(out.float().cpu().numpy(), expected)


def test_nan_padding_needs_a_floating_point_tensor(device):
    x = device.tensor(np.zeros((16, 16), np.int32))
    out = device.zeros((16, 16), "int32")
    with pytest.raises(tilejit.CompilationError, match="padding_option 'nan' needs a floating-point"):
        _copy_through_device_descriptors[(1, 1)](x, out, 16, 16, 16, 16, BM=16, BN=16, PADDING="nan")


def test_nan_padding_is_part_of_the_host_descriptor_signature():
    src = tilejit.ASTSource(_copy_through_host_descriptors,
                            signature={"in_desc": "tensordesc<fp32[16, 16],padding=nan>",
                                       "out_desc": "tensordesc<fp32[16, 16]>"})
    ttir = tilejit.compile(src, target="interpreter").asm["ttir"]
    assert ttir.count("tt.make_tensor_descriptor") == 2 and ttir.count('{padding = "nan"}') == 1



@tilejit.jit
def _descriptor_reduce(desc, src_ptr, M, N, M_BLOCK: tl.constexpr, N_BLOCK: tl.constexpr, KIND: tl.constexpr,
                       DEVICE_DESC: tl.constexpr):
    """Triton 3.x's descriptor reductions: every program combines its tile of `src` into `desc`'s
    tensor at an offset that runs past the tensor's end for the last tiles."""
    moffset = tl.program_id(0) * M_BLOCK - 3
    noffset = tl.program_id(1) * N_BLOCK
    rows = moffset + tl.arange(0, M_BLOCK)[:, None]
    cols = noffset + tl.arange(0, N_BLOCK)[None, :]
    val = tl.load(src_ptr + rows * N + cols, mask=(rows >= 0) & (rows < M) & (cols < N), other=0)
    if DEVICE_DESC:
        desc = tl.make_tensor_descriptor(desc, shape=[M, N], strides=[N, 1], block_shape=[M_BLOCK, N_BLOCK])
    if KIND == "add":
        desc.atomic_add([moffset, noffset], val)
    elif KIND == "min":
        desc.atomic_min([moffset, noffset], val)
    elif KIND == "max":
        desc.atomic_max([moffset, noffset], val)
    elif KIND == "and":
        desc.atomic_and([moffset, noffset], val)
    elif KIND == "or":
        desc.atomic_or([moffset, noffset], val)
    else:
        desc.atomic_xor([moffset, noffset], val)


@pytest.mark.parametrize("kind,dtype", [("add", "float32"), ("add", "int32"), ("min", "int32"), ("max", "uint32"),
                                        ("and", "int64"), ("or", "uint64"), ("xor", "int32")])
@pytest.mark.parametrize("device_desc", [False, True])
def test_descriptor_atomics_combine_tiles_and_skip_out_of_bounds(device, kind, dtype, device_desc):
    M, N, MB, NB = 20, 16, 8, 16
    rs = np.random.RandomState(7)
    info = np.iinfo(dtype) if dtype != "float32" else None
    src = (rs.randint(0, 1000, (M, N)) if info is None else rs.randint(0, min(info.max, 1 << 20), (M, N))).astype(dtype)
    dst = (rs.randint(0, 1000, (M, N)) if info is None else rs.randint(0, min(info.max, 1 << 20), (M, N))).astype(dtype)
    out = device.tensor(dst)
    target = out if device_desc else TensorDescriptor.from_tensor(out, [MB, NB])
    grid = ((M + 3 + MB - 1) // MB, N // NB)   # tiles start 3 rows before the tensor, the last runs past it
    _descriptor_reduce[grid](target, device.tensor(src), M, N, M_BLOCK=MB, N_BLOCK=NB, KIND=kind,
                             DEVICE_DESC=device_desc)
    expected = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
                "xor": np.bitwise_xor}[kind](dst, src)
    np.testing.assert_array_equal(device.numpy(out), expected)


def test_descriptor_atomic_refuses_a_type_triton_refuses(device):
    out = device.zeros((8, 16), "float32")
    with pytest.raises(tilejit.CompilationError, match="atomic_and: unsupported element type"):
        _descriptor_reduce[(1, 1)](TensorDescriptor.from_tensor(out, [8, 16]), out, 8, 16, M_BLOCK=8, N_BLOCK=16,
                                   KIND="and", DEVICE_DESC=False)


@pytest.mark.parametrize("kind", ["min", "max"])
@pytest.mark.parametrize("device_desc", [False, True])
def test_descriptor_min_max_of_float16(device, kind, device_desc):
    """fp16 min/max reductions: Triton takes them only where its TMA reduces them (NVIDIA sm_90 and
    later), as a compare-and-swap loop here, NaN-propagating as NumPy's minimum/maximum; every other
    target refuses them, as Triton's (its interpreter included)."""
    M, N, MB, NB = 20, 16, 8, 16
    rs = np.random.RandomState(11)
    src = rs.standard_normal((M, N)).astype(np.float16)
    dst = rs.standard_normal((M, N)).astype(np.float16)
    src[2, 3], dst[4, 5] = np.nan, np.nan
    out = device.tensor(dst)
    target = out if device_desc else TensorDescriptor.from_tensor(out, [MB, NB])
    grid = ((M + 3 + MB - 1) // MB, N // NB)
    launch = lambda: _descriptor_reduce[grid](target, device.tensor(src), M, N, M_BLOCK=MB, N_BLOCK=NB,  # noqa: E731
                                             KIND=kind, DEVICE_DESC=device_desc)
    if not (device.name == "cuda" and device.torch.cuda.get_device_capability()[0] >= 9):
        with pytest.raises(tilejit.CompilationError, match=f"atomic_{kind}: fp16 needs a target with native"):
            launch()
        return
    launch()
    expected = (np.minimum if kind == "min" else np.maximum)(dst, src)
    got = device.numpy(out)
    assert np.isnan(got[2, 3]) and np.isnan(got[4, 5])
    np.testing.assert_array_equal(got, expected)


@tilejit.jit
def _descriptor_of_inlined(ptr, M, N, M_BLOCK: tl.constexpr, N_BLOCK: tl.constexpr, NAN: tl.constexpr):
    if NAN:
        return tl.make_tensor_descriptor(ptr, shape=[M, N], strides=[N, 1], block_shape=[M_BLOCK, N_BLOCK],
                                         padding_option="nan")
    return tl.make_tensor_descriptor(ptr, shape=[M, N], strides=[N, 1], block_shape=[M_BLOCK, N_BLOCK])


@tilejit.jit
def _pick_descriptor(a_ptr, b_ptr, M, N, USE_B, BLOCK: tl.constexpr):
    if USE_B > 0:   # a run-time branch: both arms return a descriptor, merged as their parts
        return _descriptor_of_inlined(b_ptr, M, N, BLOCK, BLOCK, True)
    else:
        return _descriptor_of_inlined(a_ptr, M, N, BLOCK, BLOCK, True)


@tilejit.jit
def _copy_from_picked(out_ptr, a_ptr, b_ptr, M, N, USE_B, BLOCK: tl.constexpr):
    src = _pick_descriptor(a_ptr, b_ptr, M, N, USE_B, BLOCK)
    out = tl.make_tensor_descriptor(out_ptr, shape=[BLOCK, BLOCK], strides=[BLOCK, 1], block_shape=[BLOCK, BLOCK])
    out.store([0, 0], src.load([0, 0]))


def test_descriptor_returned_from_a_jit_function(device):
    """Triton's test_tensor_descriptor_return_value: a noinline helper returns the descriptors."""
    x = np.random.default_rng(2).standard_normal((32, 128)).astype(np.float32)
    out = device.zeros((32, 128), "float32")
    _abs_through_returned_descriptors[(4, 4)](out, device.tensor(x), 32, 128, M_BLOCK=8, N_BLOCK=32)
    np.testing.assert_array_equal(device.numpy(out), np.abs(x))


@pytest.mark.parametrize("use_b", [0, 1])
def test_descriptor_returned_from_both_arms_of_a_branch_keeps_its_padding(device, use_b):
    a = np.full((16, 16), 1, np.float32)
    b = np.full((16, 16), 2, np.float32)
    out = device.zeros((32, 32), "float32")
    _copy_from_picked[(1,)](out, device.tensor(a), device.tensor(b), 16, 16, use_b, BLOCK=32)
    np.testing.assert_array_equal(device.numpy(out), _padded(b if use_b else a, (32, 32), "nan"))
