"""User-level private aggregation across silos (kato2024 ULDP-AVG / AVG-w / SGD, spec §4), vectorized over every
(silo, user) pair of a round: clip each pair's update to C, weight it, sum per silo, add the silo's Gaussian noise.

With Σ_s w_{s,u} ≤ 1 for every user, one user changes Σ_s Σ_u w_{s,u}·clip_C(Δ_{s,u}) by at most C (its user-level
sensitivity), and S silos each adding N(0, (σC/√S)²) give the sum noise of std σC: multiplier σ for the accountant.
"""

from __future__ import annotations

import torch


def clip_factor(norms: torch.Tensor, clip) -> torch.Tensor:
    """min(1, clip/‖g‖) for the given norms (a zero norm gives 1): the one clipping rule of the engine."""
    return torch.where(norms > clip, clip / norms, torch.ones_like(norms))


def clip_updates(updates: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale each update (last axis = parameters) to norm ≤ clip: min(1, clip/‖Δ‖)·Δ. Returns (clipped, norms)."""
    norms = torch.linalg.vector_norm(updates, dim=-1)
    return updates * clip_factor(norms, clip)[..., None], norms


def user_weights(records: torch.Tensor, kind: str) -> torch.Tensor:
    """w_{s,u} from the record counts n_{s,u} (S, U): `avg` 1/S where the user has records in the silo (ULDP-AVG,
    ULDP-SGD), `avg_w` n_{s,u}/n_u (ULDP-AVG-w, paper Eq. 4). Either way Σ_s w_{s,u} ≤ 1."""
    dtype = torch.get_default_dtype()
    if kind == "avg":
        return (records > 0).to(dtype) / records.shape[0]
    if kind == "avg_w":  # zero where the user has no records in the silo
        return (records / records.sum(dim=0, keepdim=True).clamp(min=1)).to(dtype)
    raise ValueError(f"unknown weighting {kind!r}; expected avg or avg_w")


def silo_messages(updates: torch.Tensor, weights: torch.Tensor, clip: float, sigma: float,
                  noise: torch.Tensor | None) -> torch.Tensor:
    """message_s = Σ_u w_{s,u}·clip_C(Δ_{s,u}) + (σC/√S)·Z_s for updates (S, U, P), weights (S, U) (zero for absent
    pairs and unsampled users), Z (S, P) standard normal (None: no noise). Pairs whose update is not finite are
    skipped (spec §4: a user whose local model has NaN or Inf sends nothing)."""
    S = updates.shape[0]
    finite = torch.isfinite(updates).all(dim=-1)
    clipped, _ = clip_updates(torch.where(finite[..., None], updates, torch.zeros_like(updates)), clip)
    msg = torch.einsum("su,sup->sp", torch.where(finite, weights, torch.zeros_like(weights)).to(clipped.dtype), clipped)
    if noise is not None and sigma > 0:
        msg = msg + (sigma * clip / S**0.5) * noise
    return msg
