"""The settings of one kato2024 training cell (Figs 4-10), read once from its job's params
(`TrainingSettings.from_job`, at the start of dpfl.papers.kato2024.training.cell.run_cell) into frozen, typed
objects; nothing below that boundary reads the params dict.

A cell's params are its figure's run settings and its own panel's
(dpfl.papers.kato2024.training.layout.TrainingLayout.runs_params: the panel, the hyper-parameter blocks of its
methods with the panel's overrides merged in, its methods, the sampling rates where ULDP-AVG-ws runs),
validated by workflow/schemas/papers/kato2024.schema.yaml, whose defaults the config loader fills in: a hand-made
params dict gives every key. Each value is converted here the way the cell always used it (int, float, the typed
hyper-parameter block of dpfl.papers.kato2024.methods), so that the runs compute the same numbers.

`params.implementation` (docs/papers/kato2024.md; `compat: authors-code` sets the published code's values): K1
`sgd_gradient: authors` (ULDP-SGD's per-user gradient: Σ over its batches of the batch-mean gradient / batch size),
K2 `test_loss: batch_sum` (the plotted test loss; the cell stores both, the figure table picks one), K4
`group_orders: authors` (GROUP's RDP orders), K5 `group_parallel: epsilon` (GROUP's parallel composition over silos),
K6 `group_conversion: normal` (GROUP's plotted ε from the (ε, δ) group conversion).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import ClassVar

from dpfl.cell_settings import Switches, count, exact_keys, one_of
from dpfl.papers.kato2024.methods import BY_ID, HYPER_BLOCKS, LocalHyper, SgdHyper, UldpMethod
from dpfl.papers.kato2024.panels import DISTRIBUTIONS, Panel
from dpfl.papers.kato2024.training.layout import method_cells, run_id

WHERE = "kato2024 training cell"
PARAMS = f"{WHERE}: params"  # where a top-level key is, in the messages


@dataclass(frozen=True)
class Implementation(Switches):
    """params.implementation: where the authors' published code differs from the paper. Each key's first allowed
    value (`CHOICES`) is the paper's, the schema's default; `compat: authors-code` sets the second, the code's."""

    sgd_gradient: str  # K1 mean | authors: Σ over the user's batches of the batch-mean gradient / batch size
    test_loss: str  # K2 mean | batch_sum: the sum of per-batch means at eval_batch (read by the figure table)
    group_orders: str  # K4 mironov | authors: the authors' RDP order set for GROUP's group conversion
    group_conversion: str  # K6 rdp | normal: the (ε, δ) group conversion, k capped at 62, every 5th round
    group_parallel: str  # K5 rdp | epsilon: the max of the silos' ε instead of the per-order max of their RDP

    PAPER: ClassVar[str] = "kato2024"
    #: per key, its allowed values: the paper's (the schema's default), then the published code's
    CHOICES: ClassVar[dict[str, tuple[str, str]]] = {
        "sgd_gradient": ("mean", "authors"), "test_loss": ("mean", "batch_sum"),
        "group_orders": ("mironov", "authors"), "group_conversion": ("rdp", "normal"),
        "group_parallel": ("rdp", "epsilon")}


@dataclass(frozen=True)
class RunSettings:
    """One run of a panel cell (one curve): `method` at user sampling rate `q` (ULDP-AVG-ws; None: every user
    every round) with the typed hyper-parameters of its scheme (`hyper`: η_g, η_l, Q, C as the scheme uses them,
    dpfl.papers.kato2024.methods.HYPER_BLOCKS)."""

    method: UldpMethod
    q: float | None
    hyper: LocalHyper | SgdHyper

    @property
    def rate(self) -> float:
        """The rate the round rule and the accountant use: q, or 1 (no sampling)."""
        return 1.0 if self.q is None else self.q

    def name(self, panel: str) -> str:
        """The run's name in the cell's table: "<panel>-<method id>[-q<q>]"."""
        return run_id(panel, self.method.id, self.q)


@dataclass(frozen=True)
class TrainingSettings:
    """One panel cell's settings: its `panel` of the figure's `dataset` (the seeds' allocations of the scheme
    `allocation`), its `runs` in legend order (`method_cells`: every method, ULDP-AVG-ws once per sampling rate), each
    computed for every one of `seeds` (batched) over T = `rounds` rounds with local batch B = `batch`, noise
    multiplier σ = `sigma` and ε reported at `delta`; `eval_batch` the batch of the paper's per-batch-sum test loss
    (K2), `train_subsample` the share of each seed's training records kept (reduced scales), `pair_chunk` the most
    (user, silo) pairs trained in one batched step (None: all of a bucket)."""

    dataset: str
    allocation: str
    panel: Panel
    runs: tuple[RunSettings, ...]
    seeds: tuple[int, ...]
    rounds: int
    batch: int
    sigma: float
    delta: float
    eval_batch: int
    train_subsample: float
    pair_chunk: int | None
    implementation: Implementation

    #: the keys every cell's params give, and the one given only where ULDP-AVG-ws runs
    KEYS: ClassVar[tuple[str, ...]] = ("dataset", "allocation", "panels", "methods", "seeds", "rounds", "batch",
                                       "sigma", "delta", "eval_batch", "train_subsample", "pair_chunk", "hyper",
                                       "implementation")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("sampling_rates",)

    @classmethod
    def from_job(cls, job) -> TrainingSettings:
        """The cell's settings (the boundary a cell crosses at its start, dpfl.figure.FigureFamily.settings)."""
        return cls.from_params(job.params, job.cell)

    @classmethod
    def from_params(cls, params: Mapping, cell: str) -> TrainingSettings:
        """The settings of panel cell `cell` from its params (dpfl.jobs.CellJob.params): every key known,
        the dataset, allocation scheme, methods and hyper-parameter blocks checked; values converted as the cell
        always did."""
        exact_keys(f"{WHERE} params", params, cls.KEYS, cls.OPTIONAL)  # OPTIONAL: where ULDP-AVG-ws runs
        for key in ("dataset", "allocation"):
            one_of(f"{WHERE}: params.{key}", params[key], tuple(DISTRIBUTIONS))
        dataset = params["dataset"]
        seeds = params["seeds"]
        if isinstance(seeds, (str, Mapping)) or not seeds:
            raise ValueError(f"{WHERE}: params.seeds: {seeds!r}; expected a non-empty list of integers ≥ 0")
        panel = Panel.from_params(params, cell, dataset, WHERE)
        chunk = params["pair_chunk"]
        return cls(dataset=dataset, allocation=params["allocation"], panel=panel, runs=_runs(params),
                   seeds=tuple(_seed(s) for s in seeds), rounds=count(PARAMS, "rounds", params["rounds"]),
                   batch=count(PARAMS, "batch", params["batch"]), sigma=_real(params, "sigma", 0, None),
                   delta=_real(params, "delta", 0, 1, open_low=True, open_high=True),
                   eval_batch=count(PARAMS, "eval_batch", params["eval_batch"]),
                   train_subsample=_real(params, "train_subsample", 0, 1, open_low=True),
                   pair_chunk=None if chunk is None else count(PARAMS, "pair_chunk", chunk),
                   implementation=Implementation.from_params(params))


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"{WHERE}: params.seeds: {seed!r}; expected integers ≥ 0")
    return int(seed)


def _real(params: Mapping, key: str, low: float, high: float | None, *, open_low: bool = False,
          open_high: bool = False) -> float:
    """params[key] as the cell has always read it (`float`), or a ValueError naming the key and its range."""
    value = params[key]
    x = float(value) if isinstance(value, Real) and not isinstance(value, bool) else math.nan
    above = x > low if open_low else x >= low  # NaN (not a number) is neither
    below = high is None or (x < high if open_high else x <= high)
    if not (above and below):
        span = (f"{'(' if open_low else '['}{low:g}, {'∞' if high is None else f'{high:g}'}"
                f"{')' if open_high or high is None else ']'}")
        raise ValueError(f"{WHERE}: params.{key}: {value!r}; expected a number in {span}")
    return x


def _runs(params: Mapping) -> tuple[RunSettings, ...]:
    """The cell's runs (`method_cells`), each with its scheme's typed hyper-parameters: params.methods known,
    params.sampling_rates given where ULDP-AVG-ws runs, params.hyper holding a block of each method's scheme (and
    of no unknown scheme), each block exactly the keys its scheme uses (UldpMethod.hyper_params, whose HyperError
    names the method and the key)."""
    methods = params["methods"]
    if isinstance(methods, (str, Mapping)) or not methods:
        raise ValueError(f"{WHERE}: params.methods: {methods!r}; expected a non-empty list of method ids")
    for mid in methods:
        if mid not in BY_ID:
            raise ValueError(f"{WHERE}: params.methods: unknown method {mid!r}; allowed: {', '.join(BY_ID)}")
    sampled = [mid for mid in methods if BY_ID[mid].sampled]
    if sampled and not params.get("sampling_rates"):
        raise ValueError(f"{WHERE}: params.sampling_rates: {params.get('sampling_rates')!r} gives "
                         f"{', '.join(sampled)} no run; expected at least one rate q in (0, 1]")
    if not sampled and "sampling_rates" in params:
        raise ValueError(f"{WHERE}: params.sampling_rates: given, but no listed method samples users "
                         f"(only {', '.join(m.id for m in BY_ID.values() if m.sampled)} does)")
    for q in params.get("sampling_rates") or ():
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q <= 1:
            raise ValueError(f"{WHERE}: params.sampling_rates: {q!r}; expected rates q in (0, 1]")
    hyper = params["hyper"]
    unknown = sorted(set(hyper) - set(HYPER_BLOCKS))
    if unknown:
        raise ValueError(f"{WHERE}: params.hyper: unknown block(s) {unknown}; allowed: {', '.join(HYPER_BLOCKS)}")
    runs = []
    for mid, q in method_cells(params):
        method = BY_ID[mid]
        if method.hyper not in hyper:
            raise ValueError(f"{WHERE}: params.hyper: no {method.hyper!r} block, which {method.label} ({mid}) uses; "
                             f"it takes {', '.join(f.name for f in fields(HYPER_BLOCKS[method.hyper]))}")
        runs.append(RunSettings(method=method, q=q, hyper=method.hyper_params(hyper[method.hyper])))
    return tuple(runs)
