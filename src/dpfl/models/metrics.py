"""Losses and metrics named for what they compute (spec D2): balanced accuracy (kato2024's Creditcard "accuracy"),
accuracy, the Cox partial likelihood and Harrell's C-index (TCGA)."""

from __future__ import annotations

import math

import numpy as np


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """(TPR + TNR)/2 of hard binary predictions (= ROC-AUC of hard predictions)."""
    y_true, y_pred = np.asarray(y_true).astype(int), np.asarray(y_pred).astype(int)
    pos, neg = y_true == 1, y_true == 0
    if not pos.any() or not neg.any():
        raise ValueError("balanced accuracy needs both classes in y_true")
    return float(((y_pred[pos] == 1).mean() + (y_pred[neg] == 0).mean()) / 2)


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float((np.asarray(y_true) == np.asarray(y_pred)).mean())


def cox_partial_likelihood(score, time, event, mask=None):
    """Negative Cox partial log-likelihood of a batch, averaged over the batch (spec §3, the authors' form): sort
    by T descending, subtract max s, loss = −(1/|b|) Σ_i E_i (s_i − log Σ_{j ≤ i} e^{s_j}). Torch tensors (score
    (n,), time (n,), event (n,)). Ties in T keep their input order (a stable sort). `mask` (n,) bool: only the
    valid rows count (padding sorts last, so it never enters a risk set; 0 without valid rows); without a mask the
    batch needs ≥ 2 records."""
    import torch

    if mask is None:
        if score.shape[-1] < 2:
            raise ValueError("the Cox partial likelihood needs at least 2 records")
        mask = torch.ones(score.shape, dtype=torch.bool, device=score.device)
    key = torch.where(mask, time, torch.full_like(time, -math.inf))
    order = torch.argsort(key, descending=True, stable=True)
    s, e, m = score[order], event[order].to(score.dtype), mask[order]
    s = torch.where(m, s, torch.zeros_like(s))
    top = torch.where(m, s, torch.full_like(s, -math.inf)).max().detach()
    s = s - torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    log_risk = torch.logcumsumexp(s, dim=-1)  # log Σ_{j ≤ i} e^{s_j} over the records at least as long-lived
    terms = torch.where(m, (s - log_risk) * e, torch.zeros_like(s))
    return -terms.sum() / m.sum().clamp(min=1).to(score.dtype)


def c_index(time: np.ndarray, score: np.ndarray, event: np.ndarray) -> float:
    """Harrell's C-index of risk scores (higher score = higher risk), with the semantics of lifelines'
    `concordance_index(T, −score, E)` (lifelines itself pins pandas < 3, which this project cannot take):
    a pair is comparable when its earlier time is an observed event (equal times: exactly one event, which counts
    as the earlier); it is concordant when the earlier one has the higher risk; equal risks count 1/2."""
    t, r, e = (np.asarray(a, dtype=float) for a in (time, score, event))
    e = e.astype(bool)
    ti, tj = t[:, None], t[None, :]
    # (i, j) with i the earlier: t_i < t_j and i an event, or equal times with only i an event
    earlier = ((ti < tj) & e[:, None]) | ((ti == tj) & e[:, None] & ~e[None, :])
    if not earlier.any():
        raise ValueError("no comparable pair: the C-index needs an observed event before another time")
    ri, rj = r[:, None], r[None, :]
    concordant = (earlier & (ri > rj)).sum() + 0.5 * (earlier & (ri == rj)).sum()
    return float(concordant / earlier.sum())
