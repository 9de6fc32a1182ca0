"""kato2024's `allocate` stage (the AllocationKind hooks in dpfl.papers.kato2024): one file per (dataset,
distribution, U, S, seed), named by its allocation instance "<distribution>-U<U>-S<S>-seed<k>" (`AllocationInstance`,
the one place that spells it; `parse_instance` reads it back into the instance's params), and the entry points that
build one such file from a dataset's prepared arrays (`build_records`: Creditcard, MNIST; `build_flamby`:
HeartDisease, TcgaBrca): the seed's RNGs, the train/test split, then the allocation algorithms of
dpfl.papers.kato2024.allocation, with their errors reraised naming the dataset and the instance.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re

import numpy as np

from dpfl.papers.kato2024.allocation import RECORD_KINDS, allocate

_INSTANCE = re.compile(r"^(?P<distribution>uniform|zipf|zipf-iid|zipf-noniid)-U(?P<users>[0-9]+)-S(?P<silos>[0-9]+)"
                       r"-seed(?P<seed>[0-9]+)$")


@dataclasses.dataclass(frozen=True)
class AllocationInstance:
    """One allocation of a seeded scheme: its distribution, U, S and the seed index of a run; its name
    "<distribution>-U<U>-S<S>-seed<k>" (e.g. zipf-U1000-S5-seed0) is spelled here only (`name`, `parse`)."""

    distribution: str
    users: int
    silos: int
    seed: int

    @property
    def name(self) -> str:
        return f"{self.distribution}-U{self.users}-S{self.silos}-seed{self.seed}"

    def of_scheme(self, scheme: str) -> str:
        """The configured allocation this instance is of a paper file's `allocations:` scheme
        ("kato2024-<scheme>/<name>", read by dpfl.config.ProjectConfig.allocation)."""
        return f"kato2024-{scheme}/{self.name}"

    @classmethod
    def of_panel(cls, panel: dict, seed: int) -> AllocationInstance:
        """A figure panel's allocation for one seed (the panel's distribution, users and silos)."""
        return cls(panel["distribution"], int(panel["users"]), int(panel["silos"]), int(seed))

    @classmethod
    def parse(cls, name: str) -> AllocationInstance:
        m = _INSTANCE.match(name)
        if not m:
            raise ValueError(f"allocation instance {name!r} is not <distribution>-U<users>-S<silos>-seed<k> with "
                             f"distribution one of {', '.join(RECORD_KINDS)} (e.g. zipf-U1000-S5-seed0)")
        d = m.groupdict()
        out = cls(d["distribution"], int(d["users"]), int(d["silos"]), int(d["seed"]))
        if out.users < 1 or out.silos < 1:
            raise ValueError(f"allocation instance {name!r}: U and S must be ≥ 1")
        return out


def parse_instance(instance: str) -> dict:
    """"zipf-U1000-S5-seed0" -> {distribution: zipf, users: 1000, silos: 5, seed: 0}: an instance's params (the
    AllocationKind.instances hook)."""
    return dataclasses.asdict(AllocationInstance.parse(instance))


def _instance_name(params: dict) -> str:
    """"tcga_brca allocation zipf-U500-S6-seed0": the dataset and the instance, for error messages."""
    instance = AllocationInstance(params["distribution"], params["users"], params["silos"], params["seed"])
    return f"{params['dataset']} allocation {instance.name}"


@contextlib.contextmanager
def _naming(params: dict, data: str):
    """A ValueError of an allocation function, reraised naming the dataset, the instance and its data."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"{_instance_name(params)} cannot be built from {data}: {exc}") from None


def _rngs(params: dict):
    """The seed's data RNG (shared by every allocation of this dataset and seed: the same train/test split) and the
    allocation's own RNG."""
    from dpfl.seeds import rng_for

    base = (params["global_seed"], "kato2024", params["dataset"])
    instance = (params["distribution"], params["users"], params["silos"])
    return rng_for(*base, "data", params["seed"]), rng_for(*base, "allocation", *instance, params["seed"])


def build_records(arrays: dict, params: dict, log=print) -> dict:
    """Creditcard / MNIST (§1.1, §1.2, §2.1): the seed's train/test split (and Creditcard's scaling and undersampling),
    then each training record's user and silo and the local-test mask. `record` indexes the prepared arrays (MNIST:
    the concatenation [train; test])."""
    from dpfl.papers.kato2024.split import creditcard_split, mnist_split

    data_rng, rng = _rngs(params)
    if params["dataset"] == "creditcard":
        split = creditcard_split(arrays["X"], arrays["y"], data_rng)
        labels = arrays["y"]
    else:
        split = mnist_split(arrays["y_train"], arrays["y_test"], data_rng)
        labels = np.concatenate([arrays["y_train"], arrays["y_test"]])
    keys = ("user_alpha", "silo_alpha", "n_labels", "local_test_threshold", "local_test_fraction")
    with _naming(params, f"{len(split['train'])} training records"):
        alloc = allocate(params["distribution"], n_users=params["users"], rng=rng, labels=labels[split["train"]],
                         n_silos=params["silos"], **{k: params[k] for k in keys if k in params})
    log(f"{params['dataset']} seed {params['seed']}: {len(split['train'])} training records to {params['users']} users "
        f"and {params['silos']} silos ({params['distribution']}), {int((~alloc['train_mask']).sum())} held out "
        f"as local tests")
    return {"record": split["train"], "test": split["test"], "mean": split["mean"], "scale": split["scale"], **alloc}


def build_flamby(arrays: dict, params: dict, log=print) -> dict:
    """HeartDisease / TcgaBrca (§2.2): FLamby's training records, silo by silo in each centre's order, get user ids;
    `record` indexes the prepared arrays."""
    n_centers = len(arrays["centers"])
    if params["silos"] != n_centers:
        raise ValueError(f"{_instance_name(params)}: S = {params['silos']}, but {params['dataset']} has {n_centers} "
                         f"FLamby silos (its centres): S must be {n_centers}")
    _, rng = _rngs(params)
    train = np.flatnonzero(arrays["train"])
    record = train[np.argsort(arrays["center"][train], kind="stable")]
    sizes = np.bincount(arrays["center"][record], minlength=n_centers)
    keys = ("user_alpha", "main_ratio", "min_records")
    with _naming(params, f"{len(record)} training records in silos of {sizes.tolist()}"):
        alloc = allocate(params["distribution"], n_users=params["users"], rng=rng, silo_sizes=sizes,
                         **{k: params[k] for k in keys if k in params})
    log(f"{params['dataset']} seed {params['seed']}: {len(record)} training records in silos of {sizes.tolist()} to "
        f"{params['users']} users ({params['distribution']})")
    return {"record": record, **alloc}
