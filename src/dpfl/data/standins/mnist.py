"""MNIST stand-in: the four IDX .gz files with MNIST's names, magic numbers, 28x28 size and counts (60,000 / 10,000,
with the real per-digit label counts, so label-based subsetting such as lowy2023's 774 images per digit works).

Each digit has a few prototype strokes: a smooth curve through random control points inside the central 20x20 box,
drawn with a Gaussian pen (the variants of one digit share its control points up to a jitter). A sample is one of
its digit's prototypes blended with a prototype of another digit (weight up to 0.45), under a random affine warp
(rotation, scale, shear, shift), with random pen intensity and pixel noise. The blending and warps make the classes
overlap, so even/odd is learnable by a linear model but not trivially separable.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from dpfl.data.common import gzip_writer

VERSION = 1
SIDE = 28
TRAIN_COUNTS = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
TEST_COUNTS = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
VARIANTS = 4  # prototypes per digit
PAD = 2  # zero border around prototypes, so warped coordinates just outside the image read background


def generate(out_dir: Path, seed: np.random.SeedSequence, n_train: int = 60_000, n_test: int = 10_000) -> None:
    rng = np.random.default_rng(seed)
    protos = _prototypes(rng)
    for split, n, counts in (("train", n_train, TRAIN_COUNTS), ("test", n_test, TEST_COUNTS)):
        labels = rng.permutation(np.repeat(np.arange(10, dtype=np.uint8), _scaled(counts, n)))
        images = _render(rng, protos, labels)
        write_idx(Path(out_dir) / FILES[split][0], images)
        write_idx(Path(out_dir) / FILES[split][1], labels)


def write_idx(path: Path, array: np.ndarray) -> None:
    """An unsigned-byte IDX file (magic 0x0800 | ndim, big-endian dimensions), gzip-compressed reproducibly."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(f">I{array.ndim}I", 0x0800 | array.ndim, *array.shape)
    with open(path, "wb") as raw, gzip_writer(raw) as out:
        out.write(header)
        out.write(array.tobytes())


def _scaled(counts, n: int) -> np.ndarray:
    """Per-digit counts summing to n, proportional to `counts` (largest remainders); `counts` itself at full size."""
    counts = np.asarray(counts)
    exact = counts * n / counts.sum()
    out = np.floor(exact).astype(int)
    out[np.argsort(out - exact, kind="stable")[: n - out.sum()]] += 1
    return out


def _prototypes(rng) -> np.ndarray:
    """(10 * VARIANTS, SIDE + 2 PAD, SIDE + 2 PAD) float32 images in [0, 1], variant-major within each digit."""
    yy, xx = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
    out = np.zeros((10 * VARIANTS, SIDE + 2 * PAD, SIDE + 2 * PAD), np.float32)
    t = np.linspace(0, 1, 60)
    for digit in range(10):
        base = rng.uniform(5, 22, size=(rng.integers(4, 7), 2))
        for v in range(VARIANTS):
            ctrl = base + rng.normal(0, 1.3, base.shape)
            # a smooth curve along the control points: piecewise-linear, then a moving average along its length
            knots = np.arange(len(ctrl))
            pts = np.stack([np.interp(t * knots[-1], knots, ctrl[:, k]) for k in range(2)], axis=1)
            pts = np.stack([np.convolve(np.pad(pts[:, k], 4, mode="edge"), np.ones(9) / 9, "valid")
                            for k in range(2)], 1)
            width = rng.uniform(1.0, 1.5)
            d2 = (yy[..., None] - pts[:, 0]) ** 2 + (xx[..., None] - pts[:, 1]) ** 2
            out[digit * VARIANTS + v, PAD:-PAD, PAD:-PAD] = np.exp(-d2 / (2 * width**2)).max(axis=-1)
    return out


def _render(rng, protos: np.ndarray, labels: np.ndarray, chunk: int = 5000) -> np.ndarray:
    """Warp, blend and noise one image per label (bilinear sampling of the padded prototypes), as uint8."""
    n = len(labels)
    images = np.empty((n, SIDE, SIDE), np.uint8)
    flat = protos.ravel()
    size = protos.shape[1]
    c = (SIDE - 1) / 2
    yy, xx = np.mgrid[0:SIDE, 0:SIDE].reshape(2, -1).astype(np.float32) - c
    for lo in range(0, n, chunk):
        lab = labels[lo:lo + chunk].astype(np.int64)
        b = len(lab)
        other = (lab + rng.integers(1, 10, b)) % 10
        first = lab * VARIANTS + rng.integers(0, VARIANTS, b)
        second = other * VARIANTS + rng.integers(0, VARIANTS, b)
        f32 = lambda a: a.astype(np.float32)  # noqa: E731
        angle, scale = f32(rng.uniform(-0.3, 0.3, b)), f32(rng.uniform(0.85, 1.15, b))
        shear, shift = f32(rng.uniform(-0.3, 0.3, b)), f32(rng.uniform(-2.0, 2.0, (b, 2)))
        cos, sin = np.cos(angle) / scale, np.sin(angle) / scale
        sy = (cos[:, None] * yy - sin[:, None] * xx) + shift[:, :1] + c + PAD
        sx = (sin[:, None] * yy + cos[:, None] * xx + shear[:, None] * yy) + shift[:, 1:] + c + PAD
        sy = np.clip(sy, 0, size - 1.001, out=sy)
        sx = np.clip(sx, 0, size - 1.001, out=sx)
        y0, x0 = sy.astype(np.int64), sx.astype(np.int64)
        wy, wx = sy - y0, sx - x0
        idx = y0 * size + x0

        def sample(proto):
            at = idx + (proto * size * size)[:, None]
            g = lambda off: flat.take(at + off)  # noqa: E731
            return (g(0) * (1 - wx) + g(1) * wx) * (1 - wy) + (g(size) * (1 - wx) + g(size + 1) * wx) * wy

        mix = rng.uniform(0, 0.45, (b, 1)).astype(np.float32)
        img = (1 - mix) * sample(first) + mix * sample(second)
        img = img * rng.uniform(0.7, 1.3, (b, 1)).astype(np.float32)
        img += 0.08 * rng.standard_normal(img.shape, dtype=np.float32)
        img[img < 0.2] = 0  # a clean background, as in MNIST
        images[lo:lo + b] = np.rint(np.clip(img, 0, 1) * 255).reshape(b, SIDE, SIDE).astype(np.uint8)
    return images
