"""The certified ε of lowy2023's variants (spec §9, "Accounting of the authors' variants"): the accountant is
evaluated for the noise a variant actually adds and the sensitivity its messages actually have, never the default
mode's ε beside a variant that does not have it. Reference values come from dp-accounting directly."""

from __future__ import annotations

import math
from dataclasses import replace

import dp_accounting
import numpy as np
import pytest

from dpfl.papers.lowy2023.methods import BY_ID
from dpfl.papers.lowy2023.settings import Implementation
from dpfl.privacy.rdp import STANDARD_ORDERS

PAPER = Implementation.paper()
MB, LOCAL = BY_ID["noisy_mb_sgd"], BY_ID["noisy_local_sgd"]
N, K, R, Z = 120, 19, 35, 3.0


def _dp_accounting(event: dp_accounting.DpEvent, count: int, delta: float) -> float:
    acc = dp_accounting.rdp.RdpAccountant(list(STANDARD_ORDERS), dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(event, count)
    return acc.get_epsilon(delta)


def _wor(n: int, k: int, z: float) -> dp_accounting.DpEvent:
    return dp_accounting.SampledWithoutReplacementDpEvent(n, k, dp_accounting.GaussianDpEvent(z))


def test_the_paper_mode_certifies_the_paper_accounting():
    cert = MB.certification(PAPER, n=N, K=K, R=R, clipped=True)
    assert cert.why == "" and cert.z_factor == 1.0
    assert cert.epsilon(Z) == pytest.approx(_dp_accounting(_wor(N, K, Z), R, 1 / N**2), rel=1e-6)


def test_q9_silo_messages_without_noise_certify_infinity():
    impl = replace(PAPER, mb_message="batch_sum", noise_at="server")
    cert = MB.certification(impl, n=N, K=K, R=R, clipped=True)
    assert cert.epsilon(Z) == math.inf and cert.epsilon(1e6) == math.inf
    assert "Q9" in cert.why


def test_unclipped_gradients_certify_infinity():
    cert = LOCAL.certification(PAPER, n=N, K=K, R=R, clipped=False)
    assert cert.epsilon(Z) == math.inf and "not clipped" in cert.why


def test_q7_batch_mean_clipping_is_certified_at_z_over_k_not_the_default():
    """Clipping the batch mean at C bounds one record's effect on the message by 2C, not 2C/K: the same noise is a
    K times smaller multiplier, and the certified ε is far above the default's."""
    impl = replace(PAPER, mb_clip="batch_mean")
    q7 = MB.certification(impl, n=N, K=K, R=R, clipped=True)
    default = MB.certification(PAPER, n=N, K=K, R=R, clipped=True)
    assert q7.z_factor == pytest.approx(1 / K) and "Q7" in q7.why
    assert q7.epsilon(Z) == pytest.approx(_dp_accounting(_wor(N, K, Z / K), R, 1 / N**2), rel=1e-6)
    assert q7.epsilon(Z) > 5 * default.epsilon(Z)


def test_q7_with_q3_claims_no_subsampling_amplification():
    impl = replace(PAPER, mb_clip="batch_mean", batch_sampling="with_replacement")
    cert = MB.certification(impl, n=N, K=K, R=R, clipped=True)
    want = _dp_accounting(dp_accounting.GaussianDpEvent(Z / K), R, 1 / N**2)
    assert cert.epsilon(Z) == pytest.approx(want, rel=1e-6)
    # hand check of the plain Gaussian: RDP(α) = α R / (2 z²), converted at the best order
    z = Z / K
    orders = np.asarray(STANDARD_ORDERS)
    rdp = orders * R / (2 * z**2)
    hand = np.min(rdp + np.log((orders - 1) / orders) - (np.log(1 / N**2) + np.log(orders)) / (orders - 1))
    assert cert.epsilon(Z) == pytest.approx(hand, rel=1e-9)


def test_q3_with_replacement_batches_are_bounded_by_single_draw_steps():
    impl = replace(PAPER, batch_sampling="with_replacement")
    cert = MB.certification(impl, n=N, K=K, R=R, clipped=True)
    assert cert.z_factor == pytest.approx(1 / math.sqrt(K)) and "Q3" in cert.why
    assert cert.epsilon(Z) == pytest.approx(_dp_accounting(_wor(N, 1, Z / math.sqrt(K)), K * R, 1 / N**2), rel=1e-6)


def test_q8_local_sgd_is_certified_for_the_silos_own_n():
    impl = replace(PAPER, local_noise_n="share")
    cert = LOCAL.certification(impl, n=N, K=K, R=R, clipped=True)
    assert "Q8" in cert.why
    assert cert.epsilon(Z) == pytest.approx(_dp_accounting(_wor(N, 1, Z), K * R, 1 / N**2), rel=1e-6)
