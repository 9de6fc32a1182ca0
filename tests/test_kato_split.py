"""kato2024 per-seed preprocessing (spec §1.1, §1.2): stratified split sizes, scaling statistics from the train
split only, undersampling of the train negatives, determinism per seed."""

from __future__ import annotations

import numpy as np
import pytest

from dpfl.papers.kato2024.split import creditcard_split, mnist_split, stratified_split


def fake_creditcard(n=20000, frauds=40, seed=0):
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=int)
    y[rng.choice(n, frauds, replace=False)] = 1
    return rng.normal(size=(n, 30)) * 3 + 1, y


def test_stratified_split_sizes_and_shares():
    y = np.array([0] * 90 + [1] * 10)
    train, test = stratified_split(y, 0.15, np.random.default_rng(1))
    assert len(test) == 15 and len(train) == 85 and len(np.intersect1d(train, test)) == 0
    assert (y[test] == 1).sum() in (1, 2)  # 10 % of 15 = 1.5: one class gets the rounding
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(100))
    with pytest.raises(ValueError, match="no train or no test"):
        stratified_split(y, 0.0, np.random.default_rng(1))


def test_creditcard_preprocessing():
    X, y = fake_creditcard()
    out = creditcard_split(X, y, np.random.default_rng(3))
    n_test = int(np.ceil(0.15 * len(y)))
    assert len(out["test"]) == n_test and y[out["test"]].sum() == round(0.15 * 40)  # frauds stratified
    test_set = set(out["test"].tolist())
    assert not test_set & set(out["train"].tolist())
    train_all = np.setdiff1d(np.arange(len(y)), out["test"])
    n_neg = int((y[train_all] == 0).sum())
    assert (y[out["train"]] == 0).sum() == int(np.floor(0.1 * n_neg))  # negatives undersampled to ⌊0.1·n₀⌋
    assert (y[out["train"]] == 1).sum() == (y[train_all] == 1).sum()  # every train fraud kept
    # scaling statistics come from the whole train split (before undersampling), population std
    np.testing.assert_allclose(out["mean"], X[train_all].mean(axis=0))
    np.testing.assert_allclose(out["scale"], X[train_all].std(axis=0))
    again = creditcard_split(X, y, np.random.default_rng(3))
    assert all(np.array_equal(out[k], again[k]) for k in out)
    assert not np.array_equal(out["test"], creditcard_split(X, y, np.random.default_rng(4))["test"])


def test_mnist_resplit_is_60k_10k_stratified():
    rng = np.random.default_rng(0)
    y_train, y_test = rng.integers(0, 10, 60000), rng.integers(0, 10, 10000)
    out = mnist_split(y_train, y_test, np.random.default_rng(5))
    assert len(out["train"]) == 60000 and len(out["test"]) == 10000
    labels = np.concatenate([y_train, y_test])
    share_all = np.bincount(labels, minlength=10) / len(labels)
    share_test = np.bincount(labels[out["test"]], minlength=10) / 10000
    assert np.abs(share_all - share_test).max() < 1e-3
