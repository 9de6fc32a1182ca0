"""TFF Stack Overflow (legacy HDF5) -> bag-of-words tag prediction, as TFF's `stackoverflow_tag_prediction` with
word_vocab 5000 and tag_vocab 80 (bietti2022; real or stand-in files, same format).

Vocabularies:
- words: the first WORD_VOCAB lines of stackoverflow.word_count (`word count`, most frequent first), as TFF's
  `list(load_word_counts())[:5000]`; only those lines are read and checked;
- tags: the TAG_VOCAB most frequent tags of the stackoverflow.tag_count JSON object, by decreasing count, ties broken
  by tag name (TFF sorts by count only and keeps the file order among ties; the two differ only if the 80th and 81st
  tags tie).

Documents (TFF `build_to_ids_fn`): the words of `title` and `tokens` (split on whitespace) are looked up in the
vocabulary, every other word in one OOV bucket; x = the one-hot vectors averaged over ALL the words, OOV included,
then the OOV coordinate dropped (its mass is lost, a row sums to 1 - OOV share). A document without any word gives a
zero row (TFF's mean of nothing would be NaN). y: multi-hot over the tag vocabulary of the '|'-separated `tags`;
tags outside it (and empty strings) are dropped, so a row can be all zero; a tag repeated in one document counts once
(TFF would sum to 2).

Users: the first USERS client ids, in sorted order, of the *test* split (stackoverflow_test.h5; HDF5 lists a group's
links by name, and the iteration stops after USERS, so the ~200k test clients are not all read; fewer users if the
test split has fewer clients). Per user:
- train: the first MAX_TRAIN of its examples in stackoverflow_train.h5 (file order), then shuffled by
  numpy.random.default_rng(seed).permutation, seed = the first 8 bytes (big-endian) of
  sha256("dpfl/stackoverflow/train-order/<client_id>"): the same order on every machine and run. A user without train
  examples is kept with zero train rows (info `users_without_train`);
- test: all of its test examples, in file order.
stackoverflow_held_out.h5 is never read.

Arrays (users in sorted client-id order; user i's rows are offsets[i]:offsets[i+1]):
- x_train_data float32 (nnz,), x_train_indices int32 (nnz,), x_train_indptr int64 (rows+1,): CSR rows of width
  WORD_VOCAB, column indices sorted within a row; y_train uint8 (rows, TAG_VOCAB); train_offsets int64 (N+1,);
- the same for test: x_test_data, x_test_indices, x_test_indptr, y_test, test_offsets;
- client_ids (N,), words (WORD_VOCAB,), tags (TAG_VOCAB,): unicode.
No dense (rows, WORD_VOCAB) matrix is ever built.

info: counts {users, train, test} (documents), users_without_train (+ the first 20 ids), users_with_train_cut, and per
split: documents, nnz, mean_tokens_per_document, oov_token_share (OOV words / words), oov_mass_share (the dropped OOV
coordinate, averaged over the documents with words), documents_without_tokens, documents_without_tag.
"""

from __future__ import annotations

import hashlib
import json
from itertools import repeat
from pathlib import Path

import h5py
import numpy as np

from dpfl.data.common import DataError
from dpfl.data.loaders.tff import examples_group, open_h5

VERSION = 1
DATASET = "stackoverflow"
TRAIN_FILE, TEST_FILE = "stackoverflow_train.h5", "stackoverflow_test.h5"
WORD_COUNT, TAG_COUNT = "stackoverflow.word_count", "stackoverflow.tag_count"
WORD_VOCAB = 5000
TAG_VOCAB = 80
USERS = 500
MAX_TRAIN = 500
REQUIRED = ("title", "tokens", "tags")


def load(raw_dir: Path) -> tuple[dict, dict]:
    raw_dir = Path(raw_dir)
    words = read_words(raw_dir / WORD_COUNT, WORD_VOCAB)
    tags = read_tags(raw_dir / TAG_COUNT, TAG_VOCAB)
    word_index = {w.encode("utf-8"): i for i, w in enumerate(words)}
    tag_index = {t.encode("utf-8"): i for i, t in enumerate(tags)}
    splits = {"train": _Split(len(words), len(tags)), "test": _Split(len(words), len(tags))}
    test_path, train_path = raw_dir / TEST_FILE, raw_dir / TRAIN_FILE
    with open_h5(DATASET, test_path) as test_h5, open_h5(DATASET, train_path) as train_h5:
        test_examples, train_examples = (examples_group(DATASET, h5, path, "tokens, title, tags, ...")
                                         for h5, path in ((test_h5, test_path), (train_h5, train_path)))
        client_ids = _first_clients(test_examples, test_path, USERS)
        missing, cut = [], 0
        for cid in client_ids:
            title, body, tag, _ = _read_client(test_examples, cid, test_path, None)
            splits["test"].add(title, body, tag, word_index, tag_index)
            if _has(train_examples, cid, train_path):
                title, body, tag, total = _read_client(train_examples, cid, train_path, MAX_TRAIN)
                cut += total > MAX_TRAIN
                perm = train_order(cid, len(title))
                splits["train"].add([title[i] for i in perm], [body[i] for i in perm], [tag[i] for i in perm],
                                    word_index, tag_index)
            else:
                missing.append(cid)
                splits["train"].add([], [], [], word_index, tag_index)

    arrays = {"client_ids": np.array(client_ids, dtype=str), "words": np.array(words, dtype=str),
              "tags": np.array(tags, dtype=str)}
    info = {"counts": {"users": len(client_ids)}, "word_vocab": len(words), "tag_vocab": len(tags),
            "users_without_train": len(missing), "users_without_train_ids": missing[:20],
            "users_with_train_cut": int(cut), "max_train_per_user": MAX_TRAIN,
            "train_order": "first max_train_per_user examples of the train split, permuted by "
                           "default_rng(first 8 bytes of sha256('dpfl/stackoverflow/train-order/<client_id>'))"}
    for split, acc in splits.items():
        part = acc.arrays()
        arrays.update({f"x_{split}_data": part["data"], f"x_{split}_indices": part["indices"],
                       f"x_{split}_indptr": part["indptr"], f"y_{split}": part["y"],
                       f"{split}_offsets": part["offsets"]})
        info["counts"][split] = int(part["offsets"][-1])
        for key, value in acc.summary().items():
            info.setdefault(key, {})[split] = value
    return arrays, info


def train_order(client_id: str, n: int) -> np.ndarray:
    """The documented permutation of a client's first train examples."""
    seed = int.from_bytes(hashlib.sha256(f"dpfl/stackoverflow/train-order/{client_id}".encode()).digest()[:8], "big")
    return np.random.default_rng(seed).permutation(n)


# --------------------------------------------------------------------------------------------------
# vocabularies
# --------------------------------------------------------------------------------------------------


def read_words(path: Path, n: int) -> list[str]:
    """The first n words of a `word count` file (most frequent first)."""
    words: list[str] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if len(words) == n:
                    break
                parts = line.split()
                if len(parts) != 2 or not (parts[1].isascii() and parts[1].isdigit()):
                    raise DataError(f"{DATASET}: {path.name}: line {number} is not a 'word count' pair: {line[:80]!r}")
                words.append(parts[0])
    except FileNotFoundError:
        raise DataError(f"{DATASET}: {path.name}: file not found ({path})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{DATASET}: {path.name}: cannot read: {exc}") from None
    if len(words) < n:
        raise DataError(f"{DATASET}: {path.name}: {len(words)} words, expected at least {n}")
    if len(set(words)) != n:
        dup = next(w for i, w in enumerate(words) if w in words[:i])
        raise DataError(f"{DATASET}: {path.name}: word {dup!r} listed twice in the first {n} lines")
    return words


def read_tags(path: Path, n: int) -> list[str]:
    """The n most frequent tags of a JSON object {tag: count}; ties by tag name."""
    try:
        with open(path, encoding="utf-8") as fh:
            counts = json.load(fh)
    except FileNotFoundError:
        raise DataError(f"{DATASET}: {path.name}: file not found ({path})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{DATASET}: {path.name}: not a JSON file: {exc}") from None
    if not isinstance(counts, dict):
        raise DataError(f"{DATASET}: {path.name}: a JSON {type(counts).__name__}, expected an object {{tag: count}}")
    bad = [k for k, v in counts.items() if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        raise DataError(f"{DATASET}: {path.name}: tag {bad[0]!r} has count {counts[bad[0]]!r}, expected an integer")
    if len(counts) < n:
        raise DataError(f"{DATASET}: {path.name}: {len(counts)} tags, expected at least {n}")
    return [t for t, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]]


# --------------------------------------------------------------------------------------------------
# HDF5
# --------------------------------------------------------------------------------------------------


def _first_clients(examples: h5py.Group, path: Path, n: int) -> list[str]:
    """The first n client ids in sorted order, without listing the whole group: HDF5's name index."""
    names: list[bytes] = []

    def visit(name: bytes):
        names.append(name)
        return True if len(names) >= n else None  # anything but None stops the iteration

    try:
        if n > 0:
            examples.id.links.iterate(visit, idx_type=h5py.h5.INDEX_NAME, order=h5py.h5.ITER_INC)
    except (OSError, RuntimeError) as exc:
        raise DataError(f"{DATASET}: {path.name}: cannot list examples/ (truncated or corrupt?): {exc}") from None
    ids = [name.decode("utf-8") for name in names]
    if ids != sorted(ids):  # not expected from HDF5; then list everything
        ids = sorted(examples)[:n]
    return ids


def _has(examples: h5py.Group, cid: str, path: Path) -> bool:
    try:
        return cid in examples
    except (OSError, RuntimeError) as exc:
        raise DataError(f"{DATASET}: {path.name}: cannot look up client {cid} (truncated or corrupt?): {exc}") from None


def _read_client(examples: h5py.Group, cid: str, path: Path, limit: int | None) -> tuple[list, list, list, int]:
    """A client's title, tokens and tags as lists of bytes (the first `limit` examples), and its number of
    examples."""
    where = f"{DATASET}: {path.name}: client {cid}"
    try:
        group = examples[cid]
        if not isinstance(group, h5py.Group):
            raise DataError(f"{where}: examples/{cid} is not a group")
        missing = [f for f in REQUIRED if f not in group]
        if missing:
            raise DataError(f"{where}: no {', '.join(missing)} dataset (has: {', '.join(sorted(group)) or 'nothing'})")
        sets = {f: group[f] for f in REQUIRED}
        shapes = {f: ds.shape for f, ds in sets.items()}
        if any(len(s) != 1 for s in shapes.values()) or len({s[0] for s in shapes.values()}) != 1:
            shown = ", ".join(f"{f} {s}" for f, s in shapes.items())
            raise DataError(f"{where}: title, tokens and tags differ in length or are not 1-D ({shown})")
        out = []
        for f, ds in sets.items():
            if ds.dtype.kind not in "OS":
                raise DataError(f"{where}: {f} has dtype {ds.dtype}, expected strings")
            out.append(_as_bytes(ds[:limit] if limit is not None else ds[()]))
    except DataError:
        raise
    except (OSError, KeyError, RuntimeError, ValueError) as exc:
        raise DataError(f"{where}: cannot read (truncated or corrupt?): {exc}") from None
    return out[0], out[1], out[2], shapes["tokens"][0]


def _as_bytes(values: np.ndarray) -> list[bytes]:
    """h5py gives vlen strings as bytes objects and fixed-length ones as numpy bytes; str is encoded."""
    items = values.tolist()
    return [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in items]


# --------------------------------------------------------------------------------------------------
# features
# --------------------------------------------------------------------------------------------------


class _Split:
    """CSR pieces, labels and user offsets accumulated user by user."""

    def __init__(self, n_words: int, n_tags: int):
        self.n_words, self.n_tags = n_words, n_tags
        self.data, self.indices, self.row_nnz, self.y = [], [], [], []
        self.offsets = [0]
        self.tokens = self.oov_tokens = self.without_tokens = 0
        self.oov_mass = 0.0

    def add(self, titles: list, bodies: list, tags: list, word_index: dict, tag_index: dict) -> None:
        n, V = len(titles), self.n_words
        self.offsets.append(self.offsets[-1] + n)
        if n == 0:
            return
        tokens, lengths = [], np.empty(n, np.int64)
        for i, (title, body) in enumerate(zip(titles, bodies)):
            words = title.split() + body.split()
            lengths[i] = len(words)
            tokens += words
        ids = np.fromiter(map(word_index.get, tokens, repeat(V)), np.int64, len(tokens))
        rows = np.repeat(np.arange(n), lengths)
        keys, counts = np.unique(rows * (V + 1) + ids, return_counts=True)  # sorted: row-major, columns ascending
        r, c = np.divmod(keys, V + 1)
        keep = c < V
        self.data.append((counts[keep] / lengths[r[keep]]).astype(np.float32))
        self.indices.append(c[keep].astype(np.int32))
        self.row_nnz.append(np.bincount(r[keep], minlength=n))
        oov = np.bincount(rows[ids == V], minlength=n)
        self.tokens += int(lengths.sum())
        self.oov_tokens += int(oov.sum())
        self.oov_mass += float((oov[lengths > 0] / lengths[lengths > 0]).sum())
        self.without_tokens += int((lengths == 0).sum())

        y = np.zeros((n, self.n_tags), np.uint8)
        for i, tag in enumerate(tags):
            for t in tag.split(b"|"):
                j = tag_index.get(t)
                if j is not None:
                    y[i, j] = 1
        self.y.append(y)

    def arrays(self) -> dict:
        cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)  # noqa: E731
        row_nnz = cat(self.row_nnz, np.int64)
        return {"data": cat(self.data, np.float32), "indices": cat(self.indices, np.int32),
                "indptr": np.concatenate([[0], np.cumsum(row_nnz)]).astype(np.int64),
                "y": np.concatenate(self.y) if self.y else np.zeros((0, self.n_tags), np.uint8),
                "offsets": np.array(self.offsets, np.int64)}

    def summary(self) -> dict:
        docs = self.offsets[-1]
        with_tokens = docs - self.without_tokens
        y = np.concatenate(self.y) if self.y else np.zeros((0, self.n_tags), np.uint8)
        return {"documents": docs, "nnz": int(sum(len(d) for d in self.data)),
                "mean_tokens_per_document": round(self.tokens / docs, 3) if docs else 0.0,
                "oov_token_share": round(self.oov_tokens / self.tokens, 5) if self.tokens else 0.0,
                "oov_mass_share": round(self.oov_mass / with_tokens, 5) if with_tokens else 0.0,
                "documents_without_tokens": self.without_tokens,
                "documents_without_tag": int((y.sum(axis=1) == 0).sum())}
