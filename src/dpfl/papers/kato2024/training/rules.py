"""The round rules of kato2024's training figures (spec §4) for every method scheme, vectorized over runs (seeds),
silos and users.

They train a `Federation` (dpfl.papers.kato2024.federation) of R runs' *pairs*: (run, silo, user) for the
user-level schemes (AVG, AVG-w, AVG-ws, SGD), (run, silo) for the silo-level ones (DEFAULT, NAIVE, GROUP: a silo
trains on all its records, GROUP on those its bounding flags keep). The global models are one matrix θ (R, D).
Each method scheme is one round rule (`SchemeRound`, a dpfl.fl.engine.RoundRule: `SiloRound` DEFAULT,
`NaiveRound`, `GroupRound`, `AvgRound`, `SgdRound`), chosen once per cell (`rule_class`), with the typed
hyper-parameters of its scheme (dpfl.papers.kato2024.methods.HYPER_BLOCKS) and the method's noise std; a round
draws every shuffle, Poisson sample and noise from one torch Generator. The cells run them in
dpfl.fl.engine.run_rounds.
"""

from __future__ import annotations

import abc
import math

import numpy as np
import torch

from dpfl.fl.aggregate import clip_updates, weighted_clipped_sum
from dpfl.fl.buckets import Bucket
from dpfl.fl.engine import RoundRule
from dpfl.fl.flat_model import FlatModel
from dpfl.fl.local import clipped_mean_grad_sums, dp_sgd, local_sgd, mean_grads
from dpfl.papers.kato2024.federation import Federation, subset


def silo_noise(n_runs: int, n_silos: int, dim: int, std: float, gen: torch.Generator, like: torch.Tensor):
    """Σ_s of one N(0, std²) draw per silo: (R, D)."""
    z = torch.randn((n_runs, n_silos, dim), generator=gen, device=like.device, dtype=like.dtype)
    return std * z.sum(dim=1)


class SchemeRound(RoundRule, abc.ABC):
    """θ (R, D) -> θ after one round of a method scheme (spec §4), vectorized over runs, silos and users; every
    shuffle, Poisson sample and noise drawn from the one torch Generator `gen`. The scheme is chosen once per cell
    (`rule_class`); it owns its pair level (`level`: which pairs `Federation.build` makes), its data preparation
    (`prepare`: GROUP's record bounding), its local training and its aggregation. Its noise is the method's:
    `UldpMethod.round_noise_std(σ, C)` on what the round releases (dpfl.papers.kato2024.methods)."""

    #: Federation pairs: "silo" (a silo trains on all its records) or "user" (one pair per (silo, user))
    level = "silo"

    def __init__(self, method, hyper, fed: Federation, fm: FlatModel, *, sigma: float, batch: int,
                 gen: torch.Generator, q: float = 1.0):
        self.method, self.hyper, self.fed, self.fm = method, hyper, fed, fm
        self.sigma, self.batch, self.gen, self.q = sigma, batch, gen, q
        self.dev = fed.buckets[0].X.device
        self.run_of = torch.as_tensor(fed.run, device=self.dev)

    @classmethod
    def prepare(cls, run: dict, method, n_silos: int, n_users: int, group_step: int) -> tuple[dict, int | None]:
        """One seed's training records as this scheme trains on them, and its group size k (GROUP) or None."""
        return run, None

    def __call__(self, theta: torch.Tensor) -> torch.Tensor:
        return self.step(theta, 0)


class SiloRound(SchemeRound):
    """DEFAULT (FedAvg): every silo trains on all its records from θ; θ ← θ + η_g·Σ_s message_s / S, the message
    being the silo's model delta (`message`)."""

    def local(self, start: torch.Tensor, b: Bucket) -> torch.Tensor:
        h = self.hyper
        return local_sgd(self.fm, start, b, epochs=h.epochs, batch=self.batch, lr=h.eta_l, gen=self.gen)

    def message(self, d: torch.Tensor) -> torch.Tensor:
        return d

    def step(self, theta: torch.Tensor, t: int) -> torch.Tensor:
        delta = torch.zeros_like(theta)
        for b in self.fed.buckets:
            start = theta[self.run_of[b.pairs]]
            d = self.message(self.local(start, b).sub_(start))
            delta.index_add_(0, self.run_of[b.pairs], d)
        return theta + self.hyper.eta_g * delta / self.fed.n_silos


class NaiveRound(SiloRound):
    """ULDP-NAIVE: each silo clips its delta to C and adds N(0, S·std²), so the mean over the S silos carries the
    method's noise std σC."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.silo_std = self.method.round_noise_std(self.sigma, self.hyper.clip) * math.sqrt(self.fed.n_silos)

    def message(self, d: torch.Tensor) -> torch.Tensor:
        d, _ = clip_updates(d, self.hyper.clip)
        return d + self.silo_std * torch.randn(d.shape, generator=self.gen, device=self.dev, dtype=d.dtype)


class GroupRound(SiloRound):
    """ULDP-GROUP-k: each silo runs record-level DP-SGD (noise std σC on a step's clipped sum) on the records its
    bounding keeps (`prepare`: at most k per user, dpfl.papers.kato2024.training.group)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.noise_std = self.method.round_noise_std(self.sigma, self.hyper.clip)

    @classmethod
    def prepare(cls, run, method, n_silos, n_users, group_step):
        from dpfl.papers.kato2024.training.group import bounding_flags, group_size

        k = group_size(method.group, np.bincount(run["user"], minlength=n_users))
        flags = bounding_flags(run["user"], run["silo"], n_silos, k, step=group_step)
        return {**run, **{key: run[key][flags] for key in ("X", "y", "silo", "user")}}, k

    def local(self, start, b):
        h = self.hyper
        return dp_sgd(self.fm, start, b, epochs=h.epochs, batch=self.batch, lr=h.eta_l, clip=h.clip,
                      noise_std=self.noise_std, gen=self.gen)


class UserRound(SchemeRound):
    """ULDP-AVG(-w, -ws) and ULDP-SGD: every (silo, user) pair's contribution is clipped to C and weighted
    (`method.weighting`: 1/S or n_su/n_u), the silos' sums get N(0, std²/S) each (std = σC on the sum over silos),
    users sampled with rate q each round for -ws; θ moves by η_g/(U·S·q) times the noisy sum (`apply`)."""

    level = "user"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user_of = torch.as_tensor(self.fed.user, device=self.dev)
        self.weights = torch.as_tensor(self.fed.weights(self.method.weighting), device=self.dev)
        self.silo_std = self.method.round_noise_std(self.sigma, self.hyper.clip) / math.sqrt(self.fed.n_silos)

    @abc.abstractmethod
    def pair_sums(self, theta: torch.Tensor, b: Bucket) -> torch.Tensor:
        """Σ_p w_p·clip_C(contribution_p) per run (R, D) over the pairs of bucket b."""

    @abc.abstractmethod
    def apply(self, theta: torch.Tensor, scale: float, total: torch.Tensor) -> torch.Tensor:
        """θ after the round from the noisy weighted sum `total` and its scale η_g/(U·S·q)."""

    def step(self, theta: torch.Tensor, t: int) -> torch.Tensor:
        fed, sampled = self.fed, self.method.sampled
        total = torch.zeros_like(theta)
        if sampled:  # each run samples each user with probability q
            chosen = torch.rand((fed.n_runs, fed.n_users), generator=self.gen, device=self.dev) < self.q
        for b in fed.buckets:
            if sampled:
                keep = chosen[self.run_of[b.pairs], self.user_of[b.pairs]]
                if not bool(keep.any()):
                    continue
                b = subset(b, keep)
            total += self.pair_sums(theta, b)
        total = total + silo_noise(fed.n_runs, fed.n_silos, theta.shape[1], self.silo_std, self.gen, theta)
        scale = self.hyper.eta_g / (fed.n_users * fed.n_silos * (self.q if sampled else 1.0))
        return self.apply(theta, scale, total)


class AvgRound(UserRound):
    """ULDP-AVG, -w, -ws: each pair's local SGD delta; θ ← θ + scale·total."""

    def pair_sums(self, theta, b):
        h, run_of = self.hyper, self.run_of[b.pairs]
        start = theta[run_of]
        d = local_sgd(self.fm, start, b, epochs=h.epochs, batch=self.batch, lr=h.eta_l, gen=self.gen).sub_(start)
        return weighted_clipped_sum(d, self.weights[b.pairs], run_of, self.fed.n_runs, h.clip)

    def apply(self, theta, scale, total):
        return theta + scale * total


class SgdRound(UserRound):
    """ULDP-SGD: each pair's gradient of its mean loss at θ (without forming per-pair gradients where the model
    allows, dpfl.fl.local.clipped_mean_grad_sums); θ ← θ − scale·total."""

    def pair_sums(self, theta, b):
        run_of = self.run_of[b.pairs]
        return clipped_mean_grad_sums(self.fm, theta, b, run_of, self.weights[b.pairs], self.hyper.clip, self.gen)

    def apply(self, theta, scale, total):
        return theta - scale * total


class SgdAuthorsRound(SgdRound):
    """ULDP-SGD with `sgd_gradient: authors` (K1): Σ over the pair's batches of the batch-mean gradient divided by
    the batch size (`authors_sgd_grads`)."""

    def pair_sums(self, theta, b):
        run_of = self.run_of[b.pairs]
        d = authors_sgd_grads(self.fm, theta[run_of], b, self.batch, self.gen)
        return weighted_clipped_sum(d, self.weights[b.pairs], run_of, self.fed.n_runs, self.hyper.clip)


#: the round rule of each method scheme; ULDP-SGD's by its `sgd_gradient` setting (K1)
SCHEME_ROUNDS = {"default": SiloRound, "naive": NaiveRound, "group": GroupRound, "avg": AvgRound,
                 "sgd": {"mean": SgdRound, "authors": SgdAuthorsRound}}


def rule_class(method, sgd_gradient: str = "mean") -> type[SchemeRound]:
    """The round rule of `method`'s scheme (chosen once per cell). `sgd_gradient` (ULDP-SGD): mean (the paper) |
    authors (K1)."""
    rule = SCHEME_ROUNDS[method.scheme]
    if isinstance(rule, dict):
        if sgd_gradient not in rule:
            raise ValueError(f"kato2024 implementation.sgd_gradient {sgd_gradient!r}; allowed: {', '.join(rule)}")
        rule = rule[sgd_gradient]
    return rule


def round_rule(method, hyper, fed: Federation, fm: FlatModel, *, sigma: float, batch: int, gen: torch.Generator,
               q: float = 1.0, sgd_gradient: str = "mean") -> SchemeRound:
    """The round rule of `method` with its typed `hyper` (UldpMethod.hyper_params, or the YAML block as a dict)."""
    if isinstance(hyper, dict):
        hyper = method.hyper_params(hyper)
    return rule_class(method, sgd_gradient)(method, hyper, fed, fm, sigma=sigma, batch=batch, gen=gen, q=q)


def authors_sgd_grads(fm: FlatModel, theta: torch.Tensor, b: Bucket, batch: int, gen=None) -> torch.Tensor:
    """K1 (the authors' code): Σ over the pair's consecutive batches of B records of (batch-mean gradient)/|batch|."""
    out = torch.zeros_like(theta)
    for j in range(max(1, math.ceil(b.mask.shape[1] / batch))):
        sl = slice(j * batch, (j + 1) * batch)
        part = Bucket(b.pairs, b.X[:, sl], b.y[:, sl], b.mask[:, sl], b.mask[:, sl].sum(1))
        g = mean_grads(fm, theta, part, gen)
        out += g / part.counts.clamp(min=1).to(g.dtype)[:, None]
    return out
