"""Reference implementations of user-level private aggregation in the dense (silos, users) layout, for the tests
that check dpfl.fl.aggregate and the kato2024 engine and protocol against them (no paper computes in this layout:
the engine works on pair lists, dpfl.fl.aggregate.weighted_clipped_sum)."""

from __future__ import annotations

import torch

from dpfl.fl.aggregate import pair_weights


def user_weights(records: torch.Tensor, kind: str) -> torch.Tensor:
    """dpfl.fl.aggregate.pair_weights for a dense count matrix n_{s,u} (S, U): avg 1/S where the user has records,
    avg_w n_{s,u}/n_u."""
    return pair_weights(records, records.sum(dim=0, keepdim=True), records.shape[0], kind).to(torch.get_default_dtype())


def silo_messages(updates: torch.Tensor, weights: torch.Tensor, clip: float, sigma: float,
                  noise: torch.Tensor | None) -> torch.Tensor:
    """message_s = Σ_u w_{s,u}·min(1, C/‖Δ_{s,u}‖)·Δ_{s,u} + (σC/√S)·Z_s for dense updates (S, U, P), weights (S, U)
    (zero for absent pairs and unsampled users), Z (S, P) standard normal (None: no noise); a pair whose update is
    not finite sends nothing. Written as a plain weighted sum over the user axis."""
    S = updates.shape[0]
    norms = torch.linalg.vector_norm(updates, dim=-1)
    finite = torch.isfinite(norms)
    factor = torch.where(norms > clip, clip / norms, torch.ones_like(norms))
    coef = torch.where(finite, weights.to(updates.dtype) * factor, torch.zeros_like(norms))
    safe = torch.where(finite[..., None], updates, torch.zeros((), dtype=updates.dtype))
    msg = (coef[..., None] * safe).sum(dim=1)
    if noise is not None and sigma > 0:
        msg = msg + (sigma * clip / S**0.5) * noise
    return msg
