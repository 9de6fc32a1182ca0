"""Local training of many model copies at once: every (run, silo, user) pair of a round is one row of a parameter
matrix θ (P, D), trained on its own padded, masked records (a `Bucket` of dpfl.fl.buckets). No per-pair module copies
and no Python loop over pairs: one batched step per minibatch position. These functions do what every model shares
(eval mode, batching, sampling, noise); the model-specific work (outputs, gradients, fused updates) is the gradient
path (dpfl.fl.gradients) of its `FlatModel` (dpfl.fl.flat_model), chosen once when the FlatModel is built.

- `local_sgd`: Q epochs of shuffled minibatch SGD (batch B, lr η) for every pair (torch DataLoader semantics: the
  last batch of an epoch holds the remainder), or Adam's update; returns θ_pair after training.
- `mean_grads`: each pair's gradient of its mean loss over all its records (ULDP-SGD).
- `clipped_mean_grad_sums`: Σ_p w_p·clip_C(g_p) of those gradients per run, without forming them on the MLP path.
- `dp_sgd`: Opacus-semantics DP-SGD for every pair (record level): Poisson sampling at rate q, per-example
  gradients clipped at C (one norm over all parameters), N(0, σ²C²) on the sum, divided by the expected batch size.
- `run_outputs`: every run's model outputs on its own inputs (evaluation).
All randomness (shuffles, Poisson draws, dropout masks, noise) comes from one `torch.Generator` seeded by the
caller; the module stays in eval mode and dropout is applied through explicit masks (dpfl.models.nets).
"""

from __future__ import annotations

import torch

from dpfl.fl.buckets import Bucket, active_pairs, gather_rows, poisson_rows
from dpfl.fl.flat_model import FlatModel


def local_sgd(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, *, epochs: int, batch: int, lr: float,
              gen: torch.Generator, optimizer: str = "sgd") -> torch.Tensor:
    """Q epochs of shuffled minibatch SGD for every pair of the bucket, from θ (Pb, D); returns the trained θ.
    Randomness per epoch: the shuffle keys (unless the bucket is one batch of an uncoupled loss), then per step
    the dropout masks of the pairs still active. `optimizer`: "sgd", or "adam" (torch.optim.Adam's update with its
    defaults β = (0.9, 0.999), ε = 1e-8, a fresh state per call and per pair: kato2024's published secure path, K7)."""
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"local optimizer {optimizer!r}: expected sgd or adam")
    fm.module.eval()
    shuffle = bucket.mask.shape[1] > batch or fm.coupled
    active = active_pairs(bucket, batch)
    adam = _Adam(lr) if optimizer == "adam" else None
    return fm.path.sgd(theta, bucket, epochs=epochs, batch=batch, lr=lr, gen=gen, shuffle=shuffle, active=active,
                       adam=adam)


class _Adam:
    """torch.optim.Adam's update for every pair at once, on the active prefix [:k] of each (Pb, …) parameter; each
    pair counts its own steps (a pair with fewer batches stops earlier in an epoch), so bias corrections are per
    pair."""

    def __init__(self, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        self.m, self.v, self.t = {}, {}, None

    def step(self, k: int, params: dict, grads: dict) -> None:
        first = next(iter(params.values()))
        if self.t is None:
            self.t = torch.zeros(first.shape[0], dtype=first.dtype, device=first.device)
        self.t[:k] += 1
        t = self.t[:k]
        bc1, bc2 = 1 - self.b1 ** t, 1 - self.b2 ** t
        for name, g in grads.items():
            p = params[name]
            if name not in self.m:
                self.m[name], self.v[name] = torch.zeros_like(p), torch.zeros_like(p)
            m, v = self.m[name][:k], self.v[name][:k]
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            shape = (k,) + (1,) * (p.dim() - 1)
            denom = (v.sqrt() / bc2.sqrt().view(shape)).add_(self.eps)
            p[:k].addcdiv_(m, denom * (bc1 / self.lr).view(shape), value=-1.0)


def mean_grads(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, gen: torch.Generator | None = None) -> torch.Tensor:
    """Each pair's gradient of its mean loss over all its records, at θ (Pb, D) (with dropout, as in training)."""
    fm.module.eval()
    return fm.path.mean_grads(theta, bucket, gen)


def clipped_mean_grad_sums(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, run_of: torch.Tensor,
                           weights: torch.Tensor, clip: float, gen: torch.Generator | None = None,
                           chunk_rows: int = 2048) -> torch.Tensor:
    """Σ_p w_p·clip_C(g_p) per run (R, D), g_p = pair p's gradient of its mean loss at its run's model θ[run_p]
    (θ: (R, D); run_of, weights: per pair of the bucket). Equals `weighted_clipped_sum(mean_grads(θ[run_of], …))`
    with the same draws (pairs whose gradient is not finite send nothing). Sequential MLPs (ULDP-SGD on Creditcard)
    take a path that never forms the per-pair gradients: the pairs of one run share their model, so the forward and
    backward passes are products over all of a run's rows; a pair's squared gradient norm comes from its rows'
    activations a and output gradients b (linear weight ‖Σ_i b_i a_iᵀ‖² = Σ_ij (a_i·a_j)(b_i·b_j) for small pairs,
    Ghost-clipping style, the product itself for large ones), and the clipped sum Σ_p c_p Σ_{i∈p} b_i a_iᵀ is one
    product over the run's rows scaled by their pair's coefficient."""
    fm.module.eval()
    return fm.path.clipped_mean_grad_sums(theta, bucket, run_of, weights, clip, gen, chunk_rows)


def run_outputs(fm: FlatModel, theta: torch.Tensor, X: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """The model outputs of every run on its own inputs, without dropout: θ (R, D), X (R, n, ...) -> (R, n, ...),
    batched over runs (evaluation on equal-sized test sets), `chunk` rows at a time (activations that stay in the
    cache: 1.6× faster than whole test sets on the Creditcard MLP)."""
    fm.module.eval()
    with torch.no_grad():
        return fm.path.outputs(theta, X, chunk)


def dp_sgd(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, *, epochs: int, batch: int, lr: float, clip: float,
           noise_std: float, gen: torch.Generator) -> torch.Tensor:
    """Opacus-semantics DP-SGD (record level) for every pair of the bucket, from θ (Pb, D): per pair with N records,
    q = 1/⌈N/B⌉ and ⌈N/B⌉ steps per epoch; each step samples every record with probability q, clips each
    per-example gradient at C, adds N(0, noise_std²) to the sum (Opacus: noise_std = σC for noise multiplier σ) and
    divides by the expected batch size ⌊N·q⌋. A pair with no records takes no step and draws no noise (Opacus runs
    zero steps on an empty dataset): it returns θ unchanged."""
    fm.module.eval()
    counts = bucket.counts.to(theta.dtype)
    q = 1.0 / torch.ceil(counts / batch).clamp(min=1)
    expected = torch.floor(counts * q).clamp(min=1)[:, None]
    theta = theta.clone()
    # pairs with fewer steps per epoch are done: a prefix stays; the pairs are ordered by count, so the pairs with
    # records are a prefix too, and those without are never in a step
    holding = int((bucket.counts > 0).sum())
    active = [k for k in (min(k, holding) for k in active_pairs(bucket, batch)) if k > 0]
    with torch.inference_mode(fm.path.inference_ok):  # θ (made above) is updated in place: it stays a normal tensor
        for _ in range(epochs):
            for k in active:
                idx, m = poisson_rows(bucket.counts[:k], q[:k], gen)
                Xb, yb = gather_rows(bucket.X[:k], idx), gather_rows(bucket.y[:k], idx)
                summed = fm.path.clipped_example_sums(theta, k, Xb, yb, m, gen, clip)  # (k, D); may draw dropout
                noise = torch.randn((k, fm.dim), generator=gen, device=theta.device, dtype=theta.dtype)
                theta[:k].sub_(summed.add_(noise, alpha=noise_std).div_(expected[:k]), alpha=lr)
    return theta
