"""User-level private aggregation (dpfl.fl.aggregate): every pair's update is clipped to C, the weights give each
user total weight ≤ 1 so that removing a user changes the pre-noise sum by at most C, and the summed noise has
std σC; the engine's pair-list sum equals the dense reference (tests/reference_aggregate.py)."""

from __future__ import annotations

import pytest
import torch

from dpfl.fl.aggregate import clip_updates, weighted_clipped_sum
from reference_aggregate import silo_messages, user_weights


def setup(S=4, U=6, P=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    updates = torch.randn(S, U, P, generator=g, dtype=torch.float64) * 3
    records = torch.randint(0, 4, (S, U), generator=g)
    return updates, records


def test_every_update_is_clipped_to_c():
    updates, _ = setup()
    clipped, norms = clip_updates(updates, 1.5)
    out = torch.linalg.vector_norm(clipped, dim=-1)
    assert torch.all(out <= 1.5 + 1e-12)
    small = norms <= 1.5
    assert torch.allclose(clipped[small], updates[small])  # short updates are untouched


@pytest.mark.parametrize("kind", ["avg", "avg_w"])
def test_weights_sum_to_at_most_one_per_user(kind):
    _, records = setup()
    w = user_weights(records, kind)
    assert torch.all(w.sum(dim=0) <= 1 + 1e-12) and torch.all(w[records == 0] == 0)
    if kind == "avg_w":  # n_su / n_u: exactly 1 for every user with records
        has = records.sum(dim=0) > 0
        assert torch.allclose(w.sum(dim=0)[has], torch.ones(int(has.sum()), dtype=w.dtype))
    with pytest.raises(ValueError, match="unknown weighting"):
        user_weights(records, "sum")


@pytest.mark.parametrize("kind", ["avg", "avg_w"])
def test_removing_one_user_moves_the_pre_noise_sum_by_at_most_c(kind):
    torch.set_default_dtype(torch.float64)
    try:
        updates, records = setup(seed=3)
        C = 0.8
        full = silo_messages(updates, user_weights(records, kind), C, 0.0, None).sum(dim=0)
        worst = 0.0
        for u in range(records.shape[1]):
            without = records.clone()
            without[:, u] = 0
            part = silo_messages(updates, user_weights(without, kind), C, 0.0, None).sum(dim=0)
            worst = max(worst, float(torch.linalg.vector_norm(full - part)))
        assert worst <= C + 1e-12
        # attained when a user's clipped updates all point the same way with total weight 1
        aligned = torch.zeros_like(updates)
        aligned[:, 0, 0] = 10.0
        one = torch.zeros_like(records)
        one[:, 0] = 1
        gap = silo_messages(aligned, user_weights(one, kind), C, 0.0, None).sum(dim=0)
        assert float(torch.linalg.vector_norm(gap)) == pytest.approx(C)
    finally:
        torch.set_default_dtype(torch.float32)


def test_summed_noise_has_std_sigma_c():
    S, U, P = 5, 3, 20000
    updates = torch.zeros(S, U, P, dtype=torch.float64)
    weights = torch.full((S, U), 1.0 / S, dtype=torch.float64)
    noise = torch.randn(S, P, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    total = silo_messages(updates, weights, clip=0.7, sigma=2.0, noise=noise).sum(dim=0)
    assert float(total.std()) == pytest.approx(2.0 * 0.7, rel=0.02)


def test_non_finite_updates_are_skipped():
    updates, records = setup()
    updates[1, 2, 0] = float("nan")
    w = user_weights(records, "avg").to(updates.dtype)
    msg = silo_messages(updates, w, 1.0, 0.0, None)
    assert torch.isfinite(msg).all()
    w2 = w.clone()
    w2[1, 2] = 0
    assert torch.allclose(msg, silo_messages(torch.nan_to_num(updates), w2, 1.0, 0.0, None))


def test_pair_list_sum_equals_the_dense_reference():
    """weighted_clipped_sum over the pair list (the engine's) = the dense per-silo reference, a NaN pair skipped."""
    updates, records = setup(seed=5)
    updates[2, 1, 3] = float("nan")
    w = user_weights(records, "avg_w").to(updates.dtype)
    S, U, P = updates.shape
    silo = torch.arange(S).repeat_interleave(U)
    got = weighted_clipped_sum(updates.reshape(S * U, P), w.reshape(-1), silo, S, 0.9)
    assert torch.allclose(got, silo_messages(updates, w, 0.9, 0.0, None), atol=1e-13, rtol=1e-12)
