"""The registry of federated methods. A method is one object that owns its label, its update rule, its random
draws and its accounting (mechanism, number of steps, sensitivity), so adding a method is one registry entry in
its paper's `methods.py`, with no switches elsewhere.

The privacy contract every private method keeps, checked by one parametrized test over the whole registry
(tests/test_methods.py): the Gaussian noise it injects has standard deviation `noise_std(z, clip)` =
z × `sensitivity(clip)`, where z is the multiplier its `accounting` is evaluated with, and `sensitivity` bounds how
much one record (or user) changes the released quantity `query`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Accounting:
    """What the accountant needs: the mechanism (dpfl.privacy.rdp.SampledGaussian), how many times it runs,
    and δ."""

    mechanism: object
    steps: int
    delta: float


@dataclass(frozen=True)
class Method:
    """Base of all methods. Subclasses add their update rule; private ones implement the accounting part."""

    id: str
    label: str
    private: bool

    def accounting(self, **sizes) -> Accounting:
        raise NotImplementedError(f"{self.id} is not private")

    def sensitivity(self, clip: float) -> float:
        """Largest change of `query` when one record (or user) is replaced, for clip bound `clip`."""
        raise NotImplementedError(f"{self.id} is not private")

    def noise_std(self, z: float | np.ndarray, clip: float | np.ndarray):
        """Standard deviation of the Gaussian noise for noise multiplier z: z × sensitivity."""
        return z * self.sensitivity(clip)

    # hooks of the privacy test, implemented by each private method with its own update code
    def query(self, model, X: np.ndarray, y: np.ndarray, W: np.ndarray, clip: float) -> np.ndarray:
        """The quantity the method perturbs, for one silo holding rows (X, y), at parameters W."""
        raise NotImplementedError

    def noise_probe(self, model, dim: int, z: float, clip: float, sizes: dict, samples: int,
                    rng: np.random.Generator) -> np.ndarray:
        """Noise samples as the method's own update injects them for multiplier z, on data whose gradients are
        zero, in the units of `query`."""
        raise NotImplementedError

    #: sizes for the privacy test (a small, valid setting of `accounting`'s arguments)
    probe_sizes: tuple = ()


METHODS: dict[str, Method] = {}


def register(*methods: Method) -> None:
    for m in methods:
        if m.id in METHODS and METHODS[m.id] is not m:
            raise ValueError(f"method id {m.id!r} is registered twice")
        METHODS[m.id] = m
