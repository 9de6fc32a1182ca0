"""PP-SGD (spec §3) for the linear models, vectorized over a grid of configs that share one data stream.

Every user i predicts with (W + Θ_i)ᵀx; W (d, K) is global and private, Θ_i is the user's own. A batch of G configs
(η, a, σ) is one tensor W (G, d, K) and one Θ (N, d, G, K); each round all configs see the same sampled users, the
same minibatches and the same standard-normal noise vector ξ (common random numbers: differences between configs
are not sampling noise), each scaling ξ by its own σ·C. Per round, for the sampled users S_t (rate q = Q/N):

    g_i  = (1/m)·Σ_j x_j (pred_j − y_j)ᵀ          at the pre-update (W, Θ_i), one gradient for both parts
    Θ_i ← Θ_i − η_θ·g_i                            (local step: not clipped, no noise)
    W   ← W − η_w/(qN)·(Σ_{i∈S_t} clip_C(g_i) + σC·ξ)   (only where η_w > 0)

The Frobenius norm of the whole (d, K) gradient is clipped (dpfl.fl.aggregate.clip_factor); the noise has std σC
on the sum, i.e. noise multiplier σ for the sum's user-level sensitivity C (add/remove one user).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dpfl.fl.aggregate import clip_factor


def step_sizes(eta: float, a: float) -> tuple[float, float]:
    """(η_w, η_θ) of a base step η at personalization level a = αQ (spec table): a = 0 → (0, η); 0 < a ≤ 1 →
    (a·η, η); a > 1 → (η, η/a); a = ∞ → (η, 0)."""
    if a < 0 or math.isnan(a):
        raise ValueError(f"personalization level a = αQ must be ≥ 0 or inf, got {a}")
    if a == 0:
        return 0.0, float(eta)
    if math.isinf(a):
        return float(eta), 0.0
    if a <= 1:
        return a * eta, float(eta)
    return float(eta), eta / a


@dataclass
class Grid:
    """G configs: per config the base step η, the level a, the noise multiplier σ, and the derived (η_w, η_θ)."""

    eta: np.ndarray
    a: np.ndarray
    sigma: np.ndarray

    def __post_init__(self):
        self.eta, self.a, self.sigma = (np.asarray(v, dtype=float).reshape(-1) for v in (self.eta, self.a, self.sigma))
        steps = np.array([step_sizes(e, a) for e, a in zip(self.eta, self.a)]).reshape(-1, 2)
        self.eta_w, self.eta_theta = steps[:, 0], steps[:, 1]

    @classmethod
    def product(cls, etas, levels, sigmas) -> "Grid":
        """Every (η, a, σ) combination, σ slowest, then a, then η."""
        s, a, e = np.meshgrid(np.asarray(sigmas, float), np.asarray(levels, float), np.asarray(etas, float),
                              indexing="ij")
        return cls(e.ravel(), a.ravel(), s.ravel())

    def __len__(self) -> int:
        return len(self.eta)


@dataclass
class Batch:
    """One round's data for the sampled users: their ids (L,), minibatches X (L, m, d), targets Y (L, m, K), and
    which users contribute (those with n_i ≥ m)."""

    users: torch.Tensor
    X: torch.Tensor
    Y: torch.Tensor
    valid: torch.Tensor


def ppsgd_round(W: torch.Tensor, Th: torch.Tensor, batch: Batch, grid_t: dict, *, clip: float, q: float,
                n_users: int, xi: torch.Tensor) -> None:
    """One PP-SGD round, in place on W (G, d, K) and Θ (N, d, G, K) (user-major: a sampled user's models of every
    config are one contiguous block, so the personal products are plain batched matrix products over users).
    `grid_t`: per-config tensors eta_w, eta_theta, sigma (G,); `xi`: the round's standard-normal noise (d, K),
    shared by every config."""
    users, X = batch.users, batch.X
    G, d, K = W.shape
    L = len(users)
    everyone = L == Th.shape[0]  # q = 1: no gather / scatter of Θ
    if L == 0:  # nobody sampled: the server still releases noise (the mechanism runs every round)
        grad_sum = torch.zeros_like(W)
    else:
        # g_i = (1/m)·X_iᵀ R_i with residuals R_i = X_i(W + Θ_i) − Y_i (m × K per config). With m ≪ d the (d, K)
        # gradients are never formed: ‖g_i‖²_F = (1/m²)·Σ (X_i X_iᵀ) ⊙ (R_i R_iᵀ) (Gram form), the clipped sum is
        # one product Xᵀ(c·R)/m over every sampled row, and the local step one batched product added into Θ.
        m = X.shape[1]
        Th_s = Th if everyone else Th.index_select(0, users)  # (L, d, G, K)
        shared = (X.reshape(L * m, d) @ W.permute(1, 0, 2).reshape(d, G * K)).reshape(L, m, G * K)
        R = torch.baddbmm(shared, X, Th_s.reshape(L, d, G * K)).reshape(L, m, G, K).sub_(batch.Y[:, :, None, :])
        if not bool(batch.valid.all()):  # users with n_i < m send zero and do not move
            R.mul_(batch.valid.to(R.dtype)[:, None, None, None])
        gram = torch.bmm(X, X.transpose(1, 2))  # (L, m, m)
        sq = torch.einsum("lmn,lmgk,lngk->lg", gram, R, R) / (m * m)
        factor = clip_factor(sq.clamp_(min=0).sqrt_(), clip)  # (L, G): min(1, C/‖g_i‖) per user and config
        scaled = (R * factor[:, None, :, None]).reshape(L * m, G * K)
        grad_sum = (X.reshape(L * m, d).T @ scaled).div_(m).reshape(d, G, K).permute(1, 0, 2)  # Σ_i clip_C(g_i)
        step = (R * (grid_t["eta_theta"] / m)[None, None, :, None]).reshape(L, m, G * K)
        Th_s.reshape(L, d, G * K).baddbmm_(X.transpose(1, 2), step, alpha=-1.0)  # Θ_i −= η_θ·g_i
        if not everyone:
            Th.index_copy_(0, users, Th_s)
    noisy = grad_sum + (grid_t["sigma"] * clip)[:, None, None] * xi[None]
    W -= (grid_t["eta_w"] / (q * n_users))[:, None, None] * noisy


def grid_tensors(grid: Grid, dtype, device) -> dict:
    return {k: torch.as_tensor(getattr(grid, k), dtype=dtype, device=device) for k in ("eta_w", "eta_theta", "sigma")}


# ------------------------------------------------------------------------------------------ synthetic data (§1.1)


@dataclass(frozen=True)
class Synthetic:
    """The regression task of Fig 1a: N users, d features, x ~ N(0, diag(1/k)), y = θ_i*ᵀx + N(0, τ²); θ_i* = θ_0
    except the last `personal` coordinates, which get + local_weight·N(0, 1). Frozen: a cell's settings hold it
    (dpfl.papers.bietti2022.settings.GridSettings.synthetic)."""

    n_users: int = 1000
    dim: int = 100
    personal: int = 5
    local_weight: float = 0.01
    noise: float = 0.01
    samples: int = 10
    truth_seed: int = 42

    def __post_init__(self):
        if not 0 <= self.personal <= self.dim:
            raise ValueError(f"synthetic task: personal = {self.personal} coordinates must lie between 0 and "
                             f"dim = {self.dim} (params.synthetic in config/papers/bietti2022.yaml)")

    def truth(self, dtype=torch.float64) -> torch.Tensor:
        """θ_i* (N, d, 1), from `truth_seed` (the paper's seed 42): θ_0 = 10·N(0, I), then the personal part."""
        rng = np.random.default_rng(self.truth_seed)
        theta0 = 10.0 * rng.standard_normal(self.dim)
        out = np.repeat(theta0[None], self.n_users, axis=0)
        out[:, self.dim - self.personal:] += self.local_weight * rng.standard_normal((self.n_users, self.personal))
        return torch.as_tensor(out, dtype=dtype)[..., None]

    def scales(self, dtype=torch.float64) -> torch.Tensor:
        """Σ's diagonal 1/k, k = 1..d."""
        return 1.0 / torch.arange(1, self.dim + 1, dtype=dtype)

    def draw(self, truth: torch.Tensor, gen: torch.Generator) -> Batch:
        """Every user's m fresh samples (q = 1). The normal draws are float32 whatever the run's precision, so
        float32 and float64 runs see the same data."""
        N, d, m = self.n_users, self.dim, self.samples
        X = torch.randn((N, m, d), generator=gen, device=truth.device).to(truth.dtype)
        X *= torch.sqrt(self.scales(truth.dtype).to(truth.device))
        eps = torch.randn((N, m, 1), generator=gen, device=truth.device).to(truth.dtype)
        Y = torch.einsum("nmd,ndk->nmk", X, truth) + self.noise * eps
        return Batch(torch.arange(N, device=truth.device), X, Y, torch.ones(N, dtype=torch.bool, device=truth.device))


def excess_risk(W: torch.Tensor, Th: torch.Tensor, truth: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(1/N)·Σ_i ‖w + θ_i − θ_i*‖²_Σ per config (G,) for W (G, d, K), Θ (N, d, G, K), θ* (N, d, K),
    Σ = diag(scales) (the paper's definition; the authors' code divides by d as well, B3)."""
    diff = Th + (W.permute(1, 0, 2)[None] - truth[:, :, None])  # (N, d, G, K)
    return torch.einsum("ndg,d->g", diff.square_().sum(-1), scales) / Th.shape[0]
