"""The settings of one lowy2023 panel cell, read once from its job's params (`PanelSettings.from_params`, at the start
of dpfl.papers.lowy2023.cell.run_cell) into frozen, typed objects; nothing below that boundary reads the params dict.

A cell's params are its figure's params reduced to its panel and methods (dpfl.papers.lowy2023.layout.LowyLayout.
runs_params), validated by workflow/schemas/papers/lowy2023.schema.yaml, whose defaults the config loader fills in;
its paper-level settings are `noise_calibration`, given where one of its methods is private. The cell reads each of
its runs' own params (those of the run computed alone) the same way, so that a run's numbers do not depend on the
runs beside it. Each value is converted here the way the cell always used it (int, float, a tuple of floats where
the cell made a float array of the list), so that the runs compute the same numbers.

`params.implementation` (spec §9, docs/papers/lowy2023.md; `compat: authors-code` sets the published code's values):
`Implementation`. Import-light (the method registry, dpfl.papers.lowy2023.methods, reads `Implementation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from dpfl.cell_settings import Switches

#: the experiments (data, model and metric: dpfl.papers.lowy2023.cell.EXPERIMENTS)
EXPERIMENTS = ("mnist", "insurance", "obesity")
#: the methods (the registry's ids, dpfl.papers.lowy2023.methods, also the schema's `step_grids` keys) and each
#: one's update, whose step grid it tunes over where it has none of its own; and the private ones, which need the
#: noise calibration. Here rather than read from the registry, which reads `Implementation` from this module.
UPDATES = {"noisy_mb_sgd": "minibatch", "noisy_local_sgd": "local", "mb_sgd": "minibatch", "local_sgd": "local"}
PRIVATE = frozenset({"noisy_mb_sgd", "noisy_local_sgd"})


def _keys(where: str, given: Mapping, needed: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """Every key of `given` known and every needed key given, or a ValueError naming them."""
    unknown = sorted(set(given) - {*needed, *optional})
    missing = [k for k in needed if k not in given]
    if unknown or missing:
        extra = f" (and optionally {list(optional)})" if optional else ""
        raise ValueError(f"lowy2023: {where}: unknown key(s) {unknown}, missing key(s) {missing}; expected "
                         f"{list(needed)}{extra}")


def _choice(where: str, value, allowed: tuple, more: str = "") -> None:
    """`value` one of `allowed` (a boolean where they are booleans, and only there), or a ValueError naming `where`."""
    if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
        raise ValueError(f"lowy2023: {where}: {value!r}; allowed: {', '.join(map(str, allowed))}{more}")


@dataclass(frozen=True)
class Implementation(Switches):
    """params.implementation (spec §9): where the authors' published code differs from the paper (Q2-Q12). Each key's
    first allowed value (`CHOICES`) is the paper's algorithm, the schema's default; `compat: authors-code` sets the
    published code's (per figure: config/papers/lowy2023.yaml `authors_code`)."""

    server: str  # Q2 mean | sum: MB-SGD's server step over the M silo messages
    batch_sampling: str  # Q3 without_replacement | with_replacement: MB-SGD's minibatches
    mb_clip: str  # Q7 per_example | batch_mean: MB-SGD clips the batch-mean gradient
    mb_message: str  # Q9 batch_mean | batch_sum: what an MB-SGD silo sends
    noise_at: str  # Q9 silo | server: one noise draw added to the server's average
    mnist_silos: str  # per_trial_split | bootstrap_fixed_split: bootstrapped silos, split positions fixed across trials
    class_silo_sampling: str  # Q10 without_replacement | with_replacement: obesity's class silos cut to n_min rows
    lipschitz: str | float  # data | data_silo1 (over silo index 1 only) | a number (Q10: 20)
    clip_at_lipschitz: bool  # true | false: private methods clip per-example gradients at L from the data
    upsilon_bootstrap: bool  # Q6 false | true: υ*² from a bootstrap resample of each silo
    local_noise_n: str  # Q8 silo | share: the n of noisy Local SGD's noise formula is ⌈n_total/N⌉
    clamp_error_bars: bool  # Q12 false | true: error-rate percentiles clamped to [0, 1]

    PAPER: ClassVar[str] = "lowy2023"
    #: per key, its allowed values: the paper's (the schema's default) first; `lipschitz` may also be a number > 0
    CHOICES: ClassVar[dict[str, tuple]] = {
        "server": ("mean", "sum"), "batch_sampling": ("without_replacement", "with_replacement"),
        "mb_clip": ("per_example", "batch_mean"), "mb_message": ("batch_mean", "batch_sum"),
        "noise_at": ("silo", "server"), "mnist_silos": ("per_trial_split", "bootstrap_fixed_split"),
        "class_silo_sampling": ("without_replacement", "with_replacement"), "lipschitz": ("data", "data_silo1"),
        "clip_at_lipschitz": (True, False), "upsilon_bootstrap": (False, True), "local_noise_n": ("silo", "share"),
        "clamp_error_bars": (False, True)}

    @classmethod
    def from_params(cls, params: Mapping) -> Implementation:
        """params.implementation with every key given (the config loader fills the schema's defaults; a hand-made
        params dict must give them all) and each value one of its key's `CHOICES` (`lipschitz`: or a number > 0,
        kept as the float the data's L would be)."""
        impl = params["implementation"]
        keys = tuple(f.name for f in fields(cls))
        _keys("params.implementation", impl, keys)
        values = {key: impl[key] for key in keys}
        lipschitz = values["lipschitz"]
        if isinstance(lipschitz, (int, float)) and not isinstance(lipschitz, bool) and lipschitz > 0:
            values["lipschitz"] = float(lipschitz)  # the L it sets (dpfl.papers.lowy2023.split)
        for key, value in values.items():
            if not (key == "lipschitz" and isinstance(value, float)):
                _choice(f"params.implementation.{key}", value, cls.CHOICES[key],
                        " or a number > 0" if key == "lipschitz" else "")
        return cls(**values)


@dataclass(frozen=True)
class Panel:
    """A panel (one cell): its id (the panel letter), N = `n_silos` silos, M = `silos_per_round` taking part in each
    round."""

    id: str
    n_silos: int
    silos_per_round: int


@dataclass(frozen=True)
class LogGrid:
    """A log step-size grid: exp(linspace(start, stop, num)), only its first `first` points where given (the
    authors')."""

    start: float
    stop: float
    num: int
    first: int | None = None

    def points(self) -> np.ndarray:
        return np.exp(np.linspace(self.start, self.stop, self.num))[: self.first]


@dataclass(frozen=True)
class StepGrids:
    """params.step_grids as the cell holds them: a method's own grid (keyed by its id) where given, else its update's
    (`minibatch`, `local`). A run's params hold only the grid it tunes over (LowyLayout.runs_params)."""

    minibatch: LogGrid | None = None
    local: LogGrid | None = None
    noisy_mb_sgd: LogGrid | None = None
    noisy_local_sgd: LogGrid | None = None
    mb_sgd: LogGrid | None = None
    local_sgd: LogGrid | None = None

    def of(self, method_id: str) -> LogGrid:
        """The grid `method_id` tunes over: its own, else its update's (every method of a cell has one:
        `PanelSettings.from_params` checks)."""
        return getattr(self, method_id) or getattr(self, UPDATES[method_id])

    @classmethod
    def from_params(cls, grids: Mapping) -> StepGrids:
        names = tuple(f.name for f in fields(cls))
        _keys("params.step_grids", grids, (), names)
        out = {}
        for name, grid in grids.items():
            _keys(f"params.step_grids.{name}", grid, ("start", "stop", "num"), ("first",))
            first = grid.get("first")
            out[name] = LogGrid(start=float(grid["start"]), stop=float(grid["stop"]), num=int(grid["num"]),
                                first=None if first is None else int(first))
        return cls(**out)


@dataclass(frozen=True)
class Divergence:
    """params.divergence: the training loss above which a run is declared diverged (checked every 5 rounds; None:
    only a non-finite loss) and the test value recorded for a diverged run."""

    threshold: float | None
    penalty: float


@dataclass(frozen=True)
class PanelSettings:
    """One panel cell's settings (or one of its runs'): `methods` (ids, in the registry's order) run on `panel` of
    `experiment`, each tuned for every ε of `epsilons` over its step grid (`step_grids`; MB-SGD's rescaled by
    `mb_step_scale`: M, K or None) and the clip grid `clips` (insurance: L = C; None: L from the data), by `score`,
    in every one of `trials` trials with `reps` repetitions of `rounds` R rounds, the output the mean of the last
    `average_last` iterates. `noise_calibration` (paper | accountant) is the paper-level setting, None where no method
    of the cell is private (its params then carry only ε_max, which sets K). `error_bars` is the figure table's."""

    experiment: str
    panel: Panel
    methods: tuple[str, ...]
    trials: int
    reps: int
    rounds: int
    epsilons: tuple[float, ...]
    step_grids: StepGrids
    mb_step_scale: str | None
    clips: tuple[float, ...] | None
    average_last: int
    divergence: Divergence
    score: str
    error_bars: bool
    implementation: Implementation
    noise_calibration: str | None

    #: the keys every cell's params give; those it may leave out (the schema's default null)
    KEYS: ClassVar[tuple[str, ...]] = ("experiment", "panels", "methods", "trials", "reps", "rounds", "epsilons",
                                       "step_grids", "average_last", "divergence", "score", "error_bars",
                                       "implementation")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("mb_step_scale", "clips")
    SCORES: ClassVar[tuple[str, ...]] = ("excess_loss", "loss")
    STEP_SCALES: ClassVar[tuple] = ("silos_per_round", "local", None)
    CALIBRATIONS: ClassVar[tuple[str, ...]] = ("paper", "accountant")

    @classmethod
    def from_job(cls, job) -> PanelSettings:
        """The cell's settings (the boundary a cell crosses at its start, dpfl.figure.FigureFamily.settings)."""
        return cls.from_params(job.params, job.settings, job.cell)

    @classmethod
    def from_params(cls, params: Mapping, paper_settings: Mapping, cell: str) -> PanelSettings:
        """The settings of panel `cell`'s params and paper-level settings (a dpfl.jobs.CellJob's `params` and
        `settings`): every key known and given, the enumerations checked, each method known and with a step grid;
        values converted as the cell always read them (`clips`: None when absent, null or empty)."""
        _keys("cell params", params, cls.KEYS, cls.OPTIONAL)
        _keys("cell settings", paper_settings, (), ("noise_calibration",))
        _choice("params.experiment", params["experiment"], EXPERIMENTS)
        _choice("params.score", params["score"], cls.SCORES)
        _choice("params.mb_step_scale", params.get("mb_step_scale"), cls.STEP_SCALES)
        _choice("params.error_bars", params["error_bars"], (True, False))
        panel = next((entry for entry in params["panels"] if entry.get("id") == cell), None)
        if panel is None:
            raise ValueError(f"lowy2023: params.panels has no panel {cell!r} (the cell's); panels: "
                             f"{', '.join(str(entry.get('id')) for entry in params['panels'])}")
        _keys(f"params.panels[{cell}]", panel, ("id", "n_silos", "silos_per_round"))
        grids = StepGrids.from_params(params["step_grids"])
        methods = tuple(params["methods"])
        for method in methods:
            _choice("params.methods", method, tuple(UPDATES))
            if getattr(grids, method) is None and getattr(grids, UPDATES[method]) is None:
                raise ValueError(f"lowy2023: params.step_grids: method {method} has no grid; expected {method} or "
                                 f"{UPDATES[method]}")
        calibration = paper_settings.get("noise_calibration")
        if calibration is not None or PRIVATE.intersection(methods):
            _choice("settings.noise_calibration", calibration, cls.CALIBRATIONS)
        _keys("params.divergence", params["divergence"], ("threshold", "penalty"))
        threshold = params["divergence"]["threshold"]
        clips = params.get("clips")
        return cls(experiment=params["experiment"],
                   panel=Panel(id=panel["id"], n_silos=int(panel["n_silos"]),
                               silos_per_round=int(panel["silos_per_round"])),
                   methods=methods, trials=int(params["trials"]), reps=int(params["reps"]),
                   rounds=int(params["rounds"]), epsilons=tuple(float(e) for e in params["epsilons"]),
                   step_grids=grids, mb_step_scale=params.get("mb_step_scale"),
                   clips=tuple(float(c) for c in clips) if clips else None,
                   average_last=int(params["average_last"]),
                   divergence=Divergence(threshold=None if threshold is None else float(threshold),
                                         penalty=float(params["divergence"]["penalty"])),
                   score=params["score"], error_bars=params["error_bars"],
                   implementation=Implementation.from_params(params), noise_calibration=calibration)
