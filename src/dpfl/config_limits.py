"""The limits of a configuration that no schema can state: those that depend on more than one key or on the size of
the data. dpfl.config.load calls `check` once the files are merged and validated, so that an impossible setting
stops the run before the first job, naming the file that set it, the key path, the value and the limit, instead of
failing inside a job (or after the figure's other cells ran).

Every variant a figure defines is checked with the params it runs with: the paper's, the authors-code variant
(`authors_code.params` merged in) and each ablation, after the scale overlay (config/scales/<scale>.yaml). The file
named is the one that set the offending value: the scale file (its `figures`, `families` or `all_figures` entry),
the paper file (the figure's params, its `authors_code` items or its `ablations`), or, for a value no file writes,
the schema that gives its default.

The limits sit in one registry per figure family (`FIGURE_LIMITS`, keyed by (paper, FigureFamily.name), so a new
figure of a family is checked without an entry here) and per paper (`PAPER_LIMITS`); each function's docstring says
which code assumes each limit. Families without a cross-field limit are listed in `NO_LIMITS`.

Data sizes (`DataSizes`): where the data a run will read is already prepared (data/prepared/<dataset>.npz, of the
kind `data_source` asks for), its recorded counts; otherwise the documented size of the real data (`DOCUMENTED`;
the stand-ins write the same counts). The message says which.

Import-light: it reads the papers' registries and constants, never a dataset's arrays (a prepared file's metadata
only), so it adds milliseconds to a load.
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass
from pathlib import Path

from dpfl import paths
from dpfl.papers import FIGURES

# --------------------------------------------------------------------------------------------------
# the sizes of the data
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# one figure variant, and where its values come from
# --------------------------------------------------------------------------------------------------


def _key_path(path) -> str:
    """"figures.fig4.params.panels[0].n_silos": the form of the schema errors (dpfl.config)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _has(tree, path) -> bool:
    for part in path:
        if isinstance(part, int) and isinstance(tree, list) and 0 <= part < len(tree):
            tree = tree[part]
        elif isinstance(tree, dict) and part in tree:
            tree = tree[part]
        else:
            return False
    return True


def _set(overlay, path) -> bool:
    """Whether a merged overlay sets the value at `path`: a value that is not a mapping (a mapping is merged key by
    key, so its other keys come from below)."""
    return _has(overlay, path) and not isinstance(_get(overlay, path), dict)


@dataclass(frozen=True)
class Problem:
    path: tuple  # the offending key, a key path of the merged paper configuration
    text: str  # its value, the limit and the code that assumes it


class Variant:
    """One paper (`figure` None) or one figure in one mode: the params it runs with and where each value was set."""

    def __init__(self, cfg, scale: dict, paper: str, sizes: DataSizes, figure: str | None = None,
                 mode: str = "none"):
        self.cfg, self.paper, self.figure, self.mode, self.data = cfg, paper, figure, mode, sizes
        self.paper_cfg = cfg.papers[paper]
        self.paper_file, self.scale_file = cfg.sources[paper]
        self.written = cfg.written.get(paper, {})
        self.part = ((scale or {}).get("papers") or {}).get(paper) or {}
        if figure is not None:
            self.spec = cfg.figure(paper, figure)
            self.params = cfg.figure_params(paper, figure, mode)
        self.problems: list[Problem] = []

    def p(self, *rel) -> tuple:
        """The key path of params.<rel> of this figure."""
        return ("figures", self.figure, "params", *rel)

    def problem(self, path: tuple, text: str) -> None:
        self.problems.append(Problem(path, text))

    def ref(self, path: tuple) -> str:
        """A key named in a message: its key path, and the file that set it where that is not the paper file's key."""
        where, key = self.locate(path)
        plain = _key_path(path)
        if where == self.paper_file and key.startswith(plain):
            return key  # written in the paper file, or its schema default
        return f"{plain}, set at {where} {key}"

    def locate(self, path: tuple) -> tuple[str, str]:
        """(file, key path in that file) of the value at `path`: the variant's overlay, then the scale file, then the
        paper file, else the schema's default."""
        if self.figure is not None and self.mode != "none" and path[:3] == ("figures", self.figure, "params"):
            rest = path[3:]
            code = self.spec.get("authors_code", {})
            if self.mode == paths.AUTHORS_CODE:
                if _set(code.get("params", {}), rest):
                    return self._file_of(("figures", self.figure, "authors_code", "params", *rest))
            else:
                name = paths.ablation_name(self.mode)
                chosen = (self.spec.get("ablations") or {}).get(name)
                if isinstance(chosen, dict):
                    if _set(chosen.get("params", {}), rest):
                        return self._file_of(("figures", self.figure, "ablations", name, "params", *rest))
                else:
                    for item in reversed(chosen or []):
                        if _set((code.get("items") or {}).get(item, {}), rest):
                            return self._file_of(("figures", self.figure, "authors_code", "items", item, *rest))
        return self._file_of(path)

    def _file_of(self, path: tuple) -> tuple[str, str]:
        if _has(self.written, path) and isinstance(_get(self.written, path), dict):
            return self.paper_file, _key_path(path)  # a block the paper file writes (a scale may change its keys)
        candidates = [(path, "")]
        if path[0] == "figures" and len(path) > 2:
            fig, rest = path[1], path[2:]
            applied = f" (as figures.{fig})"
            candidates = [(("figures", fig, *rest), "")]
            if rest[0] == "params" and (self.paper, fig) in FIGURES:
                family = FIGURES[(self.paper, fig)].family.name
                dataset = self.written.get("figures", {}).get(fig, {}).get("params", {}).get("dataset")
                if dataset is not None:
                    candidates.append((("families", family, "datasets", dataset, "params", *rest[1:]), applied))
                candidates.append((("families", family, "params", *rest[1:]), applied))
            candidates.append((("all_figures", *rest), applied))
        for sub, note in candidates:
            if _has(self.part, sub):
                return self.scale_file, _key_path(("papers", self.paper, *sub)) + note
        if _has(self.written, path):
            return self.paper_file, _key_path(path)
        return self.paper_file, f"{_key_path(path)} (not written: the default of " \
                                f"workflow/schemas/papers/{self.paper}.schema.yaml)"


def _distinct(v: Variant, items: list, path_of, name_of, what: str) -> None:
    """Items whose names must differ (one cell or run each: FigureLayout.cells are unique)."""
    seen: dict = {}
    for i, item in enumerate(items):
        name = name_of(item)
        if name in seen:
            v.problem(path_of(i), f"{name!r} names the same {what} as {_key_path(path_of(seen[name]))}; allowed: "
                                  f"distinct values (each is one cell or run and one table)")
        seen.setdefault(name, i)


# --------------------------------------------------------------------------------------------------
# lowy2023
# --------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _lowy_test_fraction() -> float:
    from dpfl.papers.lowy2023.split import _split

    return inspect.signature(_split).parameters["test_fraction"].default


def _lowy_train_rows(rows: int) -> int:
    """Training rows of a silo of `rows`: the test part is ⌈0.2·rows⌉ (dpfl.papers.lowy2023.split._split)."""
    return rows - math.ceil(_lowy_test_fraction() * rows)


def _lowy_insurance_min_silo(rows: int, n_silos: int) -> int:
    """The fewest training rows of an insurance silo: silos hold ⌈rows/N⌉ consecutive rows of the sorted charges
    (the last the rest, possibly none)."""
    per = math.ceil(rows / n_silos)
    return _lowy_train_rows(max(0, min(per, rows - (n_silos - 1) * per)))


def _lowy_figure(v: Variant) -> None:
    """lowy2023 Figs 4-9 (one panel per cell, dpfl.papers.lowy2023.cell):

    - silos_per_round M ≤ n_silos N: each round draws M of the N silos without replacement
      (dpfl.papers.lowy2023.isrl._subsets; a larger M gives the round fewer silos than its arrays expect);
    - MNIST: N ≤ the 25 (even, odd) silos of the allocation mnist-pairs (split.even_odd_pairs; trial_data takes the
      first N); obesity: N ≤ the data's classes (split.trial_data: silo k holds the training rows of class k, an
      empty class gives n_min = 0); insurance: every silo keeps ≥ 2 training rows (split.trial_data: ⌈rows/N⌉ rows
      per silo, each standardised with its own training std, ddof = 1);
    - the MB-SGD batch K = ⌊n·sqrt(max(epsilons)/(4·rounds))⌋ (cell.local_steps; n = the largest silo's training rows,
      insurance ⌈rows/N⌉) ≤ every silo's training rows: the batch is drawn from the silo without replacement
      (isrl.minibatch_draws) and accounted as K of n sampled without replacement (methods.IsrlMethod.accounting),
      for every variant. Obesity's silos are reduced to a random n_min: there K ≤ n_min needs
      max(epsilons) ≤ 4·rounds."""
    from dpfl.papers.lowy2023.split import EVENS, ODDS

    p = v.params
    experiment = p["experiment"]
    _distinct(v, p["panels"], lambda i: v.p("panels", i, "id"), lambda q: q["id"], "panel")
    eps, rounds = max(p["epsilons"]), int(p["rounds"])
    share, batch_checked = math.sqrt(eps / (4 * rounds)), False
    if experiment == "mnist":
        size = v.data("mnist")
        alloc = v.paper_cfg.get("allocations", {}).get("mnist-pairs")  # without it the DAG names the missing entry
        per_digit = min(alloc["params"]["per_digit"], min(size.counts["train_labels"])) if alloc else None
        pool = len(EVENS) * len(ODDS)  # one silo per (even, odd) digit pair
        n_train = _lowy_train_rows(2 * per_digit) if alloc else None
    for i, panel in enumerate(p["panels"]):
        N, M = int(panel["n_silos"]), int(panel["silos_per_round"])
        if M > N:
            v.problem(v.p("panels", i, "silos_per_round"),
                      f"{M} must be <= {N}, the panel's n_silos ({v.ref(v.p('panels', i, 'n_silos'))}): each round "
                      f"draws M of the N silos without replacement (dpfl.papers.lowy2023.isrl)")
        if experiment == "mnist":
            if N > pool:
                v.problem(v.p("panels", i, "n_silos"),
                          f"{N} must be <= {pool}, the (even, odd) digit-pair silos of allocation mnist-pairs "
                          f"(dpfl.papers.lowy2023.split.even_odd_pairs)")
            if n_train is None:
                continue
            n_for_k, n_min, what = n_train, n_train, (f"the {n_train} training rows of an MNIST silo "
                                                      f"(2 × per_digit {per_digit}, 80%; {size.origin})")
        elif experiment == "obesity":
            size = v.data("obesity")
            classes = size.counts["classes"]
            if N > classes:
                v.problem(v.p("panels", i, "n_silos"),
                          f"{N} must be <= {classes}, the classes of obesity ({size.origin}): silo k holds the "
                          f"training rows of class k (dpfl.papers.lowy2023.split.trial_data)")
            if share > 1:
                _lowy_batch_problem(v, eps, rounds,
                                    f"a batch K = ⌊n_min·sqrt(ε/(4R))⌋ with sqrt(ε/(4R)) = {share:.3g} > 1",
                                    "the n_min training rows of an obesity silo (each silo is cut to the smallest "
                                    "class's count in the trial)", f"<= {4 * rounds}", f">= {math.ceil(eps / 4)}")
            continue
        else:  # insurance
            size = v.data("insurance")
            rows = size.counts["rows"]
            n_min = _lowy_insurance_min_silo(rows, N)
            if n_min < 2:
                most = next(n for n in range(1, rows + 2) if _lowy_insurance_min_silo(rows, n) < 2) - 1
                v.problem(v.p("panels", i, "n_silos"),
                          f"{N} leaves an insurance silo with {max(n_min, 0)} training rows: the {rows} rows "
                          f"({size.origin}) go to silos of ⌈{rows}/N⌉ = {math.ceil(rows / N)} rows, the last one "
                          f"the rest, and each silo is standardised with its own training std "
                          f"(dpfl.papers.lowy2023.split.trial_data); allowed: N such that every silo keeps ≥ 2 "
                          f"training rows (every N <= {most} does)")
                continue
            n_for_k = math.ceil(rows / N)
            what = f"the {n_min} training rows of the smallest insurance silo at N = {N} ({size.origin})"
        K = _local_steps(n_for_k, eps, rounds)
        if K > n_min and not batch_checked:
            batch_checked = True
            least = max(1, math.floor(eps * n_for_k ** 2 / (4 * (n_min + 1) ** 2)))
            while _local_steps(n_for_k, eps, least) > n_min:
                least += 1
            _lowy_batch_problem(v, eps, rounds, f"a batch K = ⌊{n_for_k}·sqrt(ε/(4R))⌋ = {K} in panel {panel['id']}",
                                what, f"< {4 * rounds * ((n_min + 1) / n_for_k) ** 2:.4g}", f">= {least}")


def _local_steps(n: int, eps: float, rounds: int) -> int:
    """K = ⌊n·sqrt(ε_max/(4R))⌋, at least 1 (dpfl.papers.lowy2023.cell.local_steps)."""
    return max(1, math.floor(n * math.sqrt(eps / (4 * rounds))))


def _lowy_batch_problem(v: Variant, eps: float, rounds: int, batch: str, what: str, eps_allowed: str,
                        rounds_allowed: str) -> None:
    """The MB-SGD batch exceeds a silo: named at `rounds` where a file other than the paper file set it and the
    paper file the ε grid (a scale's reduction), else at `epsilons`."""
    eps_at, rounds_at = v.p("epsilons"), v.p("rounds")
    why = ("the MB-SGD batch is drawn from a silo without replacement and accounted so: "
           "dpfl.papers.lowy2023.cell.local_steps, isrl, methods")
    if v.locate(rounds_at)[0] != v.paper_file and v.locate(eps_at)[0] == v.paper_file:
        v.problem(rounds_at, f"{rounds} with the largest ε {eps:g} ({v.ref(eps_at)}) gives {batch}, more than {what}; "
                             f"allowed: rounds {rounds_allowed} at that ε ({why})")
    else:
        v.problem(eps_at, f"the largest ε {eps:g} with rounds R = {rounds} ({v.ref(rounds_at)}) gives {batch}, more "
                          f"than {what}; allowed: a largest ε {eps_allowed} at R = {rounds} ({why})")


def _lowy_paper(v: Variant) -> None:
    """lowy2023's allocation mnist-pairs (dpfl.papers.lowy2023.split.even_odd_pairs):

    - per_digit ≤ the rarest digit's training images: every (even, odd) silo takes the first per_digit images of
      each of its digits and the 25 silos are stacked into one array (silos of unequal size cannot be);
    - pca_components ≤ the pixels of an image (and ≤ the training images): PCA's n_components."""
    entry = v.paper_cfg.get("allocations", {}).get("mnist-pairs")
    if not entry:
        return
    size = v.data("mnist")
    params = entry["params"]
    where = ("allocations", "mnist-pairs", "params")
    rarest = min(size.counts["train_labels"])
    if params["per_digit"] > rarest:
        v.problem((*where, "per_digit"), f"{params['per_digit']} must be <= {rarest}, the training images of the "
                                         f"rarest digit ({size.origin})")
    most = min(size.counts["pixels"], size.counts["train"])
    if params["pca_components"] > most:
        v.problem((*where, "pca_components"), f"{params['pca_components']} must be <= {most}, the pixels of an MNIST "
                                              f"image (PCA's n_components; {size.origin})")


# --------------------------------------------------------------------------------------------------
# bietti2022
# --------------------------------------------------------------------------------------------------


def _bietti_training(v: Variant) -> None:
    """bietti2022 Figs 1a-d and 2 (dpfl.papers.bietti2022.layout, tasks, table), per grid:

    - federated tasks: users_per_round Q ≤ users N (users are sampled at rate q = Q/N: layout.GridLayout.needs), and
      N ≤ the users the prepared data holds (federated.FederatedTask.from_arrays, sparse.SparseTask.from_arrays);
    - model cnn only on an image task (emnist: tasks.Setup);
    - the synthetic task: synthetic.personal ≤ synthetic.dim (ppsgd.Synthetic);
    - sigmas name distinct cells ("<grid>-sigma<σ>", layout.GridLayout.cells);
    - Fig 1 (table fig1): exactly one grid, and `show` picks at least one of the grid's levels and σ (table.fig1
      refuses both only after every cell ran)."""
    from dpfl.papers.bietti2022.layout import TASK_DATASETS, level
    from dpfl.papers.bietti2022.tasks import FEDERATED

    p = v.params
    for gid, grid in p["grids"].items():
        g = ("grids", gid)
        task = grid["task"]
        _distinct(v, grid["sigmas"], lambda j, g=g: v.p(*g, "sigmas", j), lambda s: f"{float(s):g}", "σ cell")
        if task == "synthetic":
            syn = grid["synthetic"]
            if syn["personal"] > syn["dim"]:
                v.problem(v.p(*g, "synthetic", "personal"),
                          f"{syn['personal']} must be <= {syn['dim']}, the task's dim "
                          f"({v.ref(v.p(*g, 'synthetic', 'dim'))}): the personal coordinates are among the dim "
                          f"coordinates (dpfl.papers.bietti2022.ppsgd.Synthetic)")
        else:
            N, Q = int(grid["users"]), int(grid["users_per_round"])
            if Q > N:
                v.problem(v.p(*g, "users_per_round"),
                          f"{Q} must be <= {N}, the grid's users ({v.ref(v.p(*g, 'users'))}): users are sampled at "
                          f"rate q = Q/N (dpfl.papers.bietti2022.layout)")
            dataset = TASK_DATASETS[task]
            size = v.data(dataset)
            if N > size.counts["users"]:
                v.problem(v.p(*g, "users"),
                          f"{N} must be <= {size.counts['users']}, the users of the prepared {dataset} data "
                          f"({size.origin}): a grid trains on the first N users (dpfl.papers.bietti2022.federated, "
                          f"sparse)")
        if grid["model"] == "cnn":
            images = [t for t, f in FEDERATED.items() if not f.sparse]
            if task not in images:
                v.problem(v.p(*g, "model"),
                          f"'cnn' needs an image task ({', '.join(images)}), not task {task!r} "
                          f"({v.ref(v.p(*g, 'task'))}) (dpfl.papers.bietti2022.tasks)")
    if not FIGURES[(v.paper, v.figure)].table.endswith(":fig1"):
        return
    if len(p["grids"]) != 1:
        v.problem(v.p("grids"), f"{len(p['grids'])} grids ({', '.join(p['grids'])}); Fig 1 draws exactly one "
                                f"(dpfl.papers.bietti2022.table.fig1)")
        return
    grid = next(iter(p["grids"].values()))
    show = p.get("show") or {}
    ran = [level(a) for a in grid["levels"]]
    if "levels" in show and not any(level(a) in ran for a in show["levels"]):
        v.problem(v.p("show", "levels"), f"{show['levels']} picks none of the grid's levels {grid['levels']}; "
                                         f"allowed: at least one of them (dpfl.papers.bietti2022.table.fig1)")
    sigmas = [float(s) for s in grid["sigmas"]]
    if "sigmas" in show and not any(float(s) in sigmas for s in show["sigmas"]):
        v.problem(v.p("show", "sigmas"), f"{show['sigmas']} picks none of the grid's sigmas {grid['sigmas']}; "
                                         f"allowed: at least one of them (dpfl.papers.bietti2022.table.fig1)")


# --------------------------------------------------------------------------------------------------
# kato2024
# --------------------------------------------------------------------------------------------------


def _creditcard_training_records(rows: int, frauds: int) -> int:
    """The training records of a creditcard seed (dpfl.papers.kato2024.split.creditcard_split: a stratified test split
    of ⌈test_size·rows⌉, then the negatives of the training split undersampled to ⌊keep_negatives·n₀⌋): the same for
    every seed."""
    from dpfl.papers.kato2024.split import creditcard_split

    defaults = inspect.signature(creditcard_split).parameters
    test_size, keep = defaults["test_size"].default, defaults["keep_negatives"].default
    n_test = math.ceil(test_size * rows)
    counts = [rows - frauds, frauds]
    exact = [c * n_test / rows for c in counts]
    per_class = [math.floor(e) for e in exact]
    for c in sorted(range(2), key=lambda c: -(exact[c] - per_class[c]))[: n_test - sum(per_class)]:
        per_class[c] += 1  # the remainder to the largest fractional parts, lower class first (stratified_split)
    train_neg, train_pos = counts[0] - per_class[0], counts[1] - per_class[1]
    return math.floor(keep * train_neg) + train_pos


def _kato_records(v: Variant, dataset: str) -> tuple[int, str]:
    """(training records of one seed, their origin) of a record-allocated dataset (creditcard, mnist)."""
    size = v.data(dataset)
    if dataset == "creditcard":
        return _creditcard_training_records(size.counts["rows"], size.counts["frauds"]), size.origin
    return size.counts["train"], size.origin  # MNIST: train and test pooled, 10,000 (the test count) held out


def _kato_allocation(v: Variant, dataset_path: tuple, family_path: tuple) -> dict | None:
    """The allocation family a figure (or Fig 11 panel) names, which must be a configured one of its dataset (its
    cells read that family's instances as records of the figure's dataset: dpfl.papers.kato2024.panels)."""
    dataset, family = _get(v.params, dataset_path[3:]), _get(v.params, family_path[3:])
    entry = v.paper_cfg.get("allocations", {}).get(family)
    if entry is None:
        v.problem(family_path, f"{family!r} is not an allocation family of allocations: (configured: "
                               f"{', '.join(v.paper_cfg.get('allocations', {})) or 'none'})")
        return None
    if entry["dataset"] != dataset:
        v.problem(family_path, f"{family!r} allocates {entry['dataset']} (allocations.{family}.dataset), not "
                               f"{dataset} ({v.ref(dataset_path)}): its instances index the records of "
                               f"{entry['dataset']} (dpfl.papers.kato2024.panels, allocation)")
        return None
    return entry


def _get(tree, path):
    for part in path:
        tree = tree[part]
    return tree


def _kato_panel(v: Variant, entry: dict, panel: dict, at: tuple) -> None:
    """One panel's allocation instance <distribution>-U<users>-S<silos> of `entry` (dpfl.papers.kato2024.allocation):

    - the distribution is one the dataset's allocation kind has (FLamby: uniform, zipf: training.layout.DISTRIBUTIONS);
    - FLamby (heart_disease, tcga_brca): silos = the dataset's centres (build_flamby), and users ≤ its training
      records (min_records 1) or Σ_s ⌊n_s/2⌋ (min_records 2, TCGA's pairs: allocate_flamby);
    - creditcard, mnist: silos ≤ the seed's training records, and with `uniform` users ≤ them too
      (allocate_records)."""
    from dpfl.papers.kato2024.training.layout import DISTRIBUTIONS

    dataset = entry["dataset"]
    users, silos, dist = int(panel["users"]), int(panel["silos"]), panel["distribution"]
    if dist not in DISTRIBUTIONS[dataset]:
        v.problem((*at, "distribution"), f"{dist!r} is not a distribution of {dataset}; allowed: "
                                         f"{', '.join(DISTRIBUTIONS[dataset])} (dpfl.papers.kato2024.allocation)")
        return
    if entry["kind"] == "kato_flamby":
        size = v.data(dataset)
        sizes = size.counts["train"]
        if silos != len(sizes):
            v.problem((*at, "silos"), f"{silos} must be {len(sizes)}, the FLamby centres of {dataset} ({size.origin}) "
                                      f"(dpfl.papers.kato2024.allocation.build_flamby)")
        pairs = entry["params"]["min_records"] == 2
        capacity = sum(n // 2 for n in sizes) if pairs else sum(sizes)
        if users > capacity:
            need = (f"≥ 2 records in some centre (Σ ⌊n_s/2⌋ over the centres' training records {sizes})" if pairs
                    else f"≥ 1 of the {capacity} training records (centres of {sizes})")
            v.problem((*at, "users"), f"{users} must be <= {capacity}: every user of a {dataset} allocation holds "
                                      f"{need}; {size.origin} (dpfl.papers.kato2024.allocation.allocate_flamby)")
        return
    records, origin = _kato_records(v, dataset)
    if silos > records:
        v.problem((*at, "silos"), f"{silos} must be <= {records}, the training records of a {dataset} seed ({origin}): "
                                  f"every silo needs ≥ 1 (dpfl.papers.kato2024.allocation.allocate_records)")
    if dist == "uniform" and users > records:
        v.problem((*at, "users"), f"{users} must be <= {records}, the training records of a {dataset} seed "
                                  f"({origin}): uniform gives every user ⌊N/U⌋ or ⌈N/U⌉ records, at least one "
                                  f"(dpfl.papers.kato2024.allocation.allocate_records)")


def _kato_panels(v: Variant) -> None:
    """The panels of a figure whose panels share the figure's `allocation` (Figs 4-10, 13): distinct ids (one cell
    each), the family of the figure's dataset, and each panel's instance (`_kato_panel`)."""
    _distinct(v, v.params["panels"], lambda i: v.p("panels", i, "id"), lambda q: q["id"], "panel")
    entry = _kato_allocation(v, v.p("dataset"), v.p("allocation"))
    if entry is not None:
        for i, panel in enumerate(v.params["panels"]):
            _kato_panel(v, entry, panel, v.p("panels", i))


def _kato_training(v: Variant) -> None:
    """kato2024 Figs 4-10 (dpfl.papers.kato2024.training): the panels and allocations (`_kato_panels`), and

    - every method's hyper block: params.hyper has the block of each listed method's family, which (with a panel's
      `hyper` override) holds exactly the keys the family uses (training.layout.runs_params reads the block;
      methods.UldpMethod.hyper_params refuses a missing or unused key when the cell starts);
    - uldp_avg_ws needs sampling_rates (one curve each: training.layout.method_cells), whose values name distinct
      runs ("<panel>-uldp_avg_ws-q<q>")."""
    from dataclasses import fields

    from dpfl.papers.kato2024.methods import BY_ID, HYPER_BLOCKS

    _kato_panels(v)
    p = v.params
    families = list(dict.fromkeys(BY_ID[m].hyper for m in p["methods"]))
    users = {f: [m for m in p["methods"] if BY_ID[m].hyper == f] for f in families}
    for family in families:
        names = [f.name for f in fields(HYPER_BLOCKS[family])]
        if family not in p["hyper"]:
            v.problem(v.p("hyper"), f"no {family!r} block, which {', '.join(users[family])} in "
                                    f"{v.ref(v.p('methods'))} use(s); it needs {', '.join(names)} "
                                    f"(dpfl.papers.kato2024.methods)")
            continue
        for i, panel in enumerate(p["panels"]):  # a panel's block: the figure's with the panel's override
            override = (panel.get("hyper") or {}).get(family) or {}
            block = {k: x for k, x in {**p["hyper"][family], **override}.items() if x is not None}
            at = v.p("panels", i, "hyper", family) if override else v.p("hyper", family)
            missing = [k for k in names if k not in block]
            if missing:
                v.problem(at, f"lacks {', '.join(missing)}, which {', '.join(users[family])} need(s): the {family} "
                              f"block takes exactly {', '.join(names)} (dpfl.papers.kato2024.methods)")
            for key in sorted(set(block) - set(names)):
                owner = v.p("panels", i, "hyper", family) if key in override else v.p("hyper", family)
                v.problem((*owner, key), f"{block[key]!r} is not used by {', '.join(users[family])}: the {family} "
                                         f"block takes exactly {', '.join(names)} (dpfl.papers.kato2024.methods)")
    sampled = [m for m in p["methods"] if BY_ID[m].sampled]
    if sampled and not p["sampling_rates"]:
        v.problem(v.p("sampling_rates"), f"[] gives {', '.join(sampled)} no curve; allowed: at least one rate q "
                                         f"(dpfl.papers.kato2024.training.layout.method_cells)")
    _distinct(v, p["sampling_rates"], lambda j: v.p("sampling_rates", j), lambda q: f"{float(q):g}", "run")


def _kato_allocation_figure(v: Variant) -> None:
    """kato2024 Fig 13 (dpfl.papers.kato2024.records): the panels' allocation instances (`_kato_panels`)."""
    _kato_panels(v)


@functools.lru_cache(maxsize=16)
def _lcm_bits(record_bound: int) -> int:
    """Bits of L·10^12, L = lcm(1..N̄) (dpfl.papers.kato2024.protocol.secure.lcm_bound, Server)."""
    return (math.lcm(*range(1, record_bound + 1)) * 10 ** 12).bit_length()


def _largest_record_bound(bits: int) -> int:
    """The largest N̄ whose L·10^12 has fewer than bits − 2 bits."""
    lcm, n = 1, 0
    while (math.lcm(lcm, n + 1) * 10 ** 12).bit_length() < bits - 2:
        n, lcm = n + 1, math.lcm(lcm, n + 1)
    return n


def _kato_protocol(v: Variant) -> None:
    """kato2024 Figs 11-12 (dpfl.papers.kato2024.protocol):

    - a `secure` level in securities needs key_bits ≥ 3072 or simulation: true (security.Security.check_key_bits;
      layout.check_securities refuses it when the DAG is built);
    - key_bits must hold L = lcm(1..record_bound) times the encoded values: (L·10^12) has fewer than key_bits − 2
      bits (secure.Server refuses it when the cell starts)."""
    from dpfl.papers.kato2024.protocol.security import SECURE_KEY_BITS

    p = v.params
    bits, bound = int(p["key_bits"]), int(p["record_bound"])
    if "secure" in p["securities"] and bits < SECURE_KEY_BITS and not p["simulation"]:
        v.problem(v.p("key_bits"), f"{bits} must be >= {SECURE_KEY_BITS} for the secure level of securities "
                                   f"{p['securities']} ({v.ref(v.p('securities'))}), unless simulation is true "
                                   f"({v.ref(v.p('simulation'))}) (dpfl.papers.kato2024.protocol.security)")
    need = _lcm_bits(bound)
    if need >= bits - 2:
        most = _largest_record_bound(bits)
        v.problem(v.p("record_bound"), f"{bound} must be <= {most} for a {bits}-bit key "
                                       f"({v.ref(v.p('key_bits'))}): L = lcm(1..record_bound) times 10^12 takes "
                                       f"{need} bits, the modulus holds fewer than {bits - 2} "
                                       f"(dpfl.papers.kato2024.protocol.secure.Server)")


def _kato_protocol_figure(v: Variant) -> None:
    """kato2024's protocol family: the protocol's limits (`_kato_protocol`), and for a figure of panels (Fig 11)
    distinct panel ids (one cell each) and per panel the allocation family of its dataset and its instance
    (`_kato_panel`)."""
    _kato_protocol(v)
    if "panels" not in v.params:  # Fig 12: sweeps of generated data
        return
    _distinct(v, v.params["panels"], lambda i: v.p("panels", i, "id"), lambda q: q["id"], "panel")
    for i, panel in enumerate(v.params["panels"]):
        entry = _kato_allocation(v, v.p("panels", i, "dataset"), v.p("panels", i, "allocation"))
        if entry is not None:
            _kato_panel(v, entry, panel, v.p("panels", i))


# --------------------------------------------------------------------------------------------------
# asoodeh2021, balle2020
# --------------------------------------------------------------------------------------------------


def _asoodeh_fig2(v: Variant) -> None:
    """asoodeh2021 Fig 2: every q gives an integer batch m = q·n_users (dpfl.papers.asoodeh2021.table.fig2, which
    refuses |m − round(m)| > 1e-9 in its job)."""
    n = int(v.params["n_users"])
    for i, q in enumerate(v.params["q"]):
        m = q * n
        if abs(m - round(m)) > 1e-9:
            v.problem(v.p("q", i), f"{q!r} gives a batch m = q·n_users = {m:.6g} users per iteration with n_users = "
                                   f"{n} ({v.ref(v.p('n_users'))}); allowed: q·n_users an integer, q a multiple of "
                                   f"1/{n} (dpfl.papers.asoodeh2021.table.fig2)")


def _balle_checkins(v: Variant) -> None:
    """balle2020 Thm 3.2 figure: plot.p0 is one of params.p0 (dpfl.papers.balle2020.plot.thm3_2 draws the curves of
    that p0 only: another value draws an empty figure)."""
    p0, values = v.spec["plot"]["p0"], v.params["p0"]
    if not any(abs(p0 - q) <= 1e-8 + 1e-5 * abs(q) for q in values):  # numpy.isclose, as the plot selects
        v.problem(("figures", v.figure, "plot", "p0"),
                  f"{p0!r} must be one of {v.ref(v.p('p0'))} = {values}: the plot draws the curves of that p0 "
                  f"(dpfl.papers.balle2020.plot.thm3_2)")


# --------------------------------------------------------------------------------------------------
# the registry and the check
# --------------------------------------------------------------------------------------------------

#: (paper, figure family = FigureFamily.name) -> its limits
FIGURE_LIMITS = {
    ("lowy2023", "training"): _lowy_figure,
    ("bietti2022", "grids"): _bietti_training,
    ("kato2024", "training"): _kato_training,
    ("kato2024", "records"): _kato_allocation_figure,
    ("kato2024", "protocol"): _kato_protocol_figure,
    ("asoodeh2021", "theorem2"): _asoodeh_fig2,
    ("balle2020", "checkins"): _balle_checkins,
}
#: families whose settings the schema bounds alone: kato2024 Fig 2 (closed form; k > 62 is clamped by design),
#: balle2020 Fig 2 and Table 1 (closed forms of any n ≥ 1)
NO_LIMITS = {("kato2024", "group_privacy"), ("balle2020", "shuffling"), ("balle2020", "table1")}
#: paper -> the limits of its paper-level settings (allocations)
PAPER_LIMITS = {"lowy2023": _lowy_paper}


def _modes(spec: dict) -> list[str]:
    """Every variant a figure defines: the paper's, authors-code (where it has params) and each ablation."""
    modes = ["none"]
    if (spec.get("authors_code") or {}).get("params"):
        modes.append(paths.AUTHORS_CODE)
    return modes + [paths.ablation_mode(name) for name in spec.get("ablations") or {}]


def check(cfg, scale: dict) -> str | None:
    """Every limit of the loaded configuration `cfg` (dpfl.config.ProjectConfig; `scale`: the scale file as read):
    None when all hold, else the message, one line per problem under the file that set the value."""
    sizes = DataSizes(cfg)
    found: dict[tuple[str, str, str], list[str]] = {}  # (file, key path, text) -> variants
    for paper in sorted(cfg.papers):
        runs = []
        if paper in PAPER_LIMITS:
            v = Variant(cfg, scale, paper, sizes)
            PAPER_LIMITS[paper](v)
            runs.append(v)
        for figure in sorted(cfg.papers[paper]["figures"]):
            limits = FIGURE_LIMITS.get((paper, FIGURES[(paper, figure)].family.name))
            if limits is None:
                continue
            for mode in _modes(cfg.figure(paper, figure)):
                v = Variant(cfg, scale, paper, sizes, figure, mode)
                limits(v)
                runs.append(v)
        for v in runs:
            for prob in v.problems:
                where, key = v.locate(prob.path)
                found.setdefault((where, key, prob.text), []).append(v.mode)
    if not found:
        return None
    by_file: dict[str, list[str]] = {}
    for (where, key, text), modes in found.items():
        note = "" if "none" in modes else f" (in the {', '.join(dict.fromkeys(modes))} variant)"
        by_file.setdefault(where, []).append(f"  - {key}: {text}{note}")
    return "\n".join(f"invalid configuration in {where}:\n" + "\n".join(lines) for where, lines in by_file.items())
