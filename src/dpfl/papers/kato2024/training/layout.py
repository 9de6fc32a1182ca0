"""The shape of a kato2024 training figure, read when the DAG is built: one cell per panel, named by the panel id,
which runs every method of the panel in turn (ULDP-AVG-ws once per sampling rate) in one process, each run named
"<panel>-<method id>" or "<panel>-<method id>-q<q>", and reads the panel's allocation of every seed."""

from __future__ import annotations

from dpfl.figure import FigureLayout
from dpfl.papers.kato2024.methods import BY_ID
from dpfl.papers.kato2024.panels import DISTRIBUTIONS, panel_of, seed_allocation


def method_cells(params: dict) -> list[tuple[str, float | None]]:
    """(method id, q or None) of every curve of a panel: the listed methods; AVG-ws once per sampling rate."""
    out = []
    for mid in params["methods"]:
        if BY_ID[mid].sampled:
            out += [(mid, float(q)) for q in params["sampling_rates"]]
        else:
            out.append((mid, None))
    return out


def parse_run(run: str) -> tuple[str, str, float | None]:
    """A run of a panel cell: "a-uldp_avg_ws-q0.1" -> ("a", "uldp_avg_ws", 0.1); "b-default" -> ("b", "default",
    None)."""
    parts = run.split("-")
    if len(parts) not in (2, 3) or parts[1] not in BY_ID or (len(parts) == 3 and not parts[2].startswith("q")):
        raise ValueError(f"kato2024 run {run!r} is not <panel>-<method>[-q<rate>] with method one of "
                         f"{', '.join(BY_ID)}")
    return parts[0], parts[1], float(parts[2][1:]) if len(parts) == 3 else None


def run_id(panel_id: str, method_id: str, q: float | None) -> str:
    """The run of `method_id` (at sampling rate q) on a panel: "<panel>-<method id>[-q<q>]"."""
    return f"{panel_id}-{method_id}" + ("" if q is None else f"-q{q:g}")


class TrainingLayout(FigureLayout):
    """Figs 4-10: one cell per panel, named by the panel id; its runs (`cell_runs`) are the panel's curves, one per
    (method[, sampling rate]), named "<panel>-<method id>[-q<q>]", computed one after another in the cell's process,
    each reading the panel's allocation of every seed."""

    def cells(self, params: dict) -> list[str]:
        return [panel["id"] for panel in params["panels"]]

    def cell_runs(self, params: dict, cell: str) -> list[str]:
        """The panel's curves in legend order: every listed method; ULDP-AVG-ws once per sampling rate."""
        panel_of(params, cell)
        return [run_id(cell, mid, q) for mid, q in method_cells(params)]

    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prepared datasets, allocations) of the figure; a panel whose distribution its dataset does not support stops
        the DAG before any job (config/papers/kato2024.yaml, the panel's `distribution`)."""
        for i, panel in enumerate(params["panels"]):
            allowed = DISTRIBUTIONS[params["dataset"]]
            if panel["distribution"] not in allowed:
                raise ValueError(f"config/papers/kato2024.yaml: params.panels[{i}] (id {panel['id']}).distribution: "
                                 f"{panel['distribution']!r} is not allowed for {params['dataset']}; allowed: "
                                 f"{', '.join(allowed)} (spec §2)")
        names = [seed_allocation(params, panel, s) for panel in params["panels"] for s in params["seeds"]]
        return (params["dataset"],), tuple(dict.fromkeys(names))

    def cell_needs(self, params: dict, cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A cell reads its own panel's allocations (every seed) only."""
        return self.needs({**params, "panels": [panel_of(params, cell)]})

    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """What one panel cell depends on: its panel, the hyper-parameter blocks of its methods (with the panel's
        overrides), its methods and sampling rates, and the shared run settings (so editing another panel, or a
        block none of its methods uses, reruns nothing here)."""
        return self.runs_params(params, paper_settings, cell, self.cell_runs(params, cell))

    def runs_params(self, params: dict, paper_settings: dict, cell: str, runs: list[str]) -> tuple[dict, dict]:
        """What the panel cell computing only `runs` depends on: the panel, the hyper-parameter blocks of their
        methods, their methods and sampling rates (only where ULDP-AVG-ws runs), the shared run settings. For one
        run, the params another figure's run must equal for `reuse_cells` to read it there."""
        shared = ("panels", "hyper", "methods", "sampling_rates", "reuse_cells")
        own = {k: v for k, v in params.items() if k not in shared}
        panel = dict(panel_of(params, cell))
        parsed = [parse_run(r) for r in runs]
        if not parsed or any(p != cell for p, _, _ in parsed):
            raise ValueError(f"kato2024 panel cell {cell!r}: runs {runs!r} are not runs of panel {cell!r}")
        methods = list(dict.fromkeys(mid for _, mid, _ in parsed))
        # a panel may override its methods' hyper-parameters (MNIST: ULDP-AVG's η_g is 10 at U = 100, 100 at U = 10000)
        override = panel.pop("hyper", None) or {}
        own["panels"] = [panel]
        own["hyper"] = {block: {**params["hyper"][block], **override.get(block, {})}
                        for block in dict.fromkeys(BY_ID[mid].hyper for mid in methods)}
        own["methods"] = methods
        rates = [q for _, _, q in parsed if q is not None]
        if rates:
            own["sampling_rates"] = rates
        return own, {}

    def reused_cells(self, params: dict) -> dict[str, str]:
        """{run: figure}: runs ("<panel>-<method>[-q<q>]") that are the same run as that figure's run of the same name
        (`reuse_cells` in the figure's params); dpfl.jobs.cell_sources reads its rows from that figure's panel cell
        when both runs' params are identical, and this figure's panel cell leaves it out."""
        return dict(params.get("reuse_cells") or {})

    def gpu_cell(self, params: dict) -> bool:
        """A cell worth a GPU (dpfl.jobs.cell_gpu): MNIST's CNN (Figs 5, 10(b)); the other models are tiny."""
        return params["dataset"] == "mnist"

    def bench_units(self, params: dict) -> tuple[int, str]:
        """How many units of work the full figure runs per cell, and their name (rounds, all seeds batched)."""
        return int(params["rounds"]), "round"

    def bench_params(self, params: dict, units: int) -> dict:
        """The benchmark's reduced run of a cell: every seed (batched, as the real job), `units` rounds."""
        return {**params, "rounds": int(units)}

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """The setting columns of the tidy table (dpfl.papers.kato2024.training.table.curves): panel ids, methods,
        sampling rates (q = 1 for a method without sub-sampling), U, S and distributions of the panels; its quantities
        and windows; and the gap rows: method "gap" / quantity loss_gap / window by_silos where ULDP-AVG and ULDP-AVG-w
        both run (_weighting_gaps), panel "<iid>→<noniid>" / distribution "zipf-noniid − zipf-iid" / quantity
        noniid_gap / window by_users for a (U, S) with a zipf-iid and a zipf-noniid panel (_noniid_gaps)."""
        panels, curves = params["panels"], method_cells(params)
        out = {"panel": {panel["id"] for panel in panels}, "method": {mid for mid, _ in curves},
               "q": {1.0 if q is None else float(q) for _, q in curves},
               "users": {int(panel["users"]) for panel in panels}, "silos": {int(panel["silos"]) for panel in panels},
               "distribution": {panel["distribution"] for panel in panels},
               # table.QUANTITIES (not imported: a layout imports no numerics)
               "quantity": {"utility", "test_loss", "test_loss_batch_sum", "eps", "eps_certified"},
               "window": {"round", "final", "early"}}
        if {"uldp_avg", "uldp_avg_w"} <= out["method"]:
            out["method"].add("gap")
            out["quantity"].add("loss_gap")
            out["window"].add("by_silos")
        by_setting: dict = {}
        for panel in panels:
            setting = by_setting.setdefault((int(panel["users"]), int(panel["silos"])), {})
            setting.setdefault(panel["distribution"], panel["id"])
        for ids in by_setting.values():
            if {"zipf-iid", "zipf-noniid"} <= set(ids):
                out["panel"].add(f"{ids['zipf-iid']}→{ids['zipf-noniid']}")
                out["distribution"].add("zipf-noniid − zipf-iid")
                out["quantity"].add("noniid_gap")
                out["window"].add("by_users")
        return out

