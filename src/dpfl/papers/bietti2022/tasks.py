"""What a bietti2022 task contributes to a cell's runs (`Setup`): its sizes (N users, d features, K outputs), the
rounds T and user rate q, each run's data stream (`Run`) and the evaluation of the models.

Tasks: `synthetic` (spec §1.1, generated here; every user every round, excess risk after every round) and the
federated tasks of `FEDERATED` (spec §1.2-1.3, the prepared data: `emnist`, dense images; `stackoverflow`, bag-of-words
rows; top-1 test accuracy every `eval_every` rounds and after the last).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfl.papers.bietti2022.settings import GridSettings


@dataclass(frozen=True)
class FederatedData:
    """A federated task's prepared data: the dataset, its classes K, the target shift (one-hot or multi-hot minus
    `shift`, spec §2) and whether its rows are bag-of-words (dpfl.papers.bietti2022.sparse)."""

    dataset: str
    classes: int
    shift: float
    sparse: bool


#: the federated tasks
FEDERATED = {"emnist": FederatedData(dataset="emnist", classes=10, shift=0.1, sparse=False),
             "stackoverflow": FederatedData(dataset="stackoverflow", classes=80, shift=0.1, sparse=True)}


@dataclass
class Run:
    """One run's data: `next()` gives round t's batch; T rounds; q the user rate of every round (B1: per round)."""

    next: object
    T: int
    q: object
    full_T: int | None = None  # T of the configured passes, where the data sets it
    most_rounds: int | None = None  # B1: the most rounds one user takes part in (None: Poisson, certified = nominal)


class Setup:
    """What a task contributes to the loop: sizes, rounds, user rate q, the per-round draw and the evaluation.
    `stream(data_seed)` gives a run's data (`Run`) from the seed of its data stream (the cell's `Streams.data`);
    `evaluate(W, Θ)` the linear models' metric per config. The task's checks (a known task; the CNN on images only)
    come first, before any data is read."""

    def __init__(self, settings: GridSettings, inputs: dict, dtype, device, log):
        self.task = settings.task
        if self.task != "synthetic" and self.task not in FEDERATED:
            raise ValueError(f"bietti2022: unknown task {self.task!r}; known: synthetic, {', '.join(FEDERATED)}")
        if settings.model == "cnn" and (self.task not in FEDERATED or FEDERATED[self.task].sparse):
            raise ValueError(f"bietti2022 grid {settings.grid}: model cnn needs an image task (emnist)")
        self.sparse = False  # bag-of-words rows (Stackoverflow)
        if settings.synthetic is not None:
            self._synthetic(settings, dtype, device)
        else:
            self._federated(settings, inputs, dtype, device, log)

    def _synthetic(self, settings: GridSettings, dtype, device):
        """Every user's fresh samples each round (q = 1) for the configured T; the excess risk after every round
        (both the paper's sum over coordinates and the authors' code's mean are stored, B3)."""
        import torch

        from dpfl.papers.bietti2022.ppsgd import excess_risk

        syn = settings.synthetic
        truth, scales = syn.truth(dtype).to(device), syn.scales(dtype).to(device)
        self.N, self.d, self.K, self.q, self.T = syn.n_users, syn.dim, 1, 1.0, settings.rounds
        self.T_epochs = None  # T is configured, not derived from the data
        self.metric, self.every = "excess_risk", None
        if settings.implementation.excess_risk == "coordinate_mean":  # B3: the authors' code divides by d (both stored)
            self.metric = "excess_risk_per_coordinate"

        def stream(data_seed: int) -> Run:
            gen = torch.Generator(device=device).manual_seed(data_seed)
            return Run(lambda: syn.draw(truth, gen), self.T, 1.0)

        def evaluate(W, Th):
            risk = excess_risk(W, Th, truth, scales)
            risk = torch.where(torch.isfinite(risk), risk, torch.full_like(risk, math.nan)).cpu().numpy()
            return {"excess_risk": risk, "excess_risk_per_coordinate": risk / syn.dim}

        self.stream, self.evaluate = stream, evaluate

    def _federated(self, settings: GridSettings, inputs: dict, dtype, device, log):
        """The first N users of the prepared data, Q per round (Poisson at q = Q/N, or B1's shuffled plan), T from
        the configured passes unless `rounds` is set (spec §3); the pooled test accuracy."""
        from dpfl.papers.bietti2022.federated import FederatedTask, UserStreams, accuracy
        from dpfl.papers.bietti2022.sparse import SparseTask, SparseUserStreams

        spec, fed, rounds = FEDERATED[self.task], settings.federated, settings.rounds
        sampling = settings.implementation.sampling
        arrays = dict(np.load(inputs["prepared"][spec.dataset], allow_pickle=False))
        self.sparse = spec.sparse
        if self.sparse:  # bag of words: compact personal rows, sparse products (dpfl.papers.bietti2022.sparse)
            data = SparseTask.from_arrays(arrays, fed.users, spec.shift, dtype, device)
            UserStreams = SparseUserStreams  # noqa: N806
        else:
            data = FederatedTask.from_arrays(arrays, fed.users, spec.classes, spec.shift, dtype, device)
        m, Q = fed.batch, fed.users_per_round
        self.N, self.d, self.K = data.n_users, data.dim, spec.classes
        self.q = min(1.0, Q / self.N)
        self.T_epochs = data.rounds(fed.epochs, Q, m)  # T of the configured passes (spec §3)
        self.T = rounds if rounds else self.T_epochs
        self.metric, self.every = "accuracy", fed.eval_every
        shuffle = sampling == "shuffle"
        log(f"{self.task}: {self.N} users, {int(data.counts().sum())} training rows, d = {self.d}, K = {self.K}, "
            + (f"the first Q = {Q} of the shuffled users with data each round until all are exhausted (B1)"
               if shuffle else f"q = {self.q:g}, T = {self.T}"))

        self.data = data

        def stream(data_seed: int) -> Run:
            users = UserStreams(data, m, self.q, np.random.default_rng(data_seed), sampling=sampling, per_round=Q,
                                epochs=fed.epochs)
            if not shuffle:
                return Run(users.next_batch, self.T, self.q, self.T_epochs)
            T = min(users.rounds, rounds) if rounds else users.rounds
            return Run(users.next_batch, T, users.users_per_round[:T] / self.N, users.rounds,
                       int(users.rounds_per_user.max(initial=0)))

        def evaluate(W, Th):
            acc = accuracy(data, W, Th).cpu().numpy()
            return {"accuracy": np.where(np.isfinite(acc), acc, np.nan)}

        self.stream, self.evaluate = stream, evaluate

    def end_round(self, T: int, end_point: str) -> int:
        """The round whose evaluation is the end of training: the last (the paper), or with `last_multiple` (B4) the
        last multiple of eval_every (real data; the synthetic task evaluates every round)."""
        if end_point == "last_multiple" and self.every is not None and T >= self.every:
            return T // self.every * self.every
        return T
