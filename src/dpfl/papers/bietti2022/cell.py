"""One bietti2022 cell: PP-SGD over the grid of (η, a) of one σ (or the a = 0 runs), every seed, on one task.

The configs of a cell are trained together (dpfl.papers.bietti2022.ppsgd): one W (G, d, K) and one Θ (N, d, G, K)
per seed. The data stream of a seed (user samples, minibatches) is named by (task, seed) only, not by the cell, so
every cell of a seed sees the same data (common random numbers across σ and a); the noise vector ξ is named by
(task, seed, σ) (`Streams`). Each (config batch, seed) is one run of dpfl.fl.engine.run_rounds: the model strategy's
round (`_PpSgdRounds`), the task's evaluation at the scheduled rounds (`_GridEvaluation`), no freeze (a row whose
metric is not finite is marked failed). Tasks: `synthetic` (spec §1.1, generated here; excess risk after every
round) and `emnist` (spec §1.3, the prepared federated EMNIST; top-1 test accuracy every `eval_every` rounds and
after the last).
Returns one row per (seed, a, η, evaluation round): the metric, ε nominal / certified, and `end` (the run's end of
training, which the tables read as "final"). ε certified equals ε nominal except under B1 `sampling: shuffle`, whose
nominal ε is the authors' Poisson analysis of a fixed-size sampler; there it is what a certificate without
amplification gives (dpfl.papers.bietti2022.methods.shuffled_certified_curve).

`params.implementation` (spec §8; `compat: authors-code` sets the published code's values): B1 `sampling: shuffle`
(each run's rounds come from a plan drawn up front: the first Q of the shuffled users with data left, until all are
exhausted; T and each round's rate L_t/N follow from it, and ε composes the rounds' rates), B2 `cnn_local_step:
times_users`, B3 `excess_risk: coordinate_mean`, B4 `end_point: last_multiple`, B5 `rng: per_run` (each config is
its own run with its own data and noise streams, named by (seed, η, a): one config per batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfl.fl.engine import Evaluation, RoundRule
from dpfl.papers.bietti2022.layout import evaluation_rounds, level, level_name, parse_cell
from dpfl.seeds import rng_for, torch_generator

#: per federated task: the prepared dataset, classes, the target shift (one-hot minus 0.1, spec §2)
FEDERATED = {"emnist": {"dataset": "emnist", "classes": 10, "shift": 0.1, "sparse": False},
             "stackoverflow": {"dataset": "stackoverflow", "classes": 80, "shift": 0.1, "sparse": True}}


#: params.implementation's keys (spec §8). Their defaults, the paper's algorithm, live in the schema
#: (workflow/schemas/papers/bietti2022.schema.yaml); `compat: authors-code` sets the published code's values:
IMPLEMENTATION = (
    "sampling",  # B1 poisson | shuffle: the first Q of the shuffled users with data left, until all are exhausted
    "cnn_local_step",  # B2 eta_theta | times_users: the CNN's local step is L·η_θ
    "excess_risk",  # B3 coordinate_sum | coordinate_mean: the synthetic excess risk ÷ d
    "end_point",  # B4 last_round | last_multiple: the end of training is the last multiple of eval_every
    "rng",  # B5 per_seed | per_run: every run (config) its own data order and noise, no common random numbers
)


def implementation(params: dict) -> dict:
    """params.implementation with every key given (the config loader fills the schema's defaults; a hand-made params
    dict must give them all)."""
    impl = params["implementation"]
    unknown, missing = sorted(set(impl) - set(IMPLEMENTATION)), sorted(set(IMPLEMENTATION) - set(impl))
    if unknown or missing:
        raise ValueError(f"bietti2022: params.implementation: unknown key(s) {unknown}, missing key(s) {missing}; "
                         f"expected exactly {list(IMPLEMENTATION)}")
    return impl


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


@dataclass
class _Run:
    """One run's data: `next()` gives round t's batch; T rounds; q the user rate of every round (B1: per round)."""

    next: object
    T: int
    q: object
    full_T: int | None = None  # T of the configured passes, where the data sets it
    most_rounds: int | None = None  # B1: the most rounds one user takes part in (None: Poisson, certified = nominal)


class _PpSgdRounds(RoundRule):
    """A run's PP-SGD rounds: the model strategy's step (in place) on round t's batch of the data stream, with the
    run's noise Generator, at the round's user rate (B1: per round)."""

    def __init__(self, model, run: _Run, noise_gen, q: float):
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


class _Setup:
    """What a task contributes to the loop: sizes, rounds, user rate q, the per-round draw and the evaluation."""

    def __init__(self, job, inputs, dtype, device, log):
        import torch

        p, self.task = job.params, job.params["task"]
        self.sparse = False  # bag-of-words rows (Stackoverflow)
        impl = implementation(p)
        self.streams = streams = Streams(job.seed, self.task)
        if self.task == "synthetic":
            from dpfl.papers.bietti2022.ppsgd import Synthetic, excess_risk

            syn = Synthetic(**p["synthetic"])
            truth, scales = syn.truth(dtype).to(device), syn.scales(dtype).to(device)
            self.N, self.d, self.K, self.q, self.T = syn.n_users, syn.dim, 1, 1.0, int(p["rounds"])
            self.T_epochs = None  # T is configured, not derived from the data
            self.metric, self.every = "excess_risk", None
            if impl["excess_risk"] == "coordinate_mean":  # B3: the authors' code divides by d (both are stored)
                self.metric = "excess_risk_per_coordinate"

            def stream(seed, run=()):
                gen = torch.Generator(device=device).manual_seed(streams.data(seed, run))
                return _Run(lambda: syn.draw(truth, gen), self.T, 1.0)

            def evaluate(W, Th):
                risk = excess_risk(W, Th, truth, scales)
                risk = torch.where(torch.isfinite(risk), risk, torch.full_like(risk, math.nan)).cpu().numpy()
                return {"excess_risk": risk, "excess_risk_per_coordinate": risk / syn.dim}
        elif self.task in FEDERATED:
            from dpfl.papers.bietti2022.federated import FederatedTask, UserStreams, accuracy
            from dpfl.papers.bietti2022.sparse import SparseTask, SparseUserStreams

            spec = FEDERATED[self.task]
            arrays = dict(np.load(inputs["prepared"][spec["dataset"]], allow_pickle=False))
            self.sparse = spec["sparse"]
            if self.sparse:  # bag of words: compact personal rows, sparse products (dpfl.papers.bietti2022.sparse)
                data = SparseTask.from_arrays(arrays, int(p["users"]), spec["shift"], dtype, device)
                UserStreams = SparseUserStreams  # noqa: N806
            else:
                data = FederatedTask.from_arrays(arrays, int(p["users"]), spec["classes"], spec["shift"], dtype, device)
            m, Q = int(p["batch"]), int(p["users_per_round"])
            self.N, self.d, self.K = data.n_users, data.dim, spec["classes"]
            self.q = min(1.0, Q / self.N)
            self.T_epochs = data.rounds(float(p["epochs"]), Q, m)  # T of the configured passes (spec §3)
            self.T = int(p["rounds"]) if p.get("rounds") else self.T_epochs
            self.metric, self.every = "accuracy", int(p["eval_every"])
            shuffle = impl["sampling"] == "shuffle"
            log(f"{self.task}: {self.N} users, {int(data.counts().sum())} training rows, d = {self.d}, K = {self.K}, "
                + (f"the first Q = {Q} of the shuffled users with data each round until all are exhausted (B1)"
                   if shuffle else f"q = {self.q:g}, T = {self.T}"))

            self.data = data

            def stream(seed, run=()):
                users = UserStreams(data, m, self.q, np.random.default_rng(streams.data(seed, run)),
                                    sampling=impl["sampling"], per_round=Q, epochs=float(p["epochs"]))
                if not shuffle:
                    return _Run(users.next_batch, self.T, self.q, self.T_epochs)
                T = min(users.rounds, int(p["rounds"])) if p.get("rounds") else users.rounds
                return _Run(users.next_batch, T, users.users_per_round[:T] / self.N, users.rounds,
                            int(users.rounds_per_user.max(initial=0)))

            def evaluate(W, Th):
                acc = accuracy(data, W, Th).cpu().numpy()
                return {"accuracy": np.where(np.isfinite(acc), acc, np.nan)}
        else:
            raise ValueError(f"bietti2022: unknown task {self.task!r}; known: synthetic, {', '.join(FEDERATED)}")
        self.stream, self.evaluate = stream, evaluate

    def end_round(self, T: int, end_point: str) -> int:
        """The round whose evaluation is the end of training: the last (the paper), or with `last_multiple` (B4) the
        last multiple of eval_every (real data; the synthetic task evaluates every round)."""
        if end_point == "last_multiple" and self.every is not None and T >= self.every:
            return T // self.every * self.every
        return T


class _Storage:
    """Zeroed storage reused by the models of successive config batches and seeds: allocating a multi-GiB Θ anew
    costs seconds of page faults each time (Stackoverflow: ≈ 4 s per 4 GiB batch)."""

    def __init__(self):
        self.flat = None

    def zeros(self, shape, dtype, device):
        import torch

        n = math.prod(shape)
        if self.flat is None or self.flat.numel() < n or self.flat.dtype != dtype:
            self.flat = None  # free the old storage first
            self.flat = torch.empty(n, dtype=dtype, device=device)
        return self.flat[:n].view(shape).zero_()


class _LinearModel:
    """The linear models (spec §2): W (G, d, K), Θ (N, d, G, K), both zero at the start."""

    def __init__(self, setup, G, grid_t, clip, dtype, device, storage=None, local_times_users: bool = False):
        self.setup, self.G, self.gt, self.clip, self.dtype, self.device = setup, G, grid_t, clip, dtype, device
        self.storage = storage or _Storage()
        self.local_times_users = local_times_users

    def memory_mib(self) -> float:
        s = self.setup
        return self.G * s.N * s.d * s.K * torch_bytes(self.dtype) / 2**20

    def start(self):
        import torch

        s = self.setup
        return (torch.zeros((self.G, s.d, s.K), dtype=self.dtype, device=self.device),
                self.storage.zeros((s.N, s.d, self.G, s.K), self.dtype, self.device))

    def step(self, state, batch, noise_gen, q: float) -> None:
        import torch

        from dpfl.papers.bietti2022.ppsgd import ppsgd_round

        s = self.setup
        xi = torch.randn((s.d, s.K), generator=noise_gen, device=self.device).to(self.dtype)  # float32 draws
        ppsgd_round(*state, batch, self.gt, clip=self.clip, q=q, n_users=s.N, xi=xi)

    def evaluate(self, state) -> dict:
        return self.setup.evaluate(*state)


class _CnnModel(_LinearModel):
    """The CNN (spec §2, EMNIST): Φ and w global (Glorot / N(0,1)/√32 init, key 42), Θ (N, G, 32, K) zero."""

    def memory_mib(self) -> float:
        from dpfl.papers.bietti2022.cnn import FEATURES

        return self.G * self.setup.N * FEATURES * self.setup.K * torch_bytes(self.dtype) / 2**20

    def start(self):
        import torch

        from dpfl.papers.bietti2022.cnn import FEATURES, initial

        phi0, w0 = initial(self.setup.K, seed=42, dtype=self.dtype)
        phi = {k: v.to(self.device)[None].repeat(self.G, *[1] * v.dim()).contiguous() for k, v in phi0.items()}
        w = w0.to(self.device)[None].repeat(self.G, 1, 1).contiguous()
        return phi, w, torch.zeros((self.setup.N, self.G, FEATURES, self.setup.K), dtype=self.dtype, device=self.device)

    def step(self, state, batch, noise_gen, q: float) -> None:
        import torch

        from dpfl.papers.bietti2022.cnn import cnn_round

        phi, w, _ = state
        noise = {k: torch.randn(v.shape[1:], generator=noise_gen, device=self.device).to(self.dtype)
                 for k, v in [*phi.items(), ("_w", w)]}
        local_scale = float(len(batch.users)) if self.local_times_users else 1.0  # B2: L·η_θ
        cnn_round(*state, batch, self.gt, clip=self.clip, q=q, n_users=self.setup.N, noise=noise,
                  local_scale=local_scale)

    def evaluate(self, state) -> dict:
        from dpfl.papers.bietti2022.cnn import cnn_accuracy

        acc = cnn_accuracy(self.setup.data, *state).cpu().numpy()
        return {"accuracy": np.where(np.isfinite(acc), acc, np.nan)}


class _SparseModel(_LinearModel):
    """The linear model on bag-of-words rows: W (G, d, K) and the compact Θ (Σ_i |V_i| + 1, G, K)."""

    def memory_mib(self) -> float:
        return self.G * (self.setup.data.theta_rows() + self.setup.d) * self.setup.K * torch_bytes(self.dtype) / 2**20

    def start(self):
        from dpfl.papers.bietti2022.sparse import SparseState

        s = self.setup
        return SparseState.zeros(s.d, s.K, s.data.theta_rows(), self.gt, clip=self.clip, q=s.q, n_users=s.N,
                                 dtype=self.dtype, device=self.device,
                                 theta=self.storage.zeros((s.data.theta_rows() + 1, self.G, s.K), self.dtype,
                                                          self.device))

    def step(self, state, batch, noise_gen, q: float) -> None:
        import torch

        from dpfl.papers.bietti2022.sparse import sparse_round

        s = self.setup
        xi = torch.randn((s.d, s.K), generator=noise_gen, device=self.device).to(self.dtype)
        sparse_round(state, batch, self.gt, clip=self.clip, q=q, n_users=s.N, xi=xi)

    def evaluate(self, state) -> dict:
        from dpfl.papers.bietti2022.sparse import sparse_accuracy

        acc = sparse_accuracy(self.setup.data, state).cpu().numpy()
        return {"accuracy": np.where(np.isfinite(acc), acc, np.nan)}


def torch_bytes(dtype) -> int:
    import torch

    return torch.finfo(dtype).bits // 8


def run_cell(job, inputs: dict, log) -> pd.DataFrame:
    import torch

    from dpfl.fl.device import describe, resolve_device
    from dpfl.fl.engine import NoFreeze, progress_rounds, run_rounds
    from dpfl.io import Progress
    from dpfl.papers.bietti2022.methods import epsilon_curve, shuffled_certified_curve
    from dpfl.papers.bietti2022.ppsgd import Grid, grid_tensors

    p = job.params
    _, sigma = parse_cell(job.cell)
    levels = [level(a) for a in p["levels"]]
    grid = Grid.product(p["etas"], levels, [0.0 if sigma is None else sigma])
    device = resolve_device(job.device)
    dtype = {"float32": torch.float32, "float64": torch.float64}[p["dtype"]]
    clip, delta = float(p["clip"]), float(p["delta"])
    setup = _Setup(job, inputs, dtype, device, log)
    impl = implementation(p)
    per_run = impl["rng"] == "per_run"
    N, d, K, q, T = setup.N, setup.d, setup.K, setup.q, setup.T
    kind = p["model"]
    if kind == "cnn" and (setup.task not in FEDERATED or setup.sparse):
        raise ValueError(f"bietti2022 grid {p['grid']}: model cnn needs an image task (emnist)")
    Model = _CnnModel if kind == "cnn" else _SparseModel if setup.sparse else _LinearModel  # noqa: N806
    per_config = Model(setup, 1, None, clip, dtype, device).memory_mib()
    # configs trained together: as many as fit `max_memory_mib` (each batch replays the same data and noise draws)
    size = max(1, min(len(grid), int(float(p["max_memory_mib"]) // max(per_config, 1e-9))))
    size = 1 if per_run else size  # B5: no two runs share a stream
    batches = [np.arange(a, min(len(grid), a + size)) for a in range(0, len(grid), size)]
    log(f"{job.cell}: {kind} model, {len(grid)} configs (η × a) in {len(batches)} batch(es) of ≤ {size}, N = {N}, "
        f"d = {d}, K = {K}, "
        f"T = {T if impl['sampling'] == 'poisson' or setup.task == 'synthetic' else 'until the data is exhausted'}, "
        f"seeds {list(p['seeds'])}, device {describe(device)}; the models take "
        f"{per_config * size:.0f} MiB per batch")
    rows, storage = [], _Storage()
    training, evaluating, rounds_run, evaluations, full_T, eps_cache = 0.0, 0.0, 0, 0, [], {}
    progress = Progress(len(batches) * len(p["seeds"]) * len(progress_rounds(T)), log, f"{job.cell}: checkpoint")
    for idx in batches:
        sub = Grid(grid.eta[idx], grid.a[idx], grid.sigma[idx])
        model = Model(setup, len(sub), grid_tensors(sub, dtype, device), clip, dtype, device, storage,
                      local_times_users=impl["cnn_local_step"] == "times_users")
        # B5 per_run: the run (its one config) names its own data and noise streams
        run_key = (float(sub.eta[0]), float(sub.a[0])) if per_run else ()
        keys = [{"a": float(sub.a[g]), "level": level_name(sub.a[g]), "eta": float(sub.eta[g])}
                for g in range(len(sub))]
        for seed in p["seeds"]:
            run = setup.stream(seed, run_key)
            noise_gen = setup.streams.noise(seed, sigma, run_key, device)
            eval_at, end = evaluation_rounds(run.T, setup.every), setup.end_round(run.T, impl["end_point"])
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
    # per seed, all configs of the cell (every batch): a round's training, and one evaluation (dpfl.bench)
    df["seconds_per_round"] = training / (rounds_run / len(batches))
    df["seconds_per_evaluation"] = evaluating / (evaluations / len(batches))
    df["evaluations"] = evaluations // len(batches)
    df["config_batches"] = len(batches)
    df["device"] = describe(device)
    df["metric"] = setup.metric
    df["q"] = q  # the nominal rate Q/N (B1: round t is accounted at L_t/N)
    df["grid"] = p["grid"]
    df["model"] = kind
    df["sampling"] = impl["sampling"]
    if full_T and full_T[0] is not None:
        df["rounds_from_epochs"] = max(full_T)  # the full run's T (the benchmark's reduced runs set rounds)
    return df
