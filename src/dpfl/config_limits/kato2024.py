"""The configuration limits of kato2024 (dpfl.config_limits): its allocation instances against the records of a
seed or the FLamby centres, the training figures' method hyper-parameter blocks and sampling rates, and the
protocol's key size; each function's docstring names the code that assumes each limit.
"""

from __future__ import annotations

import functools
import inspect
import math

from dpfl.config_limits.variant import Variant, _distinct, _get

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


def _kato_allocation(v: Variant, dataset_path: tuple, scheme_path: tuple) -> dict | None:
    """The allocation scheme a figure (or Fig 11 panel) names, which must be a configured one of its dataset (its
    cells read that scheme's instances as records of the figure's dataset: dpfl.papers.kato2024.panels)."""
    dataset, scheme = _get(v.params, dataset_path[3:]), _get(v.params, scheme_path[3:])
    entry = v.paper_cfg.get("allocations", {}).get(scheme)
    if entry is None:
        v.problem(scheme_path, f"{scheme!r} is not an allocation scheme of allocations: (configured: "
                               f"{', '.join(v.paper_cfg.get('allocations', {})) or 'none'})")
        return None
    if entry["dataset"] != dataset:
        v.problem(scheme_path, f"{scheme!r} allocates {entry['dataset']} (allocations.{scheme}.dataset), not "
                               f"{dataset} ({v.ref(dataset_path)}): its instances index the records of "
                               f"{entry['dataset']} (dpfl.papers.kato2024.panels, allocation)")
        return None
    return entry



def _kato_panel(v: Variant, entry: dict, panel: dict, at: tuple) -> None:
    """One panel's allocation instance <distribution>-U<users>-S<silos> of `entry`
    (dpfl.papers.kato2024.allocation_instances):

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
                                      f"(dpfl.papers.kato2024.allocation_instances.build_flamby)")
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
    each), the allocation scheme of the figure's dataset, and each panel's instance (`_kato_panel`)."""
    _distinct(v, v.params["panels"], lambda i: v.p("panels", i, "id"), lambda q: q["id"], "panel")
    entry = _kato_allocation(v, v.p("dataset"), v.p("allocation"))
    if entry is not None:
        for i, panel in enumerate(v.params["panels"]):
            _kato_panel(v, entry, panel, v.p("panels", i))


def _kato_training(v: Variant) -> None:
    """kato2024 Figs 4-10 (dpfl.papers.kato2024.training): the panels and allocations (`_kato_panels`), and

    - every method's hyper block: params.hyper has the block of each listed method's scheme, which (with a panel's
      `hyper` override) holds exactly the keys the scheme uses (training.layout.runs_params reads the block;
      methods.UldpMethod.hyper_params refuses a missing or unused key when the cell starts);
    - uldp_avg_ws needs sampling_rates (one curve each: training.layout.method_cells), whose values name distinct
      runs ("<panel>-uldp_avg_ws-q<q>")."""
    from dataclasses import fields

    from dpfl.papers.kato2024.methods import BY_ID, HYPER_BLOCKS

    _kato_panels(v)
    p = v.params
    blocks = list(dict.fromkeys(BY_ID[m].hyper for m in p["methods"]))
    users = {f: [m for m in p["methods"] if BY_ID[m].hyper == f] for f in blocks}
    for name in blocks:
        names = [f.name for f in fields(HYPER_BLOCKS[name])]
        if name not in p["hyper"]:
            v.problem(v.p("hyper"), f"no {name!r} block, which {', '.join(users[name])} in "
                                    f"{v.ref(v.p('methods'))} use(s); it needs {', '.join(names)} "
                                    f"(dpfl.papers.kato2024.methods)")
            continue
        for i, panel in enumerate(p["panels"]):  # a panel's block: the figure's with the panel's override
            override = (panel.get("hyper") or {}).get(name) or {}
            block = {k: x for k, x in {**p["hyper"][name], **override}.items() if x is not None}
            at = v.p("panels", i, "hyper", name) if override else v.p("hyper", name)
            missing = [k for k in names if k not in block]
            if missing:
                v.problem(at, f"lacks {', '.join(missing)}, which {', '.join(users[name])} need(s): the {name} "
                              f"block takes exactly {', '.join(names)} (dpfl.papers.kato2024.methods)")
            for key in sorted(set(block) - set(names)):
                owner = v.p("panels", i, "hyper", name) if key in override else v.p("hyper", name)
                v.problem((*owner, key), f"{block[key]!r} is not used by {', '.join(users[name])}: the {name} "
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
    """Bits of L·10^12, L = lcm(1..N̄) (dpfl.papers.kato2024.protocol.encoding.lcm_bound,
    dpfl.papers.kato2024.protocol.secure.Server)."""
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
    distinct panel ids (one cell each) and per panel the allocation scheme of its dataset and its instance
    (`_kato_panel`)."""
    _kato_protocol(v)
    if "panels" not in v.params:  # Fig 12: sweeps of generated data
        return
    _distinct(v, v.params["panels"], lambda i: v.p("panels", i, "id"), lambda q: q["id"], "panel")
    for i, panel in enumerate(v.params["panels"]):
        entry = _kato_allocation(v, v.p("panels", i, "dataset"), v.p("panels", i, "allocation"))
        if entry is not None:
            _kato_panel(v, entry, panel, v.p("panels", i))
