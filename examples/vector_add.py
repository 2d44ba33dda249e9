"""Vector add, the first Triton tutorial, with only the imports changed."""
import numpy as np

import tilejit as triton
import tilejit.language as tl
from _device import array_module


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def add(x, y, out):
    n = x.shape[0]
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=1024)
    return out


if __name__ == "__main__":
    to_dev, to_host, where = array_module()
    rng = np.random.default_rng(0)
    x, y = rng.random(98_432, dtype=np.float32), rng.random(98_432, dtype=np.float32)
    out = to_host(add(to_dev(x), to_dev(y), to_dev(np.empty_like(x))))
    assert np.array_equal(out, x + y)
    print(f"vector add on {where}: matches NumPy")
