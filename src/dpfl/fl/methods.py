"""The registry of federated methods. A method is one object that owns its label, its update rule, its random
draws and its accounting (mechanism, number of steps, sensitivity), so adding a method is one registry entry in
its paper's `methods.py`, with no switches elsewhere.

The privacy contract every private method keeps, checked by one parametrized test over the whole registry
(tests/test_methods.py): the Gaussian noise it injects has standard deviation `noise_std(z, clip)` =
z × `sensitivity(clip)`, where z is the multiplier its `accounting` is evaluated with, and `sensitivity` bounds how
much one record (or user) changes the released quantity `query`.
"""

from __future__ import annotations

import abc
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
    """Base of all methods: what the DAG, the tables and the plots need. Subclasses add their update rule."""

    id: str
    label: str
    private: bool


class PrivateMethod(Method, abc.ABC):
    """A method with privacy accounting. Its accounting hooks are abstract: a subclass that leaves one out
    cannot be instantiated, so the registry never holds a private method the privacy tests cannot check.
    A subclass also sets `probe_sizes` (a small, valid setting of `accounting`'s arguments, for those tests) and
    `neighbouring` (what one privacy unit's change is: "replace" one record, or "add_remove" one user)."""

    neighbouring = "replace"

    @abc.abstractmethod
    def accounting(self, **sizes) -> Accounting:
        """The mechanism, steps and δ of one run with these sizes."""

    @abc.abstractmethod
    def sensitivity(self, clip: float) -> float:
        """Largest change of the released quantity when one privacy unit changes, for clip bound `clip`."""

    def noise_std(self, z: float | np.ndarray, clip: float | np.ndarray):
        """Standard deviation of the Gaussian noise for noise multiplier z: z × sensitivity."""
        return z * self.sensitivity(clip)


class GlmProbeMethod(PrivateMethod):
    """A record-level private method whose released quantity can be computed for one silo of a GLM (numpy), so
    the registry-wide test (tests/test_methods.py) can replace records and measure the injected noise."""

    @abc.abstractmethod
    def query(self, model, X: np.ndarray, y: np.ndarray, W: np.ndarray, clip: float) -> np.ndarray:
        """The quantity the method perturbs, for one silo holding rows (X, y), at parameters W."""

    @abc.abstractmethod
    def noise_probe(self, model, dim: int, z: float, clip: float, sizes: dict, samples: int,
                    rng: np.random.Generator) -> np.ndarray:
        """Noise samples as the method's own update injects them for multiplier z, on data whose gradients are
        zero, in the units of `query`."""


METHODS: dict[str, Method] = {}


def register(*methods: Method) -> None:
    for m in methods:
        if m.private and not isinstance(m, PrivateMethod):
            raise TypeError(f"method {m.id!r} is private but not a PrivateMethod (it has no accounting hooks)")
        if m.id in METHODS and METHODS[m.id] is not m:
            raise ValueError(f"method id {m.id!r} is registered twice")
        METHODS[m.id] = m
