"""ULDP-GROUP-k with a silo that record bounding left empty (spec §4 GROUP step 3; seen with TCGA U = 50 zipf
GROUP-2 in 3 of 5 seeds). Opacus semantics: the silo takes no DP-SGD step, so it sends Δ_s = 0, draws no noise and
adds no RDP; it still counts among the S in the server's mean. Before the fix it took one step of pure noise per
epoch (expected batch clamped to 1) and was charged as q = 1 full-batch steps, doubling that seed's ε."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpfl.fl.flat_model import FlatModel
from dpfl.fl.local import dp_sgd
from dpfl.models.nets import build_model
from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves
from dpfl.papers.kato2024.federation import Federation
from dpfl.papers.kato2024.training.rules import round_rule

HYPER = {"eta_g": 2.0, "eta_l": 0.05, "epochs": 2, "clip": 0.5}


def heart_run(silos: list[int], seed: int = 0) -> dict:
    """Heart-shaped records: `silos[s]` records in silo s (0 = an empty silo), one user per record."""
    rng = np.random.default_rng(seed)
    n = sum(silos)
    return {"X": rng.normal(size=(n, 13)).astype(np.float32), "y": (rng.random(n) < 0.5).astype(np.int64),
            "silo": np.repeat(np.arange(len(silos)), silos), "user": np.arange(n) % 7}


def model() -> FlatModel:
    return FlatModel(build_model("heart_logistic", 0), "bce")


def test_dp_sgd_leaves_a_pair_without_records_unchanged_and_draws_nothing_for_it():
    run = heart_run([9, 0, 5])
    with_empty = Federation.build([run], 3, 7, "silo", 4, "cpu")
    without = Federation.build([heart_run([9, 0, 5]) | {"silo": np.where(run["silo"] == 2, 1, run["silo"])}], 2, 7,
                               "silo", 4, "cpu")
    fm = model()
    (b3,), (b2,) = with_empty.buckets, without.buckets
    assert b3.counts.tolist() == [9, 5, 0]  # ordered by count: the empty silo last
    theta = fm.initial()
    out3 = dp_sgd(fm, theta.expand(3, -1), b3, epochs=2, batch=4, lr=0.05, clip=0.5, noise_std=1.0,
                  gen=torch.Generator().manual_seed(3))
    out2 = dp_sgd(fm, theta.expand(2, -1), b2, epochs=2, batch=4, lr=0.05, clip=0.5, noise_std=1.0,
                  gen=torch.Generator().manual_seed(3))
    assert torch.equal(out3[2], theta)  # the empty silo: no step, no noise
    assert torch.equal(out3[:2], out2)  # the others: the same draws as if the empty silo did not exist
    assert not torch.equal(out3[0], theta)


def test_the_server_mean_counts_the_empty_silo_and_its_delta_is_zero():
    method = BY_ID["uldp_group_2"]
    fm = model()
    run = heart_run([9, 0, 5])
    fed = Federation.build([run], 3, 7, "silo", 4, "cpu")
    theta = fm.initial()[None]
    rule = round_rule(method, HYPER, fed, fm, sigma=1.0, batch=4, gen=torch.Generator().manual_seed(5))
    got = rule(theta)
    # by hand: each silo's DP-SGD delta from the same generator, summed, over S = 3 (the empty silo counts)
    local = dp_sgd(fm, theta.expand(3, -1), fed.buckets[0], epochs=2, batch=4, lr=0.05, clip=0.5,
                   noise_std=method.round_noise_std(1.0, 0.5), gen=torch.Generator().manual_seed(5))
    deltas = local - theta
    assert torch.equal(deltas[2], torch.zeros_like(deltas[2]))
    torch.testing.assert_close(got, theta + 2.0 * deltas.sum(0, keepdim=True) / 3, rtol=1e-6, atol=1e-7)


def test_an_empty_silo_adds_no_rdp():
    method = BY_ID["uldp_group_2"]
    kw = dict(batch=4, epochs=2, group_k=2)
    with_empty = epsilon_curves(method, 10, 1.2, 1e-5, silo_records=[9, 0, 5], **kw)
    without = epsilon_curves(method, 10, 1.2, 1e-5, silo_records=[9, 5], **kw)
    for a, b in zip(with_empty, without):
        np.testing.assert_array_equal(a, b)
    # before the fix an empty silo was charged as Q full-batch steps at q = 1 per round: ε far larger
    full_batch = epsilon_curves(method, 10, 1.2, 1e-5, silo_records=[9, 1, 5], **kw)[0]
    assert (full_batch >= with_empty[0]).all() and full_batch[-1] > 1.05 * with_empty[0][-1]
    with pytest.raises(ValueError, match="no silo kept any record"):
        epsilon_curves(method, 10, 1.2, 1e-5, silo_records=[0, 0], **kw)
