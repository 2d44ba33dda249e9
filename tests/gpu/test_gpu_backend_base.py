"""`GPUBackend`: the base both GPU backends share (driver delegation, hash, ttgir/llir stages), and
the float code generation options it passes down (fp fusion, flushed exp2 as Triton)."""
import llvmlite.binding as llvm

import tilejit
import tilejit.language as tl
from tilejit.gpu.backend import GPUBackend
from tilejit_amd.backend import HIPBackend
from tilejit_nvidia.backend import CUDABackend


def test_both_gpu_backends_share_the_base():
    for cls in (CUDABackend, HIPBackend):
        assert issubclass(cls, GPUBackend)
        # The delegation lives once, in the base.
        for name in ("is_active", "inactive_reason", "get_current_target", "owns", "get_benchmarker",
                     "toolchain_status", "hash"):
            assert name not in vars(cls), f"{cls.__name__} still defines {name}"


def test_hash_names_llvm_and_the_backends_own_tools():
    version = ".".join(map(str, llvm.llvm_version_info))
    cuda = CUDABackend(CUDABackend.default_target()).hash()
    hip = HIPBackend(HIPBackend.default_target()).hash()
    assert f":llvm{version}:ptxas" in cuda
    assert f":llvm{version}:lld" in hip


class _BrokenDriver:
    def is_active(self):
        raise RuntimeError("no device library")

    def inactive_reason(self):
        raise RuntimeError("no device library")


class _Unplugged(GPUBackend):
    name = "unplugged-test"

    @classmethod
    def _driver(cls):
        return _BrokenDriver()

    @classmethod
    def _driver_class(cls):
        class Owner:
            @staticmethod
            def owns(arg):
                return arg == "mine"
        return Owner

    @staticmethod
    def supports_target(target):
        return False

    def add_stages(self, stages, options):
        raise AssertionError("not compiled in this test")

    def make_launcher(self, compiled_kernel):
        raise AssertionError("not launched in this test")


def test_driver_failures_read_as_inactive_with_the_reason():
    assert _Unplugged.is_active() is False
    assert _Unplugged.inactive_reason() == "no device library"
    assert _Unplugged.owns("mine") and not _Unplugged.owns("theirs")


def test_both_backends_get_the_shared_stages():
    for cls in (CUDABackend, HIPBackend):
        backend = cls(cls.default_target())
        stages = {}
        backend.add_stages(stages, backend.parse_options({}))
        assert list(stages)[:2] == ["ttgir", "llir"]


@tilejit.jit
def _axpy(x_ptr, y_ptr, out_ptr, a):
    offs = tl.arange(0, 128)
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


@tilejit.jit
def _exp2(x_ptr, out_ptr):
    offs = tl.arange(0, 128)
    tl.store(out_ptr + offs, tl.math.exp2(tl.load(x_ptr + offs)))


def _ptx(kernel, *sig, **options):
    return kernel.warmup(*sig, grid=(1,), target="cuda:90", **options).asm["ptx"]


def test_fp_fusion_contracts_multiply_add_unless_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    fused = _ptx(_axpy, "*fp32", "*fp32", "*fp32", "fp32")
    assert "fma.rn.f32" in fused
    plain = _ptx(_axpy, "*fp32", "*fp32", "*fp32", "fp32", enable_fp_fusion=False)
    assert "fma.rn.f32" not in plain and "mul.rn.f32" in plain and "add.rn.f32" in plain


def test_exp2_is_one_flushed_ex2_as_triton(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    ptx = _ptx(_exp2, "*fp32", "*fp32")
    assert "ex2.approx.ftz.f32" in ptx
    assert "ex2.approx.f32" not in ptx
