"""Every random stream derives from the global seed and a tuple of names (paper, figure, cell,
trial, repetition, ...) through numpy's SeedSequence, so the same config gives bit-identical
numbers, and streams of different cells never collide or depend on execution order."""

from __future__ import annotations

import hashlib

import numpy as np


def _key_to_int(key) -> int:
    return int.from_bytes(hashlib.sha256(str(key).encode()).digest()[:8], "little")


def seed_sequence(seed: int, *keys) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(seed), *(_key_to_int(k) for k in keys)])


def rng_for(seed: int, *keys) -> np.random.Generator:
    """A numpy Generator for the stream named by `keys` under the global `seed`."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *keys)))


def torch_generator(rng: np.random.Generator, device="cpu"):
    """A torch Generator on `device` seeded by `rng`'s next draw (a named stream's torch side)."""
    import torch

    return torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))
