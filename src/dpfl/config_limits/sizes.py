"""The sizes of the data a configuration's limits are checked against (`DataSizes`): where the data a run will read
is already prepared (data/prepared/<dataset>.npz, of the kind `data_source` asks for), its recorded counts;
otherwise the documented size of the real data (`DOCUMENTED`; the stand-ins write the same counts). Each size says
which of the two it is, for the messages.

Apart from the limits themselves because it is the one part that reads files (a prepared file's metadata only, never
its arrays), and every paper's limits ask it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dpfl import paths

#: The documented sizes of the prepared datasets (config/datasets.yaml, docs/data.md; every stand-in writes the same
#: counts): MNIST's training and test images, their per-digit training counts and pixels per image; the rows of
#: insurance and obesity (and obesity's classes); creditcard's rows and frauds; the training records per FLamby centre
#: of heart_disease and tcga_brca (FLamby's train split); the users the loaders keep of federated EMNIST (the first
#: 1000 of 3,383 writers: dpfl.data.loaders.emnist.MAX_USERS) and Stack Overflow (the first 500 test clients:
#: dpfl.data.loaders.stackoverflow.USERS).
DOCUMENTED = {
    "mnist": {"train": 60_000, "test": 10_000, "pixels": 28 * 28,
              "train_labels": [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]},
    "insurance": {"rows": 1338},
    "obesity": {"rows": 2111, "classes": 7},
    "creditcard": {"rows": 284_807, "frauds": 492},
    "heart_disease": {"train": [199, 172, 30, 85]},  # cleveland, hungarian, switzerland, va
    "tcga_brca": {"train": [40, 129, 129, 248, 156, 164]},  # Canada, Europe, Midwest, Northeast, South, West
    "emnist": {"users": 1000},
    "stackoverflow": {"users": 500},
}


def _counts(dataset: str, meta: dict) -> dict:
    """A prepared file's metadata (dpfl.data.prepare: `counts`, and MNIST's `label_counts`) in DOCUMENTED's shape."""
    counts = meta["counts"]
    if dataset == "mnist":
        return {"train": int(counts["train"]), "test": int(counts["test"]), "pixels": DOCUMENTED["mnist"]["pixels"],
                "train_labels": [int(c) for c in meta["label_counts"]["train"]]}
    if dataset == "obesity":
        return {"rows": int(counts["rows"]), "classes": len(counts["classes"])}
    if dataset in ("heart_disease", "tcga_brca"):
        return {"train": [int(c) for c in counts["train"].values()]}
    keys = DOCUMENTED[dataset]
    return {k: int(counts[k]) for k in keys}


@dataclass(frozen=True)
class DataSize:
    counts: dict  # in DOCUMENTED's shape
    origin: str  # which data the counts are of, for the messages


class DataSizes:
    """The sizes of the data each dataset's jobs will read, as far as the loader can tell (once per dataset)."""

    def __init__(self, cfg):
        self.cfg, self._seen = cfg, {}

    def __call__(self, dataset: str) -> DataSize:
        if dataset not in self._seen:
            self._seen[dataset] = self._size(dataset)
        return self._seen[dataset]

    def _size(self, dataset: str) -> DataSize:
        source = self.cfg.globals.get("dataset_source", {}).get(dataset, self.cfg.globals["data_source"])
        rel = paths.prepared_npz(dataset)
        meta = _prepared_meta(Path(self.cfg.root) / rel)
        why = "not prepared yet"
        if meta is not None and meta.get("dataset") == dataset:
            kind = "a stand-in" if meta.get("standin") else "real data"
            if source == "auto" or bool(meta.get("standin")) == (source == "standin"):  # what the run reads
                try:
                    return DataSize(_counts(dataset, meta), f"{rel}, {kind}")
                except (KeyError, TypeError, ValueError, AttributeError):
                    why = f"{rel} records no counts"
            else:
                why = f"{rel} holds {kind}, which data_source {source} replaces"
        kind = "stand-in" if source == "standin" and self.cfg.datasets.get(dataset, {}).get("standin") else "real data"
        return DataSize(DOCUMENTED[dataset], f"the documented size of the {kind}; {why}")


def _prepared_meta(path: Path) -> dict | None:
    """The metadata of a prepared file (its arrays are not read), or None when there is none that can be read."""
    if not path.is_file():
        return None
    from dpfl.data.common import load_prepared_meta

    try:
        meta = load_prepared_meta(path)
    except Exception:  # noqa: BLE001 (a damaged or foreign file: the documented size serves)
        return None
    return meta if isinstance(meta, dict) else None
