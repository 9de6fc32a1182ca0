"""lowy2023 data (spec §1): the MNIST (even, odd) silo pool (a configured allocation, computed once) and each
trial's silos and pooled test set."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from dpfl.fl.data import SiloData
from dpfl.papers.lowy2023.settings import Implementation

EVENS, ODDS = (0, 2, 4, 6, 8), (1, 3, 5, 7, 9)
OBESITY_STANDARDIZE = ("Age", "Height", "Weight", "CH2O", "TUE")


def even_odd_pairs(arrays: dict, params: dict, log=print) -> dict:
    """The 25 (even, odd) silos of 2·per_digit PCA images each (spec §1.1). PCA (centred, not whitened, full SVD)
    is fitted on all 60,000 training images scaled to [0, 1]; each digit contributes its first `per_digit` images
    (774 = ⌊5421/7⌋: 1/7 of the rarest digit's count, so every digit contributes equally)."""
    from sklearn.decomposition import PCA

    per_digit = params["per_digit"]
    x = arrays["x_train"].reshape(len(arrays["x_train"]), -1).astype(np.float64) / 255.0
    labels = arrays["y_train"]
    log(f"PCA-{params['pca_components']} of {x.shape[0]} × {x.shape[1]} MNIST training images")
    feats = PCA(n_components=params["pca_components"], svd_solver="full").fit_transform(x)
    by_digit = {d: feats[np.flatnonzero(labels == d)[:per_digit]] for d in range(10)}
    X, y, pairs = [], [], []
    for e, o in itertools.product(EVENS, ODDS):
        X.append(np.concatenate([by_digit[e], by_digit[o]]))
        y.append(np.concatenate([np.ones(per_digit), np.zeros(per_digit)]))
        pairs.append((e, o))
    return {"X": np.stack(X), "y": np.stack(y), "pairs": np.array(pairs)}


def _split(n: int, rng: np.random.Generator, test_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Random train/test split; the test part has ⌈0.2·n⌉ rows (scikit-learn's rounding)."""
    perm = rng.permutation(n)
    n_test = math.ceil(test_fraction * n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


@dataclass
class TrialData:
    train: SiloData
    X_test: np.ndarray
    y_test: np.ndarray
    lipschitz: float  # L from the data (MNIST, obesity); insurance uses the clip grid instead
    naive_mse: float  # insurance: MSE of predicting the pooled training mean
    n_for_K: int  # the n in K = ⌊n·sqrt(ε_max/(4R))⌋ (spec §5 table)


def _lipschitz(train: SiloData, rule) -> float:
    """L = 2·max‖x‖ over the training rows (`data`), over silo index 1 only (`data_silo1`, Q5), or a number (Q10)."""
    if rule == "data":
        return 2 * float(np.max(train.norms))
    if rule == "data_silo1":
        return 2 * float(np.max(train.norms[1]))
    return float(rule)


def trial_data(experiment: str, source: dict, n_silos: int, rng: np.random.Generator, impl: Implementation,
               fixed_rng: np.random.Generator | None = None) -> TrialData:
    """One trial's silos and pooled test set, from the experiment's prepared source arrays.

    `impl` (the figure's `implementation` settings, dpfl.papers.lowy2023.settings.Implementation): mnist_silos
    `per_trial_split` (paper) or `bootstrap_fixed_split` (Q4: silos bootstrap their pool each trial and split it at
    positions fixed across trials, drawn from `fixed_rng`); class_silo_sampling (obesity, Q10); lipschitz (Q5,
    Q10)."""
    if experiment == "mnist":
        bootstrap = impl.mnist_silos == "bootstrap_fixed_split"
        Xs, ys, Xt, yt = [], [], [], []
        fixed = _split(source["X"].shape[1], fixed_rng) if bootstrap else None
        for X, y in zip(source["X"][:n_silos], source["y"][:n_silos]):
            if bootstrap:
                boot = rng.integers(0, len(X), len(X))  # 1548 draws with replacement: train and test may share images
                X, y = X[boot], y[boot]
                tr, te = fixed
            else:
                tr, te = _split(len(X), rng)
            Xs.append(X[tr]), ys.append(y[tr]), Xt.append(X[te]), yt.append(y[te])
        train = SiloData.from_lists(Xs, ys)
        L = _lipschitz(train, impl.lipschitz)
        return TrialData(train, np.concatenate(Xt), np.concatenate(yt), L, np.nan, int(train.counts.max()))
    if experiment == "insurance":
        X, y = source["X"], source["y"]
        order = np.argsort(y, kind="stable")
        per = math.ceil(len(y) / n_silos)
        Xs, ys, Xt, yt = [], [], [], []
        for s in range(n_silos):
            rows = order[s * per : (s + 1) * per]
            tr, te = _split(len(rows), rng)
            Xtr, Xte = X[rows[tr]].copy(), X[rows[te]].copy()
            for col in (0, 2):  # age, bmi: standardized with this silo's training mean and std (ddof = 1)
                mu, sd = Xtr[:, col].mean(), Xtr[:, col].std(ddof=1)
                Xtr[:, col], Xte[:, col] = (Xtr[:, col] - mu) / sd, (Xte[:, col] - mu) / sd
            Xs.append(np.column_stack([np.ones(len(tr)), Xtr])), ys.append(y[rows[tr]])
            Xt.append(np.column_stack([np.ones(len(te)), Xte])), yt.append(y[rows[te]])
        train = SiloData.from_lists(Xs, ys)
        y_test = np.concatenate(yt)
        naive = float(np.mean((y_test - train.pooled_y.mean()) ** 2))
        return TrialData(train, np.concatenate(Xt), y_test, np.nan, naive, per)
    if experiment == "obesity":
        X, y, columns = source["X"], source["y"], list(source["columns"])
        tr, te = _split(len(y), rng)
        Xtr, Xte = X[tr].copy(), X[te].copy()
        for name in OBESITY_STANDARDIZE:
            c = columns.index(name)
            mu, sd = Xtr[:, c].mean(), Xtr[:, c].std(ddof=1)
            Xtr[:, c], Xte[:, c] = (Xtr[:, c] - mu) / sd, (Xte[:, c] - mu) / sd
        Xtr, Xte = np.column_stack([Xtr, np.ones(len(tr))]), np.column_stack([Xte, np.ones(len(te))])
        ytr = y[tr]
        n_min = int(min(np.sum(ytr == k) for k in range(n_silos)))
        replace = impl.class_silo_sampling == "with_replacement"
        Xs, ys = [], []
        for k in range(n_silos):  # silo k = the training rows of class k, reduced to n_min at random
            rows = rng.choice(np.flatnonzero(ytr == k), n_min, replace=replace)
            Xs.append(Xtr[np.sort(rows)]), ys.append(ytr[np.sort(rows)])
        train = SiloData.from_lists(Xs, ys)
        return TrialData(train, Xte, y[te], _lipschitz(train, impl.lipschitz), np.nan, n_min)
    raise ValueError(f"unknown lowy2023 experiment {experiment!r}; expected mnist, insurance or obesity")
