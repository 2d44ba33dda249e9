"""A `torch.autograd.Function` whose forward and backward are tilejit kernels, on the interpreter (CPU
tensors). Tensors that require grad, `nn.Parameter`s and non-leaf tensors are passed by `data_ptr()`,
as Triton does; the CUDA twin of this test is in tests/nvidia/test_launcher_gpu.py."""
from __future__ import annotations

import pytest

tilejit = pytest.importorskip("tilejit")
tl = pytest.importorskip("tilejit.language")
torch = pytest.importorskip("torch")


@tilejit.jit
def scaled_tanh_forward(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    w = tl.load(w_ptr + offs, mask=mask)
    e = tl.exp(-2.0 * x)
    tl.store(y_ptr + offs, w * (1.0 - e) / (1.0 + e), mask=mask)


@tilejit.jit
def scaled_tanh_backward(x_ptr, w_ptr, dy_ptr, dx_ptr, dw_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    w = tl.load(w_ptr + offs, mask=mask)
    dy = tl.load(dy_ptr + offs, mask=mask)
    e = tl.exp(-2.0 * x)
    t = (1.0 - e) / (1.0 + e)
    tl.store(dx_ptr + offs, dy * w * (1.0 - t * t), mask=mask)
    tl.store(dw_ptr + offs, dy * t, mask=mask)


class ScaledTanh(torch.autograd.Function):
    """y = w * tanh(x), elementwise."""

    @staticmethod
    def forward(ctx, x, w):
        y = torch.empty_like(x)
        n = x.numel()
        scaled_tanh_forward[(triton_cdiv(n, 64),)](x, w, y, n, BLOCK=64)
        ctx.save_for_backward(x, w)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw = torch.empty_like(x), torch.empty_like(w)
        n = x.numel()
        # In backward, `dy` is often a non-leaf tensor and x / w still require grad.
        scaled_tanh_backward[(triton_cdiv(n, 64),)](x, w, dy.contiguous(), dx, dw, n, BLOCK=64)
        return dx, dw


def triton_cdiv(a, b):
    return (a + b - 1) // b


def run_and_compare(device):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, generator=generator).to(device).requires_grad_(True)
    w = torch.nn.Parameter(torch.randn(300, generator=generator).to(device))
    hidden = x * 1.5                       # a non-leaf tensor that requires grad
    y = ScaledTanh.apply(hidden, w)
    loss = (y * y).sum()
    loss.backward()

    x_ref = x.detach().clone().requires_grad_(True)
    w_ref = w.detach().clone().requires_grad_(True)
    y_ref = w_ref * torch.tanh(x_ref * 1.5)
    (y_ref * y_ref).sum().backward()
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=1e-4, atol=1e-5)


def test_autograd_function_forward_and_backward_on_the_interpreter():
    run_and_compare("cpu")


def test_parameter_and_grad_tensors_are_passed_without_detach():
    w = torch.nn.Parameter(torch.ones(64))
    y = torch.empty(64)
    scaled_tanh_forward[(1,)](torch.zeros(64, requires_grad=True), w, y, 64, BLOCK=64)
    assert (y == 0).all() and w.grad is None
