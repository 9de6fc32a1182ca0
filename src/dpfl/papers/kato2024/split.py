"""kato2024 per-seed preprocessing (spec §1.1, §1.2): which prepared records are trained on and tested on, and the
feature scaling, for one seed's data RNG. Returned as indices and statistics (small), so an allocation file can
hold them beside its user/silo assignment and every method of the seed reads the same split."""

from __future__ import annotations

import numpy as np


def stratified_split(labels: np.ndarray, test_size: float | int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) indices, sorted: per class, a random ⌈test share⌉ of its records goes to test (scikit-learn's
    StratifiedShuffleSplit sizes: n_test = ⌈test_size·n⌉ in total, split over classes by their shares)."""
    labels = np.asarray(labels)
    n = len(labels)
    n_test = int(test_size) if isinstance(test_size, (int, np.integer)) else int(np.ceil(test_size * n))
    if not 0 < n_test < n:
        raise ValueError(f"test size {test_size} leaves no train or no test records out of {n}")
    classes, counts = np.unique(labels, return_counts=True)
    exact = counts * n_test / n
    per_class = np.floor(exact).astype(int)
    short = n_test - per_class.sum()  # the remainder to the largest fractional parts (ties: lower class first)
    per_class[np.argsort(-(exact - per_class), kind="stable")[:short]] += 1
    test = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:k] for c, k in zip(classes, per_class)])
    mask = np.zeros(n, dtype=bool)
    mask[test] = True
    return np.flatnonzero(~mask), np.flatnonzero(mask)


def creditcard_split(X: np.ndarray, y: np.ndarray, rng: np.random.Generator, test_size: float = 0.15,
                     keep_negatives: float = 0.1) -> dict:
    """§1.1: stratified split (test 15 %), StandardScaler statistics of the train split (all 30 columns, population
    std as scikit-learn), then class 0 of the train split undersampled to ⌊0.1·n₀⌋ without replacement, all train
    frauds kept; the test set is not undersampled. Returns train/test indices into (X, y), mean and scale."""
    train, test = stratified_split(y, test_size, rng)
    mean = X[train].mean(axis=0)
    scale = X[train].std(axis=0)
    scale = np.where(scale == 0, 1.0, scale)  # scikit-learn leaves constant columns unscaled
    neg, pos = train[y[train] == 0], train[y[train] == 1]
    kept = rng.choice(neg, int(np.floor(keep_negatives * len(neg))), replace=False)
    return {"train": np.sort(np.concatenate([kept, pos])), "test": test, "mean": mean, "scale": scale}


def mnist_split(y_train: np.ndarray, y_test: np.ndarray, rng: np.random.Generator) -> dict:
    """§1.2: train and test concatenated (70k) and split again, stratified, with 10,000 test records. Indices refer
    to the concatenation [train; test]; pixels are normalized with mean 0.1307 and std 0.3081 when read."""
    labels = np.concatenate([y_train, y_test])
    train, test = stratified_split(labels, len(y_test), rng)
    return {"train": train, "test": test, "mean": np.array(0.1307), "scale": np.array(0.3081)}
