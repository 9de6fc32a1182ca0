"""Stackoverflow stand-in (bietti2022): the five raw files of TFF's legacy Stack Overflow data with their
real names and layout, filled with topic-model documents.

Files:
- stackoverflow_train.h5, stackoverflow_test.h5, stackoverflow_held_out.h5: HDF5 `examples/<client_id>/` with the
  six per-example datasets of the real files: variable-length UTF-8 strings `creation_date` ("2015-03-02
  17:04:51.123 UTC"; train before 2018-01-01, test after, sorted within a client), `title`, `tags` ('|'-separated),
  `tokens` (space-separated), `type` (question | answer), and int64 `score`.
- stackoverflow.word_count: `word count` lines, most frequent first: the 5000 vocabulary words, then OOV_LISTED
  rarer words, so the loader's "first 5000 lines" is a real cut. The counts are nominal (the background Zipf law,
  scaled; non-increasing), not recounted from the documents.
- stackoverflow.tag_count: a JSON object {tag: count} over all N_TAGS tags (keys in name order; the counts follow
  the tags' Zipf popularity, whose ranks are a random permutation of the names, so the loader must sort by count).

Clients: 8-digit ids. `n_users` clients have train and test examples (the loader's users: every test client also has
train examples); `n_train_only` clients have train examples only; `n_held_out` clients (ids divisible by 10, as the
real held-out users, user_id % 10 == 0) have a few examples in the held-out file, which the loader never reads.
Groups are created in a fixed shuffled order; HDF5 lists them by name.

Model: words w0000..w4999 with a global Zipf(1.1) background over their index; 40 topics, topic k's word
distribution 0.5 Dirichlet(0.05) + 0.5 background; N_TAGS tags tag000..tag119 with Zipf(1.0) popularity; each topic has
U{2..4} core tags drawn without replacement in proportion to popularity, with Dirichlet(1) weights. Per user: a topic
mixture ~ Dirichlet(0.2) and, for every topic, a personal re-weighting of its core tags ~ Dirichlet(1), multiplied
with the topic's weights and renormalized (the personal signal). Per document: topic z from the user's mixture, length
l = 1 + Poisson(40) tokens, each OOV (uniform over the OOV_WORDS words q0000..q1999, none of them among the 5000;
the first OOV_LISTED are the rarer lines of the word-count file) with probability 0.15, else drawn from topic z's
words; the first min(l, U{3..8}) tokens are the title, the rest the body (`tokens`), so title + body hold the l
tokens and the loader's x is the in-vocabulary counts / l. Tags: 1 + Binomial(2, 0.3) capped at the number of z's
core tags, drawn without replacement in proportion to the user's re-weighted core tags of z (Gumbel top-k); with
probability 0.1 none (empty string). Train count per user U{300..500}, test U{10..100}, held-out U{5..20}.

Deterministic bytes: one Generator from the seed, a fixed order of draws and writes, and `track_times=False` on every
dataset (HDF5 then stores no time stamp). 500 users (~230k documents, ~9.4M tokens): about 3 s on one core,
~112 MB of HDF5 (variable-length strings, stored uncompressed: HDF5 filters do not reach their heap).
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

VERSION = 1
FILES = {"train": "stackoverflow_train.h5", "held_out": "stackoverflow_held_out.h5", "test": "stackoverflow_test.h5"}
WORD_COUNT, TAG_COUNT = "stackoverflow.word_count", "stackoverflow.tag_count"
VOCAB = 5000  # in-vocabulary words (the loader's word_vocab)
OOV_WORDS = 2000  # words outside the vocabulary
OOV_LISTED = 1000  # of them, the rarer lines of the word-count file after the first VOCAB
N_TAGS = 120
N_TOPICS = 40
TOPIC_ALPHA, BACKGROUND_ZIPF, TAG_ZIPF, MIXTURE_ALPHA = 0.05, 1.1, 1.0, 0.2
CORE_TAGS = (2, 4)  # inclusive range of core tags per topic
MEAN_LENGTH, P_OOV, P_NO_TAG = 40, 0.15, 0.1
EXTRA_TAGS = (2, 0.3)  # tags per document: 1 + Binomial(n, p)
TITLE_TOKENS = (3, 8)  # inclusive
DOCS = {"train": (300, 500), "test": (10, 100), "held_out": (5, 20)}  # inclusive ranges per client
DATES = {"train": ("2008-08-01", "2018-01-01"), "test": ("2018-01-01", "2019-01-01"),
         "held_out": ("2008-08-01", "2019-01-01")}
FIELDS = ("creation_date", "score", "tags", "title", "tokens", "type")
WORD_WIDTH = 5  # every word string has 5 characters (w0000, q0000): tokens are sliced out of one byte buffer


def generate(out_dir: Path, seed: np.random.SeedSequence, n_users: int = 500, n_train_only: int = 10,
             n_held_out: int = 5) -> None:
    out_dir = Path(out_dir)
    rng = np.random.default_rng(seed)
    model = _model(rng)

    # client ids: distinct 8-digit numbers; held-out ones divisible by 10, the others not
    n_main = n_users + n_train_only
    base = rng.choice(10**7, n_main + n_held_out, replace=False)
    main_ids = base[:n_main] * 10 + rng.integers(1, 10, n_main)
    held_ids = base[n_main:] * 10
    in_test = np.zeros(n_main, bool)
    in_test[rng.choice(n_main, n_users, replace=False)] = True
    names = np.array([f"{i:08d}" for i in main_ids])
    held_names = np.array([f"{i:08d}" for i in held_ids])

    # per user (all of them: main then held-out): topic mixture and per-topic tag weights
    n_all = n_main + n_held_out
    mixture = rng.dirichlet(np.full(N_TOPICS, MIXTURE_ALPHA), n_all)
    personal = rng.gamma(1.0, size=(n_all, N_TOPICS, CORE_TAGS[1])) * model["core_weights"]  # zero on padding
    personal /= personal.sum(axis=2, keepdims=True)

    counts = {"train": rng.integers(DOCS["train"][0], DOCS["train"][1] + 1, n_main),
              "test": np.where(in_test, rng.integers(DOCS["test"][0], DOCS["test"][1] + 1, n_main), 0),
              "held_out": rng.integers(DOCS["held_out"][0], DOCS["held_out"][1] + 1, n_held_out)}
    users = {"train": np.arange(n_main), "test": np.arange(n_main), "held_out": n_main + np.arange(n_held_out)}
    ids = {"train": names, "test": names, "held_out": held_names}
    for split in ("train", "test", "held_out"):
        docs = _documents(rng, model, np.repeat(users[split], counts[split]), mixture, personal, split)
        order = rng.permutation(len(ids[split]))  # group creation order: fixed, not sorted
        _write_h5(out_dir / FILES[split], ids[split], counts[split], docs, order)

    _write_word_count(out_dir / WORD_COUNT)
    _write_tag_count(out_dir / TAG_COUNT, model["tag_names"], model["tag_rank"])


def _model(rng) -> dict:
    """Topics (word CDFs), tag names and popularity ranks, core tags with their weights."""
    background = np.arange(1, VOCAB + 1, dtype=float) ** -BACKGROUND_ZIPF
    background /= background.sum()
    g = rng.gamma(TOPIC_ALPHA, size=(N_TOPICS, VOCAB))
    topics = 0.5 * g / g.sum(axis=1, keepdims=True) + 0.5 * background
    cdf = np.cumsum(topics, axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    # topic k's CDF shifted by k: one searchsorted over (topic + uniform) samples every token at once
    stacked = (cdf + np.arange(N_TOPICS)[:, None]).ravel()

    tag_rank = rng.permutation(N_TAGS)  # popularity rank of tag000, tag001, ...
    popularity = (tag_rank + 1.0) ** -TAG_ZIPF
    popularity /= popularity.sum()
    n_core = rng.integers(CORE_TAGS[0], CORE_TAGS[1] + 1, N_TOPICS)
    core = np.full((N_TOPICS, CORE_TAGS[1]), -1, np.int64)
    weights = np.zeros((N_TOPICS, CORE_TAGS[1]))
    for k in range(N_TOPICS):
        core[k, :n_core[k]] = rng.choice(N_TAGS, n_core[k], replace=False, p=popularity)
        weights[k, :n_core[k]] = rng.dirichlet(np.ones(n_core[k]))
    tag_names = [f"tag{t:03d}" for t in range(N_TAGS)]
    return {"stacked_cdf": stacked, "n_core": n_core, "core": core, "core_weights": weights,
            "tag_names": tag_names, "tag_bytes": [t.encode() for t in tag_names], "tag_rank": tag_rank}


def _word_table() -> np.ndarray:
    """(VOCAB + OOV_WORDS, WORD_WIDTH + 1) bytes: each word followed by a space."""
    words = [f"w{i:04d}" for i in range(VOCAB)] + [f"q{i:04d}" for i in range(OOV_WORDS)]
    return np.frombuffer("".join(w + " " for w in words).encode(), np.uint8).reshape(len(words), WORD_WIDTH + 1)


def _documents(rng, model: dict, user: np.ndarray, mixture: np.ndarray, personal: np.ndarray, split: str) -> dict:
    """The documents of the given users (one entry per document, grouped by user), as per-field lists."""
    n = len(user)
    cum = np.cumsum(mixture, axis=1)
    z = np.minimum((rng.random(n)[:, None] >= cum[user]).sum(axis=1), N_TOPICS - 1)
    length = 1 + rng.poisson(MEAN_LENGTH, n)

    # tokens: topic words via the stacked CDFs, OOV words uniformly
    doc = np.repeat(np.arange(n), length)
    u = rng.random(len(doc))
    word = np.searchsorted(model["stacked_cdf"], z[doc] + u, side="right") - z[doc] * VOCAB
    word = np.clip(word, 0, VOCAB - 1)
    oov = rng.random(len(doc)) < P_OOV
    word[oov] = VOCAB + rng.integers(0, OOV_WORDS, int(oov.sum()))
    buffer = _word_table()[word].tobytes()
    step = WORD_WIDTH + 1
    start = np.concatenate([[0], np.cumsum(length)[:-1]])
    title_len = np.minimum(length, rng.integers(TITLE_TOKENS[0], TITLE_TOKENS[1] + 1, n))
    t0, t1, t2 = (start * step).tolist(), ((start + title_len) * step).tolist(), ((start + length) * step).tolist()
    titles = [buffer[a:b - 1] for a, b in zip(t0, t1)]
    bodies = [buffer[b:c - 1] for b, c in zip(t1, t2)]  # empty when the title holds every token

    # tags: Gumbel top-k over the user's re-weighted core tags of z = sampling without replacement
    n_tags = np.minimum(1 + rng.binomial(EXTRA_TAGS[0], EXTRA_TAGS[1], n), model["n_core"][z])
    n_tags[rng.random(n) < P_NO_TAG] = 0
    with np.errstate(divide="ignore"):
        keys = np.log(personal[user, z]) + rng.gumbel(size=(n, CORE_TAGS[1]))
    ranked = np.take_along_axis(model["core"][z], np.argsort(-keys, axis=1, kind="stable"), axis=1)
    names = model["tag_bytes"]
    tags = [b"|".join([names[t] for t in row[:k]]) for row, k in zip(ranked.tolist(), n_tags.tolist())]

    lo, hi = (np.datetime64(d, "ms").astype(np.int64) for d in DATES[split])
    stamp = rng.integers(lo, hi, n)
    stamp = stamp[np.lexsort((stamp, user))]  # sorted within each user (documents are grouped by user)
    dates = [d.replace("T", " ") + " UTC" for d in np.datetime_as_string(stamp.astype("datetime64[ms]"), unit="ms")]
    kind = np.where(rng.random(n) < 0.4, "question", "answer")
    score = (rng.poisson(2.0, n) - rng.poisson(0.5, n)).astype(np.int64)
    return {"creation_date": dates, "score": score, "tags": tags, "title": titles, "tokens": bodies,
            "type": kind.tolist()}


def _write_h5(path: Path, names: np.ndarray, counts: np.ndarray, docs: dict, order: np.ndarray) -> None:
    text = h5py.string_dtype("utf-8")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    with h5py.File(path, "w", libver="earliest") as f:
        examples = f.create_group("examples")
        for i in order.tolist():
            a, b = int(bounds[i]), int(bounds[i + 1])
            if a == b:
                continue
            group = examples.create_group(str(names[i]))
            for field in FIELDS:
                values = docs[field][a:b]
                if field == "score":
                    group.create_dataset(field, data=values, dtype=np.int64, track_times=False)
                else:
                    group.create_dataset(field, data=np.array(values, dtype=object), dtype=text, track_times=False)


def _write_word_count(path: Path) -> None:
    rank = np.arange(1, VOCAB + OOV_LISTED + 1, dtype=float)
    count = np.maximum(1, np.round(1e6 * rank ** -BACKGROUND_ZIPF)).astype(np.int64)  # non-increasing
    words = [f"w{i:04d}" for i in range(VOCAB)] + [f"q{i:04d}" for i in range(OOV_LISTED)]
    path.write_bytes("".join(f"{w} {c}\n" for w, c in zip(words, count.tolist())).encode())


def _write_tag_count(path: Path, tag_names: list, tag_rank: np.ndarray) -> None:
    count = np.round(3e5 / (tag_rank + 1.0) ** TAG_ZIPF).astype(np.int64)
    path.write_bytes(json.dumps(dict(zip(tag_names, count.tolist())), sort_keys=True).encode())
