"""Host-side `TensorDescriptor` objects (`triton.tools.tensor_descriptor`) passed as kernel arguments:
`desc.load`, `desc.store`, `desc.shape` inside the kernel, on every backend."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.tools.tensor_descriptor import TensorDescriptor


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


def test_nan_padding_is_refused_by_name(device):
    x = device.tensor(np.zeros((16, 16), np.float32))
    desc = TensorDescriptor.from_tensor(x, [16, 16], padding="nan")
    with pytest.raises(ValueError, match="padding"):
        _scale_tiles[(1, 1)](desc, desc, M_BLOCK=16, N_BLOCK=16)
