"""The settings of one bietti2022 cell, read once from its job's params (`GridSettings.from_params`, at the start of
dpfl.papers.bietti2022.cell.run_cell) into frozen, typed objects; nothing below that boundary reads the params dict.

A cell's params are its figure's shared run settings (delta, seeds, dtype, implementation) and its grid's keys
(dpfl.papers.bietti2022.layout.GridLayout.cell_params), validated by workflow/schemas/papers/bietti2022.schema.yaml,
whose defaults the config loader fills in: a hand-made params dict gives every key. Each value is converted here
the way the cell always used it (int, float, a level's float), so that the runs compute the same numbers.

`params.implementation` (spec §8; `compat: authors-code` sets the published code's values): B1 `sampling: shuffle`
(each run's rounds come from a plan drawn up front: the first Q of the shuffled users with data left, until all are
exhausted; T and each round's rate L_t/N follow from it, and ε composes the rounds' rates), B2 `cnn_local_step:
times_users`, B3 `excess_risk: coordinate_mean`, B4 `end_point: last_multiple`, B5 `rng: per_run` (each config is
its own run with its own data and noise streams, named by (seed, η, a): one config per batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from dpfl.cell_settings import Switches
from dpfl.papers.bietti2022.layout import level

if TYPE_CHECKING:
    from dpfl.papers.bietti2022.ppsgd import Synthetic


@dataclass(frozen=True)
class Implementation(Switches):
    """params.implementation (spec §8): where the authors' published code differs from the paper. Each key's first
    allowed value (`CHOICES`) is the paper's algorithm, the schema's default; `compat: authors-code` sets the second,
    the published code's."""

    sampling: str  # B1 poisson | shuffle: the first Q of the shuffled users with data left, until all are exhausted
    cnn_local_step: str  # B2 eta_theta | times_users: the CNN's local step is L·η_θ
    excess_risk: str  # B3 coordinate_sum | coordinate_mean: the synthetic excess risk ÷ d
    end_point: str  # B4 last_round | last_multiple: the end of training is the last multiple of eval_every
    rng: str  # B5 per_seed | per_run: every run (config) its own data order and noise, no common random numbers

    PAPER: ClassVar[str] = "bietti2022"
    #: per key, its allowed values: the paper's (the schema's default), then the published code's
    CHOICES: ClassVar[dict[str, tuple[str, str]]] = {
        "sampling": ("poisson", "shuffle"), "cnn_local_step": ("eta_theta", "times_users"),
        "excess_risk": ("coordinate_sum", "coordinate_mean"), "end_point": ("last_round", "last_multiple"),
        "rng": ("per_seed", "per_run")}


@dataclass(frozen=True)
class FederatedSettings:
    """A federated task's data settings (spec §1.2-1.3, §3): the first `users` N users of the prepared data, Q =
    `users_per_round` sampled per round (Poisson at q = Q/N; B1: the first Q of the shuffled users), minibatches of
    `batch` m per sampled user, `epochs` E passes over the data (they set T where `rounds` is not given), and the test
    accuracy every `eval_every` rounds and after the last."""

    users: int
    users_per_round: int
    batch: int
    epochs: float
    eval_every: int

    KEYS: ClassVar[tuple[str, ...]] = ("users", "users_per_round", "batch", "epochs", "eval_every")


@dataclass(frozen=True)
class GridSettings:
    """One cell's settings: its grid (`grid`, the id that names it) of PP-SGD runs on `task` with `model`, every
    (η, a) of `etas` × `levels` (the cell's levels: a = 0 for '<grid>-local', a > 0 for '<grid>-sigma<σ>'; its σ comes
    from the cell's name), run for each of `seeds` (data streams) in `dtype`, with the global part's per-user
    gradient clipped at `clip` and ε reported at `delta`. Configs are trained together as many at a time as fit
    `max_memory_mib`. `rounds` T is configured (the synthetic task: always) or None (a federated task: T from the
    data's passes). Exactly one of `synthetic` (the generated task, spec §1.1) and `federated` is set."""

    grid: str
    task: str
    model: str  # linear | cnn (image tasks only, dpfl.papers.bietti2022.tasks)
    etas: tuple[float, ...]  # base steps η; the tables take the best η at every evaluation point
    levels: tuple[float, ...]  # personalization levels a = αQ (inf: global only)
    seeds: tuple[int, ...]
    dtype: str  # float32 | float64
    clip: float
    delta: float
    max_memory_mib: float
    implementation: Implementation
    rounds: int | None
    synthetic: Synthetic | None
    federated: FederatedSettings | None

    #: the keys every cell's params give, and those it may give that the cell does not read here: `sigmas` (the σ
    #: is the cell's name's); the other task kind's keys (a federated grid carries the schema's default `synthetic`)
    KEYS: ClassVar[tuple[str, ...]] = ("grid", "task", "model", "etas", "levels", "seeds", "dtype", "clip", "delta",
                                       "max_memory_mib", "implementation")
    IGNORED: ClassVar[tuple[str, ...]] = ("sigmas",)
    DTYPES: ClassVar[tuple[str, ...]] = ("float32", "float64")
    MODELS: ClassVar[tuple[str, ...]] = ("linear", "cnn")

    @classmethod
    def from_job(cls, job) -> GridSettings:
        """The cell's settings (the boundary a cell crosses at its start, dpfl.figure.FigureFamily.settings)."""
        return cls.from_params(job.params)

    @classmethod
    def from_params(cls, params: Mapping) -> GridSettings:
        """The settings of a cell's params (dpfl.jobs.CellJob.params): every key known, the ones the task needs
        given, the enumerations checked; values converted as the cell always did (`rounds`: None when absent, null
        or 0)."""
        from dpfl.papers.bietti2022.ppsgd import Synthetic

        synthetic = params.get("task") == "synthetic"
        needed = [*cls.KEYS, *(("synthetic", "rounds") if synthetic else FederatedSettings.KEYS)]
        known = {*cls.KEYS, *cls.IGNORED, "synthetic", "rounds", *FederatedSettings.KEYS}
        unknown, missing = sorted(set(params) - known), sorted(set(needed) - set(params))
        if unknown or missing:
            raise ValueError(f"bietti2022 cell params: unknown key(s) {unknown}, missing key(s) {missing}; expected "
                             f"{sorted(needed)} (and optionally {sorted(known - set(needed))})")
        for key, allowed in (("dtype", cls.DTYPES), ("model", cls.MODELS)):
            if params[key] not in allowed:
                raise ValueError(f"bietti2022 grid {params['grid']}: {key} {params[key]!r}; allowed: "
                                 f"{', '.join(allowed)}")
        rounds = int(params["rounds"]) if params.get("rounds") else None
        if synthetic and rounds is None:
            raise ValueError(f"bietti2022 grid {params['grid']}: the synthetic task needs rounds ≥ 1, got "
                             f"{params['rounds']!r}")
        federated = None if synthetic else FederatedSettings(
            users=int(params["users"]), users_per_round=int(params["users_per_round"]), batch=int(params["batch"]),
            epochs=float(params["epochs"]), eval_every=int(params["eval_every"]))
        return cls(grid=params["grid"], task=params["task"], model=params["model"],
                   etas=tuple(float(e) for e in params["etas"]), levels=tuple(level(a) for a in params["levels"]),
                   seeds=tuple(int(s) for s in params["seeds"]), dtype=params["dtype"], clip=float(params["clip"]),
                   delta=float(params["delta"]), max_memory_mib=float(params["max_memory_mib"]),
                   implementation=Implementation.from_params(params), rounds=rounds,
                   synthetic=Synthetic(**params["synthetic"]) if synthetic else None, federated=federated)
