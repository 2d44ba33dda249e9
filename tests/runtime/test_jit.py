import numpy as np
import pytest

import fakes
from tilejit.runtime.jit import JITFunction, jit
import tilejit.language as tl

SCALE = None  # replaced by a constexpr in test_cache_key_covers_global_constexpr


class constexpr:  # stands for tl.constexpr: the JIT recognises the annotation by name
    def __init__(self, value):
        self.value = value


@jit
def helper(x):
    return x + 1


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: constexpr):
    pid = helper(n)
    return pid


@jit(do_not_specialize=["n"])
def nospec_kernel(x_ptr, n, m):
    pass


@jit(do_not_specialize_on_alignment=["x_ptr"])
def noalign_kernel(x_ptr, n):
    pass


@jit
def string_annotated(x_ptr, BLOCK: "tl.constexpr", ACT: "constexpr" = "relu", eps=1e-5):  # noqa: F821
    pass


@pytest.fixture(autouse=True)
def _fresh_kernels():
    for kernel in (add_kernel, nospec_kernel, noalign_kernel, string_annotated):
        kernel.clear_cache()


def _spec(kernel):
    (per_target,) = kernel.cache.values()
    return [entry[0] for entry in per_target.values()]


def test_decorator_attributes():
    assert isinstance(add_kernel, JITFunction)
    assert add_kernel.arg_names == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]
    assert [p.is_constexpr for p in add_kernel.params] == [False, False, False, False, True]
    assert [p.is_constexpr for p in string_annotated.params] == [False, True, True, False]
    assert add_kernel.src.startswith("def add_kernel(")
    assert add_kernel.__name__ == "add_kernel" and add_kernel.__globals__ is globals()
    with open(__file__) as f:
        lines = f.read().splitlines()
    assert lines[add_kernel.starting_line_number - 1].startswith("def add_kernel(")
    assert nospec_kernel.do_not_specialize == (1,)


def test_calling_outside_a_kernel_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="outside of the scope of a kernel"):
        add_kernel(1, 2, 3, 4, 5)


def test_cache_key_covers_called_jit_functions(monkeypatch):
    before = add_kernel.cache_key
    monkeypatch.setattr(add_kernel, "_cache_key", None)
    monkeypatch.setattr(helper, "src", helper.src + "\n# changed")
    assert add_kernel.cache_key != before


def test_cache_key_covers_global_constexpr(monkeypatch):
    @jit
    def uses_scale(x):
        return x * SCALE

    monkeypatch.setitem(globals(), "SCALE", constexpr(2))
    first = uses_scale.cache_key
    uses_scale._cache_key = None
    monkeypatch.setitem(globals(), "SCALE", constexpr(3))
    assert uses_scale.cache_key != first


def test_launch_specializes_and_passes_runtime_args(fake):
    x = np.zeros(64, np.float32)
    y = np.zeros(64, np.float16)
    out = np.zeros(64, np.float32)[1:]  # 4 bytes off: not 16-byte aligned
    kernel = add_kernel[(2,)](x, y, out, 32, BLOCK=128)
    md = kernel.metadata
    assert md["signature"] == {"x_ptr": "*fp32", "y_ptr": "*fp16", "out_ptr": "*fp32", "n": "i32",
                               "BLOCK": "constexpr"}
    assert md["constants"] == {"BLOCK": 128}
    src_text = kernel.asm["ttir"]
    assert "((0,), [['tt.divisibility', 16]])" in src_text and "((3,), [['tt.divisibility', 16]])" in src_text
    assert "((2,)" not in src_text  # the misaligned pointer is not specialized
    (launch,) = fake.launches
    assert launch[1] == (2, 1, 1) and len(launch[2]) == 4 and launch[2][0] is x and launch[2][3] == 32


def test_int_equal_to_one_becomes_a_constexpr(fake):
    x = np.zeros(16, np.float32)
    kernel = add_kernel[(1,)](x, x, x, 1, BLOCK=16)
    assert kernel.metadata["signature"]["n"] == "constexpr"
    assert kernel.metadata["constants"]["n"] == 1
    assert len(fake.launches[0][2]) == 3  # n is no longer a runtime argument


def test_specialization_key_distinguishes_values(fake):
    x = np.zeros(64, np.float32)
    for n in (1, 16, 17, 33, 1 << 40):
        add_kernel[(1,)](x, x, x, n, BLOCK=16)
    add_kernel[(1,)](x, x, x, 18, BLOCK=16)  # same key as 17: no new compilation
    keys = {kernel.metadata["signature"]["n"] + str(kernel.metadata["constants"].get("n")) for kernel in _spec(add_kernel)}
    assert len(_spec(add_kernel)) == 4 and keys == {"constexpr1", "i32None", "i64None"}
    assert fake.make_ir_calls == 4


def test_do_not_specialize(fake):
    x = np.zeros(64, np.float32)
    kernel = nospec_kernel[(1,)](x, 1, 1)
    sig = kernel.metadata["signature"]
    assert sig["n"] == "i32" and sig["m"] == "constexpr"
    nospec_kernel[(1,)](x, 32, 1)
    nospec_kernel[(1,)](x, 7, 1)
    assert len(_spec(nospec_kernel)) == 1  # n's value never enters the key


def test_do_not_specialize_on_alignment(fake):
    x = np.zeros(64, np.float32)
    kernel = noalign_kernel[(1,)](x, 32)
    assert "((0,)" not in kernel.asm["ttir"] and "((1,), [['tt.divisibility', 16]])" in kernel.asm["ttir"]


def test_second_launch_reuses_the_compiled_kernel(fake):
    x = np.zeros(64, np.float32)
    first = add_kernel[(1,)](x, x, x, 64, BLOCK=16)
    second = add_kernel[(3,)](x, x, x, 64, BLOCK=16)
    assert first is second and fake.make_ir_calls == 1 and len(fake.launches) == 2
    add_kernel[(1,)](x, x, x, 64, BLOCK=32)  # a new constexpr value compiles again
    add_kernel[(1,)](x, x, x, 64, BLOCK=16, num_warps=8)  # and so does a new option
    assert fake.make_ir_calls == 3


def test_torch_tensors_keyed_inline_still_specialize_by_dtype_and_alignment(fake):
    """The launch path keys torch tensors by (raw dtype, aligned, device): each distinct full key must
    still get its own compilation, and equal ones must share it."""
    torch = pytest.importorskip("torch")
    x = torch.zeros(64, dtype=torch.float32)
    half = torch.zeros(64, dtype=torch.float16)
    calls = [(x, x, x), (x, x, x), (x[1:], x, x), (x, half, x), (x[1:], x, x), (x[4:], x, x), (x, half, x)]
    kernels = [add_kernel[(1,)](*tensors, 64, BLOCK=16) for tensors in calls]
    signatures = [(k.metadata["signature"]["x_ptr"], k.metadata["signature"]["y_ptr"],
                   "((0,)" in k.asm["ttir"]) for k in kernels]
    assert signatures == [("*fp32", "*fp32", True), ("*fp32", "*fp32", True), ("*fp32", "*fp32", False),
                          ("*fp32", "*fp16", True), ("*fp32", "*fp32", False), ("*fp32", "*fp32", True),
                          ("*fp32", "*fp16", True)]
    assert kernels[0] is kernels[1] is kernels[5] and kernels[2] is kernels[4] and kernels[3] is kernels[6]
    assert fake.make_ir_calls == 3
    assert [launch[2][0].data_ptr() for launch in fake.launches] == [t[0].data_ptr() for t in calls]


def test_grid_callable_gets_the_bound_meta(fake):
    x = np.zeros(64, np.float32)
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (meta["n"] // meta["BLOCK"],)

    add_kernel[grid](x, x, x, n=256, BLOCK=64, num_warps=2)
    assert fake.launches[0][1] == (4, 1, 1)
    assert seen["BLOCK"] == 64 and seen["num_warps"] == 2 and seen["x_ptr"] is x


def test_defaults_and_keyword_arguments(fake):
    x = np.zeros(64, np.float32)
    kernel = string_annotated[(1,)](x, BLOCK=32, eps=0.5)
    assert kernel.metadata["constants"] == {"BLOCK": 32, "ACT": "relu"}
    assert kernel.metadata["signature"]["eps"] == "fp32"


@pytest.mark.parametrize("call, message", [
    (lambda x: add_kernel[(1,)](x, x, x), "missing 2 required positional arguments: 'n' and 'BLOCK'"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, 16, 99), "takes 5 positional arguments but 6 were given"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, BLOCK=16, blok=3), "unexpected keyword argument.*'blok'"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, BLOCK=x), "constexpr parameter 'BLOCK' was given a tensor"),
    (lambda x: add_kernel[(1,)](x, x, x, 4, 16, n=3), "multiple values for argument 'n'"),
])
def test_binding_errors_name_the_kernel_and_parameter(fake, call, message):
    with pytest.raises(TypeError, match=message) as info:
        call(np.zeros(4, np.float32))
    assert "add_kernel" in str(info.value)


def test_bad_argument_names_the_parameter(fake):
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="argument 'y_ptr'.*str"):
        add_kernel[(1,)](x, "oops", x, 4, BLOCK=16)
    with pytest.raises(ValueError, match="argument 'n'.*64 bits"):
        add_kernel[(1,)](x, x, x, 1 << 70, BLOCK=16)
    with pytest.raises(TypeError, match="argument 'x_ptr'.*complex64"):
        add_kernel[(1,)](np.zeros(4, np.complex64), x, x, 4, BLOCK=16)


@pytest.mark.parametrize("grid", [(), (1, 2, 3, 4), (-1,), (1.5,), "abc", (True,)])
def test_bad_grid_is_a_value_error_naming_the_kernel(fake, grid):
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="kernel 'add_kernel'"):
        add_kernel[grid](x, x, x, 4, BLOCK=16)


def test_callable_grid_returning_garbage_is_a_value_error(fake):
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="kernel 'add_kernel'"):
        add_kernel[lambda meta: None](x, x, x, 4, BLOCK=16)


def test_warmup_compiles_without_launching(fake):
    kernel = add_kernel.warmup("*fp32", "*fp16", "*fp32", "i32", BLOCK=64, grid=(1,), target="fake")
    assert fake.launches == [] and kernel.metadata["signature"]["y_ptr"] == "*fp16"
    assert kernel.metadata["constants"] == {"BLOCK": 64}
    x = np.zeros(4, np.float32)
    assert add_kernel.warmup(x, x, x, 4, BLOCK=64, grid=(1,)) is not kernel
    assert fake.launches == []


def test_stream_and_options_reach_the_launcher_and_compiler(fake):
    x = np.zeros(4, np.float32)
    kernel = add_kernel[(1,)](x, x, x, 4, BLOCK=16, num_warps=2, num_stages=1, stream=7)
    assert kernel.metadata["num_warps"] == 2 and kernel.metadata["num_stages"] == 1
    assert fake.launches[0][3] == 7


def test_jit_debug_flag_becomes_an_option(fake):
    @jit(debug=True)
    def debug_kernel(x_ptr):
        pass

    kernel = debug_kernel[(1,)](np.zeros(4, np.float32))
    assert kernel.metadata["debug"] is True


def test_non_plain_parameters_are_rejected():
    def varargs(*args):
        pass

    with pytest.raises(TypeError, match="'args'"):
        jit(varargs)


def test_target_selection_is_memoised_but_sees_scoped_targets(fake, monkeypatch):
    import tilejit.backends as backends

    calls = []

    def counting_select(args=(), explicit=None, names=None):
        calls.append(names)
        if explicit is not None:
            return backends.GPUTarget.parse(explicit)
        return backends.current_explicit_target() or fakes.FAKE_TARGET

    monkeypatch.setattr(backends, "select_target", counting_select)
    x = np.zeros(4, np.float32)
    add_kernel[(1,)](x, x, x, 4, BLOCK=16)
    add_kernel[(1,)](x, x, x, 5, BLOCK=16)
    # Target selection sees the runtime arguments (constexprs cannot be tensors).
    assert len(calls) == 1 and calls[0] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    with backends.target("fake:other"):
        kernel = add_kernel[(1,)](x, x, x, 4, BLOCK=16)
    assert str(kernel.target) == "fake:other" and len(calls) == 1  # the scoped target wins outright
    assert set(map(str, add_kernel.cache)) == {"fake", "fake:other"}


def _specialization_name(spec):
    ones = "_".join(k for k, v in spec.constants.items() if isinstance(k, str) and v == 1)
    return f"kernel_{spec.signature['value']}_{ones}"


@jit(repr=_specialization_name)
def _named_by_repr(value, is_one, x_ptr):
    tl.store(x_ptr, value + is_one)


@pytest.mark.parametrize("value,type_string", [(-1, "i32"), (2**31, "i64"), (-2**63, "i64"), (2**63, "u64")])
def test_repr_names_each_specialization_as_triton(value, type_string):
    """`@jit(repr=fn)`: the compiled kernel's name comes from fn(specialization) (Triton's
    test_value_specialization); the launch still finds the kernel's own symbol."""
    x = np.zeros(1, np.int64 if type_string != "i32" else np.int32)
    h = _named_by_repr.warmup(value, 1, x, grid=(1,))
    assert h.name == f"kernel_{type_string}_is_one"
    if type_string != "u64":
        _named_by_repr[(1,)](value, 1, x)
        assert x[0] == value + 1


def test_generic_launch_options_a_backend_lacks_are_ignored(fake):
    """`maxnreg` (a field of `triton.Config`) is NVIDIA's; Triton's other backends keep only their own
    option fields, so a config written for NVIDIA runs on AMD and the interpreter too. The fake
    backend has no `maxnreg`: the launch compiles without it instead of failing."""
    x = np.zeros(4, np.float32)
    kernel = add_kernel[(1,)](x, x, x, 4, BLOCK=16, maxnreg=64)
    assert "maxnreg" not in kernel.metadata and fake.launches


def test_maxnreg_on_the_interpreter_runs_the_kernel():
    import tilejit

    @tilejit.jit
    def twice(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)

    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    twice[(1,)](x, out, BLOCK=16, maxnreg=64)   # NumPy arrays: the interpreter
    np.testing.assert_array_equal(out, 2 * x)


def test_jit_accepts_tritons_unused_version_argument():
    @jit(version=1, do_not_specialize=["n"])
    def versioned(x_ptr, n):
        pass

    assert isinstance(versioned, JITFunction) and versioned.arg_names == ["x_ptr", "n"]
