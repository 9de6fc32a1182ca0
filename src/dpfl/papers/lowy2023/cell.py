"""lowy2023: one cell = one panel over all trials (spec §5), its four methods computed one after another as runs
("<panel>-<method>", dpfl.papers.lowy2023.layout) in one process. For every trial the cell builds the trial's data,
the optimum F* and υ*² once (they depend on the experiment, N and the trial only), then for every run and ε tunes the
method's grid (step size, and clip bound for insurance) and records the test value at the chosen grid point. Every
grid point × ε × repetition of a trial runs in one vectorized call (dpfl.papers.lowy2023.isrl on the dpfl.fl engine).
The cell's table is its runs' rows in method order, each marked with its run. A run's numbers are those of the run
computed alone: it reads its own part of the params (`LowyLayout.runs_params` of the one run), draws from its own
named streams (`Streams`: nothing depends on the cell id or on the runs before it), and the shared trial data are
only read. `run_cell` reads the cell's params and each run's own part once, at its start, into frozen settings
(dpfl.papers.lowy2023.settings.PanelSettings); below that, typed settings only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfl.figure import CellResult, RunTiming
from dpfl.fl.data import SiloData
from dpfl.fl.device import describe, resolve_device
from dpfl.io import Progress
from dpfl.models.glm import GLM, newton_optimum
from dpfl.papers.lowy2023.isrl import Grid, Settings
from dpfl.papers.lowy2023.layout import LowyLayout, run_id
from dpfl.papers.lowy2023.methods import BY_ID, IsrlMethod
from dpfl.papers.lowy2023.settings import PanelSettings, StepGrids
from dpfl.papers.lowy2023.split import TrialData, trial_data
from dpfl.privacy.calibration import noise_level
from dpfl.seeds import rng_for

EXPERIMENTS = {
    # the model trained on each experiment's data, and the test metric of its figures (spec §2)
    "mnist": {"model": GLM("logistic"), "metric": "test_error"},
    "insurance": {"model": GLM("linear"), "metric": "relative_rmse"},
    "obesity": {"model": GLM("softmax", classes=7), "metric": "test_error"},
}


@dataclass(frozen=True)
class Streams:
    """The named random streams of a lowy2023 cell. Decision (written once, here): a trial's data split and υ*²
    bootstrap depend on (experiment, N, trial) only, so every figure and method on the same data sees the same
    trial splits; the optimization draws (silo subsets, batches, noise) depend on (figure, panel, method, trial,
    repetition)."""

    seed: int
    experiment: str
    n_silos: int
    figure: str
    panel: str
    method: str

    def trial(self, t: int) -> np.random.Generator:
        return rng_for(self.seed, "lowy2023", self.experiment, f"N{self.n_silos}", "trial", t)

    def fixed_split(self) -> np.random.Generator:
        """The split positions the authors' MNIST code fixes across trials (Q4)."""
        return rng_for(self.seed, "lowy2023", self.experiment, "fixed-split")

    def upsilon(self, t: int) -> np.random.Generator:
        return rng_for(self.seed, "lowy2023", self.experiment, f"N{self.n_silos}", "upsilon", t)

    def rep(self, t: int, r: int) -> np.random.Generator:
        return rng_for(self.seed, "lowy2023", self.figure, self.panel, self.method, "trial", t, "rep", r)


def tuning_score(train_loss: np.ndarray, diverged: np.ndarray, F_star: float, kind: str) -> np.ndarray:
    """The score the tuner minimizes (spec §5): F_train(w̄) − F* (`excess_loss`) or F_train(w̄) (`loss`). F* is a
    constant per trial, so both choose the same grid point; without a certified F* the score is the loss itself.
    A diverged run scores +inf: it is never preferred to a finite one, whatever the configured test penalty."""
    score = train_loss - (F_star if kind == "excess_loss" and np.isfinite(F_star) else 0.0)
    return np.where(diverged, np.inf, score)


def local_steps(n_for_K: int, eps_max: float, rounds: int) -> int:
    """K = ⌊n·sqrt(ε_max/(4R))⌋ (spec §3 E), at least 1: ε_max the largest ε of the figure's grid (a non-private run
    is given only that one), R the rounds."""
    return max(1, int(math.floor(n_for_K * math.sqrt(eps_max / (4 * rounds)))))


def step_grid(grids: StepGrids, mb_step_scale: str | None, method: IsrlMethod, M: int, K: int) -> np.ndarray:
    """The method's step sizes: its own grid if the YAML has one, else its update's. The YAML grids are the
    authors'; `mb_step_scale` rescales MB-SGD's grid (× M where the server averages instead of summing, × K where
    silos average their batch instead of summing it: spec §5), so that it searches the same effective steps as
    the authors' code (their code sums, so `authors_code` sets mb_step_scale: null)."""
    grid = grids.of(method.id).points()
    if method.update == "minibatch":
        grid = grid * {"silos_per_round": M, "local": K, None: 1}[mb_step_scale]
    return grid


def load_source(experiment: str, inputs: dict) -> dict:
    """The arrays a cell trains on: the MNIST silo pool (allocation) or the prepared table."""
    from dpfl.data import load_prepared

    if experiment == "mnist":
        return load_prepared(inputs["allocations"]["lowy2023-mnist-pairs"])[0]
    return load_prepared(inputs["prepared"][experiment])[0]


def run_cell(job, inputs: dict, log) -> CellResult:
    """Tune and evaluate every run of the panel `job.cell` (its methods, params.methods) for every trial
    (spec §5). `job` is a dpfl.jobs.CellJob. Returns a table of one row per (run, trial, ε) with the chosen grid point
    and its test value (non-private methods: ε = NaN), the runs' rows one after another in method order, with a `run`
    column; and each run's wall-clock seconds per trial (RunTiming.seconds_per_trial, its own work without the shared
    trial data).

    numpy's BLAS (Newton's Hessians, the test metric) runs on as many threads as torch, the cell's share of the
    cores: Snakemake sets OPENBLAS_NUM_THREADS so for its jobs, a bare process (`dpfl bench`) does not, and two
    BLAS threads on a busy two-core machine made Newton's method 10-20× slower (same numbers either way)."""
    import torch
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
        return _run_cell(job, inputs, log)


@dataclass(frozen=True)
class TrialShared:
    """What every run of a panel reads in one trial (read-only): the trial's data, F* (NaN if not certified), υ*²,
    and Newton's diagnostics."""

    data: TrialData
    F_star: float
    upsilon2: float
    newton_iterations: int
    newton_converged: bool


def _run_cell(job, inputs: dict, log) -> CellResult:
    # the boundary: the cell's settings, and each run's as the run alone sees them; below, typed settings only
    cell = PanelSettings.from_job(job)
    runs = []  # (run id, its method, its settings, its streams)
    for method_id in cell.methods:
        run = run_id(cell.panel.id, method_id)
        own = PanelSettings.from_params(*LowyLayout().runs_params(job.params, job.settings, job.cell, [run]), job.cell)
        runs.append((run, BY_ID[method_id], own,
                     Streams(job.seed, cell.experiment, cell.panel.n_silos, job.figure, cell.panel.id, method_id)))
    device = resolve_device(job.device)
    log(f"computing on {describe(device)}")
    impl, experiment, N = cell.implementation, cell.experiment, cell.panel.n_silos
    model = EXPERIMENTS[experiment]["model"]
    streams = runs[0][3]  # the trial's data and υ*² streams: the same for every method (and figure, and panel)
    source = load_source(experiment, inputs)
    rows = {run: [] for run, *_ in runs}
    seconds = dict.fromkeys(rows, 0.0)
    progress = Progress(cell.trials, log, f"{cell.panel.id} trial")
    for trial in range(cell.trials):
        data = trial_data(experiment, source, N, streams.trial(trial), impl, fixed_rng=streams.fixed_split())
        W_star, F_star, newton_iters, newton_ok = newton_optimum(model, data.train.pooled_X, data.train.pooled_y)
        ups_rng = streams.upsilon(trial)
        bootstrap = impl.upsilon_bootstrap
        ups2 = float(np.mean([np.sum(model.grad(*_silo_rows(data.train, s, bootstrap, ups_rng), W_star) ** 2)
                              for s in range(data.train.n_silos)]))
        if not newton_ok:  # no certified optimum (e.g. quasi-separable obesity classes): F* and υ*² are n/a
            F_star, ups2 = np.nan, np.nan
        shared = TrialShared(data, F_star, ups2, newton_iters, newton_ok)
        said = []
        for run, method, own, run_streams in runs:
            start = time.perf_counter()
            got = run_trial(own, method, trial, shared, run_streams, device)
            seconds[run] += time.perf_counter() - start
            rows[run].extend(got)
            said.append(f"{method.id} " + ", ".join(f"ε={r['eps']:g}: {r['test']:.4g}" for r in got))
        K = local_steps(data.n_for_K, max(cell.epsilons), cell.rounds)
        progress.step(f"K = {K}, υ*² = {_fmt(ups2)}; " + "; ".join(said))
    tables = []
    for run, *_ in runs:
        df = pd.DataFrame(rows[run])
        df.insert(0, "run", run)
        tables.append(df)
    timing = {run: RunTiming(seconds_per_trial=seconds[run] / max(1, cell.trials)) for run, *_ in runs}
    return CellResult(pd.concat(tables, ignore_index=True), timing)


def run_trial(own: PanelSettings, method: IsrlMethod, trial: int, shared: TrialShared, streams: Streams,
              device) -> list[dict]:
    """One run's rows of one trial: method `method` tuned over its grid on the trial's data `shared` (not modified),
    one row per ε. `own`: the run's own settings (those of the run computed alone)."""
    impl, panel = own.implementation, own.panel
    model, metric = EXPERIMENTS[own.experiment]["model"], EXPERIMENTS[own.experiment]["metric"]
    N, M, R = panel.n_silos, panel.silos_per_round, own.rounds
    data, F_star, ups2 = shared.data, shared.F_star, shared.upsilon2
    eps_grid = np.asarray(own.epsilons, float) if method.private else np.array([np.nan])
    clips = np.asarray(own.clips, float) if own.clips else None
    K = local_steps(data.n_for_K, max(own.epsilons), R)
    settings = Settings(rounds=R, silos_per_round=M, local=K, average_last=own.average_last,
                        divergence_threshold=own.divergence.threshold, **method.settings_overrides(impl))
    steps = step_grid(own.step_grids, own.mb_step_scale, method, M, K)
    clip_values = clips if clips is not None else np.array([np.nan])
    # configs: ε (outer) × step × clip (inner)
    E, S_, C_ = np.meshgrid(np.arange(len(eps_grid)), np.arange(len(steps)), np.arange(len(clip_values)),
                            indexing="ij")
    E, S_, C_ = E.ravel(), S_.ravel(), C_.ravel()
    eta = steps[S_]
    if clips is not None:
        L_cfg = clip_values[C_]  # insurance: the clip bound is the Lipschitz bound L = C
        clip_cfg = L_cfg
    else:
        L_cfg = np.full(len(E), data.lipschitz)
        # the private methods clip every per-example gradient at L (a no-op on these data that makes the
        # sensitivity bound unconditional); the authors' code does not (clip_at_lipschitz: false)
        clip_cfg = L_cfg if method.private and impl.clip_at_lipschitz else np.full(len(E), np.inf)
    noise = np.zeros((len(E), N))
    diag = []
    if method.private:
        for e_i, eps in enumerate(eps_grid):
            for n_s in np.unique(data.train.counts):
                # Q8: the authors' noisy Local SGD on insurance uses n = ⌈1338/N⌉ (and δ = 1/n²)
                n_noise = data.n_for_K if method.update == "local" and impl.local_noise_n == "share" else n_s
                acc = method.accounting(n=int(n_noise), K=K, R=R)
                z = noise_level(acc, float(eps), method.paper_multiplier(int(n_noise), K, R, float(eps)),
                                own.noise_calibration)
                # the ε certified for the noise as this variant adds it (its sensitivity and sampling; spec §9)
                cert = method.certification(impl, n=int(n_s), K=K, R=R, clipped=bool(np.all(np.isfinite(clip_cfg))))
                level = z.as_dict()
                if cert.why:  # the paper's accounting does not hold for this variant
                    level.update(eps_certified=cert.epsilon(z.z_used), eps_certified_paper=cert.epsilon(z.z_paper))
                diag.append({**level, "eps": eps, "certification": cert.why})
                silos = data.train.counts == n_s
                sel = E == e_i
                noise[np.ix_(sel, silos)] = method.noise_std(z.z_used, L_cfg[sel])[:, None]
    grid = Grid(eta=eta, clip=clip_cfg, noise_std=noise)
    reps = own.reps
    rngs = [streams.rep(trial, r) for r in range(reps)]
    draws = method.draws(rngs, data.train, settings, model.out_dim, impl)
    res = method.run(model, data.train, settings, grid, draws, reps, device=device)
    with np.errstate(all="ignore"):
        if metric == "test_error":
            test = model.predict_error(data.X_test, data.y_test, res.W)
        else:
            test = np.sqrt(model.mse(data.X_test, data.y_test, res.W) / data.naive_mse)
    score = tuning_score(res.train_loss, res.diverged, F_star, own.score)
    test = np.where(res.diverged, own.divergence.penalty, test)  # a diverged run's test value
    mean_score, mean_test = score.mean(axis=0), test.mean(axis=0)
    rows = []
    for e_i, eps in enumerate(eps_grid):
        sel = np.flatnonzero(E == e_i)
        best = sel[int(np.argmin(mean_score[sel]))]
        d_eps = [d for d in diag if d["eps"] == eps]
        rows.append({
            "trial": trial, "algorithm": method.id, "label": method.label, "private": method.private,
            "panel": panel.id, "eps": eps,
            "test": float(mean_test[best]), "score": float(mean_score[best]), "step": float(eta[best]),
            "clip": float(clip_values[C_[best]]), "diverged_reps": int(res.diverged[:, best].sum()),
            "diverged_share_grid": float(res.diverged[:, sel].mean()), "grid_edge": _edge(S_[best], len(steps)),
            "K": K, "n_silos": N, "silos_per_round": M, "rounds": R, "upsilon2": ups2, "F_star": F_star,
            "newton_iterations": shared.newton_iterations, "newton_converged": shared.newton_converged,
            "L": float(data.lipschitz) if clips is None else float(clip_values[C_[best]]),
            "z_used": min((d["z_used"] for d in d_eps), default=np.nan),
            "z_paper": min((d["z_paper"] for d in d_eps), default=np.nan),
            "z_accountant": min((d["z_accountant"] for d in d_eps), default=np.nan),
            "eps_certified": max((d["eps_certified"] for d in d_eps), default=np.nan),
            "eps_certified_paper_noise": max((d["eps_certified_paper"] for d in d_eps), default=np.nan),
            "certification": "; ".join(dict.fromkeys(d["certification"] for d in d_eps if d["certification"])),
            "n_train_min": int(data.train.counts.min()), "n_test": len(data.y_test),
        })
    return rows


def _fmt(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{v:.3g}"


def _silo_rows(data: SiloData, s: int, bootstrap: bool, rng: np.random.Generator):
    """A silo's training rows; for the authors' υ*² estimate (Q6), n rows drawn with replacement."""
    c = int(data.counts[s])
    idx = rng.integers(0, c, c) if bootstrap else np.arange(c)
    return data.X[s, idx], data.y[s, idx]


def _edge(index: int, size: int) -> str:
    """Whether the chosen step lies on the edge of its grid (a hint that the grid is too narrow)."""
    return "low" if index == 0 else ("high" if index == size - 1 else "")
