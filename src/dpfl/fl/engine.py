"""The round loop over torch state, and the tracker that follows every run of a batch of runs.

A *batch of runs* is a tensor of parameters W (reps, d, G, C): `reps` independent repetitions × G grid configs,
each a (d, C) model. A method supplies `round_fn(W, draw) -> W_new` (one communication round, vectorized over
the batch); the engine feeds it the round's random draws, keeps the last `average_last` iterates for the output
average, and every `check_every` rounds freezes the runs whose training loss exceeds the divergence threshold.
Everything stays on the device of W; the only host transfer per round is the draw itself.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
import torch


@dataclass
class Result:
    W: np.ndarray  # output parameters (reps, G, d, C): mean of the last `average_last` iterates
    diverged: np.ndarray  # (reps, G) bool
    train_loss: np.ndarray  # (reps, G) training loss at W (penalty not applied)


class Tracker:
    """Iterate averaging (the last `average_last` iterates, including w_0 early on) and the divergence check
    every `check_every` rounds. `loss_fn(W) -> (reps, G)` is the training loss of every run."""

    def __init__(self, W0: torch.Tensor, loss_fn: Callable, average_last: int = 1,
                 divergence_threshold: float | None = None, check_every: int = 5, max_loss: float = float("inf")):
        self.loss_fn, self.check_every, self.threshold = loss_fn, check_every, divergence_threshold
        self.history = deque([W0.clone()], maxlen=average_last)
        self.diverged = torch.zeros((W0.shape[0], W0.shape[2]), dtype=torch.bool, device=W0.device)
        # a loss bounded by max_loss (e.g. the guarded logistic loss) can never exceed a larger threshold
        self.can_diverge = divergence_threshold is not None and divergence_threshold < max_loss

    def average(self) -> torch.Tensor:
        return torch.stack(tuple(self.history)).mean(dim=0)

    def step(self, r: int, W_old: torch.Tensor, W_new: torch.Tensor) -> torch.Tensor:
        """Record round r's iterate; diverged runs stay frozen at their last value."""
        W = torch.where(self.diverged[:, None, :, None], W_old, W_new)
        self.history.append(W)
        if self.can_diverge and (r + 1) % self.check_every == 0:
            loss = self.loss_fn(self.average())
            self.diverged |= ~(loss <= self.threshold)  # NaN counts as diverged
        return W

    def result(self) -> Result:
        W = self.average()
        loss = self.loss_fn(W)
        return Result(W=W.permute(0, 2, 1, 3).cpu().numpy(),
                      diverged=(self.diverged | ~torch.isfinite(loss)).cpu().numpy(), train_loss=loss.cpu().numpy())


def run_rounds(W0: torch.Tensor, round_fn: Callable, draws: Iterable[dict], tracker: Tracker) -> Result:
    """Run one round per draw: W ← round_fn(W, draw), tracked (averaging, divergence freeze)."""
    W = W0
    for r, draw in enumerate(draws):
        W = tracker.step(r, W, round_fn(W, draw))
    return tracker.result()
