"""The ops bench/realworld.py runs: Liger-Kernel's autograd functions, each with its inputs (small
shapes for the CPU, benchmark shapes for the GPU), the library call, and a plain PyTorch reference
for its outputs and input gradients."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F


@dataclass
class Case:
    name: str
    module: str  # liger_kernel.ops.<module>
    make: Callable  # (device, dtype, big) -> list of tensors (those with requires_grad get grads)
    call: Callable  # (module, *inputs) -> tensor or tuple of tensors
    ref: Callable  # (*inputs) -> same structure
    tol: float = 1e-4
    # Ops whose bf16 results are off for Triton and tilejit alike (Liger sums in the input type:
    # sparsemax's running sums pick the support, group_norm's statistics) run in fp32 on the GPU.
    dtype: Optional[torch.dtype] = None


def _rows(big):
    return (4096, 4096) if big else (16, 256)


def _t(*shape, device, dtype, grad=True, scale=1.0):
    return (torch.randn(shape, device=device, dtype=dtype) * scale).requires_grad_(grad)


def _rms(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rms_ref(x, w, eps=1e-6):
    return _rms(x.float(), eps).to(x.dtype) * w


def _sparsemax_ref(x):
    # in fp32, as Liger computes it: in bf16 the running sums decide the support wrongly (a 91% error)
    z = x.float()
    zs, _ = z.sort(-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    cs = zs.cumsum(-1)
    kz = (1 + k * zs > cs).sum(-1, keepdim=True)
    tau = (cs.gather(-1, kz - 1) - 1) / kz
    return torch.clamp(z - tau, min=0).to(x.dtype)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def _jsd_ref(logq, logp, beta=0.5):
    p, q = logp.exp(), logq.exp()
    logm = torch.log(beta * p + (1 - beta) * q)
    return (beta * p * (logp - logm) + (1 - beta) * q * (logq - logm)).sum() / logq.shape[0]


def _make_rope(device, dtype, big):
    b, hq, hk, s, d = (2, 32, 8, 2048, 128) if big else (1, 2, 1, 8, 16)
    q = _t(b, hq, s, d, device=device, dtype=dtype)
    k = _t(b, hk, s, d, device=device, dtype=dtype)
    pos = torch.arange(s, device=device, dtype=torch.float32)
    freqs = torch.outer(pos, 1.0 / (10000 ** (torch.arange(0, d, 2, device=device).float() / d)))
    emb = torch.cat((freqs, freqs), -1)[None]
    return [q, k, emb.cos().to(dtype), emb.sin().to(dtype)]


def _rope_ref(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _make_ce(device, dtype, big):
    n, v = (4096, 32000) if big else (16, 500)
    target = torch.randint(0, v, (n,), device=device)
    target[1] = -100
    return [_t(n, v, device=device, dtype=dtype), target]


def _make_flce(device, dtype, big):
    n, h, v = (4096, 2048, 32000) if big else (16, 64, 300)
    return [_t(n, h, device=device, dtype=dtype, scale=0.5), _t(v, h, device=device, dtype=dtype, scale=0.1),
            torch.randint(0, v, (n,), device=device)]


def _make_probs(device, dtype, big, log=True):
    n, v = (1024, 32000) if big else (8, 300)
    a = torch.randn(n, v, device=device, dtype=dtype).log_softmax(-1).requires_grad_(True)
    b = torch.randn(n, v, device=device, dtype=dtype).log_softmax(-1)
    return [a, b if log else b.exp()]


def _make_group_norm(device, dtype, big):
    b, c, length = (32, 256, 4096) if big else (2, 8, 64)
    return [_t(b, c, length, device=device, dtype=dtype), _t(c, device=device, dtype=dtype),
            _t(c, device=device, dtype=dtype)]


def _make_neighborhood(device, dtype, big):
    b, h, s, d = (2, 8, 1024, 64) if big else (1, 2, 40, 16)
    return [_t(b, h, s, d, device=device, dtype=dtype) for _ in range(3)]


def _neighborhood_ref(q, k, v, kernel_size=7, dilation=1):
    """Attention where query i sees the keys j with |i - j| <= kernel_size // 2 * dilation and
    (j - i) a multiple of dilation."""
    pos = torch.arange(q.shape[-2], device=q.device)
    rel = pos[None, :] - pos[:, None]
    seen = (rel.abs() <= kernel_size // 2 * dilation) & (rel % dilation == 0)
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (scores.masked_fill(~seen, float("-inf")).softmax(-1) @ v.float()).to(q.dtype)


def _probs(*shape, device, dtype, grad):
    return torch.randn(*shape, device=device).softmax(-1).to(dtype).requires_grad_(grad)


def _poly_norm_ref(x, w, b, eps=1e-6):
    xf = x.float()
    return (w[0] * _rms(xf ** 3, eps) + w[1] * _rms(xf ** 2, eps) + w[2] * _rms(xf, eps) + b).to(x.dtype)


def _make_mrope(device, dtype, big):
    b, hq, hk, s, d = (2, 28, 4, 2048, 128) if big else (1, 2, 1, 8, 16)
    pos = torch.arange(s, device=device, dtype=torch.float32)[None, None, :] + torch.arange(3, device=device)[:, None, None] * 7
    freqs = pos[..., None] / (10000 ** (torch.arange(0, d, 2, device=device).float() / d))
    emb = torch.cat((freqs, freqs), -1).expand(3, b, s, d)
    return [_t(b, hq, s, d, device=device, dtype=dtype), _t(b, hk, s, d, device=device, dtype=dtype),
            emb.cos().to(dtype), emb.sin().to(dtype)]


def _mrope_section(head_dim):
    return [head_dim // 8, head_dim * 3 // 16, head_dim * 3 // 16]   # Qwen2-VL's [16, 24, 24] at 128


def _mrope_ref(q, k, cos, sin):
    """Qwen2-VL's multimodal rotary embedding: the halves of the head dim split into temporal,
    height and width sections, each rotated by its own position."""
    sections = _mrope_section(q.shape[-1]) * 2
    pick = [i % 3 for i in range(len(sections))]
    cos = torch.cat([c[j] for c, j in zip(cos.float().split(sections, -1), pick)], -1)[:, None]
    sin = torch.cat([c[j] for c, j in zip(sin.float().split(sections, -1), pick)], -1)[:, None]
    return tuple((x.float() * cos + _rotate_half(x.float()) * sin).to(x.dtype) for x in (q, k))


def _make_moe(device, dtype, big):
    t, h, inter, e, k = (4096, 1024, 1024, 8, 2) if big else (16, 32, 32, 4, 2)
    experts = torch.rand(t, e, device=device).topk(k, -1).indices.to(torch.int32)
    return [_t(t, h, device=device, dtype=dtype, scale=0.5), _t(e, 2 * inter, h, device=device, dtype=dtype, scale=h ** -0.5),
            _t(e, h, inter, device=device, dtype=dtype, scale=inter ** -0.5), experts,
            torch.rand(t, k, device=device).softmax(-1).to(dtype)]


def _moe_ref(x, gate_up, down, experts, weights):
    """Each token: the sum over its experts of weight * down(silu(gate) * up)."""
    inter = gate_up.shape[1] // 2
    out = torch.zeros(x.shape, device=x.device)
    for e in range(gate_up.shape[0]):
        tok, slot = (experts == e).nonzero(as_tuple=True)
        h = x[tok].float() @ gate_up[e].float().T
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ down[e].float().T
        out = out.index_add(0, tok, y * weights[tok, slot, None].float())
    return out.to(x.dtype)


def _make_mta(device, dtype, big):
    b, h, length = (2, 8, 512) if big else (1, 2, 8)
    return [_t(b, h, length, length, device=device, dtype=dtype), _t(h, h, 3, 3, device=device, dtype=dtype, scale=0.3),
            _t(h, device=device, dtype=dtype, scale=0.1)]


def _mta_ref(scores, weight, bias):
    """Multi-token attention: causal softmax of the scores, a 3x3 convolution across heads, the
    future zeroed again."""
    future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
    probs = scores.float().masked_fill(future, -1e9).softmax(-1)
    return F.conv2d(probs, weight.float(), bias.float(), padding=1).masked_fill(future, 0.0).to(scores.dtype)


def _make_linear_pair(device, dtype, big):
    n, h, v = (1024, 1024, 32000) if big else (8, 32, 50)
    return [_t(n, h, device=device, dtype=dtype, scale=0.5), _t(v, h, device=device, dtype=dtype, scale=h ** -0.5),
            _t(n, h, device=device, dtype=dtype, scale=0.5, grad=False),
            _t(v, h, device=device, dtype=dtype, scale=h ** -0.5, grad=False)]


def _linear_jsd_ref(x, w, tx, tw):
    return _jsd_ref((x.float() @ w.float().T).log_softmax(-1), (tx.float() @ tw.float().T).log_softmax(-1))


def _make_linear_kl(device, dtype, big):
    n, h, v = (1024, 1024, 32000) if big else (8, 32, 50)
    return [_t(n, h, device=device, dtype=dtype, scale=0.5), _t(v, h, device=device, dtype=dtype, scale=h ** -0.5),
            _probs(n, v, device=device, dtype=dtype, grad=False)]


def _linear_kl_ref(x, w, target):
    t = target.float()
    return (t * (t.clamp_min(1e-10).log() - (x.float() @ w.float().T).log_softmax(-1))).sum() / x.shape[0]


def _make_ce_tvd(device, dtype, big):
    n, v = (4096, 32000) if big else (8, 50)
    return [_t(n, v, device=device, dtype=dtype), _t(n, v, device=device, dtype=dtype, grad=False),
            torch.randint(0, v, (n,), device=device)]


def _ce_tvd_ref(s, t, target):
    s32, t32 = s.float(), t.float()
    return F.cross_entropy(s32, target, reduction="none"), 0.5 * (s32.softmax(-1) - t32.softmax(-1)).abs().sum(-1)


def _attn_res_ref(v, w_query, w_norm, eps=1e-6):
    """Softmax attention over the stacked blocks: each block's RMS-normalized value scored against a
    learned query, the blocks summed by those weights."""
    vf = v.float()
    keys = (_rms(vf, eps).to(v.dtype) * w_norm).float()
    alpha = (keys * w_query.float()).sum(-1).softmax(0)
    return (alpha[..., None] * vf).sum(0).to(v.dtype)


def _make_modulated(device, dtype, big):
    b, s, h = (8, 512, 4096) if big else (2, 4, 64)
    return [_t(b, s, h, device=device, dtype=dtype), _t(h, device=device, dtype=dtype),
            _t(b, h, device=device, dtype=dtype, scale=0.2), _t(b, h, device=device, dtype=dtype, scale=0.2)]


def _modulated_ref(x, w, scale, shift, eps=1e-6):
    """(1 + scale) * RMSNorm(x) * w + shift, scale and shift per batch row."""
    y = _rms(x.float(), eps).to(x.dtype) * w
    return (y.float() * (1 + scale.float()[:, None]) + shift.float()[:, None]).to(x.dtype)


CASES = [
    Case("rms_norm", "rms_norm",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt), _t(_rows(big)[1], device=dev, dtype=dt)],
         lambda m, x, w: m.LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False),
         _rms_ref),
    Case("fused_add_rms_norm", "fused_add_rms_norm",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt), _t(*_rows(big), device=dev, dtype=dt),
                               _t(_rows(big)[1], device=dev, dtype=dt)],
         lambda m, x, r, w: m.LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6, 0.0, "llama", False),
         lambda x, r, w: (_rms_ref(x + r, w), x + r)),
    Case("layer_norm", "layer_norm",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt), _t(_rows(big)[1], device=dev, dtype=dt),
                               _t(_rows(big)[1], device=dev, dtype=dt)],
         lambda m, x, w, b: m.LigerLayerNormFunction.apply(x, w, b, 1e-6),
         lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-6)),
    Case("group_norm", "group_norm", _make_group_norm,
         lambda m, x, w, b: m.LigerGroupNormFunction.apply(x, w, b, x.shape[1], 4, 1e-6),
         # statistics and the weight/bias gradients in fp32 (bf16 sums of 32x4096x64 terms drift)
         lambda x, w, b: F.group_norm(x.float(), 4, w.float(), b.float(), 1e-6).to(x.dtype), dtype=torch.float32),
    Case("swiglu", "swiglu",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt), _t(*_rows(big), device=dev, dtype=dt)],
         lambda m, a, b: m.LigerSiLUMulFunction.apply(a, b),
         lambda a, b: F.silu(a) * b),
    Case("geglu", "geglu",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt), _t(*_rows(big), device=dev, dtype=dt)],
         lambda m, a, b: m.LigerGELUMulFunction.apply(a, b),
         lambda a, b: F.gelu(a, approximate="tanh") * b),
    Case("relu_squared", "relu_squared",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt)],
         lambda m, x: m.LigerReLUSquaredFunction.apply(x),
         lambda x: F.relu(x) ** 2),
    Case("dyt", "dyt",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt), _t(1, device=dev, dtype=dt),
                               _t(_rows(big)[1], device=dev, dtype=dt), _t(_rows(big)[1], device=dev, dtype=dt)],
         lambda m, x, a, g, b: m.LigerDyTFunction.apply(x, a, g, b),
         lambda x, a, g, b: g * torch.tanh(a * x) + b),
    Case("softmax", "softmax",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt)],
         lambda m, x: m.LigerSoftmaxFunction.apply(x),
         lambda x: torch.softmax(x, -1)),
    Case("sparsemax", "sparsemax",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt)],
         lambda m, x: m.LigerSparsemaxFunction.apply(x, -1),
         _sparsemax_ref, dtype=torch.float32),
    Case("rope", "rope", _make_rope,
         lambda m, q, k, c, s: m.LigerRopeFunction.apply(q, k, c, s),
         _rope_ref),
    Case("cross_entropy", "cross_entropy", _make_ce,
         lambda m, x, t: m.LigerCrossEntropyFunction.apply(x, t, None, -100, 0.0, 0.0, "mean")[0],
         lambda x, t: F.cross_entropy(x, t, ignore_index=-100)),
    Case("fused_linear_cross_entropy", "fused_linear_cross_entropy", _make_flce,
         lambda m, x, w, t: m.LigerFusedLinearCrossEntropyFunction.apply(x, w, t)[0],
         lambda x, w, t: F.cross_entropy(x @ w.T, t), tol=1e-3),
    Case("kl_div", "kl_div", lambda dev, dt, big: _make_probs(dev, dt, big, log=False),
         lambda m, a, b: m.LigerKLDivLossFunction.apply(a, b, "batchmean", False, 1e-10),
         lambda a, b: F.kl_div(a, b, reduction="batchmean")),
    Case("jsd", "jsd", _make_probs,
         lambda m, a, b: m.LigerJSDFunction.apply(a, b, None, 0.5),
         _jsd_ref),
    # dots, masks, a row softmax and tl.trans of loaded tiles (its backward's dot(trans(attn), do));
    # fp32 dots are TF32 by default (tilejit's interpreter rounds as the tensor cores do: 1e-3 off)
    Case("neighborhood_attention", "fused_neighborhood_attention", _make_neighborhood,
         lambda m, q, k, v: m.LigerFusedNeighborhoodAttentionFunction.apply(q, k, v, 7, 1, None),
         _neighborhood_ref, tol=5e-3),
    # more of Liger's ops: norms, rotary embeddings, a mixture of experts, distillation losses
    Case("poly_norm", "poly_norm",
         lambda dev, dt, big: [_t(*_rows(big), device=dev, dtype=dt), _t(3, device=dev, dtype=dt, scale=0.5),
                               _t(device=dev, dtype=dt, scale=0.1)],
         lambda m, x, w, b: m.LigerPolyNormFunction.apply(x, w, b, 1e-6, False),
         _poly_norm_ref),
    Case("modulated_rms_norm", "modulated_rms_norm", _make_modulated,
         lambda m, x, w, sc, sh: m.LigerModulatedRMSNormFunction.apply(x, w, sc, sh, 1e-6),
         _modulated_ref),
    Case("fused_gate_up_swiglu", "swiglu",
         lambda dev, dt, big: [_t(_rows(big)[0], 2 * _rows(big)[1], device=dev, dtype=dt)],
         lambda m, y: m.LigerFusedGateUpSiLUMulFunction.apply(y),
         lambda y: F.silu(y[..., :y.shape[-1] // 2]) * y[..., y.shape[-1] // 2:]),
    Case("qwen2vl_mrope", "qwen2vl_mrope", _make_mrope,
         lambda m, q, k, c, s: m.LigerQwen2VLMRopeFunction.apply(q, k, c, s, _mrope_section(q.shape[-1])),
         _mrope_ref),
    Case("attn_res", "attn_res",
         lambda dev, dt, big: [_t(8 if big else 3, *_rows(big), device=dev, dtype=dt),
                               _t(_rows(big)[1], device=dev, dtype=dt, scale=0.3),
                               _t(_rows(big)[1], device=dev, dtype=dt, scale=0.3)],
         lambda m, v, wq, wn: m.LigerAttnResFunction.apply(v, wq, wn, 1e-6),
         _attn_res_ref),
    Case("multi_token_attention", "multi_token_attention", _make_mta,
         lambda m, s, w, b: m.LigerMultiTokenAttentionFunction.apply(s, w, b, 1, 1),
         _mta_ref),
    # fp32 dots are TF32 by default (as neighborhood attention)
    Case("fused_moe", "fused_moe", _make_moe,
         lambda m, x, gu, d, e, w: m.LigerFusedMoEFunction.apply(x, gu, d, e, w),
         _moe_ref, tol=5e-3),
    Case("tvd", "tvd",
         lambda dev, dt, big: [_probs(*((1024, 32000) if big else (8, 100)), device=dev, dtype=dt, grad=True),
                               _probs(*((1024, 32000) if big else (8, 100)), device=dev, dtype=dt, grad=False)],
         lambda m, p, q: m.LigerTVDLossFunction.apply(p, q, None, "batchmean", -100),
         lambda p, q: 0.5 * (p.float() - q.float()).abs().sum() / p.shape[0]),
    Case("fused_ce_tvd", "fused_ce_tvd", _make_ce_tvd,
         lambda m, s, t, y: m.LigerFusedCETVDFunction.apply(s, t, y, -100),
         _ce_tvd_ref),
    Case("fused_linear_jsd", "fused_linear_jsd", _make_linear_pair,
         lambda m, x, w, tx, tw: m.LigerFusedLinearJSDFunction.apply(x, w, tx, tw),
         _linear_jsd_ref, tol=5e-3),
    Case("fused_linear_kl_div", "fused_linear_kl_div", _make_linear_kl,
         lambda m, x, w, t: m.LigerFusedLinearKLDivFunction.apply(x, w, t),
         _linear_kl_ref, tol=5e-3),
]
