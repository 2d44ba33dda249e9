"""`tilejit.reinterpret` (`triton.reinterpret`): a kernel reads and writes a tensor's bytes as another
element type, on every backend."""
import numpy as np

import tilejit
import tilejit.language as tl


@tilejit.jit
def _fp8_roundtrip(x_ptr, wide_ptr, back_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)  # fp8 e4m3 through a uint8 buffer
    tl.store(wide_ptr + offs, x.to(tl.float32), mask=mask)
    tl.store(back_ptr + offs, (x.to(tl.float32) * 2).to(tl.float8e4nv), mask=mask)


def test_reinterpret_uint8_bytes_as_fp8(device):
    raw = np.array([0x38, 0x40, 0xB8, 0x3C, 0x00, 0xC4, 0x30, 0x48], np.uint8)  # 1 2 -1 1.5 0 -3 .5 4
    x = tilejit.reinterpret(device.tensor(raw), tl.float8e4nv)
    wide = device.zeros(8, "float32")
    back_bytes = device.zeros(8, "uint8")
    _fp8_roundtrip[(1,)](x, wide, tilejit.reinterpret(back_bytes, tl.float8e4nv), 8, BLOCK=8)
    np.testing.assert_array_equal(device.numpy(wide), [1, 2, -1, 1.5, 0, -3, 0.5, 4])
    # doubling adds one to the exponent field (bits 3..6) of every nonzero value
    expected = np.where(raw & 0x7F, raw + 0x08, raw).astype(np.uint8)
    np.testing.assert_array_equal(device.numpy(back_bytes), expected)
