"""One kato2024 training cell: one panel, its runs (one per method, ULDP-AVG-ws once per sampling rate) computed one
after another in one process, every seed of a run batched into one set of runs (spec §7). Reads the prepared dataset
and the panel's allocation of every seed once; each run trains with the round rule of
dpfl.papers.kato2024.training.rules (its method scheme's, chosen once) in the round loop of dpfl.fl.engine on the
configured device, evaluates on the test set after every round and returns one row per (seed, round): utility, test
loss (mean, and the paper's per-batch sum), ε nominal and certified; the cell's table is its runs' rows in order,
each marked with its run ("<panel>-<method>[-q<q>]"). `run_cell` reads the job's params once into frozen settings
(dpfl.papers.kato2024.training.settings.TrainingSettings); below it, nothing reads the params dict. A seed whose
model turns non-finite, or whose test loss does, is failed from then on (its rows NaN;
dpfl.fl.engine.FreezeNonFinite). Random streams: dpfl.papers.kato2024.streams (a run's draws depend on its dataset,
panel setting, method, q and seeds, never on the cell or on the runs before it: each run builds its own models,
generator and federation from read-only seed data)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfl.figure import CellResult, RunTiming
from dpfl.fl.engine import Evaluation
from dpfl.papers.kato2024.streams import Streams
from dpfl.papers.kato2024.tasks import TASKS, load_run_data
from dpfl.papers.kato2024.training.settings import RunSettings, TrainingSettings


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


def run_cell(job, inputs: dict, log) -> CellResult:
    """The panel `job.cell`: every run of its params (`TrainingSettings.runs`: its methods, ULDP-AVG-ws per sampling
    rate), in order, on the seeds' data loaded once; one table of their rows with a `run` column, and each run's
    timing."""
    from dpfl.fl.device import keep_freed_memory, resolve_device

    settings = TrainingSettings.from_job(job)  # the boundary: below, typed settings only
    panel, dataset, streams = settings.panel, settings.dataset, Streams(job.seed)
    device = resolve_device(job.device)
    keep_freed_memory()  # the cell's process reuses the pages its steps free (speed only)
    prepared = dict(np.load(inputs["prepared"][dataset], allow_pickle=False))
    share = settings.train_subsample
    data = []  # per seed: its training and test records, read-only from here (each run prepares its own copy)
    for seed in settings.seeds:
        alloc = dict(np.load(inputs["allocations"][panel.allocation(settings.allocation, seed)], allow_pickle=False))
        d = load_run_data(dataset, prepared, alloc)
        if share < 1.0:  # a reduced scale: a uniform random subset of the seed's training records
            d = subsample(d, share, streams.subsample(dataset, share, seed))
        data.append(d)
    del prepared
    tables, timing = [], {}
    for i, run in enumerate(settings.runs, 1):
        name = run.name(panel.id)
        log(f"run {i}/{len(settings.runs)}: {name}")
        df, timing[name] = run_method(settings, run, data, streams, device, log)
        df.insert(0, "run", name)
        tables.append(df)
    return CellResult(pd.concat(tables, ignore_index=True), timing)


def run_method(settings: TrainingSettings, run: RunSettings, data: list[dict], streams: Streams, device,
               log) -> tuple[pd.DataFrame, RunTiming]:
    """One run of a panel cell: `run`'s method (at its sampling rate) on every seed's records `data` (not
    modified), its seeds batched; its rows and its round loop's seconds per round."""
    import torch

    from dpfl.fl.device import describe
    from dpfl.fl.engine import FreezeNonFinite, progress_rounds, run_rounds
    from dpfl.fl.flat_model import FlatModel
    from dpfl.io import Progress
    from dpfl.models.nets import build_model
    from dpfl.papers.kato2024.federation import Federation
    from dpfl.papers.kato2024.methods import epsilon_curves
    from dpfl.papers.kato2024.training import rules

    panel, method, hyper, q = settings.panel, run.method, run.hyper, run.q
    panel_id, dataset, task = panel.id, settings.dataset, TASKS[settings.dataset]
    impl = settings.implementation
    seeds = list(settings.seeds)
    S, U, T, B = panel.silos, panel.users, settings.rounds, settings.batch
    sigma, delta, rate = settings.sigma, settings.delta, run.rate
    Rule = rules.rule_class(method, impl.sgd_gradient)  # noqa: N806  (the scheme, chosen once)

    runs, group_ks, kept = [], [], []
    for d in data:
        d, k = Rule.prepare(d, method, S, U, task["group_step"])
        if k is not None:
            group_ks.append(k)
        kept.append(np.bincount(d["silo"], minlength=S))
        runs.append(d)
    fed = Federation.build(runs, S, U, Rule.level, B, device, chunk=settings.pair_chunk)
    name = f"{panel_id}/{method.label}{'' if q is None else f' q={q}'}"
    log(f"{name}: {len(seeds)} seeds, {len(fed.run)} pairs in {len(fed.buckets)} buckets, U={U}, S={S}, T={T}, "
        f"device {describe(device)}")

    fm = FlatModel(build_model(task["model"], seeds[0]), task["loss"])
    fm.module.to(device)
    theta = torch.stack([FlatModel(build_model(task["model"], s), task["loss"]).initial() for s in seeds]).to(device)
    gen = streams.training(dataset, panel.distribution, U, S, method.id, q, seeds, device)
    rule = Rule(method, hyper, fed, fm, sigma=sigma, batch=B, gen=gen, q=rate)
    tests = TestEvaluation(fm, [torch.as_tensor(d["X_test"], device=device) for d in runs],
                           [torch.as_tensor(d["y_test"], device=device) for d in runs], task["metric"],
                           settings.eval_batch)
    done = run_rounds(theta, rule, tests, rounds=T, schedule=range(1, T + 1), failure=FreezeNonFinite("test_loss"),
                      progress=Progress(len(progress_rounds(T)), log, name))
    df = pd.DataFrame(done.rows([{"seed": seed} for seed in seeds]))
    eps_cols = []
    for r, seed in enumerate(seeds):
        nominal, certified = epsilon_curves(
            method, T, sigma, delta, q=rate, silo_records=kept[r], batch=B, epochs=hyper.epochs,
            group_k=group_ks[r] if group_ks else 1, group_orders=impl.group_orders,
            group_parallel=impl.group_parallel, group_conversion=impl.group_conversion)
        eps_cols.append(pd.DataFrame({"seed": seed, "round": np.arange(1, T + 1), "eps": nominal,
                                      "eps_certified": certified}))
    df = df.merge(pd.concat(eps_cols), on=["seed", "round"])
    df.insert(0, "panel", panel_id)
    df.insert(1, "method", method.id)
    df.insert(2, "label", method.label if q is None else f"{method.label} (q={q:g})")
    df.insert(3, "q", rate)
    df["users"], df["silos"], df["distribution"] = U, S, panel.distribution
    df["group_k"] = [group_ks[seeds.index(s)] if group_ks else np.nan for s in df["seed"]]
    df["multiplier_used"] = method.multiplier_used(sigma) if method.private else np.nan
    df["device"] = describe(device)
    df["metric"] = task["metric"]
    return df, RunTiming(seconds_per_round=done.seconds / T)  # the round loop alone (the accounting runs once per run)
