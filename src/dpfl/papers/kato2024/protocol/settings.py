"""The settings of one kato2024 Fig 11 or Fig 12 cell, read once from its job's params (`ProtocolSettings.from_job`,
at the start of dpfl.papers.kato2024.protocol.cell.run_cell) into a frozen, typed object; nothing below that
boundary reads the params dict.

A cell's params are the figure's (dpfl.papers.kato2024.protocol.layout.ProtocolLayout.cell_params): the shared run
settings, the cell's implementation and security level, and either its Fig 11 `panel` or its Fig 12 point (`hidden`,
`users`) with the artificial data's settings; validated by workflow/schemas/papers/kato2024.schema.yaml
(`protocol_fig11`, `protocol_fig12`). Values are converted as the cell always used them (counts `int`, σ and δ
`float`), so that its table stays the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dpfl.cell_settings import count, exact_keys, one_of
from dpfl.papers.kato2024.panels import DISTRIBUTIONS, Panel
from dpfl.papers.kato2024.protocol.layout import IMPLEMENTATIONS
from dpfl.papers.kato2024.protocol.security import Security

WHERE = "kato2024 protocol cell"
#: the users' local optimizers of the protocol's runs (the schema's `optimizer`; adam: the published code's, K7)
OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class ProtocolPanel(Panel):
    """A Fig 11 panel (a dpfl.papers.kato2024.panels.Panel): `dataset`'s records in S silos and U users as its
    allocation scheme `scheme` (the params' `allocation`) arranges them (`distribution`), local batches of `batch`
    records."""

    dataset: str
    scheme: str
    batch: int

    KEYS: ClassVar[tuple[str, ...]] = ("id", "dataset", "allocation", "users", "distribution", "silos", "batch")

    def allocation_name(self, seed: int) -> str:
        """The allocation one seed of the panel reads (the name dpfl.papers.kato2024.protocol.layout.panel_allocation
        gives the layout)."""
        return self.allocation(self.scheme, seed)


@dataclass(frozen=True)
class ArtificialData:
    """Fig 12's generated records: `records_per_silo` in each silo, `features` features and `classes` classes."""

    features: int
    classes: int
    records_per_silo: int


@dataclass(frozen=True)
class ProtocolSettings:
    """One cell: ULDP-AVG-w (`hyper`, its typed hyper-parameters; noise multiplier `sigma`, δ = `delta`) through the
    private weighting protocol for `rounds` rounds of every run in `seeds`, with the silos' encrypted weighting
    `implementation`, at `security` on a `key_bits`-bit Paillier key, no user above `record_bound` records, the
    users' local `optimizer`. Fig 11 (`panel` given): a dataset's panel. Fig 12 (`data` given): S = `silos` silos
    and U = `users` users of generated records, the model's hidden width `hidden`, local batches of `batch`."""

    seeds: tuple[int, ...]
    rounds: int
    sigma: float
    delta: float
    hyper: object  # dpfl.papers.kato2024.methods.HYPER_BLOCKS["avg"]: ULDP-AVG-w's
    key_bits: int
    record_bound: int
    optimizer: str
    implementation: str
    security: Security
    silos: int
    users: int
    batch: int
    panel: ProtocolPanel | None = None
    hidden: int | None = None
    data: ArtificialData | None = None

    KEYS: ClassVar[tuple[str, ...]] = ("seeds", "rounds", "sigma", "delta", "hyper", "key_bits", "record_bound",
                                       "simulation", "optimizer", "implementation", "security")
    FIG11: ClassVar[tuple[str, ...]] = ("panel",)
    FIG12: ClassVar[tuple[str, ...]] = ("data", "silos", "batch", "hidden", "users")
    #: Fig 12's sweep centre: in its cells' params, read by the layout only
    IGNORED: ClassVar[tuple[str, ...]] = ("default_hidden", "default_users")

    @classmethod
    def from_job(cls, job) -> ProtocolSettings:
        """The cell's settings (the boundary a cell crosses at its start, dpfl.figure.FigureFamily.settings)."""
        return cls.from_params(job.params)

    @classmethod
    def from_params(cls, params: Mapping) -> ProtocolSettings:
        """The settings of a cell's params: exactly the keys of its figure, the implementation, security level and
        optimizer known, the counts integers ≥ 1, the secure level's key size checked (Security.check_key_bits)."""
        from dpfl.papers.kato2024.methods import BY_ID

        fig11 = "panel" in params
        own = cls.FIG11 if fig11 else cls.FIG12
        exact_keys(f"{WHERE} params", params, (*cls.KEYS, *own), () if fig11 else cls.IGNORED)
        one_of(f"{WHERE}: params.implementation", params["implementation"], IMPLEMENTATIONS)
        one_of(f"{WHERE}: params.optimizer", params["optimizer"], OPTIMIZERS)
        security = Security(params["security"], bool(params["simulation"]))
        bits = count(WHERE, "key_bits", params["key_bits"])
        security.check_key_bits(bits)
        seeds = tuple(int(s) for s in params["seeds"])
        if not seeds:
            raise ValueError(f"{WHERE}: params.seeds is empty; expected at least one run")
        shared = dict(seeds=seeds, rounds=count(WHERE, "rounds", params["rounds"]), sigma=float(params["sigma"]),
                      delta=float(params["delta"]), hyper=BY_ID["uldp_avg_w"].hyper_params(params["hyper"]),
                      key_bits=bits, record_bound=count(WHERE, "record_bound", params["record_bound"]),
                      optimizer=params["optimizer"], implementation=params["implementation"], security=security)
        if fig11:
            given, at = params["panel"], f"{WHERE}: params.panel"
            exact_keys(at, given, ProtocolPanel.KEYS)
            one_of(f"{at}.dataset", given["dataset"], tuple(DISTRIBUTIONS))
            one_of(f"{at}.distribution", given["distribution"], DISTRIBUTIONS[given["dataset"]])
            panel = ProtocolPanel(id=given["id"], users=count(at, "users", given["users"]),
                                  silos=count(at, "silos", given["silos"]), distribution=given["distribution"],
                                  dataset=given["dataset"], scheme=given["allocation"],
                                  batch=count(at, "batch", given["batch"]))
            return cls(**shared, silos=panel.silos, users=panel.users, batch=panel.batch, panel=panel)
        d, at = params["data"], f"{WHERE}: params.data"
        exact_keys(at, d, ("features", "classes", "records_per_silo"))
        data = ArtificialData(features=count(at, "features", d["features"]), classes=count(at, "classes", d["classes"]),
                              records_per_silo=count(at, "records_per_silo", d["records_per_silo"]))
        return cls(**shared, silos=count(WHERE, "silos", params["silos"]), users=count(WHERE, "users", params["users"]),
                   batch=count(WHERE, "batch", params["batch"]), hidden=count(WHERE, "hidden", params["hidden"]),
                   data=data)

    @property
    def setting(self) -> str:
        """The cell's setting: Fig 11 its panel's id, Fig 12 "h<hidden>-U<users>"."""
        return self.panel.id if self.panel is not None else f"h{self.hidden}-U{self.users}"
