"""PP-SGD with the CNN of spec §2 (EMNIST, Fig 1d): a shared representation Φ_W and a global head w, both private,
and a personal head θ_i per user; scores = Φ_W(x)ᵀ(w + θ_i).

Per round, for each config and sampled user: the gradients of the minibatch loss (mean over rows *and* classes of
(score − target)², no ½) with respect to (W, w) and θ_i at the pre-update parameters; θ_i ← θ_i − η_θ·∇θ_i (not
clipped); (∇W, ∇w) clipped jointly with one divisor (one Frobenius norm over every tensor), summed over users, plus
σC·ξ noise per tensor; W and w ← − η_w/(qN)·(…). Vectorized with `torch.func`: vmap over users inside vmap over
configs, one functional_call of one module.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpfl.fl.aggregate import clip_factor
from dpfl.papers.bietti2022.ppsgd import Batch

FEATURES = 32


class Representation(nn.Module):
    """Φ_W: Conv(16, 8×8, stride 2, TF-SAME = 3 px padding) → ReLU → MaxPool(2, stride 1) → Conv(32, 4×4, stride 2,
    VALID) → ReLU → MaxPool(2, stride 1) → Flatten(512) → Dense(32) → ReLU (the paper's "4-layer" model with the
    head)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 8, stride=2, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 4, stride=2)
        self.dense = nn.Linear(512, FEATURES)

    def forward(self, x):
        x = x.reshape(-1, 1, 28, 28)
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2, stride=1)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2, stride=1)
        return torch.relu(self.dense(x.flatten(1)))


def initial(classes: int, seed: int = 42, dtype=torch.float32) -> tuple[dict, torch.Tensor]:
    """(Φ parameters, w): Glorot-normal weights (JAX's glorot_normal: a normal truncated at ±2 std, rescaled to the
    variance 2/(fan_in + fan_out)) and N(0, 1e-6²) biases, the stax defaults the authors use, drawn from torch's
    generator seeded with `seed` (so not the authors' JAX numbers); w ~ N(0, 1)/√32."""
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, p in Representation().named_parameters():
        if name.endswith("weight"):
            fan_in = p[0].numel()
            fan_out = p.shape[0] * (p[0, 0].numel() if p.dim() > 2 else 1)
            std = math.sqrt(2.0 / (fan_in + fan_out)) / 0.87962566103423978  # truncation at ±2 shrinks the std
            params[name] = nn.init.trunc_normal_(torch.empty(p.shape), 0.0, std, -2 * std, 2 * std, generator=gen)
        else:
            params[name] = torch.randn(p.shape, generator=gen) * 1e-6
    w = torch.randn((FEATURES, classes), generator=gen) / math.sqrt(FEATURES)
    return {k: v.to(dtype) for k, v in params.items()}, w.to(dtype)


_MODULE = Representation()


def _loss(phi: dict, w: torch.Tensor, theta: torch.Tensor, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    scores = functional_call(_MODULE, phi, (X,)) @ (w + theta)
    return (scores - Y).square().mean()


_per_user = vmap(grad(_loss, argnums=(0, 1, 2)), in_dims=(None, None, 0, 0, 0))  # users share (Φ, w)
_per_config = vmap(_per_user, in_dims=(0, 0, 0, None, None))  # configs share the data


def cnn_round(phi: dict, w: torch.Tensor, Th: torch.Tensor, batch: Batch, grid_t: dict, *, clip: float, q: float,
              n_users: int, noise: dict, local_scale: float = 1.0) -> None:
    """One round in place: Φ {name: (G, …)}, w (G, 32, K), Θ (N, G, 32, K); `noise`: standard normals with Φ's and
    w's shapes without the config axis (shared by the configs, scaled by each σ·C). `local_scale` multiplies the
    local step η_θ (compat authors-code, spec §8 B2: the round's number of users L)."""
    users = batch.users
    G = w.shape[0]
    if len(users):
        Th_s = Th.index_select(0, users).transpose(0, 1)  # (G, L, 32, K)
        g_phi, g_w, g_th = _per_config(phi, w, Th_s, batch.X, batch.Y)  # (G, L, …)
        valid = batch.valid.to(w.dtype)[None, :]
        sq = sum(t.square().flatten(2).sum(-1) for t in (*g_phi.values(), g_w))  # (G, L): joint norm of (∇W, ∇w)
        factor = clip_factor(sq.sqrt(), clip) * valid
        eta_theta = local_scale * grid_t["eta_theta"][:, None, None, None]
        Th.index_copy_(0, users, (Th_s - eta_theta * g_th * valid[..., None, None]).transpose(0, 1))
        sums = {k: torch.einsum("gl,gl...->g...", factor, v) for k, v in g_phi.items()}
        sums["_w"] = torch.einsum("gl,gl...->g...", factor, g_w)
    else:
        sums = {k: torch.zeros_like(v) for k, v in phi.items()}
        sums["_w"] = torch.zeros_like(w)
    scale = grid_t["eta_w"] / (q * n_users)
    sc = grid_t["sigma"] * clip
    for k, v in phi.items():
        shape = (G,) + (1,) * (v.dim() - 1)
        v -= scale.reshape(shape) * (sums[k] + sc.reshape(shape) * noise[k][None])
    w -= scale[:, None, None] * (sums["_w"] + sc[:, None, None] * noise["_w"][None])




def cnn_accuracy(task, phi: dict, w: torch.Tensor, Th: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """Top-1 test accuracy per config (G,), pooled over every user's test rows, user i scored with its own head
    w + θ_i; `chunk` test rows at a time (features of every config)."""
    import numpy as np

    toff = task.test_offsets
    owner_all = torch.as_tensor(np.repeat(np.arange(task.n_users), np.diff(toff)), device=w.device)
    hits = torch.zeros(w.shape[0], dtype=torch.float64, device=w.device)
    with torch.no_grad():
        for a in range(0, int(toff[-1]), chunk):
            X, y, owner = task.X_test[a: a + chunk], task.y_test[a: a + chunk], owner_all[a: a + chunk]
            feats = vmap(lambda p: functional_call(_MODULE, p, (X,)))(phi)  # (G, r, 32)
            heads = w[:, None] + Th[owner].transpose(0, 1)  # (G, r, 32, K)
            scores = torch.einsum("grf,grfk->grk", feats, heads)
            hits += (scores.argmax(-1) == y[None]).sum(1).to(torch.float64)
    return hits / max(1, int(toff[-1]))
