"""The configuration limits of lowy2023 (dpfl.config_limits): its training figures' panels (silos, the MB-SGD batch
against a silo's training rows) and its allocation mnist-pairs; each function's docstring names the code that
assumes each limit.
"""

from __future__ import annotations

import functools
import inspect
import math

from dpfl.config_limits.variant import Variant, _distinct

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
