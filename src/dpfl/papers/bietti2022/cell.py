"""One bietti2022 cell: PP-SGD over the grid of (η, a) of one σ (or the a = 0 runs), every seed, on one task.

`run_cell` reads the job's params once into frozen settings (dpfl.papers.bietti2022.settings.GridSettings); the task
(dpfl.papers.bietti2022.tasks.Setup) gives the sizes, rounds and each run's data, the model strategy
(dpfl.papers.bietti2022.models) the storage, round and evaluation of a batch of configs. The configs of a cell are
trained together (dpfl.papers.bietti2022.ppsgd): one W (G, d, K) and one Θ (N, d, G, K) per seed. The data stream
of a seed (user samples, minibatches) is named by (task, seed) only, not by the cell, so every cell of a seed sees
the same data (common random numbers across σ and a); the noise vector ξ is named by (task, seed, σ) (`Streams`).
Each (config batch, seed) is one run of dpfl.fl.engine.run_rounds: the model strategy's round (`_PpSgdRounds`), the
task's evaluation at the scheduled rounds (`_GridEvaluation`), no freeze (a row whose metric is not finite is marked
failed).
Returns one row per (seed, a, η, evaluation round): the metric, ε nominal / certified, and `end` (the run's end of
training, which the tables read as "final"). ε certified equals ε nominal except under B1 `sampling: shuffle`, whose
nominal ε is the authors' Poisson analysis of a fixed-size sampler; there it is what a certificate without
amplification gives (dpfl.papers.bietti2022.methods.shuffled_certified_curve). B1-B5 (`params.implementation`):
dpfl.papers.bietti2022.settings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfl.figure import CellResult, RunTiming
from dpfl.fl.engine import Evaluation, RoundRule
from dpfl.papers.bietti2022.layout import evaluation_rounds, level_name, parse_cell
from dpfl.papers.bietti2022.models import Storage, model_class
from dpfl.papers.bietti2022.settings import GridSettings
from dpfl.papers.bietti2022.tasks import Run, Setup
from dpfl.seeds import rng_for, torch_generator


@dataclass(frozen=True)
class Streams:
    """The named random streams of a bietti2022 cell, all derived from the global seed. Decision (written once,
    here): a seed's data stream (user samples, minibatches; the synthetic task's samples) depends on (task, seed)
    only, so every cell and config of a seed sees the same data (common random numbers across σ and a); its noise
    vectors ξ on (task, seed, σ). B5 (`rng: per_run`): each run (one config) names its own streams by (η, a) too."""

    seed: int
    task: str

    def data(self, seed: int, run: tuple = ()) -> int:
        """The seed of a run's data stream (synthetic: a torch Generator on the device; federated: numpy's)."""
        return int(rng_for(self.seed, "bietti2022", self.task, "data", seed, *run).integers(2**62))

    def noise(self, seed: int, sigma: float | None, run: tuple, device):
        """A run's torch Generator of the noise vectors ξ, on `device`."""
        return torch_generator(rng_for(self.seed, "bietti2022", self.task, "noise", seed, sigma or 0.0, *run), device)


class _PpSgdRounds(RoundRule):
    """A run's PP-SGD rounds: the model strategy's step (in place) on round t's batch of the data stream, with the
    run's noise Generator, at the round's user rate (B1: per round)."""

    def __init__(self, model, run: Run, noise_gen, q: float):
        self.model, self.run, self.noise_gen, self.q = model, run, noise_gen, q

    def step(self, state, t: int):
        run = self.run
        self.model.step(state, run.next(), self.noise_gen, self.q if np.ndim(run.q) == 0 else float(run.q[t - 1]))
        return state


class _GridEvaluation(Evaluation):
    """Every config's metric (the model strategy's evaluation), its ε after round t and whether t is the end of
    training (`end`), per config of the batch."""

    def __init__(self, model, grid, eps: dict, end: int, metric: str):
        """`eps`: per a, the (nominal, certified) ε after each round (index 0: before the first)."""
        self.model, self.grid, self.eps, self.end, self.metric = model, grid, eps, end, metric

    def evaluate(self, state, t: int) -> dict:
        values = dict(self.model.evaluate(state))
        values["eps"] = np.array([self.eps[float(a)][0][t] for a in self.grid.a])
        values["eps_certified"] = np.array([self.eps[float(a)][1][t] for a in self.grid.a])
        values["end"] = np.full(len(self.grid), t == self.end)
        return values

    def summary(self, values: dict, failed) -> str:
        last = np.asarray(values[self.metric], float)
        best = (np.nanmin if self.metric.startswith("excess_risk") else np.nanmax)(last) \
            if np.isfinite(last).any() else np.nan
        return f"best {self.metric} {best:.4g}"


def run_cell(job, inputs: dict, log) -> CellResult:
    """The cell's table (see the module's docstring) and its timing; `job` a dpfl.jobs.CellJob, `inputs` the
    prepared data of a federated task ({"prepared": {dataset: path}})."""
    import torch

    from dpfl.fl.device import describe, resolve_device
    from dpfl.fl.engine import NoFreeze, progress_rounds, run_rounds
    from dpfl.io import Progress
    from dpfl.papers.bietti2022.methods import epsilon_curve, shuffled_certified_curve
    from dpfl.papers.bietti2022.ppsgd import Grid, grid_tensors

    settings = GridSettings.from_job(job)  # the boundary: below, typed settings only
    impl = settings.implementation
    _, sigma = parse_cell(job.cell)
    grid = Grid.product(settings.etas, settings.levels, [0.0 if sigma is None else sigma])
    device = resolve_device(job.device)
    dtype = {"float32": torch.float32, "float64": torch.float64}[settings.dtype]
    clip, delta = settings.clip, settings.delta
    setup = Setup(settings, inputs, dtype, device, log)
    streams = Streams(job.seed, setup.task)
    per_run = impl.rng == "per_run"
    N, d, K, q, T = setup.N, setup.d, setup.K, setup.q, setup.T
    kind = settings.model
    Model = model_class(kind, setup.sparse)  # noqa: N806
    per_config = Model(setup, 1, None, clip, dtype, device).memory_mib()
    # configs trained together: as many as fit `max_memory_mib` (each batch replays the same data and noise draws)
    size = max(1, min(len(grid), int(settings.max_memory_mib // max(per_config, 1e-9))))
    size = 1 if per_run else size  # B5: no two runs share a stream
    batches = [np.arange(a, min(len(grid), a + size)) for a in range(0, len(grid), size)]
    log(f"{job.cell}: {kind} model, {len(grid)} configs (η × a) in {len(batches)} batch(es) of ≤ {size}, N = {N}, "
        f"d = {d}, K = {K}, "
        f"T = {T if impl.sampling == 'poisson' or setup.task == 'synthetic' else 'until the data is exhausted'}, "
        f"seeds {list(settings.seeds)}, device {describe(device)}; the models take "
        f"{per_config * size:.0f} MiB per batch")
    rows, storage = [], Storage()
    training, evaluating, rounds_run, evaluations, full_T, eps_cache = 0.0, 0.0, 0, 0, [], {}
    progress = Progress(len(batches) * len(settings.seeds) * len(progress_rounds(T)), log, f"{job.cell}: checkpoint")
    for idx in batches:
        sub = Grid(grid.eta[idx], grid.a[idx], grid.sigma[idx])
        model = Model(setup, len(sub), grid_tensors(sub, dtype, device), clip, dtype, device, storage,
                      local_times_users=impl.cnn_local_step == "times_users")
        # B5 per_run: the run (its one config) names its own data and noise streams
        run_key = (float(sub.eta[0]), float(sub.a[0])) if per_run else ()
        keys = [{"a": float(sub.a[g]), "level": level_name(sub.a[g]), "eta": float(sub.eta[g])}
                for g in range(len(sub))]
        for seed in settings.seeds:
            run = setup.stream(streams.data(seed, run_key))
            noise_gen = streams.noise(seed, sigma, run_key, device)
            eval_at, end = evaluation_rounds(run.T, setup.every), setup.end_round(run.T, impl.end_point)
            # ε nominal and certified after each round (0 before the first), the same for every a > 0 of the run
            schedule = (run.T, np.asarray(run.q, float).tobytes(), run.most_rounds)
            for a in set(map(float, sub.a)) - set(eps_cache.get(schedule, {})):
                nominal = np.concatenate([[0.0], epsilon_curve(sigma or 0.0, a, run.T, run.q, delta)])
                certified = nominal if run.most_rounds is None else np.concatenate(
                    [[0.0], shuffled_certified_curve(sigma or 0.0, a, run.T, run.most_rounds, delta)])
                eps_cache.setdefault(schedule, {})[a] = (nominal, certified)
            state = model.start()
            done = run_rounds(state, _PpSgdRounds(model, run, noise_gen, q),
                              _GridEvaluation(model, sub, eps_cache[schedule], end, setup.metric), rounds=run.T,
                              schedule=eval_at, failure=NoFreeze(setup.metric), progress=progress,
                              label=f"seed {seed}")
            rows.extend(done.rows([{"seed": seed, **key} for key in keys]))
            training += done.seconds - done.evaluation_seconds
            evaluating += done.evaluation_seconds
            rounds_run += run.T
            evaluations += done.evaluations
            full_T.append(run.full_T)
            del state, done
    df = pd.DataFrame(rows)
    failed = df.pop("failed")  # a row whose metric is not finite (dpfl.fl.engine.NoFreeze); its column goes last
    df["eps_certified"] = df.pop("eps_certified")  # (its column where it has always been)
    df["sigma"] = np.nan if sigma is None else sigma
    df["failed"] = failed
    df["evaluations"] = evaluations // len(batches)
    df["config_batches"] = len(batches)
    df["device"] = describe(device)
    df["metric"] = setup.metric
    df["q"] = q  # the nominal rate Q/N (B1: round t is accounted at L_t/N)
    df["grid"] = settings.grid
    df["model"] = kind
    df["sampling"] = impl.sampling
    # per seed, all configs of the cell (every batch): a round's training, and one evaluation (dpfl.bench); the full
    # run's T where the data sets it (the benchmark's reduced runs set rounds)
    timing = RunTiming(seconds_per_round=training / (rounds_run / len(batches)),
                       seconds_per_evaluation=evaluating / (evaluations / len(batches)),
                       full_rounds=max(full_T) if full_T and full_T[0] is not None else None)
    return CellResult(df, timing)
