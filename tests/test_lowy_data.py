"""lowy2023 data: the silo allocation is exactly as specified (sizes, order, labels), and per-trial
splits and standardization follow spec §1."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pathlib import Path

from dpfl import config
from dpfl.papers.lowy2023.cell import local_steps
from dpfl.papers.lowy2023.methods import BY_ID
from dpfl.papers.lowy2023.settings import Implementation
from dpfl.papers.lowy2023.split import even_odd_pairs, trial_data

MNIST_PER_DIGIT = 774
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cfg():
    return config.load(ROOT)


def impl(cfg, figure: str = "fig4", mode: str = "none") -> Implementation:
    """The `implementation` settings a figure runs with (the paper's, or the authors' code's)."""
    return Implementation.from_params(cfg.figure_params("lowy2023", figure, mode))


PAPER = Implementation.paper()
AUTHORS_MNIST = dataclasses.replace(PAPER, mnist_silos="bootstrap_fixed_split", lipschitz="data_silo1")
AUTHORS_OBESITY = dataclasses.replace(PAPER, lipschitz=20.0, class_silo_sampling="with_replacement")


def mnist_pool(arrays, log):
    return even_odd_pairs(arrays, {"pca_components": 50, "per_digit": MNIST_PER_DIGIT}, log)


@pytest.fixture(scope="module")
def fake_mnist():
    """Tiny MNIST-shaped arrays: 800 images per digit, digit d drawn around its own mean image."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 800)
    rng.shuffle(labels)
    means = rng.integers(0, 200, size=(10, 28, 28))
    images = np.clip(means[labels] + rng.integers(0, 55, size=(len(labels), 28, 28)), 0, 255).astype(np.uint8)
    return {"x_train": images, "y_train": labels}


def test_mnist_pool_has_25_even_odd_silos_in_order(fake_mnist):
    pool = mnist_pool(fake_mnist, log=lambda *_: None)
    assert pool["X"].shape == (25, 2 * MNIST_PER_DIGIT, 50)
    expected = [(e, o) for e in (0, 2, 4, 6, 8) for o in (1, 3, 5, 7, 9)]
    assert [tuple(p) for p in pool["pairs"]] == expected
    assert np.all(pool["y"][:, :MNIST_PER_DIGIT] == 1) and np.all(pool["y"][:, MNIST_PER_DIGIT:] == 0)
    # silo (0, 1) and silo (0, 3) share the first 774 zeros, in dataset order
    np.testing.assert_array_equal(pool["X"][0, :MNIST_PER_DIGIT], pool["X"][1, :MNIST_PER_DIGIT])
    # PCA is centred: the 50 components of all 8000 training images average to 0 (checked via a silo mean bound)
    assert abs(pool["X"].mean()) < 5


def test_mnist_trial_split_sizes(fake_mnist):
    pool = mnist_pool(fake_mnist, log=lambda *_: None)
    t = trial_data("mnist", pool, 25, np.random.default_rng(1), PAPER)
    assert t.train.counts.tolist() == [1238] * 25 and len(t.y_test) == 25 * 310
    assert t.lipschitz == pytest.approx(2 * np.linalg.norm(t.train.pooled_X, axis=1).max())
    assert local_steps(t.n_for_K, max([0.75, 1.5, 3, 6, 12, 18]), 35) == 443  # ⌊1238·sqrt(18/140)⌋


def fake_insurance(seed=0):
    rng = np.random.default_rng(seed)
    n = 1338
    X = np.column_stack([rng.integers(18, 65, n), rng.integers(0, 2, n), rng.normal(30, 6, n),
                         rng.integers(0, 5, n), rng.integers(0, 2, n), rng.integers(0, 4, n)]).astype(float)
    y = rng.lognormal(9, 0.9, n)
    return {"X": X, "y": y}


@pytest.mark.parametrize("N,sizes", [(10, [134] * 9 + [132]), (5, [268] * 4 + [266]), (3, [446] * 3),
                                     (15, [90] * 14 + [78])])
def test_insurance_silos_are_contiguous_ranges_of_sorted_charges(N, sizes):
    src = fake_insurance()
    t = trial_data("insurance", src, N, np.random.default_rng(2), PAPER)
    test_sizes = [math.ceil(0.2 * s) for s in sizes]
    assert t.train.counts.tolist() == [s - ts for s, ts in zip(sizes, test_sizes)]
    assert len(t.y_test) == sum(test_sizes)
    # silo i's charges all lie below silo i+1's
    for s in range(N - 1):
        assert t.train.y[s, : t.train.counts[s]].max() <= t.train.y[s + 1, : t.train.counts[s + 1]].min()
    # features [1, age, sex, bmi, children, smoker, region]; age and bmi standardized per silo (ddof = 1)
    X0 = t.train.X[0, : t.train.counts[0]]
    assert np.all(X0[:, 0] == 1)
    for col in (1, 3):
        assert X0[:, col].mean() == pytest.approx(0, abs=1e-12) and X0[:, col].std(ddof=1) == pytest.approx(1)
    assert t.naive_mse == pytest.approx(np.mean((t.y_test - t.train.pooled_y.mean()) ** 2))
    assert t.n_for_K == sizes[0]


def test_obesity_silos_are_balanced_classes():
    rng = np.random.default_rng(3)
    columns = np.array(["Gender", "Age", "Height", "Weight", "family_history_with_overweight", "FAVC", "FCVC", "NCP",
                        "CAEC", "SMOKE", "CH2O", "SCC", "FAF", "TUE", "CALC", "MTRANS"])
    n = 2111
    X = rng.normal(size=(n, 16)) * 3 + 10
    y = rng.integers(0, 7, n)
    t = trial_data("obesity", {"X": X, "y": y, "columns": columns}, 7, rng, PAPER)
    n_min = t.train.counts[0]
    assert t.train.counts.tolist() == [n_min] * 7 and t.n_for_K == n_min
    for k in range(7):
        assert np.all(t.train.y[k, :n_min] == k)
    assert t.train.dim == 17 and np.all(t.train.X[:, :n_min, -1] == 1)
    assert len(t.y_test) == math.ceil(0.2 * n)


def test_authors_code_mnist_silos_bootstrap_with_a_fixed_split(fake_mnist):
    pool = mnist_pool(fake_mnist, log=lambda *_: None)
    fixed = lambda: np.random.default_rng(99)  # noqa: E731  (a fresh, identical stream each trial)
    a = trial_data("mnist", pool, 25, np.random.default_rng(1), AUTHORS_MNIST, fixed_rng=fixed())
    b = trial_data("mnist", pool, 25, np.random.default_rng(2), AUTHORS_MNIST, fixed_rng=fixed())
    assert a.train.counts.tolist() == [1238] * 25 and len(a.y_test) == 25 * 310
    # bootstrap: some pool images repeat within a silo; the trials differ
    assert len(np.unique(a.train.X[0, :1238], axis=0)) < 1238
    assert not np.array_equal(a.train.X, b.train.X)
    # Q4: L from silo index 1 only
    assert a.lipschitz == pytest.approx(2 * np.linalg.norm(a.train.X[1, :1238], axis=1).max())


def test_authors_code_obesity_resamples_with_replacement_and_fixes_L():
    rng = np.random.default_rng(4)
    columns = np.array(["Gender", "Age", "Height", "Weight", "family_history_with_overweight", "FAVC", "FCVC", "NCP",
                        "CAEC", "SMOKE", "CH2O", "SCC", "FAF", "TUE", "CALC", "MTRANS"])
    X, y = rng.normal(size=(2111, 16)), rng.integers(0, 7, 2111)
    t = trial_data("obesity", {"X": X, "y": y, "columns": columns}, 7, rng, AUTHORS_OBESITY)
    assert t.lipschitz == 20.0
    assert any(len(np.unique(t.train.X[k, : t.train.counts[k]], axis=0)) < t.train.counts[k] for k in range(7))


def test_authors_code_settings_follow_the_spec(cfg):
    """The authors-code `implementation` settings in config/papers/lowy2023.yaml give each MB-SGD variant of spec
    §9; the default (paper) settings give the paper's algorithm; Local SGD is never changed."""
    paper = {"aggregation": "mean", "batch": "mean", "noise_at": "silo", "clip": "example"}
    for figure in ("fig4", "fig5", "fig6", "fig7", "fig8", "fig9"):
        assert BY_ID["noisy_mb_sgd"].settings_overrides(impl(cfg, figure)) == paper
        assert BY_ID["noisy_local_sgd"].settings_overrides(impl(cfg, figure, "authors-code")) == {}
    for figure in ("fig4", "fig7"):  # Q2
        assert (BY_ID["noisy_mb_sgd"].settings_overrides(impl(cfg, figure, "authors-code"))
                == {**paper, "aggregation": "sum"})
    for figure in ("fig5", "fig8", "fig9"):  # Q2, Q7
        ac = impl(cfg, figure, "authors-code")
        assert BY_ID["noisy_mb_sgd"].settings_overrides(ac) == {**paper, "aggregation": "sum", "clip": "batch_mean"}
        assert BY_ID["mb_sgd"].settings_overrides(ac) == {**paper, "aggregation": "sum", "clip": "batch_mean_other"}
        assert ac.local_noise_n == "share"  # Q8
    ac = impl(cfg, "fig6", "authors-code")  # Q9, Q10
    assert BY_ID["noisy_mb_sgd"].settings_overrides(ac) == {**paper, "batch": "sum", "noise_at": "server"}
    assert ac.lipschitz == 20 and ac.class_silo_sampling == "with_replacement"
    for figure in ("fig4", "fig5", "fig6"):  # Q3
        assert impl(cfg, figure, "authors-code").batch_sampling == "with_replacement"
