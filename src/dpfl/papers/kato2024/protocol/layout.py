"""The shape of kato2024 Figs 11 and 12 (docs/papers/kato2024.md, 'The private weighting protocol'), what the private
weighting protocol costs phase by phase, read when the DAG is built (import-light).

Fig 11 (`panels`): Heart and TCGA with their zipf allocations (the training figures' allocation schemes), one cell
per panel, implementation of the silos' encrypted weighting and security level, named "<panel>-<implementation>"
(the paper's protocol) or "<panel>-<implementation>-secure" (the secure mode). Fig 12 (artificial data, no
`panels`): one cell per (h, U) of the two sweeps (#params at the default #users, #users at the default h),
implementation and level, named "h<h>-U<U>-<implementation>[-secure]" (the default setting is shared by both
sweeps). Every cell is timed. A secure level on a key under 3072 bits outside a simulation is refused here, when
the DAG is built.
"""

from __future__ import annotations

from dpfl.figure import FigureLayout
from dpfl.papers.kato2024.protocol.security import SECURITY_LEVELS, Security

IMPLEMENTATIONS = ("fast", "reference")
PHASES = ("key exchange", "blinded histogram", "local training", "aggregation")
#: the phases that run every round (the others once per run of -w)
PER_ROUND = ("local training", "aggregation")



def is_fig11(params: dict) -> bool:
    """Fig 11's params have `panels` (a cell's: its `panel`); Fig 12's have the sweeps."""
    return "panels" in params or "panel" in params


def settings(params: dict) -> list[tuple[int, int]]:
    """Fig 12's (hidden width, #users) points: the #params sweep at the default #users, then the #users sweep at the
    default width, without repeating the shared default."""
    out = [(int(h), int(params["default_users"])) for h in params["hidden"]]
    out += [(int(params["default_hidden"]), int(u)) for u in params["users"]]
    return list(dict.fromkeys(out))


def cell_name(setting: str, impl: str, security: str) -> str:
    """"heart100", "fast", "paper" -> "heart100-fast"; with "secure" -> "heart100-fast-secure" (the paper's protocol
    keeps the names it had before the secure mode existed)."""
    return f"{setting}-{impl}" + ("" if security == "paper" else f"-{security}")


def parse_cell(cell: str) -> tuple[str, str, str]:
    """"heart100-fast" -> ("heart100", "fast", "paper"); "h2-U20-reference-secure" -> ("h2-U20", "reference",
    "secure")."""
    security, rest = "paper", cell
    for level in SECURITY_LEVELS[1:]:
        if cell.endswith(f"-{level}"):
            security, rest = level, cell[: -len(level) - 1]
    setting, _, impl = rest.rpartition("-")
    if impl not in IMPLEMENTATIONS or not setting:
        raise ValueError(f"kato2024 protocol cell {cell!r} is not <setting>-<implementation>[-secure] with "
                         f"implementation one of {', '.join(IMPLEMENTATIONS)}")
    return setting, impl, security


def check_securities(params: dict) -> None:
    """Every level of `securities` must accept the figure's `key_bits` (the secure one: ≥ 3072 bits, or
    `simulation: true`): refused when the DAG is built rather than when a cell starts."""
    for level in params["securities"]:
        Security(level, bool(params["simulation"])).check_key_bits(int(params["key_bits"]))


def parse_setting(setting: str) -> tuple[int, int]:
    """"h2-U20" -> (2, 20)."""
    h, _, u = setting.partition("-")
    if not (h.startswith("h") and u.startswith("U") and h[1:].isdigit() and u[1:].isdigit()):
        raise ValueError(f"kato2024 Fig 12 setting {setting!r} is not h<hidden>-U<users>")
    return int(h[1:]), int(u[1:])


def panel_allocation(panel: dict, seed: int) -> str:
    """The allocation of one seed of a Fig 11 panel (each panel names its own `allocation` scheme)."""
    from dpfl.papers.kato2024.allocation_instances import AllocationInstance

    return AllocationInstance.of_panel(panel, seed).of_scheme(panel["allocation"])


class ProtocolLayout(FigureLayout):
    """Figs 11 ("<panel>-<implementation>") and 12 ("h<width>-U<users>-<implementation>"): every cell times the
    protocol's phases."""

    def cells(self, params: dict) -> list[str]:
        check_securities(params)
        impls, levels = params["implementations"], params["securities"]
        points = ([panel["id"] for panel in params["panels"]] if is_fig11(params)
                  else [f"h{h}-U{u}" for h, u in settings(params)])
        return [cell_name(point, impl, level) for point in points for impl in impls for level in levels]

    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Fig 11: the panels' datasets and allocations of every seed; Fig 12: nothing (generated in the cell)."""
        if not is_fig11(params):
            return (), ()
        datasets = tuple(dict.fromkeys(panel["dataset"] for panel in params["panels"]))
        names = [panel_allocation(p, s) for p in params["panels"] for s in params["seeds"]]
        return datasets, tuple(dict.fromkeys(names))

    def cell_needs(self, params: dict, cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A Fig 11 cell reads its own panel's dataset and allocations only; Fig 12 reads nothing."""
        if not is_fig11(params):
            return (), ()
        setting, _, _ = parse_cell(cell)
        return self.needs({**params, "panels": [panel for panel in params["panels"] if panel["id"] == setting]})

    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """A cell depends on its own setting, implementation and security level and the shared run settings."""
        setting, impl, security = parse_cell(cell)
        own = {k: v for k, v in params.items()
               if k not in ("panels", "hidden", "users", "implementations", "securities")}
        own["implementation"], own["security"] = impl, security
        if is_fig11(params):
            own["panel"] = next(panel for panel in params["panels"] if panel["id"] == setting)
        else:
            own["hidden"], own["users"] = parse_setting(setting)
        return own, {}

    def timed_cell(self, params: dict) -> bool:
        """Every cell measures wall-clock time: a local run gives it the machine alone (dpfl.jobs.cell_threads)."""
        return True

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """The setting columns of the table (rows: dpfl.papers.kato2024.protocol.table): the implementations
        ("reference/fast" on the speed-up rows where both ran), the security levels ("secure/paper" on the overhead
        rows where both ran), the phases, the quantities; Fig 11 each panel's id, dataset, U and S (the table keeps no
        distribution); Fig 12 the settings "h<width>-U<users>" of both sweeps, their widths and #users."""
        impls, levels = set(params["implementations"]), set(params["securities"])
        both = set(IMPLEMENTATIONS) <= impls
        overhead = set(SECURITY_LEVELS) <= levels
        out = {"implementation": impls | ({"reference/fast"} if both else set()),
               "security": levels | ({"secure/paper"} if overhead else set()), "phase": set(PHASES)}
        if is_fig11(params):
            panels = params["panels"]
            out.update(panel={panel["id"] for panel in panels}, dataset={panel["dataset"] for panel in panels},
                       users={int(panel["users"]) for panel in panels}, silos={int(panel["silos"]) for panel in panels},
                       quantity={"phase_seconds", "silo_seconds"})
        else:
            points = settings(params)
            out.update(panel={f"h{h}-U{u}" for h, u in points}, dataset={"artificial"},
                       hidden={h for h, _ in points}, users={u for _, u in points}, silos={int(params["silos"])},
                       sweep={"params", "users"}, quantity={"phase_seconds", "last_over_first"})
        if both:
            out["quantity"].add("speedup")
        if overhead:
            out["quantity"].add("secure_overhead")
        return out

    def bench_units(self, params: dict) -> tuple[int, str]:
        """A unit is one run (a seed: all its rounds)."""
        return len(params["seeds"]), "run"

    def bench_params(self, params: dict, units: int) -> dict:
        """The benchmark's reduced run of a cell: the first `units` runs (seeds), every round (the fast weighting's
        reuse of c_u shows only from round 2)."""
        return {**params, "seeds": list(params["seeds"])[: max(1, int(units))]}

    def bench_side_by_side(self, results: dict[str, dict]) -> list[str]:
        """Lines of the benchmark's phase table: per setting (and security level) and phase, mean seconds of each
        implementation and the speed-up; `results` {cell: {phase: mean seconds}} (dpfl.bench)."""
        by_setting: dict = {}
        for cell, phases in results.items():
            setting, impl, security = parse_cell(cell)
            label = setting if security == "paper" else f"{setting} {security}"
            by_setting.setdefault(label, {})[impl] = phases
        out = [f"  {'setting':18s} {'phase':28s} {'fast s':>9s} {'reference s':>12s} {'speed-up':>9s}"]
        for setting, impls in by_setting.items():
            for phase in (*PHASES, "local training (rounds ≥ 2)"):
                f, r = (impls.get(i, {}).get(phase) for i in IMPLEMENTATIONS)
                if f is None and r is None:
                    continue
                sp = f"{r / f:8.1f}×" if f and r else ""
                out.append(f"  {setting:18s} {phase:28s} {'' if f is None else f'{f:9.3f}':>9s} "
                           f"{'' if r is None else f'{r:12.3f}':>12s} {sp:>9s}")
        return out
