"""The launch ABI that the JIT and every launcher share (`tilejit.runtime.launch_abi`, the pointer reader
of `tilejit.runtime.args`): one grid check, one scalar encoding, one pointer reader. Runs without a GPU:
the NVIDIA and AMD packers are checked byte for byte, the interpreter by running kernels."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import ArgumentTypeError, ArgumentValueError, GridError
from tilejit.runtime.args import device_pointer
from tilejit.runtime.launch_abi import bf16_bits, normalize_grid, scalar_value

torch = pytest.importorskip("torch")

# Values whose bf16 depends on rounding to float32 first: 1 + 2**-8 + 2**-30 is a tie once in float32
# (so ties-to-even gives 0x3F80, as torch does) but just above the tie as a float64 (0x3F81 when
# rounded from the exact value, as the constant path did).
BF16_VALUES = [0.0, -0.0, 1.0, 1.0 + 2**-8 + 2**-30, -(1.0 + 2**-8 + 2**-30), 1.0 + 3 * 2**-9, 3.14159,
               -2.5, 1e-40, 65504.0, 3.3895313892515355e38, 3.4028235e38, 1e39, float("inf"), -float("inf"),
               0.1, 1 / 3, 1.0 + 2**-9 + 2**-40, 2.0 ** -133]


def torch_bf16_bits(value: float) -> int:
    return torch.tensor(value, dtype=torch.bfloat16).view(torch.int16).item() & 0xFFFF


# --- the grid -----------------------------------------------------------------------------------

@pytest.mark.parametrize("grid", [(), (1, 2, 3, 4), (-1,), (1.5,), "abc", (True,), (2**31,), (1, 2**31), 2**64,
                                  None])
def test_every_bad_grid_is_one_error_naming_the_kernel(grid):
    with pytest.raises(GridError, match="kernel 'k'") as info:
        normalize_grid(grid, "k")
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_grid_limits_and_forms():
    assert normalize_grid(5) == (5, 1, 1)
    assert normalize_grid([2, 3]) == (2, 3, 1)
    assert normalize_grid((np.int64(2), 1, 0)) == (2, 1, 0)
    assert normalize_grid((2**31 - 1,)) == (2**31 - 1, 1, 1)


@tilejit.jit
def _fill(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.full([BLOCK], 7.0, tl.float32))


@pytest.mark.parametrize("grid", [(2**31,), (1, 2**31), (2**64,), lambda meta: (2**31,)])
def test_huge_grid_through_the_jit_is_a_grid_error(grid):
    # Was a raw OverflowError from NumPy (2**31) or from the int conversion (2**64).
    x = np.zeros(16, np.float32)
    with pytest.raises(GridError, match="kernel '_fill'.*2\\*\\*31 - 1"):
        _fill[grid](x, BLOCK=16)
    assert not x.any()


def test_compiled_kernel_grid_uses_the_same_check():
    x = np.zeros(16, np.float32)
    compiled = _fill.warmup(x, BLOCK=16, grid=(1,))
    with pytest.raises(GridError, match="kernel '_fill'"):
        compiled[(2**31,)](x)
    compiled[(1,)](x)
    assert (x == 7).all()


# --- scalars: one encoding ----------------------------------------------------------------------

@pytest.mark.parametrize("value", BF16_VALUES)
def test_bf16_bits_match_torch(value):
    assert bf16_bits(value) == torch_bf16_bits(value)


def test_bf16_nan_stays_a_quiet_nan_of_its_sign():
    assert bf16_bits(float("nan")) & 0x7FC0 == 0x7FC0
    assert bf16_bits(-float("nan")) & 0x8000


@pytest.mark.parametrize("value", BF16_VALUES)
def test_bf16_constant_equals_bf16_argument_on_every_encoder(value):
    """The GPU lowering's constant, the NVIDIA and AMD argument packers and the launch ABI agree."""
    from tilejit.gpu.llvm.float_formats import constant_bits
    from tilejit_amd.kernargs import encode_scalar
    from tilejit_nvidia.arg_packing import ArgPacker

    expected = torch_bf16_bits(value)
    assert constant_bits(value, "bf16") == expected
    packer = ArgPacker(["bf16"])
    packer.pack(value)
    assert struct.unpack("<H", bytes(packer.buffer)[:2])[0] == expected
    assert encode_scalar(value, "bf16", "x") == struct.pack("<H", expected)


@tilejit.jit
def _bf16_pair(out, x, C: tl.constexpr):
    tl.store(out, x)
    tl.store(out + 1 + tl.arange(0, 1), tl.full([1], C, tl.bfloat16))  # a bf16 constant


def test_bf16_argument_and_constant_on_the_interpreter():
    from tilejit.frontend.source import ASTSource

    for value in (1.0, 1.0 + 2**-8 + 2**-30, -(1.0 + 2**-8 + 2**-30), 3.14159):
        src = ASTSource(_bf16_pair, {"out": "*bf16", "x": "bf16", "C": "constexpr"}, constexprs={"C": value})
        compiled = tilejit.compile(src, target="interpreter")
        out = np.zeros(2, np.uint16)
        compiled[(1,)](out, value)
        assert out.tolist() == [torch_bf16_bits(value)] * 2, value


def test_scalar_rules():
    assert scalar_value(2**31 - 1, "i32") == 2**31 - 1
    assert scalar_value(2**32 - 1, "u32") == 2**32 - 1
    assert scalar_value(np.int8(-3), "i8") == -3
    assert struct.pack("<f", scalar_value(1e39, "fp32")) == struct.pack("<f", float("inf"))
    assert struct.pack("<e", scalar_value(-1e6, "fp16")) == struct.pack("<e", -float("inf"))
    assert scalar_value(True, "i1") is True
    with pytest.raises(ArgumentValueError, match="'n': 2147483648 does not fit in i32"):
        scalar_value(2**31, "i32", "n")
    with pytest.raises(ArgumentTypeError, match="'n' must be an integer"):
        scalar_value(2.5, "i32", "n")
    with pytest.raises(ArgumentTypeError, match="'n' must be an integer"):
        scalar_value(torch.ones(1, dtype=torch.int32), "i32", "n")
    with pytest.raises(ArgumentTypeError, match="'x' must be a number"):
        scalar_value("fast", "fp32", "x")


@tilejit.jit
def _store_scalar(out, n):
    tl.store(out, n)


def test_interpreter_scalars_follow_the_abi():
    from tilejit.frontend.source import ASTSource

    compiled = tilejit.compile(ASTSource(_store_scalar, {"out": "*i32", "n": "i32"}), target="interpreter")
    out = np.zeros(1, np.int32)
    compiled[(1,)](out, -7)
    assert out[0] == -7
    # Out of range was silently wrapped by the interpreter (2**31 -> -2**31); the GPU packers refuse it.
    with pytest.raises(ArgumentValueError, match="'n': 2147483648 does not fit in i32"):
        compiled[(1,)](out, 2**31)
    with pytest.raises(ArgumentTypeError, match="'n' must be an integer"):
        compiled[(1,)](out, 2.5)


# --- pointers: one reader -----------------------------------------------------------------------

class GradCudaTensor:
    """What the launch path sees of a CUDA tensor that requires grad: `data_ptr()` works, torch's
    `__cuda_array_interface__` property raises RuntimeError (not AttributeError)."""

    dtype = np.dtype(np.float32)

    def data_ptr(self):
        return 0x7F00_0000_1000

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. "
                           "If gradients aren't needed, use var.detach() to get Variable that doesn't require grad.")


def test_a_tensor_that_refuses_its_cuda_interface_is_still_a_tensor():
    from tilejit.backends.selection import select_target
    from tilejit.runtime.args import data_ptr_of, dtype_of, is_tensor_like

    arg = GradCudaTensor()
    assert is_tensor_like(arg) and dtype_of(arg, "x") == "*fp32" and data_ptr_of(arg) == 0x7F00_0000_1000
    # Target selection asked `hasattr(arg, "__cuda_array_interface__")` first and died with torch's
    # RuntimeError: every autograd backward failed on CUDA.
    select_target([arg, 3], names=["x", "n"])


def test_gpu_launchers_read_pointers_the_same_way():
    from tilejit_amd.kernargs import device_pointer as amd_pointer
    from tilejit_nvidia.arg_packing import pointer_of as cuda_pointer

    arg = GradCudaTensor()
    for read in (cuda_pointer, amd_pointer, device_pointer):
        assert read(arg, "x") == 0x7F00_0000_1000
        assert read(None, "x") == 0 and read(0x1000, "x") == 0x1000
        with pytest.raises(ArgumentValueError, match="'x' is a host array"):
            read(np.zeros(2), "x")
        with pytest.raises(ArgumentTypeError, match="'x' is a pointer; got str"):
            read("oops", "x")
        with pytest.raises(ArgumentValueError, match="DLPack device type is 1"):
            read(type("OnlyDLPack", (), {"__dlpack__": lambda self, **kw: np.zeros(2).__dlpack__()})(), "x")


# --- arguments the JIT refuses ------------------------------------------------------------------

@tilejit.jit
def _annotated(p, n: int, scale: float, m: tl.int64):
    tl.store(p, tl.load(p) + 1.0)


def test_tensor_for_a_scalar_annotated_parameter_is_refused():
    p = torch.zeros(1)
    _annotated[(1,)](p, 3, 2.0, 4)
    assert p.item() == 1.0
    # A tensor was accepted for `n: int` (and run); Triton's launcher cannot pass it.
    for args, name in (((p, torch.zeros(1), 2.0, 4), "n"), ((p, 3, np.zeros(2), 4), "scale"),
                       ((p, 3, 2.0, torch.ones(1, dtype=torch.int64)), "m"), ((p, 2.5, 2.0, 4), "n")):
        with pytest.raises(ArgumentTypeError, match=f"kernel '_annotated': parameter '{name}' is annotated"):
            _annotated[(1,)](*args)
    assert p.item() == 1.0


def test_meta_tensor_is_an_argument_error():
    with pytest.raises(ArgumentValueError, match="kernel '_fill': argument 'p' is a meta tensor"):
        _fill[(1,)](torch.empty(16, device="meta"), BLOCK=16)
    _fill.warmup(torch.empty(16, device="meta"), BLOCK=16, grid=(1,))  # compiling needs no data
    with pytest.raises(ArgumentValueError, match="meta tensor"):  # and the warmup cached no launch
        _fill[(1,)](torch.empty(16, device="meta"), BLOCK=16)
