"""One kato2024 cell: one method (at one sampling rate) on one panel, every seed batched into one set of runs
(spec §7). Reads the prepared dataset and the panel's allocation of every seed, trains with the round rule of
dpfl.papers.kato2024.uldp on the configured device, evaluates on the test set after every round and returns one
row per (seed, round): utility, test loss (mean, and the paper's per-batch sum), ε nominal and certified."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from dpfl.papers.kato2024.layout import parse_cell, panel_of, seed_allocation

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
    return {"X": np.asarray(Xtr[keep], np.float32), "y": ytr[keep].astype(np.float32 if dataset == "tcga_brca" else np.int64),
            "silo": alloc["silo"][keep], "user": alloc["user"][keep],
            "X_test": np.asarray(Xte, np.float32), "y_test": yte}


def subsample(run: dict, share: float, rng: np.random.Generator) -> dict:
    """Each training record kept independently with probability `share` (reduced scales, `train_subsample`), in its
    order, with its silo and user; the test set is untouched."""
    pick = rng.random(len(run["y"])) < share
    return {**run, **{k: run[k][pick] for k in ("X", "y", "silo", "user")}}


def utility(metric: str, out: np.ndarray, y: np.ndarray) -> float:
    from dpfl.models import metrics

    if not np.isfinite(out).all():
        return float("nan")
    if metric == "c_index":
        return metrics.c_index(y[:, 0], out, y[:, 1])
    pred = (out > 0).astype(int) if out.ndim == 1 else out.argmax(axis=1)
    return metrics.balanced_accuracy(y, pred) if metric == "balanced_accuracy" else metrics.accuracy(y, pred)


def evaluate(fm, theta, X_test, y_test, metric: str, eval_batch: int) -> list[dict]:
    """Per run: utility, mean test loss, and the sum of per-batch mean losses at batch `eval_batch` (the paper's
    "test loss", K2). Evaluation mode (no dropout). Equal-sized test sets (every dataset here: the pooled FLamby
    test sets, the seeds' stratified splits) are evaluated in one pass batched over runs."""
    import torch

    from dpfl.fl.local import run_outputs

    same = len({len(x) for x in X_test}) == 1
    outs = run_outputs(fm, theta, torch.stack(X_test)) if same else None
    rows = []
    with torch.no_grad():
        for r in range(theta.shape[0]):
            X, y = X_test[r], y_test[r]
            out = outs[r] if same else run_outputs(fm, theta[r: r + 1], X[None])[0]
            n = len(X)
            if fm.coupled:  # Cox: a batch's rows share one loss
                mask = torch.ones(n, dtype=torch.bool, device=X.device)
                losses = [fm.batch_loss_from_outputs(out[a: a + eval_batch], y[a: a + eval_batch], mask[a: a + eval_batch])
                          for a in range(0, n, eval_batch)]
                loss, batch_sum = float(fm.batch_loss_from_outputs(out, y, mask)), float(torch.stack(losses).sum())
            else:  # per-row losses once; the batch means are means over consecutive blocks
                per_row = fm.row_losses(out, y)
                full = n // eval_batch * eval_batch
                parts = per_row[:full].reshape(-1, eval_batch).mean(dim=1).sum()
                if full < n:
                    parts = parts + per_row[full:].mean()
                loss, batch_sum = float(per_row.mean()), float(parts)
            rows.append({"utility": utility(metric, out.cpu().numpy(), y.cpu().numpy()), "test_loss": loss,
                         "test_loss_batch_sum": batch_sum})
    return rows


def run_cell(job, inputs: dict, log) -> pd.DataFrame:
    import torch

    from dpfl.fl.device import describe, resolve_device
    from dpfl.fl.local import FlatModel
    from dpfl.models.nets import build_model
    from dpfl.papers.kato2024.group import bounding_flags, group_size
    from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves
    from dpfl.papers.kato2024.uldp import Federation, round_fn
    from dpfl.seeds import rng_for

    p = job.params
    panel_id, method_id, q = parse_cell(job.cell)
    panel, method = panel_of(p, panel_id), BY_ID[method_id]
    dataset, task = p["dataset"], TASKS[p["dataset"]]
    hyper = dict(p["hyper"][method.hyper])
    impl = p["implementation"]
    device = resolve_device(job.device)
    seeds = list(p["seeds"])
    S, U, T, B = int(panel["silos"]), int(panel["users"]), int(p["rounds"]), int(p["batch"])
    sigma, delta = float(p["sigma"]), float(p["delta"])

    prepared = dict(np.load(inputs["prepared"][dataset], allow_pickle=False))
    runs, group_ks, kept = [], [], []
    for seed in seeds:
        name = seed_allocation(p, panel, seed)
        alloc = dict(np.load(inputs["allocations"][name], allow_pickle=False))
        d = load_run_data(dataset, prepared, alloc)
        share = float(p.get("train_subsample", 1.0))
        if share < 1.0:  # a reduced scale: a uniform random subset of the seed's training records
            d = subsample(d, share, rng_for(job.seed, "kato2024", dataset, "subsample", share, seed))
        if method.family == "group":
            counts = np.bincount(d["user"], minlength=U)
            k = group_size(method.group, counts)
            flags = bounding_flags(d["user"], d["silo"], S, k, step=task["group_step"])
            group_ks.append(k)
            for key in ("X", "y", "silo", "user"):
                d[key] = d[key][flags]
        kept.append(np.bincount(d["silo"], minlength=S))
        runs.append(d)
    level = "user" if method.family in ("avg", "sgd") else "silo"
    fed = Federation.build(runs, S, U, level, B, device, chunk=p.get("pair_chunk"))
    log(f"{panel_id}/{method.label}{'' if q is None else f' q={q}'}: {len(seeds)} seeds, {len(fed.run)} pairs in "
        f"{len(fed.buckets)} buckets, U={U}, S={S}, T={T}, device {describe(device)}")

    fm = FlatModel(build_model(task["model"], seeds[0]), task["loss"])
    fm.module.to(device)
    theta = torch.stack([FlatModel(build_model(task["model"], s), task["loss"]).initial() for s in seeds]).to(device)
    key = rng_for(job.seed, "kato2024", "train", dataset, panel["distribution"], U, S, method.id,
                  -1.0 if q is None else q, *seeds)
    seed_int = int(key.integers(2**62))
    gen = torch.Generator(device=device).manual_seed(seed_int)
    step = round_fn(method, hyper, fed, fm, sigma=sigma, batch=B, gen=gen, q=1.0 if q is None else q,
                    sgd_gradient=impl["sgd_gradient"])
    X_test = [torch.as_tensor(d["X_test"], device=device) for d in runs]
    y_test = [torch.as_tensor(d["y_test"], device=device) for d in runs]

    rows, failed = [], np.zeros(len(seeds), dtype=bool)
    start = time.perf_counter()
    for t in range(1, T + 1):
        new = step(theta)
        ok = torch.isfinite(new).all(dim=1)
        theta = torch.where(ok[:, None], new, theta)  # a failed run stays at its last valid model
        evals = evaluate(fm, theta, X_test, y_test, task["metric"], int(p["eval_batch"]))
        for r, seed in enumerate(seeds):
            e = evals[r]
            failed[r] |= (not bool(ok[r])) or not math.isfinite(e["test_loss"])
            if failed[r]:
                e = {k: float("nan") for k in e}
            rows.append({"seed": seed, "round": t, **e, "failed": bool(failed[r])})
        if t == 1 or t % max(1, T // 10) == 0 or t == T:
            mean_u = np.nanmean([e["utility"] for e in evals]) if not failed.all() else float("nan")
            log(f"round {t}/{T}: mean utility {mean_u:.4f}, {time.perf_counter() - start:.1f} s"
                + (f", {int(failed.sum())} failed run(s)" if failed.any() else ""))
    loop_seconds = time.perf_counter() - start  # the round loop alone (the accounting below runs once per cell)
    df = pd.DataFrame(rows)
    eps_cols = []
    for r, seed in enumerate(seeds):
        nominal, certified = epsilon_curves(
            method, T, sigma, delta, q=1.0 if q is None else q, silo_records=kept[r], batch=B,
            epochs=int(hyper.get("epochs") or 1), group_k=group_ks[r] if group_ks else 1,
            group_orders=impl["group_orders"], group_parallel=impl["group_parallel"],
            group_conversion=impl.get("group_conversion", "rdp"))
        eps_cols.append(pd.DataFrame({"seed": seed, "round": np.arange(1, T + 1), "eps": nominal,
                                      "eps_certified": certified}))
    df = df.merge(pd.concat(eps_cols), on=["seed", "round"])
    df.insert(0, "panel", panel_id)
    df.insert(1, "method", method.id)
    df.insert(2, "label", method.label if q is None else f"{method.label} (q={q:g})")
    df.insert(3, "q", 1.0 if q is None else q)
    df["users"], df["silos"], df["distribution"] = U, S, panel["distribution"]
    df["group_k"] = [group_ks[seeds.index(s)] if group_ks else np.nan for s in df["seed"]]
    df["multiplier_used"] = method.multiplier_used(sigma) if method.private else np.nan
    df["seconds_per_round"] = loop_seconds / T
    df["device"] = describe(device)
    df["metric"] = task["metric"]
    return df

