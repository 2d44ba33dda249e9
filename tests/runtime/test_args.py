import numpy as np
import pytest

from tilejit.runtime.args import data_ptr_of, device_kind_of, dtype_of, is_tensor_like


class TorchLikeDtype:
    """str() like torch's dtypes."""

    def __init__(self, name):
        self.name_ = name

    def __str__(self):
        return f"torch.{self.name_}"

    def __hash__(self):
        return hash(self.name_)


class TorchLikeTensor:
    def __init__(self, dtype, address, device="cuda"):
        self.dtype = TorchLikeDtype(dtype)
        self.address = address
        self.device = type("device", (), {"type": device})()

    def data_ptr(self):
        return self.address


class CudaArray:
    def __init__(self, typestr, address):
        self.__cuda_array_interface__ = {"typestr": typestr, "data": (address, False), "shape": (4,), "version": 3}


class DLPackOnly:
    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


@pytest.mark.parametrize("value, expected", [
    (0, "i32"), (2**31 - 1, "i32"), (2**31, "i64"), (-(2**31) - 1, "i64"), (2**63, "u64"),
    (True, "i1"), (1.5, "fp32"), (None, "constexpr"), (np.int64(7), "i32"), (np.float64(2.0), "fp32"),
])
def test_scalars(value, expected):
    assert dtype_of(value) == expected


@pytest.mark.parametrize("dtype, expected", [
    (np.float16, "*fp16"), (np.float32, "*fp32"), (np.float64, "*fp64"), (np.int8, "*i8"),
    (np.int64, "*i64"), (np.uint8, "*u8"), (np.uint32, "*u32"), (np.bool_, "*i1"),
])
def test_numpy_arrays(dtype, expected):
    array = np.zeros(8, dtype)
    assert dtype_of(array) == expected
    assert data_ptr_of(array) == array.ctypes.data
    assert device_kind_of(array) == "cpu" and is_tensor_like(array)


@pytest.mark.parametrize("torch_name, expected", [
    ("float16", "*fp16"), ("bfloat16", "*bf16"), ("float8_e4m3fn", "*fp8e4nv"), ("float8_e5m2", "*fp8e5"),
    ("float8_e4m3fnuz", "*fp8e4b8"), ("int32", "*i32"), ("bool", "*i1"), ("uint8", "*u8"),
])
def test_torch_like_tensors(torch_name, expected):
    tensor = TorchLikeTensor(torch_name, 0x1000)
    assert dtype_of(tensor) == expected and data_ptr_of(tensor) == 0x1000
    assert device_kind_of(tensor) == "cuda"


def test_cuda_array_interface():
    array = CudaArray("<f2", 0x7F0000)
    assert dtype_of(array) == "*fp16" and data_ptr_of(array) == 0x7F0000 and device_kind_of(array) == "cuda"


def test_dlpack_producer_reads_type_and_offset_address():
    base = np.arange(10, dtype=np.int16)
    view = base[3:]
    producer = DLPackOnly(view)
    assert dtype_of(producer) == "*i16"
    assert data_ptr_of(producer) == view.ctypes.data == base.ctypes.data + 6
    assert device_kind_of(producer) == "cpu"


def test_errors_name_the_parameter():
    with pytest.raises(TypeError, match="argument 'x'.*str"):
        dtype_of("text", "x")
    with pytest.raises(ValueError, match="argument 'n'"):
        dtype_of(2**64, "n")
    with pytest.raises(TypeError, match="argument 'p'.*complex128"):
        dtype_of(np.zeros(2, np.complex128), "p")
    with pytest.raises(TypeError, match="argument 'q'.*no data pointer"):
        data_ptr_of(3, "q")


def test_scalars_are_not_tensors():
    for value in (1, 2.0, True, None, "s", np.float32(1)):
        assert not is_tensor_like(value)
