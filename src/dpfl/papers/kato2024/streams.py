"""The random streams of every kato2024 cell (training, protocol, Fig 12's generated data) in one place, so that
what each draw depends on is decided once for both families (`Streams`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfl.seeds import rng_for, torch_generator


@dataclass(frozen=True)
class Streams:
    """The named random streams of a kato2024 cell, all derived from the global seed. Decision (written once,
    here): a seed's record subsample (reduced scales) depends on (dataset, share, seed) only, so every method sees
    the same records; a cell's training draws (shuffles, Poisson samples, dropout masks, noise: one torch Generator
    for all its seeds) depend on (dataset, distribution, U, S, method, q, the cell's seeds); a protocol run's
    (Figs 11-12) on (setting, seed): its first draw seeds its torch Generator, the rest is its key exchange's; Fig
    12's generated data on (records per silo, S, seed), its users' draw on U as well."""

    seed: int

    def subsample(self, dataset: str, share: float, run_seed: int) -> np.random.Generator:
        return rng_for(self.seed, "kato2024", dataset, "subsample", share, run_seed)

    def training(self, dataset: str, distribution: str, users: int, silos: int, method: str, q: float | None,
                 seeds, device):
        """The cell's torch Generator on `device`."""
        key = rng_for(self.seed, "kato2024", "train", dataset, distribution, users, silos, method,
                      -1.0 if q is None else q, *seeds)
        return torch_generator(key, device)

    def protocol(self, setting: str, run_seed: int) -> np.random.Generator:
        return rng_for(self.seed, "kato2024", "protocol", setting, run_seed)

    def fig12_records(self, per_silo: int, silos: int, run_seed: int) -> int:
        """make_classification's random_state of one run's records."""
        return int(rng_for(self.seed, "kato2024", "fig12", "records", per_silo, silos, run_seed).integers(2**31))

    def fig12_users(self, users: int, per_silo: int, silos: int, run_seed: int) -> np.random.Generator:
        return rng_for(self.seed, "kato2024", "fig12", "users", users, per_silo, silos, run_seed)
