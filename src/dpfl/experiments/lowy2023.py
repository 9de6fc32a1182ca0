"""lowy2023 (ISRL-DP cross-silo FL): data preparation per trial, the tuning protocol, noise calibration,
and the figure table (spec/lowy2023.md).

A *cell* is one algorithm on one panel over all trials: it tunes the algorithm's grid (step size, and
clip bound for insurance) for every trial and ε, and records the test value at the chosen grid point.
Every grid point × ε × repetition of a trial runs in one vectorized call (dpfl.algorithms.isrl).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfl.experiments.lowy2023_layout import ALGORITHMS
from dpfl.algorithms.isrl import Grid, Settings, SiloData, local_draws, local_sgd, minibatch_draws, minibatch_sgd
from dpfl.models.glm import GLM, newton_optimum
from dpfl.privacy.rdp import SampledGaussian, calibrate_noise_multiplier, epsilon
from dpfl.seeds import rng_for

EXPERIMENTS = {
    # the model trained on each experiment's data, and the test metric of its figures (spec §2)
    "mnist": {"model": GLM("logistic"), "metric": "test_error"},
    "insurance": {"model": GLM("linear"), "metric": "relative_rmse"},
    "obesity": {"model": GLM("softmax", classes=7), "metric": "test_error"},
}

MNIST_PER_DIGIT = 774  # ⌊5421/7⌋: 1/7 of the rarest digit's count, so every digit contributes equally
EVENS, ODDS = (0, 2, 4, 6, 8), (1, 3, 5, 7, 9)
OBESITY_STANDARDIZE = ("Age", "Height", "Weight", "CH2O", "TUE")


# --------------------------------------------------------------------------------------------------
# data: pools (fixed) and per-trial splits
# --------------------------------------------------------------------------------------------------


def mnist_pool(arrays: dict, log=print) -> dict:
    """The 25 (even, odd) silos of 1548 PCA-50 images each (spec §1.1). PCA (centred, not whitened,
    full SVD) is fitted on all 60,000 training images scaled to [0, 1]."""
    from sklearn.decomposition import PCA

    x = arrays["x_train"].reshape(len(arrays["x_train"]), -1).astype(np.float64) / 255.0
    labels = arrays["y_train"]
    log(f"PCA-50 of {x.shape[0]} × {x.shape[1]} MNIST training images")
    feats = PCA(n_components=50, svd_solver="full").fit_transform(x)
    by_digit = {d: feats[np.flatnonzero(labels == d)[:MNIST_PER_DIGIT]] for d in range(10)}
    X, y, pairs = [], [], []
    for e, o in itertools.product(EVENS, ODDS):
        X.append(np.concatenate([by_digit[e], by_digit[o]]))
        y.append(np.concatenate([np.ones(MNIST_PER_DIGIT), np.zeros(MNIST_PER_DIGIT)]))
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


def trial_data(experiment: str, source: dict, n_silos: int, rng: np.random.Generator,
               compat: bool = False, fixed_rng: np.random.Generator | None = None) -> TrialData:
    """One trial's silos and pooled test set, from the experiment's prepared source arrays.

    compat (the authors' code, spec §9): MNIST silos bootstrap their pool each trial and split it at
    positions fixed across trials (`fixed_rng`), with L from silo index 1 only (Q4, Q5); obesity
    silos resample n_min rows with replacement and L = 20 (Q10)."""
    if experiment == "mnist":
        Xs, ys, Xt, yt = [], [], [], []
        fixed = _split(source["X"].shape[1], fixed_rng) if compat else None
        for X, y in zip(source["X"][:n_silos], source["y"][:n_silos]):
            if compat:
                boot = rng.integers(0, len(X), len(X))  # 1548 draws with replacement: train and test may share images
                X, y = X[boot], y[boot]
                tr, te = fixed
            else:
                tr, te = _split(len(X), rng)
            Xs.append(X[tr]), ys.append(y[tr]), Xt.append(X[te]), yt.append(y[te])
        train = SiloData.from_lists(Xs, ys)
        L = 2 * float(np.max(train.norms[1 if compat else slice(None)]))
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
        Xs, ys = [], []
        for k in range(n_silos):  # silo k = the training rows of class k, reduced to n_min at random
            rows = rng.choice(np.flatnonzero(ytr == k), n_min, replace=compat)
            Xs.append(Xtr[np.sort(rows)]), ys.append(ytr[np.sort(rows)])
        train = SiloData.from_lists(Xs, ys)
        L = 20.0 if compat else 2 * float(np.max(train.norms))
        return TrialData(train, Xte, y[te], L, np.nan, n_min)
    raise ValueError(f"unknown lowy2023 experiment {experiment!r}; expected mnist, insurance or obesity")


# --------------------------------------------------------------------------------------------------
# noise: the paper's formula and the accountant's calibration (spec §3 "Noise level", §4)
# --------------------------------------------------------------------------------------------------


def paper_sigma(L: float, steps: int, n: int, eps: float, delta: float) -> float:
    """σ² = 8 L² T ln(1/δ) / (n² ε²): std on a silo's mean gradient (T = R for MB-SGD), or per step
    (T = K·R for Local SGD) (paper App. I)."""
    return math.sqrt(8 * L**2 * steps * math.log(1 / delta)) / (n * eps)


def _mechanism(method: str, n: int, K: int, R: int) -> tuple[SampledGaussian, int]:
    """The per-silo mechanism and its number of compositions (spec §4): MB-SGD = R steps of a size-K
    batch sampled without replacement from n records; Local SGD = K·R steps of single records."""
    if method == "minibatch":
        return SampledGaussian("without_replacement", population=n, batch_size=K), R
    return SampledGaussian("without_replacement", population=n, batch_size=1), K * R


def noise_multipliers(method: str, n: int, K: int, R: int, eps: float, calibration: str) -> dict:
    """Noise multipliers z (std / replace-one sensitivity 2L of a sum) for one silo of n records:
    z_paper from the paper's formula, the z actually used (z_paper, or with `accountant` calibration
    the smallest z the exact accountant certifies at ε), and the ε certified for both."""
    delta = 1.0 / n**2
    mech, steps = _mechanism(method, n, K, R)
    if method == "minibatch":
        z_paper = paper_sigma(1.0, R, n, eps, delta) * K / 2  # σ_MB·K/(2L), L cancels
    else:
        z_paper = paper_sigma(1.0, K * R, n, eps, delta) / 2  # σ_loc/(2L)
    z_used = z_paper if calibration == "paper" else calibrated_multiplier(method, n, K, R, eps)
    eps_paper = epsilon(mech, z_paper, steps, delta)
    return {"z_paper": z_paper, "eps_certified_paper": eps_paper, "z_used": z_used,
            "eps_certified": eps_paper if z_used == z_paper else epsilon(mech, z_used, steps, delta),
            "delta": delta, "n": n}


def calibrated_multiplier(method: str, n: int, K: int, R: int, eps: float) -> float:
    """The smallest z whose ε, by the exact accountant at δ = 1/n², is at most the nominal ε."""
    mech, steps = _mechanism(method, n, K, R)
    return calibrate_noise_multiplier(mech, float(eps), int(steps), 1.0 / n**2)


# --------------------------------------------------------------------------------------------------
# one cell: an algorithm on one panel over all trials
# --------------------------------------------------------------------------------------------------


def _log_grid(g: dict) -> np.ndarray:
    """exp(linspace(start, stop, num)), keeping the first `first` points if given."""
    return np.exp(np.linspace(g["start"], g["stop"], g["num"]))[: g.get("first")]


def local_steps(p: dict, n_for_K: int) -> int:
    """K = ⌊n·sqrt(ε_max/(4R))⌋ (spec §3 E), at least 1."""
    return max(1, int(math.floor(n_for_K * math.sqrt(max(p["epsilons"]) / (4 * p["rounds"])))))


def step_grid(p: dict, algorithm: str, method: str, M: int, K: int, mode: str) -> np.ndarray:
    """The algorithm's step sizes. The YAML grids are the authors'; MB-SGD's grid is rescaled (× M where
    the server averages instead of summing, × K where silos average their batch instead of summing it:
    spec §5), so that it searches the same effective steps as the authors' code."""
    grids = p["step_grids"]
    grid = _log_grid(grids.get(algorithm) or grids[method])
    if method == "minibatch" and mode != "authors-code":  # the authors' code sums where the paper averages
        grid = grid * {"silos_per_round": M, "local": K, None: 1}[p.get("mb_step_scale")]
    return grid


def load_source(params: dict, inputs: dict) -> dict:
    """The arrays a cell trains on: the MNIST silo pool (allocation) or the prepared table."""
    from dpfl.data import load_prepared

    if params["experiment"] == "mnist":
        return load_prepared(inputs["allocations"]["lowy2023-mnist-pairs"])[0]
    return load_prepared(inputs["prepared"][params["experiment"]])[0]


def run_cell(job: dict, inputs: dict, log) -> pd.DataFrame:
    """Tune and evaluate one algorithm on one panel for every trial (spec §5). The cell id is
    "<panel>-<algorithm>". Returns one row per (trial, ε) with the chosen grid point and its test
    value (non-private algorithms: ε = NaN)."""
    import torch

    torch.set_num_threads(int(job.get("threads", 1)))
    p, mode = {"noise_calibration": None, **job["params"], **job.get("paper_settings", {})}, job["mode"]
    panel_id, algorithm = job["cell"].split("-", 1)
    panel = next(q for q in p["panels"] if q["id"] == panel_id)
    experiment = p["experiment"]
    model, metric = EXPERIMENTS[experiment]["model"], EXPERIMENTS[experiment]["metric"]
    label, method, private = ALGORITHMS[algorithm]
    N, M, R = panel["n_silos"], panel["silos_per_round"], p["rounds"]
    source = load_source(p, inputs)
    eps_grid = np.asarray(p["epsilons"], float) if private else np.array([np.nan])
    clips = np.asarray(p["clips"], float) if p.get("clips") else None
    compat = mode == "authors-code"
    rows = []
    for trial in range(p["trials"]):
        data = trial_data(experiment, source, N, rng_for(job["seed"], "lowy2023", experiment, f"N{N}", "trial", trial),
                          compat=compat, fixed_rng=rng_for(job["seed"], "lowy2023", experiment, "fixed-split"))
        K = local_steps(p, data.n_for_K)
        settings = Settings(rounds=R, silos_per_round=M, local=K, average_last=p["average_last"],
                            divergence_threshold=p["divergence"]["threshold"], **authors_code_settings(experiment, algorithm, compat))
        W_star, F_star, newton_iters, newton_ok = newton_optimum(model, data.train.pooled_X, data.train.pooled_y)
        ups_rng = rng_for(job["seed"], "lowy2023", experiment, f"N{N}", "upsilon", trial)
        ups2 = float(np.mean([np.sum(model.grad(*_silo_rows(data.train, s, bootstrap=compat and experiment == "mnist",
                                                            rng=ups_rng), W_star) ** 2)
                              for s in range(data.train.n_silos)]))
        steps = step_grid(p, algorithm, method, M, K, mode)
        clip_values = clips if clips is not None else np.array([np.nan])
        # configs: ε (outer) × step × clip (inner)
        E, S_, C_ = np.meshgrid(np.arange(len(eps_grid)), np.arange(len(steps)), np.arange(len(clip_values)), indexing="ij")
        E, S_, C_ = E.ravel(), S_.ravel(), C_.ravel()
        eta = steps[S_]
        if clips is not None:
            L_cfg = clip_values[C_]  # insurance: the clip bound is the Lipschitz bound L = C
            clip_cfg = L_cfg
        else:
            L_cfg = np.full(len(E), data.lipschitz)
            # default: the private algorithms clip every per-example gradient at L (a no-op on these data that
            # makes the sensitivity bound unconditional); the authors' code does not clip here
            clip_cfg = L_cfg if private and not compat else np.full(len(E), np.inf)
        noise = np.zeros((len(E), N))
        diag = []
        if private:
            for e_i, eps in enumerate(eps_grid):
                for n_s in np.unique(data.train.counts):
                    # Q8: the authors' noisy Local SGD on insurance uses n = ⌈1338/N⌉ (and δ = 1/n²)
                    n_noise = data.n_for_K if compat and experiment == "insurance" and method == "local" else n_s
                    z = noise_multipliers(method, int(n_noise), K, R, float(eps), p["noise_calibration"])
                    diag.append({**z, "eps": eps})
                    silos = data.train.counts == n_s
                    sel = E == e_i
                    noise[np.ix_(sel, silos)] = (2 * z["z_used"] * L_cfg[sel])[:, None]
        grid = Grid(eta=eta, clip=clip_cfg, noise_std=noise)
        reps = p["reps"]
        rngs = [rng_for(job["seed"], "lowy2023", job["figure"], panel["id"], algorithm, "trial", trial, "rep", r)
                for r in range(reps)]
        if method == "minibatch":
            draws = minibatch_draws(rngs, data.train, settings, model.out_dim, replace=compat, noise=private)  # Q3
            res = minibatch_sgd(model, data.train, settings, grid, draws, reps)
        else:
            draws = local_draws(rngs, data.train, settings, model.out_dim, noise=private)
            res = local_sgd(model, data.train, settings, grid, draws, reps)
        with np.errstate(all="ignore"):
            if metric == "test_error":
                test = model.predict_error(data.X_test, data.y_test, res.W)
            else:
                test = np.sqrt(model.mse(data.X_test, data.y_test, res.W) / data.naive_mse)
        score = res.train_loss - (F_star if p["score"] == "excess_loss" else 0.0)
        penalty = p["divergence"]["penalty"]
        score = np.where(res.diverged, penalty, score)
        test = np.where(res.diverged, penalty, test)
        mean_score, mean_test = score.mean(axis=0), test.mean(axis=0)
        for e_i, eps in enumerate(eps_grid):
            sel = np.flatnonzero(E == e_i)
            best = sel[int(np.argmin(mean_score[sel]))]
            d_eps = [d for d in diag if d["eps"] == eps]
            rows.append({
                "trial": trial, "algorithm": algorithm, "label": label, "panel": panel["id"], "eps": eps,
                "test": float(mean_test[best]), "score": float(mean_score[best]), "step": float(eta[best]),
                "clip": float(clip_values[C_[best]]), "diverged_reps": int(res.diverged[:, best].sum()),
                "diverged_share_grid": float(res.diverged[:, sel].mean()), "grid_edge": _edge(S_[best], len(steps)),
                "K": K, "n_silos": N, "silos_per_round": M, "rounds": R, "upsilon2": ups2, "F_star": F_star,
                "newton_iterations": newton_iters, "newton_converged": newton_ok,
                "L": float(data.lipschitz) if clips is None else float(clip_values[C_[best]]),
                "z_used": min((d["z_used"] for d in d_eps), default=np.nan),
                "z_paper": min((d["z_paper"] for d in d_eps), default=np.nan),
                "eps_certified": max((d["eps_certified"] for d in d_eps), default=np.nan),
                "eps_certified_paper_noise": max((d["eps_certified_paper"] for d in d_eps), default=np.nan),
                "n_train_min": int(data.train.counts.min()), "n_test": len(data.y_test),
            })
        log(f"{panel['id']}/{algorithm} trial {trial + 1}/{p['trials']}: K = {K}, υ*² = {ups2:.3g}, "
            + ", ".join(f"ε={r['eps']:g}: {r['test']:.4g}" for r in rows[-len(eps_grid):]))
    return pd.DataFrame(rows)


def _z_accountant(algorithm: str, rows: pd.DataFrame, eps: float) -> float:
    """Diagnostics: the calibrated multiplier for the smallest silo (over trials), whatever calibration
    produced the curve (computed here, once per figure, not in every cell)."""
    label, method, private = ALGORITHMS[algorithm]
    if not private:
        return np.nan
    return min(calibrated_multiplier(method, int(n), int(K), int(R), float(eps))
               for n, K, R in rows[["n_train_min", "K", "rounds"]].drop_duplicates().itertuples(index=False))


def authors_code_settings(experiment: str, algorithm: str, compat: bool) -> dict:
    """How the authors' MB-SGD differs (spec §9): the server sums the silo reports (Q2, MNIST and
    insurance); insurance clips the batch-mean gradient, non-private MB-SGD with the clip factor of an
    independent batch (Q7); obesity sends batch sums and adds one noise draw to the average (Q9)."""
    if not compat or ALGORITHMS[algorithm][1] != "minibatch":
        return {}
    private = ALGORITHMS[algorithm][2]
    if experiment == "obesity":
        return {"batch": "sum", "noise_at": "server"}
    if experiment == "insurance":
        return {"aggregation": "sum", "clip": "batch_mean" if private else "batch_mean_other"}
    return {"aggregation": "sum"}


def _silo_rows(data: SiloData, s: int, bootstrap: bool, rng: np.random.Generator):
    """A silo's training rows; for the authors' υ*² estimate (Q6), n rows drawn with replacement."""
    c = int(data.counts[s])
    idx = rng.integers(0, c, c) if bootstrap else np.arange(c)
    return data.X[s, idx], data.y[s, idx]


def _edge(index: int, size: int) -> str:
    """Whether the chosen step lies on the edge of its grid (a hint that the grid is too narrow)."""
    return "low" if index == 0 else ("high" if index == size - 1 else "")


# --------------------------------------------------------------------------------------------------
# the figure table
# --------------------------------------------------------------------------------------------------


def aggregate(params: dict, mode: str, tables: list[pd.DataFrame], log) -> pd.DataFrame:
    """Mean over trials per algorithm and ε, with error bars (p95 − p5)/2 drawn symmetrically
    (spec §5); non-private algorithms are tuned once per trial and drawn flat across ε."""
    runs = pd.concat(tables, ignore_index=True)
    eps_grid = np.asarray(params["epsilons"], float)
    out = []
    for (panel, algorithm), d in runs.groupby(["panel", "algorithm"], sort=False):
        for eps in eps_grid:
            v = d if d["eps"].isna().all() else d[np.isclose(d["eps"], eps)]
            vals = v["test"].to_numpy(float)
            lo, hi = np.percentile(vals, 5), np.percentile(vals, 95)
            if mode == "authors-code" and EXPERIMENTS[params["experiment"]]["metric"] == "test_error":
                lo, hi = max(0.0, lo), min(1.0, hi)  # Q12: the authors clamp error-rate percentiles to [0, 1]
            half = max(hi - lo, 0.0) / 2 if params["error_bars"] else 0.0
            mean = float(vals.mean())
            out.append({
                "panel": panel, "curve": v["label"].iloc[0], "algorithm": algorithm, "x": eps, "y": mean,
                "y_lo": mean - half, "y_hi": mean + half,
                "se": float(vals.std(ddof=1) / np.sqrt(len(vals))) if len(vals) > 1 else 0.0,
                "trials": len(vals), "n_silos": int(v["n_silos"].iloc[0]), "silos_per_round": int(v["silos_per_round"].iloc[0]),
                "K": int(v["K"].iloc[0]), "upsilon2": float(v["upsilon2"].mean()),
                "eps_certified": float(v["eps_certified"].max()) if v["eps_certified"].notna().any() else np.nan,
                "eps_certified_paper_noise": float(v["eps_certified_paper_noise"].max()) if v["eps_certified_paper_noise"].notna().any() else np.nan,
                "z_used": float(v["z_used"].min()), "z_paper": float(v["z_paper"].min()),
                "z_accountant": _z_accountant(algorithm, v, eps),
                "step_median": float(v["step"].median()), "diverged_reps": int(v["diverged_reps"].sum()),
                "grid_edge_share": float((v["grid_edge"] != "").mean()),
            })
    return pd.DataFrame(out)
