"""User-level private aggregation across silos (kato2024 ULDP-AVG / AVG-w / SGD, spec §4), vectorized over every (silo,
user) pair of a round: clip each pair's update to C (`clip_updates`, `clip_factor`), weight it (`pair_weights`) and sum
per silo or run (`weighted_clipped_sum`); the round rules (dpfl.papers.kato2024.training.rules) add the silos' Gaussian
noise. A dense (silo, user) reference lives in tests/reference_aggregate.py.

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


def pair_weights(counts, user_totals, n_silos: int, kind: str):
    """w_{s,u} of (silo, user) pairs from their record counts n_{s,u} and the users' totals n_u (numpy arrays or
    torch tensors of one shape): `avg` 1/S where the user has records in the silo (ULDP-AVG, ULDP-SGD), `avg_w`
    n_{s,u}/n_u (ULDP-AVG-w, paper Eq. 4). Either way Σ_s w_{s,u} ≤ 1: the one weighting rule of the engine."""
    if kind == "avg":
        return (counts > 0) / n_silos
    if kind == "avg_w":  # zero where the user has no records in the silo
        return counts / user_totals.clip(min=1)
    raise ValueError(f"unknown weighting {kind!r}; expected avg or avg_w")


def weighted_clipped_sum(updates: torch.Tensor, weights: torch.Tensor, groups: torch.Tensor, n_groups: int,
                         clip: float) -> torch.Tensor:
    """Σ_p w_p·clip_C(Δ_p) per group (silo, or run) for pair updates (P, D); pairs whose update is not finite send
    nothing (spec §4: a user whose local model has NaN or Inf is skipped). One pass for the norms and one product
    of the (groups, P) coefficient matrix with the updates: the updates are the largest tensors of a round."""
    norms = torch.linalg.vector_norm(updates, dim=-1)
    finite = torch.isfinite(norms)  # a NaN or Inf entry makes the norm non-finite
    zero = torch.zeros((), dtype=updates.dtype, device=updates.device)
    if not bool(finite.all()):
        updates = torch.where(finite[:, None], updates, zero)
    coef = torch.where(finite, weights.to(updates.dtype) * clip_factor(norms, clip), zero)
    mix = torch.zeros((n_groups, updates.shape[0]), dtype=updates.dtype, device=updates.device)
    mix[groups, torch.arange(updates.shape[0], device=updates.device)] = coef
    return mix @ updates
