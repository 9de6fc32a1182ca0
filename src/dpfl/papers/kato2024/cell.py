"""One kato2024 cell: one method (at one sampling rate) on one panel, every seed batched into one set of runs
(spec §7). Reads the prepared dataset and the panel's allocation of every seed, trains with the round rule of
dpfl.papers.kato2024.uldp (the method family's round rule, chosen once) in the round loop of dpfl.fl.engine on the
configured device, evaluates on the test set after every round and returns one row per (seed, round): utility, test
loss (mean, and the paper's per-batch sum), ε nominal and certified. A seed whose model turns non-finite, or whose
test loss does, is failed from then on (its rows NaN; dpfl.fl.engine.FreezeNonFinite). Random streams: `Streams`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfl.fl.engine import Evaluation, RoundRule
from dpfl.papers.kato2024.layout import parse_cell, panel_of, seed_allocation
from dpfl.seeds import rng_for, torch_generator

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
                losses = [fm.batch_loss_from_outputs(out[a: a + eval_batch], y[a: a + eval_batch],
                                                     mask[a: a + eval_batch]) for a in range(0, n, eval_batch)]
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


@dataclass(frozen=True)
class Streams:
    """The named random streams of a kato2024 cell, all derived from the global seed. Decision (written once,
    here): a seed's record subsample (reduced scales) depends on (dataset, share, seed) only, so every method sees
    the same records; a cell's training draws (shuffles, Poisson samples, dropout masks, noise: one torch Generator
    for all its seeds) depend on (dataset, distribution, U, S, method, q, the cell's seeds); a protocol run's
    (Figs 11-12) on (setting, seed): its first draw seeds its torch Generator, the rest is its key exchange's; Fig
    12's generated data on (records per silo, S, seed), its users' draw on U as well."""

    seed: int

    def subsample(self, dataset: str, share: float, run_seed: int) -> np.random.Generator:
        return rng_for(self.seed, "kato2024", dataset, "subsample", share, run_seed)

    def training(self, dataset: str, distribution: str, users: int, silos: int, method: str, q: float | None,
                 seeds, device):
        """The cell's torch Generator on `device`."""
        key = rng_for(self.seed, "kato2024", "train", dataset, distribution, users, silos, method,
                      -1.0 if q is None else q, *seeds)
        return torch_generator(key, device)

    def protocol(self, setting: str, run_seed: int) -> np.random.Generator:
        return rng_for(self.seed, "kato2024", "protocol", setting, run_seed)

    def fig12_records(self, per_silo: int, silos: int, run_seed: int) -> int:
        """make_classification's random_state of one run's records."""
        return int(rng_for(self.seed, "kato2024", "fig12", "records", per_silo, silos, run_seed).integers(2**31))

    def fig12_users(self, users: int, per_silo: int, silos: int, run_seed: int) -> np.random.Generator:
        return rng_for(self.seed, "kato2024", "fig12", "users", users, per_silo, silos, run_seed)


class TestEvaluation(Evaluation):
    """Every run's test utility and losses (`evaluate`), after every round."""

    def __init__(self, fm, X_test, y_test, metric: str, eval_batch: int):
        self.fm, self.X_test, self.y_test, self.metric, self.eval_batch = fm, X_test, y_test, metric, eval_batch

    def evaluate(self, state, t: int) -> dict:
        rows = evaluate(self.fm, state, self.X_test, self.y_test, self.metric, self.eval_batch)
        return {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]}

    def summary(self, values: dict, failed) -> str:
        u = np.asarray(values["utility"])[~np.asarray(failed)]
        return f"mean {self.metric} {np.nanmean(u):.4f}" if np.isfinite(u).any() else f"no finite {self.metric}"


class SecureRounds(RoundRule, Evaluation):
    """One run's rounds of ULDP-AVG-w through the private weighting protocol (kato2024 Figs 11-12,
    dpfl.papers.kato2024.secure.secure_round), as both the round rule of dpfl.fl.engine.run_rounds and its
    evaluation: after each round, the phase times (seconds per phase; local training one entry per silo), each
    silo's full-size exponentiations, and the relative error of the decrypted aggregate against the plaintext sum of
    the same messages (one run: every value a list of one). Here beside the training cell's pieces the protocol's
    cell shares (`Streams`, `load_run_data`): dpfl.papers.kato2024.protocol keeps its layout import-light."""

    def __init__(self, fed, fm, hyper, *, noise_std: float, batch: int, gen, server, silos: list, reference: bool,
                 optimizer: str):
        self.fed, self.fm, self.hyper, self.server, self.silos = fed, fm, hyper, server, silos
        self.noise_std, self.batch, self.gen = noise_std, batch, gen
        self.reference, self.optimizer = reference, optimizer
        self.state: dict = {}  # secure_round's across the rounds of the run (-w: the blinded histograms)
        self.last: dict = {}

    def step(self, theta, t: int):
        from dpfl.papers.kato2024.secure import secure_round

        fed, times = self.fed, {}
        new, plain = secure_round(theta, fed, self.fm, self.hyper, noise_std=self.noise_std, batch=self.batch,
                                  gen=self.gen, server=self.server, silos=self.silos, round_=t,
                                  reference=self.reference, optimizer=self.optimizer, times=times, state=self.state)
        got = (new - theta).numpy() / (self.hyper.eta_g / (fed.n_users * fed.n_silos))
        self.last = {"decrypted_rel_err": float(np.max(np.abs(got - plain)) / max(np.max(np.abs(plain)), 1e-300)),
                     "phases": times, "full_exponentiations": [silo.full_exponentiations for silo in self.silos]}
        return new

    def evaluate(self, state, t: int) -> dict:
        return {k: [v] for k, v in self.last.items()}

    def summary(self, values: dict, failed) -> str:
        return f"decrypted vs plaintext relative error {values['decrypted_rel_err'][0]:.1e}"


def run_cell(job, inputs: dict, log) -> pd.DataFrame:
    import torch

    from dpfl.fl.device import describe, resolve_device
    from dpfl.fl.engine import FreezeNonFinite, progress_rounds, run_rounds
    from dpfl.fl.gradients import FlatModel
    from dpfl.io import Progress
    from dpfl.models.nets import build_model
    from dpfl.papers.kato2024 import uldp
    from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves

    p = job.params
    panel_id, method_id, q = parse_cell(job.cell)
    panel, method = panel_of(p, panel_id), BY_ID[method_id]
    dataset, task = p["dataset"], TASKS[p["dataset"]]
    hyper = method.hyper_params(p["hyper"][method.hyper])
    impl = p["implementation"]
    device = resolve_device(job.device)
    seeds = list(p["seeds"])
    S, U, T, B = int(panel["silos"]), int(panel["users"]), int(p["rounds"]), int(p["batch"])
    sigma, delta, rate = float(p["sigma"]), float(p["delta"]), 1.0 if q is None else q
    streams = Streams(job.seed)
    Rule = uldp.rule_class(method, impl["sgd_gradient"])  # noqa: N806  (the family, chosen once)

    prepared = dict(np.load(inputs["prepared"][dataset], allow_pickle=False))
    runs, group_ks, kept = [], [], []
    share = float(p["train_subsample"])
    for seed in seeds:
        alloc = dict(np.load(inputs["allocations"][seed_allocation(p, panel, seed)], allow_pickle=False))
        d = load_run_data(dataset, prepared, alloc)
        if share < 1.0:  # a reduced scale: a uniform random subset of the seed's training records
            d = subsample(d, share, streams.subsample(dataset, share, seed))
        d, k = Rule.prepare(d, method, S, U, task["group_step"])
        if k is not None:
            group_ks.append(k)
        kept.append(np.bincount(d["silo"], minlength=S))
        runs.append(d)
    fed = uldp.Federation.build(runs, S, U, Rule.level, B, device, chunk=p["pair_chunk"])
    name = f"{panel_id}/{method.label}{'' if q is None else f' q={q}'}"
    log(f"{name}: {len(seeds)} seeds, {len(fed.run)} pairs in {len(fed.buckets)} buckets, U={U}, S={S}, T={T}, "
        f"device {describe(device)}")

    fm = FlatModel(build_model(task["model"], seeds[0]), task["loss"])
    fm.module.to(device)
    theta = torch.stack([FlatModel(build_model(task["model"], s), task["loss"]).initial() for s in seeds]).to(device)
    gen = streams.training(dataset, panel["distribution"], U, S, method.id, q, seeds, device)
    rule = Rule(method, hyper, fed, fm, sigma=sigma, batch=B, gen=gen, q=rate)
    tests = TestEvaluation(fm, [torch.as_tensor(d["X_test"], device=device) for d in runs],
                           [torch.as_tensor(d["y_test"], device=device) for d in runs], task["metric"],
                           int(p["eval_batch"]))
    run = run_rounds(theta, rule, tests, rounds=T, schedule=range(1, T + 1), failure=FreezeNonFinite("test_loss"),
                     progress=Progress(len(progress_rounds(T)), log, name))
    df = pd.DataFrame(run.rows([{"seed": seed} for seed in seeds]))
    eps_cols = []
    for r, seed in enumerate(seeds):
        nominal, certified = epsilon_curves(
            method, T, sigma, delta, q=rate, silo_records=kept[r], batch=B, epochs=hyper.epochs,
            group_k=group_ks[r] if group_ks else 1, group_orders=impl["group_orders"],
            group_parallel=impl["group_parallel"], group_conversion=impl["group_conversion"])
        eps_cols.append(pd.DataFrame({"seed": seed, "round": np.arange(1, T + 1), "eps": nominal,
                                      "eps_certified": certified}))
    df = df.merge(pd.concat(eps_cols), on=["seed", "round"])
    df.insert(0, "panel", panel_id)
    df.insert(1, "method", method.id)
    df.insert(2, "label", method.label if q is None else f"{method.label} (q={q:g})")
    df.insert(3, "q", rate)
    df["users"], df["silos"], df["distribution"] = U, S, panel["distribution"]
    df["group_k"] = [group_ks[seeds.index(s)] if group_ks else np.nan for s in df["seed"]]
    df["multiplier_used"] = method.multiplier_used(sigma) if method.private else np.nan
    df["seconds_per_round"] = run.seconds / T  # the round loop alone (the accounting above runs once per cell)
    df["device"] = describe(device)
    df["metric"] = task["metric"]
    return df
