"""NumPy references the language tests compare against: bf16/fp8 rounding and Philox-4x32."""
from __future__ import annotations

import numpy as np


def round_to_bf16(x) -> np.ndarray:
    """fp32 -> bf16 (round to nearest even) -> fp32, done on the bit pattern."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def fp8_table(name: str) -> np.ndarray:
    """The float value of each of the 256 codes of an fp8 format (NaN where the code is NaN)."""
    exp_bits, man_bits, bias, ieee = {"fp8e5": (5, 2, 15, True), "fp8e4nv": (4, 3, 7, False),
                                      "fp8e4b8": (4, 3, 8, None), "fp8e5b16": (5, 2, 16, None)}[name]
    values = np.empty(256, dtype=np.float64)
    for code in range(256):
        if ieee is None and code == 0x80:  # the "fnuz" formats: no -0 and no inf, 0x80 is the NaN
            values[code] = np.nan
            continue
        sign = -1.0 if code & 0x80 else 1.0
        exponent = (code >> man_bits) & ((1 << exp_bits) - 1)
        mantissa = code & ((1 << man_bits) - 1)
        if ieee and exponent == (1 << exp_bits) - 1:
            values[code] = sign * np.inf if mantissa == 0 else np.nan
        elif ieee is False and exponent == (1 << exp_bits) - 1 and mantissa == (1 << man_bits) - 1:
            values[code] = np.nan  # e4m3fn: only S.1111.111 is NaN, there is no infinity
        elif exponent == 0:
            values[code] = sign * mantissa * 2.0 ** (1 - bias - man_bits)
        else:
            values[code] = sign * (1 + mantissa / (1 << man_bits)) * 2.0 ** (exponent - bias)
    return values


def round_to_fp8(x, name: str) -> np.ndarray:
    """Nearest fp8 value of each x (callers avoid exact ties and values beyond the format's range)."""
    table = fp8_table(name)
    finite = np.where(np.isfinite(table), table, np.inf)
    x = np.asarray(x, dtype=np.float64)
    best = np.abs(x[..., None] - finite[None, :]).argmin(axis=-1)
    return table[best].astype(np.float32)


PHILOX_KEY_A, PHILOX_KEY_B = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUND_A, PHILOX_ROUND_B = 0xD2511F53, 0xCD9E8D57


def philox4x32(counters, key, rounds: int = 10):
    """Philox-4x32 written from the Random123 paper, on uint64 arrays holding 32-bit words."""
    mask = np.uint64(0xFFFFFFFF)
    c = [np.asarray(v, dtype=np.uint64) & mask for v in counters]
    k0, k1 = (np.asarray(v, dtype=np.uint64) & mask for v in key)
    for _ in range(rounds):
        prod_a = np.uint64(PHILOX_ROUND_A) * c[0]
        prod_b = np.uint64(PHILOX_ROUND_B) * c[2]
        c = [((prod_b >> np.uint64(32)) ^ c[1] ^ k0) & mask, prod_b & mask,
             ((prod_a >> np.uint64(32)) ^ c[3] ^ k1) & mask, prod_a & mask]
        k0 = (k0 + np.uint64(PHILOX_KEY_A)) & mask
        k1 = (k1 + np.uint64(PHILOX_KEY_B)) & mask
    return [v.astype(np.uint32) for v in c]


def uint32_to_uniform(x) -> np.ndarray:
    """Triton's uint_to_uniform_float for 32-bit words, in float32 arithmetic."""
    signed = np.asarray(x, dtype=np.uint32).view(np.int32).astype(np.int64)
    folded = np.where(signed < 0, -signed - 1, signed).astype(np.int32)
    return folded.astype(np.float32) * np.float32(4.6566127342e-10)
