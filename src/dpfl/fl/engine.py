"""The one round loop of every training paper (lowy2023, kato2024's training figures and its protocol, bietti2022).

A *batch of runs* is one state that holds many independent runs, trained together: kato2024 θ (R, D), one model
per seed; lowy2023 W (reps, d, G, C), one model per repetition × grid config; bietti2022 a config batch's (W, Θ);
kato2024's protocol one run θ (D,). `run_rounds` drives it with four small parts, each paper supplying its own:

- a `RoundRule`: `step(state, t)` gives the state after round t = 1..T (vectorized over the runs; it draws its own
  randomness, so each paper keeps its random-number order);
- an `Evaluation`: `evaluate(state, t)` gives per-run values ({name: array over the runs}), `observe(state, t)`
  sees every round's state (e.g. for iterate averaging), `summary(values, failed)` is the progress lines' metric;
- a schedule: the rounds evaluated (0 = the initial state, before any round);
- a `FailureRule`: `guard(old, new, t)` after every round keeps frozen runs at their old state, `judge(t, values)`
  after every evaluation says which runs failed (`FreezeNonFinite`: kato2024; `Divergence`: lowy2023; `NoFreeze`:
  bietti2022, kato2024's protocol).

The loop owns the order of these calls, the progress lines (round t/T, the evaluation's metric, elapsed time and
ETA, failed runs), the timing of the loop and of its evaluations, and the records from which `Run.rows` makes one
row per (run, evaluation). Everything stays where the round rule puts it (CPU or GPU); a rule that computes in place
(bietti2022) returns the same state object.
"""

from __future__ import annotations

import abc
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Collection, Protocol

import numpy as np
import torch


class RoundRule(abc.ABC):
    """One communication round of every run of a batch."""

    @abc.abstractmethod
    def step(self, state, t: int):
        """The state after round t (1-based) from the state before it (may update it in place and return it)."""


class Evaluation(abc.ABC):
    """What the loop measures on the state of every run."""

    @abc.abstractmethod
    def evaluate(self, state, t: int) -> dict:
        """Per-run values after round t (t = 0: the initial state): {name: array (or tensor) over the runs}."""

    def observe(self, state, t: int) -> None:
        """Sees the state after every round t ≥ 1, after the failure rule (nothing by default)."""

    def summary(self, values: dict, failed) -> str:
        """The metric of a progress line, from the latest evaluation's values ("" by default)."""
        return ""


class FailureRule(abc.ABC):
    """Which runs failed, and what a failed run's state does from then on. `failed` holds the per-run flags."""

    #: whether a failed run's rows carry NaN values (kato2024) or its measured values (the others)
    blank_failed: bool = False
    failed = None

    @abc.abstractmethod
    def start(self, state) -> None:
        """Every run healthy."""

    @abc.abstractmethod
    def guard(self, old, new, t: int):
        """The state after round t: `new`, except for the runs this rule keeps at `old`."""

    @abc.abstractmethod
    def judge(self, t: int, values: dict):
        """Update the flags from an evaluation's values; returns the per-run flags of that evaluation's rows."""


class ProgressLog(Protocol):
    """dpfl.io.Progress: `step(message)` writes "label k/n (elapsed, ETA): message"."""

    def step(self, message: str = "") -> None: ...


# ------------------------------------------------------------------------------------------ failure rules


def _per_run(mask, ndim: int, axes: tuple[int, ...]):
    """A per-run mask shaped to broadcast over a state whose run axes are `axes`."""
    shape, it = [], iter(mask.shape)
    for i in range(ndim):
        shape.append(next(it) if i in axes else 1)
    return mask.reshape(shape)


class NoFreeze(FailureRule):
    """Runs are never frozen (the state may be updated in place); a run's row is failed where the evaluated `metric`
    is not finite, at that evaluation only (bietti2022; kato2024's protocol with its decryption check)."""

    def __init__(self, metric: str):
        self.metric = metric

    def start(self, state) -> None:
        self.failed = None

    def guard(self, old, new, t: int):
        return new

    def judge(self, t: int, values: dict):
        self.failed = ~np.isfinite(np.asarray(values[self.metric], dtype=float))
        return self.failed


class FreezeNonFinite(FailureRule):
    """kato2024: a run whose new state has a NaN or Inf entry keeps its last state that round and has failed, as has
    a run whose evaluated `metric` is not finite; a failed run stays failed and its rows carry NaN values. The state
    is (runs, ...) on any device."""

    blank_failed = True

    def __init__(self, metric: str):
        self.metric = metric

    def start(self, state) -> None:
        self.failed = np.zeros(state.shape[0], dtype=bool)

    def guard(self, old, new, t: int):
        ok = torch.isfinite(new).reshape(new.shape[0], -1).all(dim=1)
        self.failed |= ~ok.cpu().numpy()
        return torch.where(_per_run(ok, new.dim(), (0,)), new, old)

    def judge(self, t: int, values: dict):
        self.failed |= ~np.isfinite(np.asarray(values[self.metric], dtype=float))
        return self.failed.copy()


class Divergence(FailureRule):
    """lowy2023: at an evaluation of a round that is a multiple of `every`, a run whose evaluated `metric` (its
    training loss) exceeds `threshold` or is NaN has diverged; at any other evaluation (the final one) only a
    non-finite value counts (`threshold` None: only non-finite values, ever). A diverged run stays frozen at its
    last state. The runs are the `axes` of the state (W (reps, d, G, C): axes (0, 2)); the flags stay on the
    state's device (no host transfer in the loop)."""

    def __init__(self, metric: str, threshold: float | None, every: int, axes: tuple[int, ...]):
        self.metric, self.threshold, self.every, self.axes = metric, threshold, int(every), tuple(axes)

    def start(self, state) -> None:
        self.failed = torch.zeros([state.shape[a] for a in self.axes], dtype=torch.bool, device=state.device)

    def guard(self, old, new, t: int):
        return torch.where(_per_run(self.failed, new.dim(), self.axes), old, new)

    def judge(self, t: int, values: dict):
        v = values[self.metric]
        if self.threshold is not None and t % self.every == 0:
            self.failed |= ~(v <= self.threshold)  # NaN counts as diverged
        else:
            self.failed |= ~torch.isfinite(v)
        return self.failed.clone()


# ------------------------------------------------------------------------------------------ evaluations


class IterateAverage(Evaluation):
    """The loss `loss_fn(W)` (per run) of the mean of the last `average_last` iterates, w_0 included early on
    (lowy2023's output average). `average()` is the output after the loop."""

    def __init__(self, W0: torch.Tensor, loss_fn: Callable, average_last: int = 1, metric: str = "train_loss"):
        self.loss_fn, self.metric = loss_fn, metric
        self.history = deque([W0.clone()], maxlen=average_last)

    def observe(self, state, t: int) -> None:
        self.history.append(state)

    def average(self) -> torch.Tensor:
        return torch.stack(tuple(self.history)).mean(dim=0)

    def evaluate(self, state, t: int) -> dict:
        return {self.metric: self.loss_fn(self.average())}


# ------------------------------------------------------------------------------------------ the loop


@dataclass
class Evaluated:
    """One evaluation: its round, the per-run values and the per-run failed flags of its rows."""

    round: int
    values: dict
    failed: object


def _scalar(v):
    """A numpy or torch element as the Python number or bool a table row holds."""
    return v.item() if isinstance(v, (np.generic, np.ndarray, torch.Tensor)) else v


@dataclass
class Run:
    """What `run_rounds` returns: the final state, every evaluation, the failure rule's final flags, and the loop's
    wall-clock seconds (evaluations included) and those of its evaluations alone."""

    state: object
    records: list[Evaluated]
    failed: object
    rounds: int
    seconds: float
    evaluation_seconds: float
    blank_failed: bool = field(default=False, repr=False)

    @property
    def evaluations(self) -> int:
        return len(self.records)

    @property
    def values(self) -> dict:
        """The last evaluation's values."""
        return self.records[-1].values

    def rows(self, keys: list[dict]) -> list[dict]:
        """One row per (evaluation, run): the run's `keys` (one dict per run), `round`, its values and `failed`
        (a failed run's values NaN where the failure rule blanks them), evaluations in order, runs within each."""
        out = []
        for rec in self.records:
            for i, key in enumerate(keys):
                failed = bool(rec.failed[i])
                if failed and self.blank_failed:
                    values = {k: float("nan") for k in rec.values}
                else:
                    values = {k: _scalar(v[i]) for k, v in rec.values.items()}
                out.append({**key, "round": rec.round, **values, "failed": failed})
        return out


def progress_rounds(rounds: int) -> list[int]:
    """The rounds a progress line follows: the first, then every tenth of the run (ceil(k·T/10), k = 1..10)."""
    return sorted({1, *(math.ceil(k * rounds / 10) for k in range(1, 11))} & set(range(1, rounds + 1)))


def run_rounds(state, rule: RoundRule, evaluation: Evaluation, *, rounds: int, schedule: Collection[int],
               failure: FailureRule, progress: ProgressLog | None = None, label: str = "") -> Run:
    """Train a batch of runs for `rounds` rounds: [evaluate round 0 if scheduled], then for t = 1..T
    state ← failure.guard(state, rule.step(state, t)), evaluation.observe, [evaluate t and judge the runs if t is
    scheduled], [a progress line at `progress_rounds`: "<label>, round t/T, <summary>, n failed run(s)"]."""
    schedule = set(schedule)
    marks = set(progress_rounds(rounds)) if progress is not None else set()
    failure.start(state)
    records: list[Evaluated] = []
    evaluating = 0.0

    def evaluate(t: int) -> None:
        nonlocal evaluating
        tick = time.perf_counter()
        values = evaluation.evaluate(state, t)
        records.append(Evaluated(t, values, failure.judge(t, values)))
        evaluating += time.perf_counter() - tick

    start = time.perf_counter()
    if 0 in schedule:
        evaluate(0)
    for t in range(1, rounds + 1):
        state = failure.guard(state, rule.step(state, t), t)
        evaluation.observe(state, t)
        if t in schedule:
            evaluate(t)
        if t in marks:
            parts = [f"{label}, round {t}/{rounds}" if label else f"round {t}/{rounds}"]
            if records:
                summary = evaluation.summary(records[-1].values, records[-1].failed)
                n_failed = int(np.asarray(_host(records[-1].failed)).sum())
                parts += [summary] if summary else []
                parts += [f"{n_failed} failed run(s)"] if n_failed else []
            progress.step(", ".join(parts))
    return Run(state, records, failure.failed, rounds, time.perf_counter() - start, evaluating,
               blank_failed=failure.blank_failed)


def _host(flags):
    return flags.cpu().numpy() if isinstance(flags, torch.Tensor) else flags
