"""Noise calibration, in one place: which noise multiplier z a private method uses at a nominal ε.

Two rules (`noise_calibration` in a paper's YAML):
  paper       the paper's own noise formula (given by the method as z_paper), whatever ε it certifies;
  accountant  the smallest z for which the exact accountant (dpfl.privacy.rdp) certifies ε at the method's δ.
Either way the result records z_paper, the z used and the ε the accountant certifies for both, so every private
result carries the certified ε beside the nominal one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dpfl.privacy.rdp import calibrate_noise_multiplier, epsilon

RULES = ("paper", "accountant")


@dataclass(frozen=True)
class NoiseLevel:
    z_paper: float  # the paper's formula
    eps_certified_paper: float  # ε the accountant certifies for z_paper
    z_accountant: float  # the smallest multiplier the accountant certifies at the nominal ε (a diagnostic either way)
    z_used: float  # the multiplier the run uses: z_paper or z_accountant
    eps_certified: float  # ε the accountant certifies for z_used
    delta: float

    def as_dict(self) -> dict:
        return asdict(self)


def calibrated_multiplier(accounting, eps: float, guess: float | None = None) -> float:
    """The smallest z whose certified ε (at the accounting's δ and steps) is at most `eps`; `guess` (e.g. the
    paper's multiplier) only speeds up the search."""
    return calibrate_noise_multiplier(accounting.mechanism, float(eps), int(accounting.steps), accounting.delta,
                                      guess=None if guess is None else float(guess))


def noise_level(accounting, eps: float, z_paper: float, rule: str) -> NoiseLevel:
    """The multiplier to use at nominal `eps` under `rule`, with the accountant's calibrated multiplier and the ε
    certified for the one used and for the paper's."""
    if rule not in RULES:
        raise ValueError(f"noise calibration must be one of {RULES}, got {rule!r}")
    mech, steps, delta = accounting.mechanism, int(accounting.steps), accounting.delta
    eps_paper = epsilon(mech, z_paper, steps, delta)
    # ε falls roughly like 1/z: start the search where the paper's multiplier, rescaled, would land
    z_accountant = calibrated_multiplier(accounting, eps, z_paper * max(eps_paper, 1e-12) / eps)
    z_used = z_paper if rule == "paper" else z_accountant
    eps_used = eps_paper if z_used == z_paper else epsilon(mech, z_used, steps, delta)
    return NoiseLevel(z_paper=z_paper, eps_certified_paper=eps_paper, z_accountant=z_accountant, z_used=z_used,
                      eps_certified=eps_used, delta=delta)
