"""kato2024 models and metrics (spec §3): parameter counts, seeded init, the Cox partial likelihood and the C-index
against hand-computed values, balanced accuracy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from dpfl.models.metrics import balanced_accuracy, c_index, cox_partial_likelihood
from dpfl.models.nets import build_model, parameter_count


@pytest.mark.parametrize("name, count", [("creditcard_mlp", 5012), ("mnist_cnn", 21840), ("heart_logistic", 14),
                                         ("tcga_cox", 40)])
def test_parameter_counts(name, count):
    assert parameter_count(build_model(name, seed=0)) == count


def test_seeded_init_is_reproducible_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = build_model("creditcard_mlp", seed=7)
    after = torch.rand(3)
    b = build_model("creditcard_mlp", seed=7)
    assert torch.equal(before, after)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(next(build_model("creditcard_mlp", seed=8).parameters()), next(a.parameters()))
    with pytest.raises(ValueError, match="unknown model 'mlp'"):
        build_model("mlp", seed=0)


def test_model_outputs():
    x = torch.randn(4, 30)
    assert build_model("creditcard_mlp", 0).eval()(x).shape == (4, 2)
    out = build_model("mnist_cnn", 0).eval()(torch.randn(3, 784))
    assert out.shape == (3, 10) and torch.allclose(out.exp().sum(dim=1), torch.ones(3))
    assert build_model("tcga_cox", 0)(torch.randn(5, 39)).shape == (5,)


def test_cox_partial_likelihood_by_hand():
    # times 5, 3, 1 (already descending), events 1, 0, 1; scores 0.2, -0.1, 0.5
    s = torch.tensor([-0.1, 0.5, 0.2], dtype=torch.float64)  # given in another order: T = 3, 1, 5
    t = torch.tensor([3.0, 1.0, 5.0], dtype=torch.float64)
    e = torch.tensor([0, 1, 1])
    # sorted by T descending: (5: s=0.2, E=1), (3: s=-0.1, E=0), (1: s=0.5, E=1)
    ss = [0.2, -0.1, 0.5]
    want = -(1 / 3) * ((ss[0] - math.log(math.exp(ss[0])))
                       + (ss[2] - math.log(sum(math.exp(v) for v in ss))))
    assert cox_partial_likelihood(s, t, e).item() == pytest.approx(want, rel=1e-12)
    # invariant to adding a constant to every score (the max is subtracted for stability)
    assert cox_partial_likelihood(s + 50, t, e).item() == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="at least 2"):
        cox_partial_likelihood(s[:1], t[:1], e[:1])


def naive_c_index(t, r, e):
    """lifelines' naive definition, pair by pair (predictions = −risk)."""
    pred = -np.asarray(r)
    pairs = correct = ties = 0.0
    for a, b in itertools.combinations(range(len(t)), 2):
        if t[a] == t[b]:
            valid = e[a] != e[b]
        else:
            valid = (e[a] and e[b]) or (e[a] and t[a] < t[b]) or (e[b] and t[b] < t[a])
        if not valid:
            continue
        pairs += 1
        if pred[a] == pred[b]:
            ties += 1
        elif pred[a] < pred[b]:
            correct += (t[a] < t[b]) or (t[a] == t[b] and e[a] and not e[b])
        else:
            correct += (t[a] > t[b]) or (t[a] == t[b] and not e[a] and e[b])
    return (correct + 0.5 * ties) / pairs


def test_c_index_by_hand_and_against_the_pairwise_definition():
    # perfect ranking: earlier events have higher risk
    assert c_index([1, 2, 3, 4], [4, 3, 2, 1], [1, 1, 1, 1]) == 1.0
    assert c_index([1, 2, 3, 4], [1, 2, 3, 4], [1, 1, 1, 1]) == 0.0
    # hand example with censoring and a tie: pairs (1,2), (1,3) comparable (t=1 event); (2,3): 2 censored -> no
    assert c_index([1, 2, 3], [0.5, 0.5, 0.1], [1, 0, 0]) == pytest.approx((0.5 + 1) / 2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = 15
        t = rng.integers(1, 6, n).astype(float)  # many tied times
        e = rng.random(n) < 0.6
        r = np.round(rng.normal(size=n), 1)  # some tied risks
        if e.any():
            assert c_index(t, r, e) == pytest.approx(naive_c_index(t, r, e), rel=1e-12)


def test_balanced_accuracy():
    y = np.array([1, 1, 0, 0, 0, 0])
    assert balanced_accuracy(y, np.array([1, 0, 0, 0, 0, 1])) == pytest.approx((0.5 + 0.75) / 2)
    assert balanced_accuracy(y, np.zeros(6)) == 0.5  # predicting the majority class scores chance
    with pytest.raises(ValueError, match="both classes"):
        balanced_accuracy(np.zeros(3), np.zeros(3))
