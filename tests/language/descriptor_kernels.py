"""Tensor-descriptor kernels shared by the language tests (every backend) and the NVIDIA lowering's
host runs (tests/gpu/test_descriptor_padding_simt.py)."""
import numpy as np

import tilejit
import tilejit.language as tl


@tilejit.jit
def _copy_through_device_descriptors(in_ptr, out_ptr, IM, IN, OM, ON, BM: tl.constexpr, BN: tl.constexpr,
                                     PADDING: tl.constexpr):
    in_desc = tl.make_tensor_descriptor(in_ptr, shape=[IM, IN], strides=[IN, 1], block_shape=[BM, BN],
                                        padding_option=PADDING)
    out_desc = tl.make_tensor_descriptor(out_ptr, shape=[OM, ON], strides=[ON, 1], block_shape=[BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    if m == 0:   # made again under a run-time branch: carried out of it as its parts, padding kept
        in_desc = tl.make_tensor_descriptor(in_ptr, shape=[IM, IN], strides=[IN, 1], block_shape=[BM, BN],
                                            padding_option=PADDING)
    out_desc.store([m, n], in_desc.load([m, n]))


def _padded(x, shape, padding):
    expected = np.full(shape, np.nan if padding == "nan" else 0, dtype=x.dtype)
    expected[:x.shape[0], :x.shape[1]] = x
    return expected


@tilejit.jit(noinline=True)
def _descriptor_of(ptr, M, N, M_BLOCK: tl.constexpr, N_BLOCK: tl.constexpr):
    return tl.make_tensor_descriptor(ptr, shape=[M, N], strides=[N, 1], block_shape=[M_BLOCK, N_BLOCK])


@tilejit.jit
def _abs_through_returned_descriptors(out_ptr, a_ptr, M, N, M_BLOCK: tl.constexpr, N_BLOCK: tl.constexpr):
    in_desc = _descriptor_of(a_ptr, M, N, M_BLOCK, N_BLOCK)   # a real call: the descriptor's parts return
    out_desc = _descriptor_of(out_ptr, M, N, M_BLOCK, N_BLOCK)
    m, n = tl.program_id(0) * M_BLOCK, tl.program_id(1) * N_BLOCK
    out_desc.store([m, n], tl.abs(in_desc.load([m, n])))
