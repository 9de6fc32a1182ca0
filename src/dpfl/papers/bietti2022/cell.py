"""One bietti2022 cell: PP-SGD over the grid of (η, a) of one σ (or the a = 0 runs), every seed, on one task.

The configs of a cell are trained together (dpfl.papers.bietti2022.ppsgd): one W (G, d, K) and one Θ (G, N, d, K)
per seed. The data stream of a seed (user samples, minibatches) is named by (task, seed) only, not by the cell, so
every cell of a seed sees the same data (common random numbers across σ and a); the noise vector ξ is named by
(task, seed, σ). Returns one row per (seed, a, η, evaluation round): the metric, and ε nominal / certified.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from dpfl.papers.bietti2022.layout import level, level_name, parse_cell


def _metric_rows(values: dict, grid, seed: int, t: int) -> list[dict]:
    rows = []
    for g in range(len(grid)):
        row = {"seed": seed, "a": float(grid.a[g]), "level": level_name(grid.a[g]), "eta": float(grid.eta[g]),
               "round": t}
        row.update({k: float(v[g]) for k, v in values.items()})
        rows.append(row)
    return rows


def run_cell(job, inputs: dict, log) -> pd.DataFrame:
    import torch

    from dpfl.fl.device import describe, resolve_device
    from dpfl.io import Progress
    from dpfl.papers.bietti2022.methods import epsilon_curve
    from dpfl.papers.bietti2022.ppsgd import Grid, Synthetic, excess_risk, grid_tensors, ppsgd_round
    from dpfl.seeds import rng_for

    p = job.params
    task = p["task"]
    if task != "synthetic":
        raise ValueError(f"bietti2022 task {task!r} has no runner yet; known: synthetic")
    sigma = parse_cell(job.cell)
    levels = [level(a) for a in p["levels"]]
    grid = Grid.product(p["etas"], levels, [0.0 if sigma is None else sigma])
    device = resolve_device(job.device)
    dtype = {"float32": torch.float32, "float64": torch.float64}[p.get("dtype", "float32")]
    T, clip, delta = int(p["rounds"]), float(p["clip"]), float(p["delta"])
    syn = Synthetic(**p["synthetic"])
    N, q = syn.n_users, 1.0  # every user, every round (spec §3 step 1)
    truth = syn.truth(dtype).to(device)
    scales = syn.scales(dtype).to(device)
    gt = grid_tensors(grid, dtype, device)
    log(f"{job.cell}: {len(grid)} configs (η × a), N = {N}, d = {syn.dim}, T = {T}, seeds {list(p['seeds'])}, "
        f"device {describe(device)}")
    rows, start = [], time.perf_counter()
    every = max(1, T // 10)
    progress = Progress(len(p["seeds"]) * math.ceil(T / every), log, f"{job.cell}: checkpoint")
    for seed in p["seeds"]:
        data_gen = torch.Generator(device=device).manual_seed(
            int(rng_for(job.seed, "bietti2022", task, "data", seed).integers(2**62)))
        noise_gen = torch.Generator(device=device).manual_seed(
            int(rng_for(job.seed, "bietti2022", task, "noise", seed, sigma or 0.0).integers(2**62)))
        W = torch.zeros((len(grid), syn.dim, 1), dtype=dtype, device=device)
        Th = torch.zeros((len(grid), N, syn.dim, 1), dtype=dtype, device=device)

        def evaluate(t):
            risk = excess_risk(W, Th, truth, scales)
            finite = torch.isfinite(risk)
            risk = torch.where(finite, risk, torch.full_like(risk, math.nan)).cpu().numpy()
            rows.extend(_metric_rows({"excess_risk": risk, "excess_risk_per_coordinate": risk / syn.dim},
                                     grid, seed, t))

        evaluate(0)
        for t in range(1, T + 1):
            batch = syn.draw(truth, data_gen)
            xi = torch.randn((syn.dim, 1), generator=noise_gen, device=device).to(dtype)  # float32 draws (see draw)
            ppsgd_round(W, Th, batch, gt, clip=clip, q=q, n_users=N, xi=xi)
            evaluate(t)
            if t % every == 0 or t == T:
                best = np.nanmin([r["excess_risk"] for r in rows[-len(grid):]] + [np.inf])
                progress.step(f"seed {seed}, round {t}/{T}, best excess risk {best:.4g}")
    seconds = time.perf_counter() - start
    df = pd.DataFrame(rows)
    eps = {}
    for a in sorted(set(levels)):
        curve = np.concatenate([[0.0], epsilon_curve(sigma or 0.0, a, T, q, delta)])  # nothing released at t = 0
        eps[level_name(a)] = curve
    df["eps"] = [eps[lv][t] for lv, t in zip(df["level"], df["round"])]
    df["eps_certified"] = df["eps"]  # the noise used is the noise accounted for (multiplier σ on the sum's C)
    df["sigma"] = np.nan if sigma is None else sigma
    df["failed"] = ~np.isfinite(df["excess_risk"])
    df["seconds_per_round"] = seconds / (T * len(p["seeds"]))
    df["device"] = describe(device)
    df["metric"] = "excess_risk"
    return df
