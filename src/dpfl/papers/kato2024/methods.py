"""The methods of kato2024 (spec §4, §5): DEFAULT, ULDP-NAIVE, ULDP-GROUP-{max, median, 2, 8}, ULDP-SGD, ULDP-AVG,
ULDP-AVG-w and ULDP-AVG-ws, each one registered object: label, scheme (which round rule of
dpfl.papers.kato2024.training.rules), the key of its hyper-parameters in the YAML with their typed form
(`hyper_params`), and its accounting.

Privacy unit: one user (all its records in every silo), add/remove. The accounting of every scheme:
- NAIVE, AVG, AVG-w, SGD: the Gaussian mechanism with multiplier σ once per round (q = 1);
- AVG-ws: the Poisson-subsampled Gaussian (user rate q) once per round;
- GROUP-k: record-level DP-SGD in every silo (Poisson rate q_s = 1/⌈N'_s/B⌉, Q·⌈N'_s/B⌉ steps per round),
  composed in parallel over the disjoint silos and converted to groups of k records (dpfl.privacy.group).
Import-light at module level (the DAG builder reads the registry; the config's schema reads `schema_fragments`, the
method ids and hyper-parameter blocks generated from it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from dpfl.fl.methods import Accounting, PrivateMethod, register

FAMILIES = ("default", "naive", "group", "sgd", "avg")


# ---- hyper-parameters (spec §7 table), one typed block per hyper block --------------------------------------


class HyperError(ValueError):
    """A method's hyper-parameter block lacks a key it needs, or has one it does not use."""


@dataclass(frozen=True)
class LocalHyper:
    """DEFAULT (`fedavg`): η_g, and the users' (silos') local SGD: η_l, Q epochs."""

    eta_g: float
    eta_l: float
    epochs: int


@dataclass(frozen=True)
class PrivateLocalHyper(LocalHyper):
    """NAIVE, GROUP, AVG (`naive`, `group`, `avg`): local SGD and the clipping bound C."""

    clip: float


@dataclass(frozen=True)
class SgdHyper:
    """ULDP-SGD (`sgd`): η_g and C; no local training (one mean gradient per user and round)."""

    eta_g: float
    clip: float

    @property
    def epochs(self) -> int:
        """One gradient per round (what GROUP's accounting would call one local epoch; unused by SGD's)."""
        return 1


#: the typed block of each hyper block (a method's `hyper` key in the YAML)
HYPER_BLOCKS = {"fedavg": LocalHyper, "naive": PrivateLocalHyper, "group": PrivateLocalHyper, "sgd": SgdHyper,
                "avg": PrivateLocalHyper}
_TYPES = {"eta_g": float, "eta_l": float, "epochs": int, "clip": float}


@dataclass(frozen=True)
class UldpMethod(PrivateMethod):
    """scheme: default | naive | group | sgd | avg. `weighting` (avg, sgd): avg (1/S) or avg_w (n_su/n_u);
    `group` (group): max | median | an integer k; `sampled` (AVG-ws): users sampled with rate q each round.
    `hyper` names the block of per-method hyper-parameters in a figure's params (fedavg, naive, group, sgd, avg)."""

    scheme: str = "avg"
    weighting: str | None = None
    group: str | int | None = None
    sampled: bool = False
    hyper: str = "avg"
    neighbouring = "add_remove"
    probe_sizes: tuple = (("rounds", 5), ("q", 0.3), ("n_records", 40), ("batch", 8), ("epochs", 2))

    # ---- accounting (spec §5) ---------------------------------------------------------------------

    def accounting(self, rounds: int, q: float = 1.0, n_records: int = 0, batch: int = 1, epochs: int = 1,
                   delta: float = 1e-5) -> Accounting:
        """User level (NAIVE, AVG, AVG-w, SGD: Gaussian, q = 1; AVG-ws: Poisson rate q), once per round. GROUP:
        the record-level DP-SGD of one silo of `n_records` kept records (Poisson q_s = 1/⌈n/B⌉, Q·⌈n/B⌉ steps
        per round); the group conversion comes on top (`epsilon_curves`)."""
        from dpfl.privacy.rdp import SampledGaussian

        if self.scheme == "group":
            steps_per_epoch = max(1, math.ceil(n_records / batch))
            return Accounting(SampledGaussian("poisson", q=1.0 / steps_per_epoch), rounds * epochs * steps_per_epoch,
                              delta)
        if self.sampled:
            return Accounting(SampledGaussian("poisson", q=float(q)), rounds, delta)
        return Accounting(SampledGaussian("none"), rounds, delta)

    def sensitivity(self, clip):
        """ℓ2 change of the released sum when one unit is added or removed. AVG/AVG-w/AVG-ws/SGD: Σ_s w_{s,u} ≤ 1
        and each term is clipped to C, so C. GROUP: one record's clipped gradient, C. NAIVE: every silo's clipped
        model delta may change from one vector of norm ≤ C to another, so the mean over silos moves by up to 2C
        (the paper takes C; its noise σC is therefore multiplier σ/2 for the true sensitivity)."""
        return 2 * clip if self.scheme == "naive" else clip

    def paper_sensitivity(self, clip):
        """The sensitivity the paper calibrates its noise to (C for every private scheme)."""
        return clip

    def multiplier_used(self, sigma: float) -> float:
        """The noise multiplier the run actually has for the true sensitivity: the noise std is σ·C (paper)."""
        return sigma * self.paper_sensitivity(1.0) / self.sensitivity(1.0)

    def round_noise_std(self, sigma: float, clip: float) -> float:
        """The std of the Gaussian noise on what a round releases, at the paper's σ: `noise_std` at the multiplier
        actually used, σ·C for every private scheme (NAIVE: σ/2 on its sensitivity 2C; GROUP: a DP-SGD step's
        sum of clipped per-example gradients; AVG, SGD: the sum over silos)."""
        return self.noise_std(self.multiplier_used(sigma), clip)

    # ---- hyper-parameters --------------------------------------------------------------------------

    def hyper_params(self, block: dict):
        """The typed hyper-parameters (`HYPER_BLOCKS[self.hyper]`) from the validated YAML block
        `params.hyper.<self.hyper>`: every key the scheme uses is required (a private scheme without `clip` would
        otherwise train with every update clipped to 0 and no noise) and no other key is accepted."""
        cls = HYPER_BLOCKS[self.hyper]
        names = [f.name for f in fields(cls)]
        where = f"kato2024 {self.label} ({self.id}): params.hyper.{self.hyper}"
        block = {k: v for k, v in block.items() if v is not None}  # a key set to null is not given
        missing = [k for k in names if k not in block]
        if missing:
            need = " (its clipping bound C: a private method cannot run without it)" if "clip" in missing else ""
            raise HyperError(f"{where} lacks {', '.join(repr(k) for k in missing)}{need}; the {self.hyper} block "
                             f"needs {', '.join(names)} (config/papers/kato2024.yaml)")
        unused = sorted(set(block) - set(names))
        if unused:
            raise HyperError(f"{where} has {', '.join(repr(k) for k in unused)}, which {self.label} does not use; "
                             f"the {self.hyper} block takes {', '.join(names)} (config/papers/kato2024.yaml)")
        return cls(**{k: _TYPES[k](block[k]) for k in names})


def _m(mid, label, scheme, **kw) -> UldpMethod:
    return UldpMethod(id=mid, label=label, private=scheme != "default", scheme=scheme,
                      hyper={"default": "fedavg"}.get(scheme, scheme), **kw)


METHODS = (
    _m("default", "DEFAULT", "default"),
    _m("uldp_naive", "ULDP-NAIVE", "naive"),
    _m("uldp_group_max", "ULDP-GROUP-max", "group", group="max"),
    _m("uldp_group_median", "ULDP-GROUP-median", "group", group="median"),
    _m("uldp_group_2", "ULDP-GROUP-2", "group", group=2),
    _m("uldp_group_8", "ULDP-GROUP-8", "group", group=8),
    _m("uldp_sgd", "ULDP-SGD", "sgd", weighting="avg"),
    _m("uldp_avg", "ULDP-AVG", "avg", weighting="avg"),
    _m("uldp_avg_w", "ULDP-AVG-w", "avg", weighting="avg_w"),
    _m("uldp_avg_ws", "ULDP-AVG-ws", "avg", weighting="avg_w", sampled=True),
)
BY_ID = {m.id: m for m in METHODS}
LABELS = {m.id: m.label for m in METHODS}
register(*METHODS)


def epsilon_curves(method: UldpMethod, rounds: int, sigma: float, delta: float, *, q: float = 1.0,
                   silo_records=(), batch: int = 1, epochs: int = 1, group_k: int = 1,
                   group_orders: str = "mironov", group_parallel: str = "rdp",
                   group_conversion: str = "rdp") -> tuple[np.ndarray, np.ndarray]:
    """(ε nominal, ε certified) after every round t = 1..T (δ = `delta`), as NaN for DEFAULT.

    nominal: what the paper plots. σ as the noise multiplier; GROUP at k' = largest power of 2 ≤ k (a lower bound
    for k not a power of 2, as the paper reports), with `group_orders` (mironov | authors, K4) and
    `group_parallel` (rdp: per-order max over silos | epsilon: max of per-silo ε, K5) and `group_conversion` (rdp |
    normal: the (ε, δ) group conversion with k capped at 62, every 5th round and the last, NaN between: K6, the
    authors' plotting notebook).
    certified: what the accountant certifies for the noise actually used. NAIVE at multiplier σ/2 (see
    `UldpMethod.sensitivity`); GROUP at the smallest power of 2 ≥ k, orders ≥ 2k', per-order max (an upper bound)."""
    from dpfl.privacy.group import group_epsilon_curve
    from dpfl.privacy.rdp import epsilon_curve

    if not method.private:
        nan = np.full(rounds, np.nan)
        return nan, nan.copy()
    if method.scheme == "group":
        parts = []
        for n in silo_records:  # a silo whose bounding kept no record runs no step: it adds no RDP (spec §4)
            if int(n) == 0:
                continue
            acc = method.accounting(rounds=1, n_records=int(n), batch=batch, epochs=epochs, delta=delta)
            parts.append((acc.mechanism, acc.steps))
        if not parts:
            raise ValueError("ULDP-GROUP: no silo kept any record, so nothing is trained or released")
        nominal = group_epsilon_curve(parts, sigma, rounds, group_k, delta, orders=group_orders,
                                      parallel=group_parallel, conversion=group_conversion, every=5)
        k_up = 1 << max(0, int(group_k - 1).bit_length())
        certified = group_epsilon_curve(parts, sigma, rounds, k_up, delta)
        return np.asarray(nominal, float), np.asarray(certified, float)
    acc = method.accounting(rounds=rounds, q=q, delta=delta)
    nominal = epsilon_curve(acc.mechanism, sigma, 1, rounds, delta)
    z_true = method.multiplier_used(sigma)
    certified = nominal if z_true == sigma else epsilon_curve(acc.mechanism, z_true, 1, rounds, delta)
    return np.asarray(nominal, float), np.asarray(certified, float)


def schema_fragments() -> dict:
    """Schemas generated from the method registry ($ref'd by workflow/schemas/papers/kato2024.schema.yaml as
    urn:dpfl:kato2024:<name>): a new method is a registry entry and YAML, never a schema edit."""
    blocks = sorted({m.hyper for m in BY_ID.values()})
    return {
        "method-id": {"enum": list(BY_ID), "description": "a method id of dpfl.papers.kato2024.methods"},
        "hyper-block": {"enum": blocks, "description": "a method scheme's hyper-parameter block "
                                                          "(dpfl.papers.kato2024.methods: each method's `hyper`)"},
    }
