"""`triton.tools.mxfp`: host-side helpers for the OCP microscaling formats, used to build test data.

* `MXFP4Tensor`: 4-bit E2M1 values (one per uint8, or two per byte with `to_packed_tensor`).
* `MXScaleTensor`: 8-bit E8M0 block scales (2**(e - 127); 255 is NaN).

Same constructors and methods as Triton's (`data=` float32 tensor or `size=`, `random()`, `to(torch.float32)`,
`to_packed_tensor(dim)`, `unpack_packed_tensor(packed, dim, shape)`); torch is required.
"""
from __future__ import annotations

import torch

# E2M1 magnitudes by code (sign bit excluded): E = code >> 1, M = code & 1.
_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def _size_tuple(size):
    return tuple(size) if isinstance(size, (tuple, list, torch.Size)) else (size,)


class MXFP4Tensor:
    """E2M1 data, one code per uint8 in `self.data`."""

    def __init__(self, data=None, size=None, device=None):
        self.device = device
        if data is not None:
            if not isinstance(data, torch.Tensor):
                raise TypeError("MXFP4Tensor: data must be a torch tensor of float32 values")
            self.device = data.device
            self.data = self._from_float(data)
            self.size = tuple(data.shape)
        elif size is not None:
            self.size = _size_tuple(size)
        else:
            raise ValueError("MXFP4Tensor: give data or size")

    def random(self):
        """Every E2M1 code (both signs) with equal probability."""
        self.data = torch.randint(0, 16, size=self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype):
        if dtype != torch.float32:
            raise ValueError("MXFP4Tensor.to: only torch.float32 is supported")
        table = torch.tensor(_E2M1_VALUES, dtype=torch.float32, device=self.data.device)
        magnitude = table[(self.data & 0x7).long()]
        return torch.where((self.data & 0x8) != 0, -magnitude, magnitude)

    def _from_float(self, values):
        """Round to nearest, ties to the even code; beyond 6 (and inf/NaN) saturate to +/-6."""
        values = values.to(torch.float32)
        sign = torch.signbit(values).to(torch.uint8)
        magnitude = values.abs()
        magnitude = torch.where(torch.isfinite(magnitude), magnitude, torch.full_like(magnitude, 6.0))
        midpoints = torch.tensor(_E2M1_MIDPOINTS, dtype=torch.float32, device=values.device)
        code = torch.bucketize(magnitude, midpoints, right=False)  # ties go to the lower code...
        tie = (code < 7) & (magnitude == midpoints[code.clamp(max=6)])
        code = torch.where(tie & (code % 2 == 1), code + 1, code)  # ...unless it is odd
        return ((sign << 3) | code.to(torch.uint8)).to(torch.uint8)

    def to_packed_tensor(self, dim):
        """Two codes per byte along `dim` (element 2i in the low nibble), padding an odd length with 0."""
        data = self.data
        if not 0 <= dim < data.ndim:
            raise ValueError(f"to_packed_tensor: dim {dim} is out of range for {data.ndim} dimensions")
        if data.size(dim) % 2:
            pad_shape = list(data.shape)
            pad_shape[dim] = 1
            data = torch.cat([data, torch.zeros(pad_shape, dtype=data.dtype, device=data.device)], dim=dim)
        pairs = data.unflatten(dim, (data.size(dim) // 2, 2))
        return (pairs.select(dim + 1, 1) << 4) | pairs.select(dim + 1, 0)

    def unpack_packed_tensor(self, packed_tensor, dim, original_shape):
        """The codes of `to_packed_tensor(dim)` again, cut to `original_shape[dim]`."""
        low = packed_tensor & 0xF
        high = (packed_tensor >> 4) & 0xF
        data = torch.stack((low, high), dim=dim + 1).flatten(dim, dim + 1)
        return data.narrow(dim, 0, original_shape[dim]).to(torch.uint8)


def fp8e8m0_to_float32(scale):
    """E8M0 bytes as float32: 2**(e - 127), e = 0 giving 2**-127 (a subnormal), 255 giving NaN."""
    scale = scale.view(torch.uint8)
    bits = (scale.to(torch.int32) << 23).clamp_min(0x00400000)
    return bits.masked_fill(scale == 255, 0x7FC00000).view(torch.float32)


class MXScaleTensor:
    """E8M0 scales, one biased exponent per uint8 in `self.data`."""

    def __init__(self, data=None, size=None, device=None):
        self.device = device
        if data is not None:
            if not isinstance(data, torch.Tensor):
                raise TypeError("MXScaleTensor: data must be a torch tensor of float32 values")
            self.device = data.device
            self.data = self._from_float(data)
            self.size = tuple(data.shape)
        elif size is not None:
            self.size = _size_tuple(size)
        else:
            raise ValueError("MXScaleTensor: give data or size")

    def random(self, low=None, high=None):
        """Random exponents (never the NaN code) for scales within [low, high]."""
        lowest = 0 if low is None else max(0, int(torch.log2(torch.tensor(float(low)))) + 127)
        highest = 254 if high is None else min(254, max(0, int(torch.log2(torch.tensor(float(high)))) + 127))
        if lowest > highest:
            raise ValueError("MXScaleTensor.random: low must not exceed high")
        self.data = torch.randint(lowest, highest + 1, size=self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype):
        if dtype != torch.float32:
            raise ValueError("MXScaleTensor.to: only torch.float32 is supported")
        return fp8e8m0_to_float32(self.data)

    def _from_float(self, values):
        """floor(log2(value)) + 127, clamped to [0, 254]; values <= 0, inf and NaN become 255 (NaN)."""
        invalid = ~torch.isfinite(values) | (values <= 0)
        safe = torch.where(invalid, torch.ones_like(values), values)
        exponent = (torch.floor(torch.log2(safe)) + 127).to(torch.int32).clamp(0, 254).to(torch.uint8)
        return torch.where(invalid, torch.full_like(exponent, 255), exponent)
