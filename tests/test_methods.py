"""The privacy contract of every registered private method (dpfl.fl.methods), one parametrized test each:

- the noise its own update injects has std = z × sensitivity(clip), z being the multiplier its accounting uses
  (dropping or changing the factor between them fails here);
- `sensitivity` really bounds a one-record replacement of the released query, and is attained;
- under `accountant` calibration the certified ε is at most the target, and equals dp-accounting's ε for the
  mechanism and steps the method declares.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfl.fl.methods import GlmProbeMethod
from dpfl.models.glm import GLM
from dpfl.papers import load_methods
from dpfl.privacy.calibration import noise_level

PRIVATE = sorted(m.id for m in load_methods().values() if m.private)
#: record-level methods whose released quantity the tests below recompute on a GLM (dpfl.fl.methods.GlmProbeMethod);
#: user-level methods (kato2024) are checked on their own engine in tests/test_kato_methods.py
PROBED = sorted(m.id for m in load_methods().values() if m.private and isinstance(m, GlmProbeMethod))


def method(mid):
    return load_methods()[mid]


def test_every_paper_with_training_registers_methods():
    assert {"noisy_mb_sgd", "noisy_local_sgd"} <= set(PRIVATE)
    assert all(not m.private for m in load_methods().values() if m.id not in PRIVATE)


@pytest.mark.parametrize("mid", PROBED)
@pytest.mark.parametrize("z, clip", [(0.8, 1.0), (2.5, 0.3)])
def test_injected_noise_std_is_multiplier_times_sensitivity(mid, z, clip):
    m = method(mid)
    sizes = dict(m.probe_sizes)
    samples = m.noise_probe(GLM("linear"), 3, z, clip, sizes, 3000, np.random.default_rng(7))
    want = z * m.sensitivity(clip)
    # std of 9000 Gaussian draws: relative standard error ≈ 1/sqrt(2·9000) ≈ 0.75 %
    assert samples.std() == pytest.approx(want, rel=0.04)
    assert abs(samples.mean()) < 4 * want / math.sqrt(samples.size)


@pytest.mark.parametrize("mid", PROBED)
@pytest.mark.parametrize("kind", ["logistic", "linear", "softmax"])
def test_sensitivity_bounds_and_is_attained_by_one_replacement(mid, kind):
    m = method(mid)
    rng = np.random.default_rng(3)
    model = GLM(kind, classes=3 if kind == "softmax" else 1)
    n, d, clip = 12, 4, 0.7
    X = rng.normal(size=(n, d)) * 5  # large features: clipping is active
    y = rng.integers(0, 3, n).astype(float) if kind == "softmax" else (rng.random(n) < 0.5).astype(float)
    W = rng.normal(size=(d, model.out_dim)) * 0.1
    base = m.query(model, X, y, W, clip)
    worst = 0.0
    for _ in range(200):  # random replacements never exceed the bound
        X2, y2 = X.copy(), y.copy()
        X2[0] = rng.normal(size=d) * 10
        y2[0] = rng.integers(0, 3) if kind == "softmax" else float(rng.random() < 0.5)
        worst = max(worst, np.linalg.norm(m.query(model, X2, y2, W, clip) - base))
    assert worst <= m.sensitivity(clip) * (1 + 1e-12)
    # the bound is attained: at W = 0 (and y fixed), replacing x by −x flips the record's gradient
    W0 = np.zeros_like(W)
    X3 = X.copy()
    X3[0] = -X[0]
    gap = np.linalg.norm(m.query(model, X3, y, W0, clip) - m.query(model, X, y, W0, clip))
    assert gap == pytest.approx(m.sensitivity(clip), rel=1e-9)


@pytest.mark.parametrize("mid", PRIVATE)
@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_accountant_calibration_certifies_the_target(mid, eps):
    import dp_accounting
    from dp_accounting import rdp

    from dpfl.privacy.rdp import STANDARD_ORDERS, epsilon

    m = method(mid)
    acc = m.accounting(**dict(m.probe_sizes))
    level = noise_level(acc, eps, 1.0, "accountant")
    assert level.eps_certified <= eps * (1 + 1e-9)
    assert level.eps_certified >= 0.9 * eps  # the smallest such multiplier, not an arbitrary large one
    assert level.eps_certified == pytest.approx(epsilon(acc.mechanism, level.z_used, acc.steps, acc.delta))
    # the same number from dp-accounting's own accountant, for the mechanism the method declares
    mech = acc.mechanism
    relation = {"replace": dp_accounting.NeighboringRelation.REPLACE_ONE,
                "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE}[m.neighbouring]
    event = rdp.RdpAccountant(list(STANDARD_ORDERS), neighboring_relation=relation)
    event.compose(_dp_event(mech, level.z_used), acc.steps)
    # Poisson sampling: dpfl evaluates fractional orders with Opacus's formula, dp-accounting with its own series
    # (both upper bounds; they differ in the 5th digit)
    assert event.get_epsilon(acc.delta) == pytest.approx(level.eps_certified,
                                                         rel=1e-4 if mech.sampling == "poisson" else 1e-6)


def _dp_event(mech, z):
    """The dp-accounting event of the declared mechanism, written out here (not through dpfl's own mapping)."""
    import dp_accounting

    gaussian = dp_accounting.GaussianDpEvent(z)
    if mech.sampling == "none" or (mech.sampling == "without_replacement" and mech.batch_size == mech.population):
        return gaussian
    if mech.sampling == "poisson":
        return dp_accounting.PoissonSampledDpEvent(mech.q, gaussian)
    assert mech.sampling == "without_replacement"
    return dp_accounting.SampledWithoutReplacementDpEvent(mech.population, mech.batch_size, gaussian)
