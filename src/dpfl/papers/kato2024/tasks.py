"""What a kato2024 cell of either family (training, Figs 4-10; protocol, Fig 11) trains on, per dataset: the model
of spec §3, its loss and utility metric (`TASKS`), and a seed's training and test records (`load_run_data`)."""

from __future__ import annotations

import numpy as np

#: per dataset: the model of spec §3, its loss, the utility metric (named for what it computes), the records per
#: (user, silo) GROUP's bounding allocates at a time (TCGA: 2, the Cox loss needs pairs)
TASKS = {
    "creditcard": {"model": "creditcard_mlp", "loss": "ce", "metric": "balanced_accuracy", "group_step": 1},
    "mnist": {"model": "mnist_cnn", "loss": "nll", "metric": "accuracy", "group_step": 1},
    "heart_disease": {"model": "heart_logistic", "loss": "bce", "metric": "accuracy", "group_step": 1},
    "tcga_brca": {"model": "tcga_cox", "loss": "cox", "metric": "c_index", "group_step": 2},
}


def load_run_data(dataset: str, prepared: dict, alloc: dict) -> dict:
    """Training records (in the silos' local order: the allocation's order) with silo and user, and the test set,
    of one seed. Creditcard: the seed's scaling; MNIST: normalized pixels; Heart: per-centre z-scores (train) and
    pooled ones (test); TCGA: raw covariates, y = (T, E)."""
    rec = alloc["record"]
    keep = alloc["train_mask"].astype(bool)
    if dataset == "creditcard":
        X = (prepared["X"] - alloc["mean"]) / alloc["scale"]
        y = prepared["y"]
        test = alloc["test"]
        Xtr, ytr, Xte, yte = X[rec], y[rec], X[test], y[test]
    elif dataset == "mnist":
        X = np.concatenate([prepared["x_train"], prepared["x_test"]]).astype(np.float32) / 255.0
        X = (X - float(alloc["mean"])) / float(alloc["scale"])
        y = np.concatenate([prepared["y_train"], prepared["y_test"]])
        Xtr, ytr, Xte, yte = X[rec], y[rec], X[alloc["test"]], y[alloc["test"]]
    elif dataset == "heart_disease":
        pos = np.cumsum(prepared["train"]) - 1  # row of X_train_std for every training record
        Xtr, ytr = prepared["X_train_std"][pos[rec]], prepared["y"][rec]
        Xte, yte = prepared["X_test_std"], prepared["y_test"]
    elif dataset == "tcga_brca":
        X = prepared["X"]
        y = np.stack([prepared["T"], prepared["E"]], axis=1)
        test = np.flatnonzero(~prepared["train"])
        Xtr, ytr, Xte, yte = X[rec], y[rec], X[test], y[test]
    else:
        raise ValueError(f"kato2024 has no task for dataset {dataset!r}; known: {', '.join(TASKS)}")
    y_type = np.float32 if dataset == "tcga_brca" else np.int64
    return {"X": np.asarray(Xtr[keep], np.float32), "y": ytr[keep].astype(y_type),
            "silo": alloc["silo"][keep], "user": alloc["user"][keep],
            "X_test": np.asarray(Xte, np.float32), "y_test": yte}
