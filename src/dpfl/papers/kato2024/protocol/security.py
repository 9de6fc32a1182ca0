"""The private weighting protocol's security levels (docs/papers/kato2024.md, 'Security of the private weighting
protocol'), typed once from a cell's params (dpfl.papers.kato2024.protocol.settings); import-light, so that the
figure layout can refuse a setting when the DAG is built, before any cell runs."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass

#: the protocol's security levels (`Security`)
SECURITY_LEVELS = ("paper", "secure")
#: the smallest Paillier modulus the secure mode accepts outside a simulation (the paper's size, ≈ 128-bit security)
SECURE_KEY_BITS = 3072
#: bytes of the secure mode's seed R (256 bits, beyond any search; the masks r_u ∈ Z_n it seeds are pseudo-random)
SECURE_SEED_BYTES = 32


@dataclass(frozen=True)
class Security:
    """How the protocol draws its secrets and protects its messages, typed once from a cell's params (`security`,
    one entry of the figure's `securities`, and `simulation`; docs/papers/kato2024.md, 'Security of the private
    weighting protocol').

    `level` paper: the paper's protocol as published (R of 32 bits from the run's seeded stream, one pair key for the
    pad of R and the pairwise masks, each silo's noise a float64 Gaussian from the run's generator rounded to the
    encoding, ciphertexts sent as computed). secure: every ciphertext a silo sends re-randomised by a fresh r^n mod
    n², R of 256 bits from `secrets`, separate HKDF subkeys for the pad and the masks, each silo's noise an exact
    discrete Gaussian from its own CSPRNG. `simulation`: the run is a simulation, not a deployment, so the secure
    mode accepts what it otherwise refuses: a Paillier key under 3072 bits, chosen primes, and a seeded generator
    for its secrets (tests use them to be fast or to construct an attack)."""

    level: str = "paper"
    simulation: bool = False

    def __post_init__(self):
        if self.level not in SECURITY_LEVELS:
            raise ValueError(f"security {self.level!r} is not one of {', '.join(SECURITY_LEVELS)}")

    @property
    def secure(self) -> bool:
        return self.level == "secure"

    def check_key_bits(self, bits: int) -> None:
        """The secure mode refuses a modulus under SECURE_KEY_BITS outside a simulation."""
        if self.secure and bits < SECURE_KEY_BITS and not self.simulation:
            raise ValueError(f"security: secure refuses a {bits}-bit Paillier key (key_bits < {SECURE_KEY_BITS}); a "
                             f"run on a smaller key must declare itself a simulation (simulation: true)")

    def check_chosen_key(self) -> None:
        """The secure mode's Paillier key comes from the operating system's CSPRNG, not from chosen primes."""
        if self.secure and not self.simulation:
            raise ValueError("security: secure generates its Paillier primes from the operating system's CSPRNG; "
                             "chosen primes are accepted only in a simulation (simulation: true)")

    def secret_source(self, rng: random.Random | None = None) -> random.Random:
        """The generator of the secure mode's secrets (R, a silo's noise and re-randomisers): a fresh
        `secrets.SystemRandom()` when `rng` is None; a seeded generator (a `random.Random` that is not the
        system's) is refused outside a simulation."""
        if rng is None:
            return secrets.SystemRandom()
        if not isinstance(rng, random.Random):
            raise TypeError(f"a secret source is a random.Random, not {type(rng).__name__}")
        if not isinstance(rng, random.SystemRandom) and not self.simulation:
            raise ValueError("security: secure draws R, the noise and the re-randomisers from the operating system's "
                             "CSPRNG; a seeded generator is accepted only in a simulation (simulation: true)")
        return rng


PAPER = Security()
