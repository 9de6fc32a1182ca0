"""TFF federated EMNIST, digits only (legacy HDF5: fed_emnist_digitsonly_train.h5, fed_emnist_digitsonly_test.h5;
real or stand-in files, same format) -> per-user arrays (bietti2022; docs/data.md).

Users: the first MAX_USERS client ids of the *train* file, in sorted order (HDF5 lists a group's links by name; the
ids are sorted here again, in code-point order). Test: the same users' examples of the test file; a user missing
from it is an error (in the real data every client is in both files).

Pixels are flattened to 784 with no other preprocessing: raw TFF values, float32 in [0, 1], 1.0 = background.

Arrays (users in sorted client-id order; user i's rows are offsets[i]:offsets[i+1], in file order):
- x_train float32 (rows, 784), y_train int64 (rows,), train_offsets int64 (N+1,);
- x_test float32, y_test int64, test_offsets int64 likewise (same users, same order);
- client_ids (N,) unicode.

Checked, with a DataError naming the file: present and readable HDF5, an `examples` group (with at least one
client in the train file), every user's `pixels` (n, 28, 28) and `label` (n,) of equal length, labels integers in
0..9, pixels in [0, 1] (NaN refused).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from dpfl.data.common import DataError
from dpfl.data.loaders.tff import examples_group, open_h5

VERSION = 1
DATASET = "emnist"
TRAIN_FILE, TEST_FILE = "fed_emnist_digitsonly_train.h5", "fed_emnist_digitsonly_test.h5"
MAX_USERS = 1000
SIDE = 28
CLASSES = 10


def load(raw_dir: Path) -> tuple[dict, dict]:
    raw_dir = Path(raw_dir)
    train_path, test_path = raw_dir / TRAIN_FILE, raw_dir / TEST_FILE
    with open_h5(DATASET, train_path) as train_h5, open_h5(DATASET, test_path) as test_h5:
        train_examples, test_examples = (examples_group(DATASET, h5, path, "pixels, label")
                                         for h5, path in ((train_h5, train_path), (test_h5, test_path)))
        try:
            all_ids = sorted(train_examples)
        except (OSError, KeyError, RuntimeError, ValueError) as exc:
            raise DataError(f"{DATASET}: {train_path.name}: cannot list examples/ (truncated or corrupt?): "
                            f"{exc}") from None
        if not all_ids:
            raise DataError(f"{DATASET}: {train_path.name}: examples/ holds no client")
        client_ids = all_ids[:MAX_USERS]
        parts = {"train": ([], []), "test": ([], [])}
        for cid in client_ids:
            for split, examples, path in (("train", train_examples, train_path), ("test", test_examples, test_path)):
                x, y = _read_client(examples, cid, path)
                parts[split][0].append(x)
                parts[split][1].append(y)

    arrays: dict[str, np.ndarray] = {"client_ids": np.array(client_ids, dtype=str)}
    info = {"counts": {"users": len(client_ids)}, "clients_in_train_file": len(all_ids), "max_users": MAX_USERS,
            "per_user": {}, "label_counts": {}}
    for split, (xs, ys) in parts.items():
        sizes = np.array([len(y) for y in ys], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        x, y = np.concatenate(xs), np.concatenate(ys)
        arrays[f"x_{split}"], arrays[f"y_{split}"], arrays[f"{split}_offsets"] = x, y, offsets
        info["counts"][split] = int(offsets[-1])
        info["per_user"][split] = {"min": int(sizes.min()), "median": float(np.median(sizes)), "max": int(sizes.max())}
        info["label_counts"][split] = np.bincount(y, minlength=CLASSES).tolist()
    return arrays, info


def _read_client(examples: h5py.Group, cid: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A client's pixels flattened to (n, 784) float32 and its labels (n,) int64, checked."""
    where = f"{DATASET}: {path.name}: client {cid}"
    try:
        if cid not in examples:
            raise DataError(f"{where}: not in the file (every train client must also have test examples)")
        group = examples[cid]
        if not isinstance(group, h5py.Group):
            raise DataError(f"{where}: examples/{cid} is not a group")
        missing = [f for f in ("pixels", "label") if f not in group]
        if missing:
            has = ", ".join(sorted(group)) or "nothing"
            raise DataError(f"{where}: no {' or '.join(missing)} dataset (has: {has})")
        pixels, label = group["pixels"], group["label"]
        if len(pixels.shape) != 3 or pixels.shape[1:] != (SIDE, SIDE):
            raise DataError(f"{where}: pixels have shape {pixels.shape}, expected (n, {SIDE}, {SIDE})")
        if len(label.shape) != 1:
            raise DataError(f"{where}: label has shape {label.shape}, expected (n,)")
        if pixels.shape[0] != label.shape[0]:
            raise DataError(f"{where}: {pixels.shape[0]} pixel images but {label.shape[0]} labels")
        if pixels.dtype.kind != "f":
            raise DataError(f"{where}: pixels have dtype {pixels.dtype}, expected float32")
        if label.dtype.kind not in "iu":
            raise DataError(f"{where}: label has dtype {label.dtype}, expected an integer type")
        x = pixels[()].astype(np.float32, copy=False).reshape(-1, SIDE * SIDE)
        y = label[()].astype(np.int64)
    except DataError:
        raise
    except (OSError, KeyError, RuntimeError, ValueError) as exc:
        raise DataError(f"{where}: cannot read (truncated or corrupt?): {exc}") from None
    if x.size and not (x.min() >= 0 and x.max() <= 1):  # also refuses NaN
        bad = x[~((x >= 0) & (x <= 1))][0]
        raise DataError(f"{where}: pixel value {bad} outside [0, 1]")
    if y.size and (y.min() < 0 or y.max() >= CLASSES):
        raise DataError(f"{where}: label {y.min() if y.min() < 0 else y.max()} outside 0..{CLASSES - 1}")
    return x, y
