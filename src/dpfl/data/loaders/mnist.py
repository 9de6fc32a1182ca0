"""The four MNIST IDX .gz files -> x_train uint8 (60000, 28, 28), y_train int64 (60000,), x_test uint8
(10000, 28, 28), y_test int64 (10000,). Read directly with gzip + numpy (no torchvision): the IDX magic numbers
(2051 images, 2049 labels), the dimensions in the header against the data, images against labels and the expected
counts are all checked."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np

from dpfl.data.common import DataError

VERSION = 1
DATASET = "mnist"
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
EXPECTED = {"train": 60_000, "test": 10_000}


def read_idx(path: Path, magic: int, dataset: str = DATASET) -> np.ndarray:
    """An unsigned-byte IDX array from a .gz file, after checking its magic number and its length."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise DataError(f"{dataset}: {path.name}: file not found ({path})") from None
    except (EOFError, OSError, zlib.error) as exc:  # truncated stream, not gzip, bad CRC
        raise DataError(f"{dataset}: {path.name}: truncated or corrupt gzip file: {exc}") from None
    found = int.from_bytes(data[:4], "big") if len(data) >= 4 else None
    if found != magic:
        kind = "images" if magic == IMAGES_MAGIC else "labels"
        raise DataError(f"{dataset}: {path.name}: IDX magic number {found}, expected {magic} ({kind})")
    ndim = magic & 0xFF
    if len(data) < 4 + 4 * ndim:
        raise DataError(f"{dataset}: {path.name}: IDX header truncated")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    if len(body) != int(np.prod(dims)):
        raise DataError(f"{dataset}: {path.name}: IDX header says {' x '.join(map(str, dims))} = {int(np.prod(dims))} "
                        f"bytes, the file holds {len(body)}")
    return np.frombuffer(body, np.uint8).reshape(dims)


def load(raw_dir: Path, expected: dict | None = EXPECTED) -> tuple[dict, dict]:
    """`expected`: {split: count} to enforce (None: any count, for small test fixtures)."""
    arrays, info = {}, {"counts": {}, "label_counts": {}}
    for split, (images_file, labels_file) in FILES.items():
        x = read_idx(Path(raw_dir) / images_file, IMAGES_MAGIC)
        y = read_idx(Path(raw_dir) / labels_file, LABELS_MAGIC).astype(np.int64)
        if x.shape[1:] != (28, 28):
            raise DataError(f"{DATASET}: {images_file}: images are {x.shape[1]} x {x.shape[2]}, expected 28 x 28")
        if len(x) != len(y):
            raise DataError(f"{DATASET}: {images_file} has {len(x)} images but {labels_file} {len(y)} labels")
        if expected and len(x) != expected[split]:
            raise DataError(f"{DATASET}: {images_file}: {len(x)} images, expected {expected[split]}")
        if y.size and y.max() > 9:
            raise DataError(f"{DATASET}: {labels_file}: label {y.max()} outside 0..9")
        arrays[f"x_{split}"], arrays[f"y_{split}"] = x, y
        info["counts"][split] = len(x)
        info["label_counts"][split] = np.bincount(y, minlength=10).tolist()
    return arrays, info
