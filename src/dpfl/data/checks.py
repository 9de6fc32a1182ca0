"""Content checks for files that have no trustworthy published sha256 (catalog key `check`).

Such a file is accepted when its content has the properties the manifest verified (rows, columns, label counts);
its sha256 is then recorded in SOURCE.json on this first download. A check is called as check(dataset, path,
**expect): the catalog file's `expect` mapping overrides the real counts (the defaults here), which a test uses to
check a tiny fixture the same way; a real run uses the catalog, whose entries state the real counts.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dpfl.data.common import DataError

CREDITCARD_COLUMNS = ["Time", *[f"V{k}" for k in range(1, 29)], "Amount", "Class"]
CREDITCARD_ROWS = 284_807
CREDITCARD_FRAUDS = 492


def _unquote(values) -> list[str]:
    return [str(v).strip().strip("\"'") for v in values]


def creditcard(dataset: str, path: Path) -> str:
    """284,807 rows x 31 columns Time, V1..V28, Amount, Class and 492 rows with Class = 1 (names and Class values
    may be quoted, as in the Kaggle and OpenML exports). Returns a one-line summary."""
    try:
        df = pd.read_csv(path)
    except (OSError, EOFError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read CSV: {exc}") from None
    columns = _unquote(df.columns)
    if columns != CREDITCARD_COLUMNS:
        raise DataError(f"{dataset}: {path.name}: columns {columns[:5]}... ({len(columns)}), expected Time, V1..V28, "
                        f"Amount, Class (31)")
    labels = pd.Series(_unquote(df.iloc[:, -1]))
    frauds = int((labels == "1").sum())
    if len(df) != CREDITCARD_ROWS or frauds != CREDITCARD_FRAUDS or not labels.isin(["0", "1"]).all():
        raise DataError(f"{dataset}: {path.name}: {len(df)} rows with {frauds} frauds (Class = 1), expected "
                        f"{CREDITCARD_ROWS} rows with {CREDITCARD_FRAUDS} frauds and Class in {{0, 1}}")
    return f"{len(df)} rows, {len(columns)} columns, {frauds} frauds"


OBESITY_COLUMNS = ["Gender", "Age", "Height", "Weight", "family_history_with_overweight", "FAVC", "FCVC", "NCP", "CAEC",
                   "SMOKE", "CH2O", "SCC", "FAF", "TUE", "CALC", "MTRANS", "NObeyesdad"]
OBESITY_CLASSES = {"Insufficient_Weight": 272, "Normal_Weight": 287, "Obesity_Type_I": 351, "Obesity_Type_II": 297,
                   "Obesity_Type_III": 324, "Overweight_Level_I": 290, "Overweight_Level_II": 290}


def obesity(dataset: str, path: Path, rows: int = sum(OBESITY_CLASSES.values()),
            classes: dict | None = None) -> str:
    """The 17 named columns (in either published order), `rows` rows and the NObeyesdad class counts (default: the
    real 2111 rows, 7 classes), no missing value. Returns a one-line summary."""
    classes = dict(OBESITY_CLASSES if classes is None else classes)
    try:
        df = pd.read_csv(path)
    except (OSError, EOFError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read CSV: {exc}") from None
    columns = _unquote(df.columns)
    if sorted(columns) != sorted(OBESITY_COLUMNS):
        raise DataError(f"{dataset}: {path.name}: columns {', '.join(columns)}, expected {', '.join(OBESITY_COLUMNS)} "
                        f"(in any order)")
    if df.isna().any().any():
        raise DataError(f"{dataset}: {path.name}: missing values")
    counts = pd.Series(_unquote(df.iloc[:, columns.index("NObeyesdad")])).value_counts().to_dict()
    if len(df) != rows or counts != classes:
        raise DataError(f"{dataset}: {path.name}: {len(df)} rows with NObeyesdad counts "
                        f"{dict(sorted(counts.items()))}, expected {rows} rows with {dict(sorted(classes.items()))}")
    return f"{len(df)} rows, {len(columns)} columns, {len(counts)} NObeyesdad classes of the expected sizes"


def tff_h5(dataset: str, path: Path, layout: str, clients: int, examples: int) -> str:
    """A legacy TFF HDF5 file (examples/<client>/<feature>) with `clients` clients and `examples` examples in all,
    every client holding every feature of the layout (dpfl.data.loaders.tff_sqlite.LAYOUTS) with the layout's
    per-example shape and kind of dtype, all of one length. Returns a one-line summary."""
    import h5py

    from dpfl.data.loaders.tff import examples_group, open_h5
    from dpfl.data.loaders.tff_sqlite import BYTES, LAYOUTS

    features = LAYOUTS[layout]
    n_clients = n_examples = 0
    with open_h5(dataset, path) as h5:
        group = examples_group(dataset, h5, path, ", ".join(features))
        try:
            for cid, client in group.items():
                lengths = set()
                for f, (kind, shape, _) in features.items():
                    ds = client.get(f) if isinstance(client, h5py.Group) else None
                    if not isinstance(ds, h5py.Dataset):
                        raise DataError(f"{dataset}: {path.name}: client {cid}: no {f} dataset")
                    kinds = "OSU" if kind == BYTES else ("f" if kind == "float" else "iu")
                    if ds.shape[1:] != shape or len(ds.shape) != 1 + len(shape) or ds.dtype.kind not in kinds:
                        raise DataError(f"{dataset}: {path.name}: client {cid}: {f} has shape {ds.shape} and dtype "
                                        f"{ds.dtype}, expected (n, {', '.join(map(str, shape))}) of kind {kind}")
                    lengths.add(ds.shape[0])
                if len(lengths) != 1:
                    raise DataError(f"{dataset}: {path.name}: client {cid}: features of different lengths {lengths}")
                n_clients += 1
                n_examples += lengths.pop()
        except DataError:
            raise
        except (OSError, KeyError, RuntimeError, ValueError) as exc:
            raise DataError(f"{dataset}: {path.name}: cannot read (truncated or corrupt?): {exc}") from None
    if (n_clients, n_examples) != (clients, examples):
        raise DataError(f"{dataset}: {path.name}: {n_clients} clients with {n_examples} examples, expected {clients} "
                        f"clients with {examples} examples")
    return f"{n_clients} clients, {n_examples} examples, features {', '.join(features)} of the expected shapes"


def tff_sqlite(dataset: str, path: Path, splits: dict) -> str:
    """A TFF .sqlite.lzma database (dpfl.data.loaders.tff_sqlite) whose client_metadata lists, for each split named in
    `splits` {split: {clients, examples}}, that many clients and examples. Leaves the decompressed database beside
    the file for the conversion that follows. Returns a one-line summary."""
    from dpfl.data.loaders.tff_sqlite import split_counts

    counts = split_counts(dataset, path)
    for split, want in splits.items():
        got = counts.get(split)
        if got != {"clients": want["clients"], "examples": want["examples"]}:
            raise DataError(f"{dataset}: {path.name}: split {split!r} has {got or 'no clients'}, expected {want} "
                            f"(splits present: {', '.join(sorted(counts)) or 'none'})")
    return "; ".join(f"split {s}: {counts[s]['clients']} clients, {counts[s]['examples']} examples" for s in splits)


CHECKS = {"creditcard": creditcard, "obesity": obesity, "tff_h5": tff_h5, "tff_sqlite": tff_sqlite}
