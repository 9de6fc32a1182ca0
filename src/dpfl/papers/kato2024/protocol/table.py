"""The tidy table of kato2024 Figs 11 and 12 from the cells' phase times.

Rows (column `quantity`); seconds are per run (all its rounds; *inferred*: the paper times "execution time" per
phase without saying per round), `per_round` the mean of one round where the phase runs every round; every row of a
run's timings carries its `security` level (paper: the paper's protocol; secure: the secure mode):
  silo_seconds    Fig 11, per (panel, implementation, security, silo): that silo's local training in a run, mean over
                  runs (y), std (y_std), x = the silo index
  phase_seconds   per (setting, implementation, security, phase): seconds in a run, mean (y) and std over runs (local
                  training: over runs and silos), x = #users (Fig 11) or the swept value (Fig 12: #params or #users;
                  `sweep`); local training also has `full_exponentiations`, the full-size modular exponentiations of
                  a silo's encrypted weighting in a run (mean over runs and silos): the cost without the hardware's
                  noise
  last_over_first Fig 12, per (sweep, implementation, security, phase): phase_seconds at the sweep's last point / at
                  its first
  speedup         per (setting, security, phase): reference / fast mean seconds, where both implementations ran
                  (implementation "reference/fast")
  secure_overhead per (setting, implementation, phase): secure / paper mean seconds, where both levels ran (security
                  "secure/paper"; `per_round` the secure mode's extra seconds per round where the phase runs every
                  round)
Every row carries the max relative difference between the decrypted and the plaintext aggregate over its cells
(`decrypted_rel_err`).
"""

from __future__ import annotations

from dpfl.papers.kato2024.protocol.layout import IMPLEMENTATIONS, PER_ROUND, PHASES, is_fig11, settings
from dpfl.papers.kato2024.protocol.security import SECURITY_LEVELS


def curve(what: str, impl: str, security: str) -> str:
    """A row's curve name: "local training (fast)" for the paper's protocol, "local training (fast, secure)"."""
    return f"{what} ({impl}{'' if security == 'paper' else ', ' + security})"


def table(params: dict, tables: list, log):
    """The tidy table of Fig 11 or 12 (rows: see the module docstring)."""
    import numpy as np
    import pandas as pd

    d = pd.concat(tables, ignore_index=True)
    fig11 = is_fig11(params)
    keys = ["panel", "dataset", "users", "silos", "params", "implementation", "security", "optimizer", "key_bits",
            "cpu", "device", "threads", "eps", "eps_certified", "records_dropped"]
    out = []
    for key, g in d.groupby(["panel", "implementation", "security"], sort=False):
        first = g.iloc[0]
        meta = {k: first[k] for k in keys}
        err = float(g["decrypted_rel_err"].max())
        # per run: the seconds each phase took over the whole run (local training: per silo), then mean ± std
        # over the runs (and the silos); the mean per round of the rounds' phases is kept beside it
        rounds = int(first["rounds"])
        for phase in PHASES:
            ph = g[g["phase"] == phase]
            if ph.empty:
                continue
            per_run = ph.groupby(["seed", "silo"])
            v = per_run["seconds"].sum().to_numpy(float)
            x = {"users": int(first["users"])} if fig11 else {}
            out.append({**meta, "quantity": "phase_seconds", "phase": phase, "curve": curve(phase, *key[1:]),
                        "y": float(v.mean()), "y_std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                        "full_exponentiations": (float(per_run["full_exponentiations"].sum().mean())
                                                 if "full_exponentiations" in ph else np.nan),
                        "per_round": float(ph["seconds"].mean()) if phase in PER_ROUND else np.nan,
                        "measurements": len(v), "rounds": rounds, "decrypted_rel_err": err, **x})
        if fig11:
            lt = g[g["phase"] == "local training"]
            for silo, s in lt.groupby("silo"):
                v = s.groupby("seed")["seconds"].sum().to_numpy(float)
                out.append({**meta, "quantity": "silo_seconds", "phase": "local training", "silo": int(silo),
                            "curve": curve(f"silo {int(silo)}", *key[1:]), "x": int(silo), "y": float(v.mean()),
                            "y_std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                            "per_round": float(s["seconds"].mean()), "measurements": len(v), "rounds": rounds,
                            "decrypted_rel_err": err})
        log(f"{key[0]} ({key[1]}, {key[2]}): " + ", ".join(
            f"{r['phase']} {r['y']:.3f} s" for r in out if (r["panel"], r["implementation"], r["security"]) == key
            and r["quantity"] == "phase_seconds")
            + f"; decrypted vs plaintext ≤ {err:.1e} relative")
    df = pd.DataFrame(out)
    phase_rows = df["quantity"] == "phase_seconds"
    if fig11:
        df.loc[phase_rows, "x"] = df.loc[phase_rows, "users"]
    else:  # each setting appears once per sweep it belongs to
        hidden_d, users_d = int(params["default_hidden"]), int(params["default_users"])
        h_of = {f"h{h}-U{u}": h for h, u in settings(params)}
        parts = []
        ph = df[phase_rows].copy()
        ph["hidden"] = ph["panel"].map(h_of)
        parts.append(ph[ph["users"] == users_d].assign(sweep="params", x=lambda f: f["params"]))
        parts.append(ph[ph["hidden"] == hidden_d].assign(sweep="users", x=lambda f: f["users"]))
        sweeps = pd.concat(parts, ignore_index=True)
        ratios = []
        for (sweep, impl, security, phase), g in sweeps.groupby(["sweep", "implementation", "security", "phase"],
                                                                 sort=False):
            g = g.sort_values("x")
            ratios.append({**{k: g.iloc[-1][k] for k in keys}, "quantity": "last_over_first", "sweep": sweep,
                           "phase": phase, "curve": curve(phase, impl, security), "x": float(g["x"].iloc[-1]),
                           "y": float(g["y"].iloc[-1] / g["y"].iloc[0]), "x_first": float(g["x"].iloc[0]),
                           "decrypted_rel_err": float(g["decrypted_rel_err"].max())})
        df = pd.concat([sweeps, pd.DataFrame(ratios)], ignore_index=True)
    ph = df[df["quantity"] == "phase_seconds"]
    where = [c for c in ("panel", "sweep", "phase") if c in ph]
    extra = []
    # the speed-up of the fast weighting where both implementations ran, per security level
    both = ph.pivot_table(index=[*where, "security"], columns="implementation", values="y", aggfunc="first")
    if set(IMPLEMENTATIONS) <= set(both.columns):
        for idx, r in both.dropna(subset=list(IMPLEMENTATIONS)).iterrows():
            idx = dict(zip(both.index.names, idx))
            extra.append({**_source_row(ph, idx, implementation="fast", keys=keys), **idx,
                          "implementation": "reference/fast", "quantity": "speedup",
                          "curve": curve(f"{idx['phase']} speed-up", "reference/fast", idx["security"]),
                          "y": float(r["reference"] / r["fast"])})
            if idx["phase"] == "local training":
                log(f"{idx['panel']}{' (' + idx['sweep'] + ' sweep)' if 'sweep' in idx else ''}, {idx['security']}: "
                    f"local training {extra[-1]['y']:.1f}× faster than the reference")
    # what the secure mode costs beside the paper's protocol, per implementation
    levels = ph.pivot_table(index=[*where, "implementation"], columns="security", values="y", aggfunc="first")
    if set(SECURITY_LEVELS) <= set(levels.columns):
        for idx, r in levels.dropna(subset=list(SECURITY_LEVELS)).iterrows():
            idx = dict(zip(levels.index.names, idx))
            per_round = {level: _match(ph, idx, security=level)["per_round"] for level in SECURITY_LEVELS}
            extra_round = per_round["secure"] - per_round["paper"]
            extra.append({**_source_row(ph, idx, security="paper", keys=keys), **idx, "security": "secure/paper",
                          "quantity": "secure_overhead",
                          "curve": f"{idx['phase']} secure/paper ({idx['implementation']})",
                          "y": float(r["secure"] / r["paper"]), "per_round": float(extra_round)})
            if idx["phase"] in PER_ROUND:
                log(f"{idx['panel']}{' (' + idx['sweep'] + ' sweep)' if 'sweep' in idx else ''}, "
                    f"{idx['implementation']}: {idx['phase']} {extra[-1]['y']:.2f}× in the secure mode "
                    f"({extra_round:+.3f} s per round)")
    if extra:
        df = pd.concat([df, pd.DataFrame(extra)], ignore_index=True)
    return df.sort_values(["quantity", "panel", "implementation", "security"], kind="stable").reset_index(drop=True)


def _match(ph, idx: dict, **fixed):
    """The first phase_seconds row at `idx` (panel, phase, sweep, and implementation or security) with the `fixed`
    column values."""
    src = ph
    for col, value in {**idx, **fixed}.items():
        if col in src:
            src = src[src[col] == value]
    return src.iloc[0]


def _source_row(ph, idx: dict, keys: list, **fixed) -> dict:
    """The setting columns of the phase_seconds row that a derived row (speed-up, overhead) describes."""
    first = _match(ph, idx, **fixed)
    return {k: first[k] for k in first.index if k in keys or k in ("sweep", "hidden", "x")}
