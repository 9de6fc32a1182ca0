"""Federated EMNIST (digits only) stand-in (docs/data.md, docs/papers/bietti2022.md): TFF's two legacy HDF5 files,
fed_emnist_digitsonly_train.h5 and fed_emnist_digitsonly_test.h5, in their real layout: a group `examples`, one
subgroup per client id (f0000_14 style: `f<writer, 4 digits>_<2 random digits>`, so sorted order = generation order),
each with `pixels` (n, 28, 28) float32 in [0, 1], 1.0 = background, and `label` (n,) int32. Every client is in both
files.

Writers (n_writers, default 1000, at most 3383 as the real data): n_train ~ U{60..140}, n_test = ⌈n_train/8⌉, a
label mix ~ Dirichlet(5·1) over the 10 digits, from which the train and the test labels are drawn independently.

Source images, chosen by `mnist`, the pipeline's prepared MNIST (data/prepared/mnist.npz, declared in
dpfl.data.standins.INPUTS so that the download job takes it as an input):
- real MNIST (its meta says it is not a stand-in): a writer's train images are MNIST train images of its labels, its
  test images MNIST test images, drawn without replacement within the writer (reuse across writers is allowed; each
  writer's style keeps the copies distinct). Preferred: real digits, so the task is about as hard as real EMNIST;
- no MNIST input, or MNIST itself a stand-in: one fresh rendering per image of the digit stroke templates of the
  MNIST stand-in (dpfl.data.standins.mnist: its prototypes, 4 stroke variants per digit, and its renderer: per-image
  affine jitter, a blend with another digit of weight up to 0.45, pen intensity and pixel noise), drawn for all
  writers in one pass: far harder than real EMNIST (below). The same bytes as VERSION 1.
Both paths draw the same writers, sizes, label mixes, labels and styles; `generate` returns which source it used and
why, for SOURCE.json's `generator`.

A fixed style per writer, applied to all its images (train and test):
- affine warp about the image centre: rotation U(−15°, 15°), shear U(−0.3, 0.3), scale U(0.85, 1.15), shift
  U(−2, 2) px per axis (scipy.ndimage.affine_transform, bilinear, zero ink outside);
- stroke width: 3×3 grey dilation with probability 0.3, 3×3 grey erosion with probability 0.2, else none
  (one uniform draw u: u < 0.3 dilation, 0.3 ≤ u < 0.5 erosion);
- intensity gamma U(0.7, 1.4) on the ink (ink ** gamma: below 1 darker, above 1 fainter strokes);
then inverted to the TFF convention (1.0 = background), clipped to [0, 1], float32.

Deterministic bytes: one Generator from the seed, a fixed order of draws and of writes (writer by writer: its train
group in the train file, then its test group in the test file; `pixels` before `label`), and `track_times=False` on
every dataset (HDF5 then stores no time stamp; the groups, old-style, store none). Datasets are gzip-compressed
(level 4; transparent to readers) to keep the files small. 1000 writers (~100k train, ~13k test images): about
13 s on one core, ~95 MB.

With the templates the classes overlap (blends, warps, styles): a pooled 10-class linear least-squares fit on 400
writers reaches about 0.49 test accuracy (the MNIST stand-in renderer alone about 0.71); a writer's train and test
images share its style.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
from scipy import ndimage

from dpfl.data.common import DataError, load_prepared
from dpfl.data.standins import mnist as mnist_standin

VERSION = 2  # 2: the offline MNIST as source images when given (the template path writes VERSION 1's bytes)
#: why this data set is a stand-in, for the provenance record
STANDS_IN_FOR = ("federated EMNIST digits (TFF fed_emnist_digitsonly, 3383 real writers) could not be obtained: "
                 "pseudo-writers with their own label mix and style (affine warp, stroke width, gamma) stand in for "
                 "the real writers' handwriting (docs/papers/bietti2022.md)")
FILES = {"train": "fed_emnist_digitsonly_train.h5", "test": "fed_emnist_digitsonly_test.h5"}
SIDE = 28
MAX_WRITERS = 3383  # writers of the real digits-only data
N_TRAIN = (60, 140)  # inclusive
TEST_FRACTION = 8  # n_test = ⌈n_train / 8⌉
LABEL_ALPHA = 5.0
ROTATION_DEG, SHEAR, SCALE, SHIFT = 15.0, 0.3, (0.85, 1.15), 2.0
P_DILATE, P_ERODE = 0.3, 0.2
GAMMA = (0.7, 1.4)
COMPRESSION = {"compression": "gzip", "compression_opts": 4}


def generate(out_dir: Path, seed: np.random.SeedSequence, n_writers: int = 1000, mnist: str | Path | None = None
             ) -> dict:
    """Write the two files; return the provenance of the source images (`images`: mnist | templates, and why)."""
    if not 1 <= n_writers <= MAX_WRITERS:
        raise ValueError(f"emnist stand-in: n_writers must be in 1..{MAX_WRITERS}, not {n_writers}")
    out_dir = Path(out_dir)
    digits, provenance = image_source(mnist)
    rng = np.random.default_rng(seed)
    protos = mnist_standin._prototypes(rng)

    # per writer: id, sizes, label mix, style
    suffix = rng.integers(0, 100, n_writers)
    client_ids = [f"f{k:04d}_{j:02d}" for k, j in enumerate(suffix)]
    n_train = rng.integers(N_TRAIN[0], N_TRAIN[1] + 1, n_writers)
    n_test = -(-n_train // TEST_FRACTION)
    mix = rng.dirichlet(np.full(10, LABEL_ALPHA), n_writers)
    styles = _styles(rng, n_writers)

    # labels (train then test, writer by writer) and an image of each: MNIST's, or one fresh rendering
    labels = []
    for k in range(n_writers):
        labels.append(rng.choice(10, n_train[k], p=mix[k]))
        labels.append(rng.choice(10, n_test[k], p=mix[k]))
    labels = np.concatenate(labels).astype(np.uint8)
    if digits is None:
        images = mnist_standin._render(rng, protos, labels)  # uint8 ink, 0 = background
    else:
        images = mnist_images(rng, digits, labels, n_train, n_test)  # MNIST's convention too

    bounds = np.concatenate([[0], np.cumsum(np.stack([n_train, n_test], 1).ravel())])
    with h5py.File(out_dir / FILES["train"], "w") as train_h5, h5py.File(out_dir / FILES["test"], "w") as test_h5:
        groups = {"train": train_h5.create_group("examples"), "test": test_h5.create_group("examples")}
        for k, cid in enumerate(client_ids):
            lo, mid, hi = bounds[2 * k], bounds[2 * k + 1], bounds[2 * k + 2]
            pixels = apply_style(images[lo:hi], styles[k])
            for split, rows in (("train", slice(0, mid - lo)), ("test", slice(mid - lo, hi - lo))):
                group = groups[split].create_group(cid)
                group.create_dataset("pixels", data=pixels[rows], track_times=False, **COMPRESSION)
                group.create_dataset("label", data=labels[lo:hi][rows].astype(np.int32), track_times=False,
                                     **COMPRESSION)
    return provenance


def image_source(mnist: str | Path | None) -> tuple[dict | None, dict]:
    """The MNIST arrays to draw from (None: the templates) and the provenance that says which source and why."""
    out = {"stands_in_for": STANDS_IN_FOR}
    if mnist is None:
        return None, {**out, "images": "templates",
                      "images_why": "no MNIST input was given: digit stroke templates (the fallback source)"}
    arrays, meta = load_prepared(mnist)
    used = {"path": str(mnist), "source": meta.get("source"), "standin": meta.get("standin"),
            "location": meta.get("location"), "files": [{k: f[k] for k in ("name", "sha256")} for f in meta["files"]]}
    if meta.get("standin") is not False:
        return None, {**out, "images": "templates", "mnist": used,
                      "images_why": "the prepared MNIST is itself a stand-in (the same stroke templates): digit "
                                    "stroke templates (the fallback source)"}
    for key in ("x_train", "y_train", "x_test", "y_test"):
        if key not in arrays:
            raise DataError(f"emnist stand-in: the prepared MNIST {mnist} has no array {key!r}")
    return arrays, {**out, "images": "mnist", "mnist": used,
                    "images_why": f"real MNIST digits (prepared from {meta.get('source')} {meta.get('location')}), "
                                  "warped per writer: the preferred source"}


def mnist_images(rng, digits: dict, labels: np.ndarray, n_train: np.ndarray, n_test: np.ndarray) -> np.ndarray:
    """MNIST images (uint8 ink, 0 = background) for the labels laid out writer by writer (its train labels, then its
    test labels): a writer's train images from MNIST's train split and its test images from the test split, distinct
    within the writer and split (drawn without replacement per digit), in label order."""
    pools = {split: [np.flatnonzero(np.asarray(digits[f"y_{split}"]) == c) for c in range(10)]
             for split in ("train", "test")}
    source = {split: np.asarray(digits[f"x_{split}"]) for split in ("train", "test")}
    out = np.empty((len(labels), SIDE, SIDE), np.uint8)
    at = 0
    for k in range(len(n_train)):
        for split, n in (("train", int(n_train[k])), ("test", int(n_test[k]))):
            want = labels[at:at + n]
            for c in np.unique(want):
                where = np.flatnonzero(want == c)
                pool = pools[split][c]
                if len(pool) < len(where):
                    raise DataError(f"emnist stand-in: MNIST's {split} split has {len(pool)} images of digit {c}; "
                                    f"writer {k} needs {len(where)} distinct ones")
                out[at + where] = source[split][pool[rng.choice(len(pool), len(where), replace=False)]]
            at += n
    return out


def _styles(rng, n: int) -> list[dict]:
    """Each writer's style: the inverse affine map (output -> input pixel coordinates) and offset of its warp,
    its stroke operation (dilate / erode / None) and its gamma."""
    angle = np.deg2rad(rng.uniform(-ROTATION_DEG, ROTATION_DEG, n))
    shear = rng.uniform(-SHEAR, SHEAR, n)
    scale = rng.uniform(*SCALE, n)
    shift = rng.uniform(-SHIFT, SHIFT, (n, 2))
    stroke = rng.random(n)
    gamma = rng.uniform(*GAMMA, n)
    c = np.full(2, (SIDE - 1) / 2)
    out = []
    for k in range(n):
        cos, sin = np.cos(angle[k]), np.sin(angle[k])
        # forward map on (row, col) about the centre: scale · rotation · shear (col += shear · row), then shift
        forward = scale[k] * np.array([[cos, -sin], [sin, cos]]) @ np.array([[1.0, 0.0], [shear[k], 1.0]])
        inverse = np.linalg.inv(forward)
        op = "dilate" if stroke[k] < P_DILATE else "erode" if stroke[k] < P_DILATE + P_ERODE else None
        out.append({"matrix": inverse, "offset": c - inverse @ (c + shift[k]), "stroke": op, "gamma": gamma[k]})
    return out


def apply_style(images: np.ndarray, style: dict) -> np.ndarray:
    """One writer's style on its uint8 ink images (n, 28, 28), as TFF pixels: float32 in [0, 1], 1.0 = background.
    The batch is warped as one 3-D array whose first axis the map leaves alone (exactly: integer coordinates)."""
    ink = images.astype(np.float32) / np.float32(255)
    matrix = np.eye(3)
    matrix[1:, 1:] = style["matrix"]
    ink = ndimage.affine_transform(ink, matrix, offset=np.r_[0.0, style["offset"]], order=1, mode="constant",
                                   cval=0.0)
    if style["stroke"] == "dilate":
        ink = ndimage.grey_dilation(ink, size=(1, 3, 3))
    elif style["stroke"] == "erode":
        ink = ndimage.grey_erosion(ink, size=(1, 3, 3))
    ink = np.clip(ink, 0, 1, out=ink) ** np.float32(style["gamma"])
    return np.clip(1 - ink, 0, 1).astype(np.float32)
