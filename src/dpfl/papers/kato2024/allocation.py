"""kato2024 record → (user, silo) allocations (spec/kato2024.md §2), as pure numpy functions of a Generator.

Every function takes a `numpy.random.Generator` (seeded elsewhere, `dpfl.seeds.rng_for`) and returns a dict of
per-record arrays: `user`, `silo` and `train_mask` (False = the unused local test split), plus a few diagnostics.
Same generator state, same result. The `allocate` stage's named instances and its entry points, which call these
functions, are in dpfl.papers.kato2024.allocation_instances.

Decisions (where the spec leaves room, or where the authors' published code does something else; none of these
is a §10 difference, so there is no `compat` switch here):
- uniform (§2.1) is exactly balanced, as the spec says (⌊N/U⌋ or ⌈N/U⌉ per user, the N mod U extra records go
  to distinct random users). The authors' code permutes ⌈N/U⌉ copies of every id and truncates to N, which can
  leave a user a few records short.
- zipf-noniid fills each user's zipf count exactly: users in id order, round robin over its `n_labels` labels
  (random order), from per-label shuffled pools; when those pools run dry, round robin over the other labels
  (in a per-user random order). Users thus keep their zipf counts; a user ends up with more than `n_labels`
  labels only when a chosen pool was empty (`fallback` marks them). Records left over (none with exact fills)
  go to user 0. The authors' code takes round(n/2) per label (numpy's half-to-even, so a user with one record
  gets none) and sends the rest to user 0.
- The local test split (silo > 500 records: ⌈10%⌉, stratified by label) follows scikit-learn's rounding:
  per label ⌊n_test·share⌋, the remainder to the largest fractional parts (ties: lower label first).
- HeartDisease/TcgaBrca zipf: the full-silo round robin moves a user's per-silo block (silos in id order)
  rather than record by record in draw order; identical except when a user's own overflow meets its own block.
- TcgaBrca (`min_records=2`): a user whose draws put < 2 records in every silo gets all its records in one of
  the drawn silos at random (the authors' helper leaves such users with single records). The full-silo round
  robin may still leave a (user, silo) pair with one record; a repair pass then relabels that record to a user
  holding ≥ 2 there (or, if the user would be left with nothing, gives it one record from a user holding ≥ 3),
  so every (user, silo) pair holds 0 or ≥ 2 records; `n_repaired` counts these relabelings. A TCGA zipf
  allocation needs U ≤ Σ_s ⌊n_s/2⌋ (each user holds ≥ 2 records in some silo).
"""
from __future__ import annotations

import numpy as np

RECORD_KINDS = ("uniform", "zipf", "zipf-iid", "zipf-noniid")  # §2.1 Creditcard, MNIST
FLAMBY_KINDS = ("uniform", "zipf")  # §2.2 HeartDisease, TcgaBrca


def _zipf_weights(n: int, alpha: float) -> np.ndarray:
    w = np.arange(1, n + 1, dtype=np.float64) ** (-float(alpha))
    return w / w.sum()


def _check_positive(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


# ---------------------------------------------------------------- §2.1 building blocks

def users_uniform(n_records: int, n_users: int, rng: np.random.Generator) -> np.ndarray:
    """Balanced user ids: every user ⌊N/U⌋ or ⌈N/U⌉ records (extras to random distinct users), permuted."""
    counts = np.full(n_users, n_records // n_users, dtype=np.int64)
    counts[rng.choice(n_users, n_records % n_users, replace=False)] += 1
    return rng.permutation(np.repeat(np.arange(n_users), counts))


def users_zipf(n_records: int, n_users: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Each record picks user i (0-based) independently with P ∝ (i+1)^−alpha."""
    return rng.choice(n_users, size=n_records, p=_zipf_weights(n_users, alpha))


def silos_uniform(n_records: int, n_silos: int, rng: np.random.Generator) -> np.ndarray:
    """Permute the records; silo s gets positions s, s+S, … (sizes differ by at most 1)."""
    silo = np.empty(n_records, dtype=np.int64)
    silo[rng.permutation(n_records)] = np.arange(n_records) % n_silos
    return silo


def silos_zipf(user: np.ndarray, n_users: int, n_silos: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Per user, silo weights ∝ x^−alpha (x = 1..S) over a per-user random permutation of the silos; each record
    picks its silo independently. Returns the silo of each record."""
    perms = np.argsort(rng.random((n_users, n_silos)), axis=1)  # perms[u, x-1] = the silo of rank x
    rank = rng.choice(n_silos, size=len(user), p=_zipf_weights(n_silos, alpha))
    return perms[user, rank]


def _round_robin(demand: int, caps: list[int]) -> list[int]:
    """Take `demand` items one at a time from pools in order, skipping empty ones; returns the takes."""
    take = [0] * len(caps)
    active = [i for i, c in enumerate(caps) if c > 0]
    while demand > 0 and active:
        k = len(active)
        level = min(min(caps[i] - take[i] for i in active), demand // k)
        if level > 0:
            for i in active:
                take[i] += level
            demand -= level * k
        else:  # fewer items left than pools: one more each, in order
            for i in active[:demand]:
                take[i] += 1
            demand = 0
        active = [i for i in active if caps[i] - take[i] > 0]
    return take


def users_noniid(labels: np.ndarray, counts: np.ndarray, n_labels: int, rng: np.random.Generator) -> dict:
    """zipf-noniid user ids: user u (in id order) takes counts[u] records round robin from its `n_labels`
    random labels' shuffled pools, then from the other labels (per-user random order) once those are empty.
    Returns `user` per record, `user_labels` (U × n_labels, the chosen labels) and `fallback` (U, bool)."""
    classes, lab = np.unique(labels, return_inverse=True)
    n_cls, n_users = len(classes), len(counts)
    k = min(n_labels, n_cls)
    order = np.argsort(rng.random((n_users, n_cls)), axis=1)  # per user: chosen labels first, then fallbacks
    pools = [rng.permutation(np.flatnonzero(lab == c)) for c in range(n_cls)]
    remaining = [len(p) for p in pools]
    take = np.zeros((n_users, n_cls), dtype=np.int64)
    fallback = np.zeros(n_users, dtype=bool)
    order_l, counts_l = order.tolist(), counts.tolist()
    for u in range(n_users):
        n = counts_l[u]
        if n == 0:
            continue
        row = order_l[u]
        got = _round_robin(n, [remaining[c] for c in row[:k]])
        rest = n - sum(got)
        if rest > 0 and k < n_cls:
            got += _round_robin(rest, [remaining[c] for c in row[k:]])
            fallback[u] = True
        for c, g in zip(row, got):
            if g:
                take[u, c] = g
                remaining[c] -= g
    user = np.zeros(len(labels), dtype=np.int64)  # leftovers (none with exact fills) stay with user 0
    ids = np.arange(n_users)
    for c in range(n_cls):
        owners = np.repeat(ids, take[:, c])
        user[pools[c][: len(owners)]] = owners
    return {"user": user, "user_labels": classes[order[:, :k]], "fallback": fallback}


def local_test_split(silo: np.ndarray, labels: np.ndarray, n_silos: int, rng: np.random.Generator,
                     threshold: int = 500, fraction: float = 0.1) -> np.ndarray:
    """train_mask: a silo with more than `threshold` records loses ⌈fraction·n_s⌉ records, stratified by label
    (scikit-learn's rounding), as its unused local test set; smaller silos keep everything."""
    _, lab = np.unique(labels, return_inverse=True)
    n_cls = int(lab.max()) + 1 if len(lab) else 0
    cnt = np.bincount(silo * n_cls + lab, minlength=n_silos * n_cls).reshape(n_silos, n_cls)
    sizes = cnt.sum(axis=1)
    n_test = np.where(sizes > threshold, np.ceil(fraction * sizes - 1e-9).astype(np.int64), 0)
    exact = n_test[:, None] * cnt / np.maximum(sizes, 1)[:, None]
    k = np.floor(exact).astype(np.int64)
    short = n_test - k.sum(axis=1)
    prio = np.argsort(-(exact - k), axis=1, kind="stable")  # largest fractional parts first
    k[np.arange(n_silos)[:, None], prio] += np.arange(n_cls)[None, :] < short[:, None]
    group = silo * n_cls + lab
    idx = np.lexsort((rng.random(len(silo)), group))
    starts = np.concatenate([[0], np.cumsum(cnt.ravel())[:-1]])
    rank = np.empty(len(silo), dtype=np.int64)
    rank[idx] = np.arange(len(silo)) - starts[group[idx]]
    return rank >= k.ravel()[group]


def allocate_records(kind: str, labels, n_users: int, n_silos: int, rng: np.random.Generator, *,
                     user_alpha: float = 0.5, silo_alpha: float = 2.0, n_labels: int = 2,
                     local_test_threshold: int = 500, local_test_fraction: float = 0.1) -> dict:
    """§2.1 (Creditcard, MNIST): `labels` of the N training records → per-record `user`, `silo`, `train_mask`
    (+ `user_labels`, `fallback` for zipf-noniid)."""
    if kind not in RECORD_KINDS:
        raise ValueError(f"unknown kato2024 allocation kind {kind!r}; expected one of {', '.join(RECORD_KINDS)}")
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    n = len(labels)
    n_users, n_silos = _check_positive("n_users", n_users), _check_positive("n_silos", n_silos)
    if n_silos > n:
        raise ValueError(f"n_silos = {n_silos} is larger than the {n} records: at most {n} silos (every silo needs "
                         f"≥ 1 record)")
    if kind == "uniform" and n_users > n:
        raise ValueError(f"n_users = {n_users} is more than the {n} records: uniform gives every user ⌊N/U⌋ or ⌈N/U⌉ "
                         f"records, so some would hold none; at most {n} users")
    out = {}
    if kind == "uniform":
        user = users_uniform(n, n_users, rng)
        silo = silos_uniform(n, n_silos, rng)
    else:
        user = users_zipf(n, n_users, user_alpha, rng)
        if kind == "zipf-noniid":
            _check_positive("n_labels", n_labels)
            out = users_noniid(labels, np.bincount(user, minlength=n_users), n_labels, rng)
            user = out.pop("user")
        silo = silos_zipf(user, n_users, n_silos, silo_alpha, rng)
    mask = local_test_split(silo, labels, n_silos, rng, local_test_threshold, local_test_fraction)
    return {"user": user, "silo": silo, "train_mask": mask, **out}


# ---------------------------------------------------------------- §2.2 HeartDisease, TcgaBrca

def _fill_round_robin(counts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Users in id order place their per-silo blocks (silos in id order); what a full silo cannot take moves
    to the next silo id, round robin. Returns the placed (U × S) counts; silo totals equal `sizes`."""
    free = sizes.tolist()
    n_silos = len(free)
    placed = np.zeros_like(counts)
    for u, row in enumerate(counts.tolist()):
        for s, c in enumerate(row):
            t = s
            while c > 0:
                got = min(c, free[t])
                if got:
                    placed[u, t] += got
                    free[t] -= got
                    c -= got
                t = (t + 1) % n_silos
    return placed


def _at_least_two(c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """TCGA step 3 for one user's silo counts: single records move to a random silo holding ≥ 2 of the user's
    records (each record drawn independently); without one, all records go to one drawn silo at random."""
    c = c.copy()
    single, big = np.flatnonzero(c == 1), np.flatnonzero(c >= 2)
    if len(single) == 0:
        return c
    if len(big) == 0:
        target = rng.choice(np.flatnonzero(c))
        total = c.sum()
        c[:] = 0
        c[target] = total
        return c
    c[single] = 0
    np.add.at(c, rng.choice(big, size=len(single)), 1)
    return c


def _repair_singles(placed: np.ndarray, rng: np.random.Generator) -> int:
    """Relabel every (user, silo) pair holding one record so that all pairs hold 0 or ≥ 2 (see module doc)."""
    repairs = 0
    for s in range(placed.shape[1]):
        col = placed[:, s]  # a view: edits go to `placed`
        for u in np.flatnonzero(col == 1):
            if col[u] != 1:
                continue
            others = np.flatnonzero((col >= 2) & (np.arange(len(col)) != u))
            rich = np.flatnonzero(col >= 3)
            singles = np.flatnonzero((col == 1) & (np.arange(len(col)) != u))
            keeps_records = placed[u].sum() > 1
            if keeps_records and len(others):
                col[rng.choice(others)] += 1
                col[u] = 0
            elif len(rich):
                col[rng.choice(rich)] -= 1
                col[u] = 2
            elif len(singles):
                col[rng.choice(singles)] = 0
                col[u] = 2
            elif len(others):
                col[rng.choice(others)] += 1
                col[u] = 0
            else:  # unreachable for silos of ≥ 2 records
                raise ValueError(f"silo {s} cannot hold (user, silo) pairs of ≥ 2 records")
            repairs += 1
    return repairs


def allocate_flamby(kind: str, silo_sizes, n_users: int, rng: np.random.Generator, *, user_alpha: float = 0.5,
                    main_ratio: float = 0.8, min_records: int = 1) -> dict:
    """§2.2: user ids for the FLamby silos of fixed `silo_sizes` (records ordered silo by silo, in each centre's
    order). `min_records` = 1 (HeartDisease) or 2 (TcgaBrca: pairs in uniform, ≥ 2 per (user, silo) in zipf).
    Returns per-record `user`, `silo`, `train_mask` (all True) and `n_repaired` (TCGA relabelings)."""
    if kind not in FLAMBY_KINDS:
        raise ValueError(f"unknown kato2024 FLamby allocation kind {kind!r}; expected one of {', '.join(FLAMBY_KINDS)}")
    sizes = np.asarray(silo_sizes)
    if sizes.ndim != 1 or len(sizes) == 0 or not np.issubdtype(sizes.dtype, np.integer) or (sizes < 1).any():
        raise ValueError(f"silo_sizes must be a non-empty list of positive integers, got {silo_sizes!r}")
    sizes = sizes.astype(np.int64)
    n_users = _check_positive("n_users", n_users)
    if min_records not in (1, 2):
        raise ValueError(f"min_records must be 1 (HeartDisease) or 2 (TcgaBrca), got {min_records!r}")
    if min_records == 2 and (sizes < 2).any():
        raise ValueError(f"every silo needs ≥ 2 records when min_records = 2, got silo sizes {sizes.tolist()}")
    n, n_silos = int(sizes.sum()), len(sizes)
    # zipf gives every user its records; uniform draws a user per record (TCGA: per pair), so beyond this many users
    # some would surely hold none while the figure is labelled with all U
    capacity = n if min_records == 1 else int((sizes // 2).sum())
    if n_users > capacity:
        need = "1 record each" if min_records == 1 else "≥ 2 records in some silo each (Σ_s ⌊n_s/2⌋)"
        raise ValueError(f"n_users = {n_users} is more than the {n} records allow at {need}: at most {capacity} "
                         f"users")
    repaired = 0
    if kind == "uniform":
        if min_records == 1:  # Heart: i.i.d. uniform user ids
            per_silo = np.split(rng.integers(0, n_users, size=n), np.cumsum(sizes)[:-1])
        else:  # TCGA: pairs get one uniform id; an odd leftover joins the silo's last pair
            ids = rng.integers(0, n_users, size=int((sizes // 2).sum()))
            per_silo = []
            for pair_ids, size in zip(np.split(ids, np.cumsum(sizes // 2)[:-1]), sizes):
                lst = np.repeat(pair_ids, 2)
                per_silo.append(np.append(lst, lst[-1]) if size % 2 else lst)
    else:
        counts = min_records + rng.multinomial(n - min_records * n_users, _zipf_weights(n_users, user_alpha))
        main = rng.integers(0, n_silos, size=n_users)
        if n_silos == 1:
            hist = counts[:, None].copy()
        else:
            p = np.full((n_users, n_silos), (1.0 - main_ratio) / (n_silos - 1))
            p[np.arange(n_users), main] = main_ratio
            hist = rng.multinomial(counts, p)
        if min_records == 2:
            hist = np.stack([_at_least_two(row, rng) for row in hist])
        placed = _fill_round_robin(hist, sizes)
        if min_records == 2:
            repaired = _repair_singles(placed, rng)
        per_silo = [np.repeat(np.arange(n_users), placed[:, s]) for s in range(n_silos)]
    # finally, per silo: shuffle the user ids and zip them with the centre's records in order
    user = np.concatenate([rng.permutation(ids) for ids in per_silo]).astype(np.int64)
    silo = np.repeat(np.arange(n_silos), sizes)
    return {"user": user, "silo": silo, "train_mask": np.ones(n, dtype=bool), "n_repaired": np.array(repaired)}


def allocate(kind: str, *, n_users: int, rng: np.random.Generator, labels=None, n_silos: int | None = None,
             silo_sizes=None, **params) -> dict:
    """One entry point: `silo_sizes` given → §2.2 (`allocate_flamby`), else `labels` and `n_silos` → §2.1
    (`allocate_records`). `params` are the keyword settings of those functions."""
    if silo_sizes is not None:
        if n_silos is not None and n_silos != len(silo_sizes):
            raise ValueError(f"n_silos = {n_silos} but {len(silo_sizes)} FLamby silo sizes were given")
        return allocate_flamby(kind, silo_sizes, n_users, rng, **params)
    if labels is None or n_silos is None:
        raise ValueError("allocate needs either silo_sizes (HeartDisease, TcgaBrca) or labels and n_silos")
    return allocate_records(kind, labels, n_users, n_silos, rng, **params)


def histogram(user: np.ndarray, silo: np.ndarray, n_users: int, n_silos: int, mask=None) -> np.ndarray:
    """n_{s,u} as a (U × S) count matrix over the records where `mask` (e.g. `train_mask`) is True (Fig 13)."""
    if mask is not None:
        user, silo = user[mask], silo[mask]
    return np.bincount(user * n_silos + silo, minlength=n_users * n_silos).reshape(n_users, n_silos)
