"""Minibatch SGD and Local SGD for cross-silo FL, with and without ISRL-DP noise (lowy2023 §3).

One implementation serves all four algorithms of the paper: the noisy variants are the plain ones with
a noise standard deviation > 0. Everything is vectorized over
  reps    independent repetitions (each with its own random stream), and
  configs grid points (step size, clip bound, noise level) that share each repetition's random draws
          ("common random numbers": every run is exactly the algorithm; runs at different grid points
          are merely correlated, which makes the tuning comparison less noisy and saves most of the
          cost of drawing Gaussian noise),
and over the participating silos of a round. Gradients are closed-form GLM gradients (dpfl.models.glm, torch
twins); the round loop is the shared engine's (dpfl.fl.engine.run_rounds) with its iterate average
(`IterateAverage`) and divergence freeze (`Divergence`), and all tensors live on the `device` given (CPU or CUDA).

Randomness is drawn per round by `minibatch_draws` / `local_draws` (numpy, so every device sees the same draws)
and passed in, so a plain-loop reference (tests/) can consume exactly the same draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import torch

from dpfl.fl.data import SiloData
from dpfl.fl.engine import Divergence, IterateAverage, RoundRule, run_rounds
from dpfl.models.glm import GLM


@dataclass
class Result:
    W: np.ndarray  # output parameters (reps, G, d, C): mean of the last `average_last` iterates
    diverged: np.ndarray  # (reps, G) bool
    train_loss: np.ndarray  # (reps, G) training loss at W (penalty not applied)


@dataclass
class Settings:
    """Shared by all grid points of one call.

    rounds R; silos_per_round M; local K (minibatch size for MB-SGD, local steps for Local SGD);
    aggregation "mean" (paper) or "sum" (authors' code, MB-SGD); average_last: the output is the mean
    of the last `average_last` iterates (8 for MNIST/insurance, 1 = last iterate for obesity);
    divergence_threshold: every `check_every` rounds, a config whose training loss at the averaged
    iterate exceeds it is declared diverged and frozen (None: never).

    MB-SGD variants of the authors' code (lowy2023 spec §9; the defaults are the paper's algorithm):
    clip: "example" (per-example clipping) | "batch_mean" (clip the batch-mean gradient, Q7) |
    "batch_mean_other" (the clip factor of an independent second batch applied to the batch mean,
    Q7's non-private MB-SGD); batch: "mean" | "sum" (the silo sends its batch-gradient sum, Q9);
    noise_at: "silo" (every silo perturbs its message) | "server" (one draw added to the average, Q9)."""

    rounds: int
    silos_per_round: int
    local: int
    aggregation: str = "mean"
    average_last: int = 8
    divergence_threshold: float | None = None
    check_every: int = 5
    clip: str = "example"
    batch: str = "mean"
    noise_at: str = "silo"


@dataclass
class Grid:
    """Per-config values (G configs): step size eta (G,), clip bound (G,) (np.inf = no clipping), and
    noise std (G, N) per silo. For MB-SGD the std is that of the Gaussian added to a silo's gradient SUM
    over its batch (the message is (sum + noise)/K); for Local SGD it is the std added to every step's
    gradient."""

    eta: np.ndarray
    clip: np.ndarray
    noise_std: np.ndarray


# --------------------------------------------------------------------------------------------------
# random draws (one dict per round, arrays stacked over reps)
# --------------------------------------------------------------------------------------------------


def _subsets(rngs, n_silos: int, m: int) -> np.ndarray:
    return np.stack([rng.permutation(n_silos)[:m] for rng in rngs])


def minibatch_draws(rngs: list[np.random.Generator], data: SiloData, settings: Settings, out_dim: int,
                    replace: bool = False, noise: bool = True) -> Iterator[dict]:
    """Per round: silos S (reps, M), batch indices B (reps, M, K) into each silo's rows (without
    replacement by default), standard-normal noise Z (reps, M, d, C)."""
    N, d, K, M = data.n_silos, data.dim, settings.local, settings.silos_per_round

    def batches(S):
        return np.stack([
            np.stack([rng.choice(data.counts[s], K, replace=replace) for s in S[i]]) for i, rng in enumerate(rngs)
        ])

    for _ in range(settings.rounds):
        S = _subsets(rngs, N, M)
        draw = {"S": S, "B": batches(S)}
        if settings.clip == "batch_mean_other":
            draw["B2"] = batches(S)  # the independent batch whose mean sets the clip factor
        shape = (M, d, out_dim) if settings.noise_at == "silo" else (1, d, out_dim)
        draw["Z"] = np.stack([rng.standard_normal(shape) for rng in rngs]) if noise else None
        yield draw


def local_draws(rngs: list[np.random.Generator], data: SiloData, settings: Settings, out_dim: int,
                noise: bool = True) -> Iterator[dict]:
    """Per round: silos S (reps, M), sample indices J (reps, K, M) drawn uniformly from each silo's rows,
    standard-normal noise Z (reps, K, M, d, C), one per local step."""
    N, d, K, M = data.n_silos, data.dim, settings.local, settings.silos_per_round
    for _ in range(settings.rounds):
        S = _subsets(rngs, N, M)
        J = np.stack([
            np.floor(rng.random((K, M)) * data.counts[S[i]]).astype(np.int64) for i, rng in enumerate(rngs)
        ])
        Z = np.empty((len(rngs), K, M, d, out_dim)) if noise else None
        for i, rng in enumerate(rngs if noise else ()):
            rng.standard_normal(out=Z[i])  # the draws of standard_normal((K, M, d, C)), written in place
        yield {"S": S, "J": J, "Z": Z}


# --------------------------------------------------------------------------------------------------
# the algorithms
# --------------------------------------------------------------------------------------------------


def _clip_factor(x_norm, res, clip):
    """min(1, C / ‖x ⊗ r‖) with ‖x ⊗ r‖ = ‖x‖·‖r‖ (torch; res (..., G, C), x_norm and clip broadcast).
    A zero gradient gives C/0 = inf, clamped to 1."""
    norm = x_norm * (res.abs()[..., 0] if res.shape[-1] == 1 else torch.linalg.vector_norm(res, dim=-1))
    return (clip / norm).clamp_(max=1.0)


#: an upper bound on a per-example residual's norm ‖r‖ where the model bounds it (sigmoid − y; softmax − one-hot)
_RESIDUAL_BOUND = {"logistic": 1.0, "softmax": 1.5}


def _clip_binds(model: GLM, norms: np.ndarray, clip: np.ndarray) -> bool:
    """False when min(1, C/‖x ⊗ r‖) is exactly 1 for every record and config: a bounded residual times the largest
    feature norm stays below every clip bound (MNIST's and obesity's private runs clip at L = 2·max‖x‖; the
    non-private ones at C = inf). Skipping the factor then changes no bit (a NaN residual stays NaN either way)."""
    bound = _RESIDUAL_BOUND.get(model.kind)
    return bound is None or not float(np.max(norms, initial=0.0)) * bound * (1 + 1e-9) < float(np.min(clip))


def _residual_(model: GLM, scores, y):
    """`model.residual_t(scores, y)` written into `scores` (logistic, linear: the same operations in the same order,
    without a new tensor per operation)."""
    if model.kind == "logistic":
        return torch.sigmoid_(scores.clamp_(-15.0, 15.0)).sub_(y[..., None])
    if model.kind == "linear":
        return scores.sub_(y[..., None])
    return model.residual_t(scores, y)


class _DrawnRounds(RoundRule):
    """A round function W ← fn(W, draw) fed the next pre-drawn dict every round."""

    def __init__(self, fn: Callable, draws: Iterable[dict]):
        self.fn, self.draws = fn, iter(draws)

    def step(self, state, t: int):
        return self.fn(state, next(self.draws))


def _train(model: GLM, data: SiloData, settings: Settings, W0: torch.Tensor, round_fn: Callable,
           draws: Iterable[dict]) -> Result:
    """The engine's loop over `settings.rounds` rounds: the output is the mean of the last `average_last` iterates;
    every `check_every` rounds a config whose pooled training loss at that average exceeds the divergence threshold
    (or is NaN) is frozen as diverged; at the end a non-finite loss counts as diverged too. A loss bounded by
    `model.max_loss` (the guarded logistic loss) never exceeds a larger threshold: no checks then."""
    X = torch.from_numpy(data.pooled_X).to(W0.device)
    y = torch.from_numpy(data.pooled_y.astype(float)).to(W0.device)
    average = IterateAverage(W0, _mean_loss(model, X, y), settings.average_last)
    threshold = settings.divergence_threshold
    checks = threshold is not None and threshold < model.max_loss
    every, T = settings.check_every, settings.rounds
    schedule = (set(range(every, T + 1, every)) if checks else set()) | {T}
    run = run_rounds(W0, _DrawnRounds(round_fn, draws), average, rounds=T, schedule=schedule,
                     failure=Divergence("train_loss", threshold if checks else None, every, axes=(0, 2)))
    loss = run.values["train_loss"]  # at the average after the last round
    return Result(W=average.average().permute(0, 2, 1, 3).cpu().numpy(), diverged=run.failed.cpu().numpy(),
                  train_loss=loss.cpu().numpy())


def _mean_loss(model: GLM, X, y) -> Callable:
    """W (reps, d, G, C) -> the mean training loss (reps, G): `model.mean_loss_t(X, y, W)`. The logistic loss runs
    the same operations in place in one buffer (MNIST: 30,950 rows × reps·G configs, 58 MB that each operation would
    allocate anew): where(y > 0.5, s, 1 − s) as s·(±1) + (0 or 1), the same roundings; the mean of −log(·) as −(the
    mean of log(·)), as rounding is symmetric."""
    if model.kind != "logistic":
        return lambda W: model.mean_loss_t(X, y, W)
    positive = (y > 0.5)[:, None]
    sign = torch.where(positive, 1.0, -1.0).to(X.dtype)
    offset = torch.where(positive, 0.0, 1.0).to(X.dtype)

    def loss(W):
        reps, d, G, _ = W.shape
        s = torch.sigmoid_((X @ W.permute(1, 0, 2, 3).reshape(d, -1)).clamp_(-15.0, 15.0))
        return -s.mul_(sign).add_(offset).add_(1e-12).log_().mean(dim=0).reshape(reps, G)

    return loss


def _gather(table, silos, rows):
    """table[silos, rows] for a (N, n_max, ...) table and broadcasting index tensors, as one index_select of whole
    rows (several times faster than indexing with two index tensors; the same values)."""
    index = silos * table.shape[1] + rows
    return table.flatten(0, 1).index_select(0, index.reshape(-1)).view(*index.shape, *table.shape[2:])


def _tensor(a, device):
    return torch.from_numpy(np.asarray(a)).to(device)


def minibatch_sgd(model: GLM, data: SiloData, settings: Settings, grid: Grid, draws: Iterable[dict],
                  reps: int, device=None) -> Result:
    """(ISRL-DP) MB-SGD. Each round, each of M silos sends g̃_s = (1/K)[Σ_{j∈B_s} clip(∇f(w; x_j)) + σ_s·Z_s];
    the server sets w ← w − η·mean_s g̃_s (or the sum, `aggregation: sum`).

    Layout: parameters (reps, d, G·C), so scores and gradient sums are batched matrix products."""
    device = device or torch.device("cpu")
    d, C, G, M, K = data.dim, model.out_dim, len(grid.eta), settings.silos_per_round, settings.local
    X, y, norms = (_tensor(a, device) for a in (data.X, data.y.astype(float), data.norms))
    W0 = torch.zeros((reps, d, G, C), dtype=torch.float64, device=device)
    eta = _tensor(grid.eta, device)[:, None]
    clip = _tensor(grid.clip, device)
    noise_std = _tensor(grid.noise_std, device)
    noisy = bool(np.any(grid.noise_std != 0))
    clipping = _clip_binds(model, data.norms, grid.clip)

    def batch_gradients(W, S, B, per_example_clip: bool):
        """Σ over the batch of (clipped) per-example gradients at W: (reps, M, d, G, C)."""
        Xb = _gather(X, S[..., None], B)  # (reps, M, K, d)
        scores = (Xb.reshape(reps, M * K, d) @ W.reshape(reps, d, G * C)).reshape(reps, M, K, G, C)
        res = _residual_(model, scores, _gather(y, S[..., None], B)[..., None])
        if per_example_clip and clipping:
            res = res * _clip_factor(_gather(norms, S[..., None], B)[..., None], res, clip)[..., None]
        return (Xb.transpose(-1, -2) @ res.reshape(reps, M, K, G * C)).reshape(reps, M, d, G, C)

    def mean_clip_factor(gsum):
        """min(1, C/‖batch mean‖) per (rep, silo, config), the norm over all parameters."""
        norm = torch.linalg.vector_norm((gsum / K).permute(0, 1, 3, 2, 4).reshape(reps, M, G, d * C), dim=-1)
        return (clip / norm).clamp_(max=1.0)[:, :, None, :, None]

    def round_fn(W, dr):
        S, B = _tensor(dr["S"], device), _tensor(dr["B"], device)
        gsum = batch_gradients(W, S, B, settings.clip == "example")
        if settings.clip == "batch_mean":
            gsum = gsum * mean_clip_factor(gsum)
        elif settings.clip == "batch_mean_other":
            gsum = gsum * mean_clip_factor(batch_gradients(W, S, _tensor(dr["B2"], device), False))
        if dr.get("Z") is not None and noisy and settings.noise_at == "silo":
            std = noise_std[:, S].permute(1, 2, 0)  # (reps, M, G)
            gsum = gsum + std[:, :, None, :, None] * _tensor(dr["Z"], device)[:, :, :, None, :]
        msg = gsum / K if settings.batch == "mean" else gsum
        agg = msg.mean(dim=1) if settings.aggregation == "mean" else msg.sum(dim=1)  # (reps, d, G, C)
        if dr.get("Z") is not None and noisy and settings.noise_at == "server":
            # one draw on the average, with the std of a silo's mean-gradient noise (silo 0's: equal sizes)
            agg = agg + (noise_std[:, 0] / K)[None, None, :, None] * _tensor(dr["Z"], device)[:, 0, :, None, :]
        return W - eta * agg

    return _train(model, data, settings, W0, round_fn, draws)


def local_sgd(model: GLM, data: SiloData, settings: Settings, grid: Grid, draws: Iterable[dict],
              reps: int, device=None) -> Result:
    """(ISRL-DP) Local SGD. Each round, each of M silos starts from w and takes K steps
    v ← v − η(clip(∇f(v; x_j)) + σ_s·Z) on single records j; the server averages the M local models.

    The noise is the same standard-normal draw for every config, scaled by a = η·σ, so a silo's local
    model is v = u − a·s with s = Σ Z its (shared) noise walk and u the rest: the per-config work of
    a step is one score and one rank-1 update, both batched matrix products (layout (reps·M, d, G·C)).
    This is an exact rewriting of the update, not an approximation.

    The K steps are sequential and bound by memory traffic, not arithmetic: what a step needs that does not depend
    on u (its records, the walk's term x·s of its score) is computed once per round, and the (rep, silo) rows run
    in chunks whose u stay in cache (`_row_chunks`). Each number is computed by the same operation as one step at a
    time over all rows, so the result is the same to the bit."""
    device = device or torch.device("cpu")
    d, C, G, M = data.dim, model.out_dim, len(grid.eta), settings.silos_per_round
    B = reps * M
    # features, label and feature norm of every record side by side: one gather per round
    table = _tensor(np.concatenate([data.X, data.y.astype(float)[..., None], data.norms[..., None]], axis=-1), device)
    eta = _tensor(grid.eta, device)[:, None]  # (G, 1)
    clip = _tensor(grid.clip, device)
    clipping = _clip_binds(model, data.norms, grid.clip)
    noise_std = _tensor(grid.noise_std, device)
    any_noise = bool(np.any(grid.noise_std != 0))
    W0 = torch.zeros((reps, d, G, C), dtype=torch.float64, device=device)
    chunks = _row_chunks(B, d, G * C, device)
    narrow = G * C <= _NARROW

    def round_fn(W, dr):
        S, J = _tensor(dr["S"], device), _tensor(dr["J"], device)
        K = J.shape[1]
        rows = _gather(table, S[None], J.permute(1, 0, 2)).view(K, B, d + 2)  # step k's records: rows[k]
        noisy = dr.get("Z") is not None and any_noise
        if noisy:
            # the walk after each step, (K, B, d, C): the same sums, one step at a time, as adding Z step by step
            walk = _tensor(np.cumsum(dr["Z"].transpose(1, 0, 2, 3, 4).reshape(K, B, d, C), axis=0), device)
            a = (noise_std[:, S].permute(1, 2, 0) * eta[:, 0]).reshape(B, G, 1)  # η_g σ_{g,s}
            # x·s, the walk's part of step k's score (k ≥ 1; at k = 0 the walk is 0): (K − 1, B, 1, C)
            xs = torch.bmm(rows[1:, :, None, :d].reshape(-1, 1, d), walk[:-1].reshape(-1, d, C)).view(K - 1, B, 1, C)
        U = W[:, None].expand(reps, M, d, G, C).reshape(B, d, G * C).clone()
        for lo, hi in chunks:
            u, n, part = U[lo:hi], hi - lo, rows[:, lo:hi]
            # each step's views, made once: features (n, 1, d) and transposed, labels, feature norms
            x, xt = part[:, :, None, :d].unbind(), part[:, :, :d, None].unbind()
            y, norm = part[:, :, d : d + 1].unbind(), part[:, :, d + 1 : d + 2].unbind()
            if noisy:
                a_part, xs_part = a[lo:hi], (None, *xs[:, lo:hi].unbind())
            for k in range(K):
                scores = torch.bmm(x[k], u).view(n, G, C)
                if noisy and k:
                    scores.sub_(a_part * xs_part[k])
                res = _residual_(model, scores, y[k])
                if clipping:
                    res = res * _clip_factor(norm[k], res, clip)[..., None]
                coef = res.mul_(eta).view(n, 1, G * C)
                if narrow:  # u − x·coef elementwise: the roundings of the rank-1 product, without its per-row calls
                    u.sub_(xt[k] * coef)
                else:
                    u.baddbmm_(xt[k], coef, alpha=-1.0)
        V = U.view(B, d, G, C)
        if noisy:
            V = V - a[:, None] * walk[-1][:, :, None, :]
        return V.reshape(reps, M, d, G, C).mean(dim=1)

    return _train(model, data, settings, W0, round_fn, draws)


#: the bytes of local models a chunk of Local SGD rows keeps: within a core's L2 cache (2 MiB here)
_CHUNK_BYTES = 5 << 18
#: ATen's elementwise CPU kernels run blocks of 16 doubles (two AVX-512 vectors) and a scalar loop over the rest
_VECTOR_BLOCK = 16
#: at most this many configs (× classes), Local SGD's rank-1 update u − x·coef runs elementwise: cheaper than B
#: matrix products of one column (the same roundings: the product x·coef, then the difference)
_NARROW = 16


def _row_chunks(rows: int, d: int, width: int, device) -> list[tuple[int, int]]:
    """The row ranges over which Local SGD's K steps run one chunk after the other (rows are independent within a
    round): chunks of at most `_CHUNK_BYTES` of models (rows × d × width doubles), so each step's two matrix products
    read them from cache, not memory (1.35× faster per step for MNIST's 78 configs). A chunk starts at a multiple of
    `_VECTOR_BLOCK` elements of the (rows, width) scores, so every element of an elementwise kernel (sigmoid: its
    vector and scalar exp may differ in the last bit) takes the same path as in one call over all rows."""
    per_row = d * width * 8
    if device.type != "cpu" or rows * per_row <= _CHUNK_BYTES:
        return [(0, rows)]
    step = _VECTOR_BLOCK // math.gcd(_VECTOR_BLOCK, width)
    size = max(step, _CHUNK_BYTES // per_row // step * step)
    return [(lo, min(lo + size, rows)) for lo in range(0, rows, size)]
