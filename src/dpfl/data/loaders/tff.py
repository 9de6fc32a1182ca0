"""Reading TensorFlow Federated's legacy HDF5 files (examples/<client_id>/<feature>), shared by the EMNIST and
Stackoverflow loaders: open a file and find its `examples` group, with DataError naming the dataset, the file and
the problem."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import h5py

from dpfl.data.common import DataError


@contextmanager
def open_h5(dataset: str, path: Path):
    """h5py.File for reading; DataError for a missing or unreadable (truncated, corrupt) file."""
    if not path.is_file():
        raise DataError(f"{dataset}: {path.name}: file not found ({path})")
    try:
        h5 = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{dataset}: {path.name}: not a readable HDF5 file (truncated or corrupt?): {exc}") from None
    with h5:
        yield h5


def examples_group(dataset: str, h5: h5py.File, path: Path, layout: str) -> h5py.Group:
    """The file's `examples` group; `layout` says what a client holds (for the error message)."""
    try:
        group = h5.get("examples")
    except (OSError, KeyError, RuntimeError) as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read the 'examples' group (truncated or corrupt?): "
                        f"{exc}") from None
    if not isinstance(group, h5py.Group):
        raise DataError(f"{dataset}: {path.name}: no 'examples' group (expected examples/<client_id>/{layout})")
    return group
