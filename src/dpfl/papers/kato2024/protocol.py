"""kato2024 Figs 11 and 12 (spec §6-§7): what the private weighting protocol costs, phase by phase.

Each cell runs ULDP-AVG-w through dpfl.papers.kato2024.secure (Paillier + Diffie-Hellman + blinded histograms +
secure aggregation, separate parties) for every run (seed) and round of one setting with one implementation of the
silos' encrypted weighting, and times each phase with perf_counter, single-threaded:
  key exchange        once per run (the silos' DH key generation and the server's Paillier keys are not timed)
  blinded histogram   once per run (-w: the histograms do not change between rounds)
  local training      per silo and round: its users' local SGD, clipping, encoding and encrypted weighting
  aggregation         per round: the server multiplies the silos' ciphertexts, decrypts and decodes
Every round also checks the protocol: the decrypted aggregate against the plaintext sum of the same messages.

Fig 11 (`panels`): Heart and TCGA with their zipf allocations (the training figures' allocation families), one cell
per panel and implementation, named "<panel>-<implementation>". Fig 12 (artificial data, no `panels`): sklearn's
make_classification, 4 features and 2 classes, `records_per_silo` records in every silo, users drawn uniformly per
record, the model Linear(4,h)-ReLU-Linear(h,2); one cell per (h, U) of the two sweeps (#params at the default
#users, #users at the default h), named "h<h>-U<U>-<implementation>" (the default setting is shared by both sweeps).

This module is the figures' layout (import-light, read when the DAG is built), cell (`run_cell`) and table (`table`);
the plot is in `protocol_plot`. Timings are hardware-specific: the table records the CPU, and the claims check trends.

Table rows (column `quantity`); seconds are per run (all its rounds; *inferred*: the paper times "execution
time" per phase without saying per round), `per_round` the mean of one round where the phase runs every round:
  silo_seconds    Fig 11, per (panel, implementation, silo): that silo's local training in a run, mean over runs (y),
                  std (y_std), x = the silo index
  phase_seconds   per (setting, implementation, phase): seconds in a run, mean (y) and std over runs (local training:
                  over runs and silos), x = #users (Fig 11) or the swept value (Fig 12: #params or #users; `sweep`);
                  local training also has `full_exponentiations`, the full-size modular exponentiations of a silo's
                  encrypted weighting in a run (mean over runs and silos): the cost without the hardware's noise
  last_over_first Fig 12, per (sweep, implementation, phase): phase_seconds at the sweep's last point / at its first
  speedup         per (setting, phase): reference / fast mean seconds, where both implementations ran
Every row carries the max relative difference between the decrypted and the plaintext aggregate over its cells
(`decrypted_rel_err`).
"""

from __future__ import annotations

from dpfl.figure import FigureLayout

IMPLEMENTATIONS = ("fast", "reference")
PHASES = ("key exchange", "blinded histogram", "local training", "aggregation")
#: the phases that run every round (the others once per run of -w)
PER_ROUND = ("local training", "aggregation")


# ------------------------------------------------------------------------------------------------ layout


def is_fig11(params: dict) -> bool:
    """Fig 11's params have `panels` (a cell's: its `panel`); Fig 12's have the sweeps."""
    return "panels" in params or "panel" in params


def settings(params: dict) -> list[tuple[int, int]]:
    """Fig 12's (hidden width, #users) points: the #params sweep at the default #users, then the #users sweep at the
    default width, without repeating the shared default."""
    out = [(int(h), int(params["default_users"])) for h in params["hidden"]]
    out += [(int(params["default_hidden"]), int(u)) for u in params["users"]]
    return list(dict.fromkeys(out))


def parse_cell(cell: str) -> tuple[str, str]:
    """"heart100-fast" -> ("heart100", "fast"); "h2-U20-reference" -> ("h2-U20", "reference")."""
    setting, _, impl = cell.rpartition("-")
    if impl not in IMPLEMENTATIONS or not setting:
        raise ValueError(f"kato2024 protocol cell {cell!r} is not <setting>-<implementation> with implementation one "
                         f"of {', '.join(IMPLEMENTATIONS)}")
    return setting, impl


def parse_setting(setting: str) -> tuple[int, int]:
    """"h2-U20" -> (2, 20)."""
    h, _, u = setting.partition("-")
    if not (h.startswith("h") and u.startswith("U") and h[1:].isdigit() and u[1:].isdigit()):
        raise ValueError(f"kato2024 Fig 12 setting {setting!r} is not h<hidden>-U<users>")
    return int(h[1:]), int(u[1:])


def panel_allocation(panel: dict, seed: int) -> str:
    """The allocation of one seed of a Fig 11 panel (each panel names its own `allocation` family)."""
    from dpfl.papers.kato2024.allocation import AllocationInstance

    return AllocationInstance.of_panel(panel, seed).of_family(panel["allocation"])


class ProtocolLayout(FigureLayout):
    """Figs 11 ("<panel>-<implementation>") and 12 ("h<width>-U<users>-<implementation>"): every cell times the
    protocol's phases."""

    def cells(self, params: dict) -> list[str]:
        impls = params["implementations"]
        if is_fig11(params):
            return [f"{p['id']}-{impl}" for p in params["panels"] for impl in impls]
        return [f"h{h}-U{u}-{impl}" for h, u in settings(params) for impl in impls]

    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Fig 11: the panels' datasets and allocations of every seed; Fig 12: nothing (generated in the cell)."""
        if not is_fig11(params):
            return (), ()
        datasets = tuple(dict.fromkeys(p["dataset"] for p in params["panels"]))
        names = [panel_allocation(p, s) for p in params["panels"] for s in params["seeds"]]
        return datasets, tuple(dict.fromkeys(names))

    def cell_needs(self, params: dict, cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A Fig 11 cell reads its own panel's dataset and allocations only; Fig 12 reads nothing."""
        if not is_fig11(params):
            return (), ()
        setting, _ = parse_cell(cell)
        return self.needs({**params, "panels": [p for p in params["panels"] if p["id"] == setting]})

    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """A cell depends on its own setting and implementation and the shared run settings."""
        setting, impl = parse_cell(cell)
        own = {k: v for k, v in params.items() if k not in ("panels", "hidden", "users", "implementations")}
        own["implementation"] = impl
        if is_fig11(params):
            own["panel"] = next(p for p in params["panels"] if p["id"] == setting)
        else:
            own["hidden"], own["users"] = parse_setting(setting)
        return own, {}

    def timed_cell(self, params: dict) -> bool:
        """Every cell measures wall-clock time: a local run gives it the machine alone (dpfl.jobs.cell_threads)."""
        return True

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """The setting columns of the table (rows: see the module docstring): the implementations ("reference/fast"
        on the speed-up rows where both ran), the phases, the quantities; Fig 11 each panel's id, dataset, U and S
        (the table keeps no distribution); Fig 12 the settings "h<width>-U<users>" of both sweeps, their widths and
        #users."""
        impls = set(params["implementations"])
        both = set(IMPLEMENTATIONS) <= impls
        out = {"implementation": impls | ({"reference/fast"} if both else set()), "phase": set(PHASES)}
        if is_fig11(params):
            panels = params["panels"]
            out.update(panel={p["id"] for p in panels}, dataset={p["dataset"] for p in panels},
                       users={int(p["users"]) for p in panels}, silos={int(p["silos"]) for p in panels},
                       quantity={"phase_seconds", "silo_seconds"})
        else:
            points = settings(params)
            out.update(panel={f"h{h}-U{u}" for h, u in points}, dataset={"artificial"},
                       hidden={h for h, _ in points}, users={u for _, u in points}, silos={int(params["silos"])},
                       sweep={"params", "users"}, quantity={"phase_seconds", "last_over_first"})
        if both:
            out["quantity"].add("speedup")
        return out

    def bench_units(self, params: dict) -> tuple[int, str]:
        """A unit is one run (a seed: all its rounds)."""
        return len(params["seeds"]), "run"

    def bench_params(self, params: dict, units: int) -> dict:
        """The benchmark's reduced run of a cell: the first `units` runs (seeds), every round (the fast weighting's
        reuse of c_u shows only from round 2)."""
        return {**params, "seeds": list(params["seeds"])[: max(1, int(units))]}

    def bench_side_by_side(self, results: dict[str, dict]) -> list[str]:
        """Lines of the benchmark's phase table: per setting and phase, mean seconds of each implementation and the
        speed-up; `results` {cell: {phase: mean seconds}} (dpfl.bench)."""
        by_setting: dict = {}
        for cell, phases in results.items():
            setting, impl = parse_cell(cell)
            by_setting.setdefault(setting, {})[impl] = phases
        out = [f"  {'setting':10s} {'phase':28s} {'fast s':>9s} {'reference s':>12s} {'speed-up':>9s}"]
        for setting, impls in by_setting.items():
            for phase in (*PHASES, "local training (rounds ≥ 2)"):
                f, r = (impls.get(i, {}).get(phase) for i in IMPLEMENTATIONS)
                if f is None and r is None:
                    continue
                sp = f"{r / f:8.1f}×" if f and r else ""
                out.append(f"  {setting:10s} {phase:28s} {'' if f is None else f'{f:9.3f}':>9s} "
                           f"{'' if r is None else f'{r:12.3f}':>12s} {sp:>9s}")
        return out


# ------------------------------------------------------------------------------------------------ cell


def artificial_run(params: dict, users: int, seed: int, streams) -> dict:
    """Fig 12's data of one run: make_classification (4 features, 2 classes) with `records_per_silo` records per
    silo, silo s holding records [s·m, (s+1)·m), each record's user drawn uniformly from the `users` users. Both
    draws come from the global seed (`streams`: dpfl.papers.kato2024.cell.Streams) and the run's `seed`; the
    records do not depend on the number of users, so a sweep's points share them."""
    import numpy as np
    from sklearn.datasets import make_classification

    data, S = params["data"], int(params["silos"])
    m = int(data["records_per_silo"])
    X, y = make_classification(n_samples=m * S, n_features=int(data["features"]), n_informative=2, n_redundant=2,
                               n_classes=int(data["classes"]), random_state=streams.fig12_records(m, S, seed))
    rng = streams.fig12_users(users, m, S, seed)
    user = rng.integers(0, users, m * S)
    # the protocol needs n_u ≤ N̄ (L = lcm(1..N̄) must cancel n_u): a user above it keeps a uniform random N̄ of its
    # records (at 10 users × 30,000 records a user would hold ≈ 3,000 > N̄ = 2,000)
    bound = int(params["record_bound"])
    order = rng.permutation(len(user))
    rank = np.empty(len(user), np.int64)
    sorted_users = user[order]
    first = np.searchsorted(np.sort(sorted_users, kind="stable"), sorted_users, side="left")
    by_user = np.argsort(sorted_users, kind="stable")
    rank[order[by_user]] = np.arange(len(user)) - first[by_user]
    keep = rank < bound
    return {"X": X[keep].astype(np.float32), "y": y[keep].astype(np.int64), "silo": np.repeat(np.arange(S), m)[keep],
            "user": user[keep], "dropped": int((~keep).sum())}


def cpu_name() -> str:
    """The CPU model (Linux /proc/cpuinfo), else platform.processor()."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_cell(job, inputs: dict, log):
    import numpy as np
    import pandas as pd
    import torch

    from dpfl.fl.device import describe, resolve_device
    from dpfl.fl.engine import NoFreeze, progress_rounds, run_rounds
    from dpfl.fl.gradients import FlatModel
    from dpfl.io import Progress
    from dpfl.models.nets import build_model
    from dpfl.papers.kato2024.cell import TASKS, SecureRounds, Streams, load_run_data
    from dpfl.seeds import torch_generator
    from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves
    from dpfl.papers.kato2024.secure import Server, Silo, key_exchange, user_masks
    from dpfl.papers.kato2024.uldp import AvgRound, Federation

    p = job.params
    torch.set_num_threads(1)  # spec §7: timings single-threaded
    device = resolve_device("cpu")  # the protocol's arithmetic is on the CPU; so is the (tiny) local training
    method = BY_ID["uldp_avg_w"]
    impl, T, hyper = p["implementation"], int(p["rounds"]), method.hyper_params(p["hyper"])
    sigma, delta, bits = float(p["sigma"]), float(p["delta"]), int(p["key_bits"])
    streams = Streams(job.seed)
    if is_fig11(p):
        panel = p["panel"]
        setting, dataset = panel["id"], panel["dataset"]
        S, U, B = int(panel["silos"]), int(panel["users"]), int(panel["batch"])
        model, loss = TASKS[dataset]["model"], TASKS[dataset]["loss"]  # as the training figures
        prepared = dict(np.load(inputs["prepared"][dataset], allow_pickle=False))
        meta = {"panel": setting, "dataset": dataset, "distribution": panel["distribution"]}
    else:
        S, U, B = int(p["silos"]), int(p["users"]), int(p["batch"])
        model, loss, dataset = f"artificial_mlp_h{int(p['hidden'])}", "ce", "artificial"
        setting = f"h{int(p['hidden'])}-U{U}"
        meta = {"panel": setting, "dataset": dataset, "distribution": "uniform", "hidden": int(p["hidden"])}
    dim = FlatModel(build_model(model, 0), loss).dim
    log(f"{setting} ({impl} weighting): {len(p['seeds'])} run(s) × {T} round(s), U = {U}, S = {S}, {dim} params, "
        f"{bits}-bit Paillier, optimizer {p['optimizer']}, 1 thread, CPU {cpu_name()}")

    rows, checks, dropped = [], [], []
    progress = Progress(len(p["seeds"]) * len(progress_rounds(T)), log, setting)
    for seed in p["seeds"]:
        if is_fig11(p):
            alloc = dict(np.load(inputs["allocations"][panel_allocation(panel, seed)], allow_pickle=False))
            run = load_run_data(dataset, prepared, alloc)
        else:
            run = artificial_run(p, U, seed, streams)
            if run["dropped"]:
                log(f"run {seed}: {run['dropped']} records dropped so that no user holds more than "
                    f"N̄ = {p['record_bound']} (the protocol's bound)")
            dropped.append(run["dropped"])
        fed = Federation.build([run], S, U, AvgRound.level, B, device)
        fm = FlatModel(build_model(model, seed, dtype=torch.float64), loss)
        theta = fm.initial().double()
        for b in fed.buckets:
            b.X = b.X.double()
            b.y = b.y.double() if b.y.is_floating_point() else b.y
        rng = streams.protocol(setting, seed)
        gen = torch_generator(rng)
        times: dict = {}
        server = Server(S, bits=bits, record_bound=int(p["record_bound"]))  # key generation: not timed
        keys, shared, _ = key_exchange(S, rng, times)
        silos = [Silo(s, server.public, keys[s], user_masks(shared[s], U, server.public.n),
                      record_bound=int(p["record_bound"])) for s in range(S)]
        rows.append({"seed": seed, "round": 0, "phase": "key exchange", "silo": -1,
                     "seconds": times.pop("key exchange")[0], "full_exponentiations": 0})
        rounds = SecureRounds(fed, fm, hyper, noise_std=method.round_noise_std(sigma, hyper.clip), batch=B, gen=gen,
                              server=server, silos=silos,
                              reference=impl == "reference", optimizer=p["optimizer"])
        done = run_rounds(theta, rounds, rounds, rounds=T, schedule=range(1, T + 1),
                          failure=NoFreeze("decrypted_rel_err"), progress=progress, label=f"run {seed}")
        for rec in done.records:  # one row per phase (local training: per silo) and round
            checks.append(float(rec.values["decrypted_rel_err"][0]))
            work = rec.values["full_exponentiations"][0]  # of the round's weighting, silo by silo
            for phase, values in rec.values["phases"][0].items():
                rows += [{"seed": seed, "round": rec.round, "phase": phase,
                          "silo": i if phase == "local training" else -1, "seconds": v,
                          "full_exponentiations": work[i] if phase == "local training" else 0}
                         for i, v in enumerate(values)]
    df = pd.DataFrame(rows)
    nominal, certified = epsilon_curves(method, T, sigma, delta, q=1.0, silo_records=np.ones(S, int), batch=B,
                                        epochs=hyper.epochs, group_k=1)
    df = df.assign(**meta, users=U, silos=S, params=dim, implementation=impl, optimizer=p["optimizer"],
                   key_bits=bits, rounds=T, threads=1, device=describe(device), cpu=cpu_name(),
                   decrypted_rel_err=max(checks), eps=float(nominal[-1]), eps_certified=float(certified[-1]),
                   records_dropped=int(sum(dropped)))
    return df


# ------------------------------------------------------------------------------------------------ table


def table(params: dict, tables: list, log):
    """The tidy table of Fig 11 or 12 (rows: see the module docstring)."""
    import numpy as np
    import pandas as pd

    d = pd.concat(tables, ignore_index=True)
    fig11 = is_fig11(params)
    keys = ["panel", "dataset", "users", "silos", "params", "implementation", "optimizer", "key_bits", "cpu",
            "device", "threads", "eps", "eps_certified", "records_dropped"]
    out = []
    for key, g in d.groupby(["panel", "implementation"], sort=False):
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
            out.append({**meta, "quantity": "phase_seconds", "phase": phase, "curve": f"{phase} ({key[1]})",
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
                            "curve": f"silo {int(silo)} ({key[1]})", "x": int(silo), "y": float(v.mean()),
                            "y_std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                            "per_round": float(s["seconds"].mean()), "measurements": len(v), "rounds": rounds,
                            "decrypted_rel_err": err})
        log(f"{key[0]} ({key[1]}): " + ", ".join(f"{r['phase']} {r['y']:.3f} s" for r in out
                                                  if r["panel"] == key[0] and r["implementation"] == key[1]
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
        for (sweep, impl, phase), g in sweeps.groupby(["sweep", "implementation", "phase"], sort=False):
            g = g.sort_values("x")
            ratios.append({**{k: g.iloc[-1][k] for k in keys}, "quantity": "last_over_first", "sweep": sweep,
                           "phase": phase, "curve": f"{phase} ({impl})", "x": float(g["x"].iloc[-1]),
                           "y": float(g["y"].iloc[-1] / g["y"].iloc[0]), "x_first": float(g["x"].iloc[0]),
                           "decrypted_rel_err": float(g["decrypted_rel_err"].max())})
        df = pd.concat([sweeps, pd.DataFrame(ratios)], ignore_index=True)
    # the speed-up of the fast weighting where both implementations ran
    ph = df[df["quantity"] == "phase_seconds"]
    both = ph.pivot_table(index=[c for c in ("panel", "sweep", "phase") if c in ph], columns="implementation",
                          values="y", aggfunc="first")
    if set(IMPLEMENTATIONS) <= set(both.columns):
        sp = []
        for idx, r in both.iterrows():
            idx = dict(zip(both.index.names, idx if isinstance(idx, tuple) else (idx,)))
            src = ph[(ph["panel"] == idx["panel"]) & (ph["phase"] == idx["phase"]) & (ph["implementation"] == "fast")]
            if "sweep" in idx:
                src = src[src["sweep"] == idx["sweep"]]
            sp.append({**{k: src.iloc[0][k] for k in src.columns if k in keys or k in ("sweep", "hidden", "x")},
                       **idx, "implementation": "reference/fast", "quantity": "speedup",
                       "curve": f"{idx['phase']} speed-up", "y": float(r["reference"] / r["fast"])})
        df = pd.concat([df, pd.DataFrame(sp)], ignore_index=True)
        for r in sp:
            if r["phase"] == "local training":
                log(f"{r['panel']}{' (' + r['sweep'] + ' sweep)' if 'sweep' in r else ''}: local training "
                    f"{r['y']:.1f}× faster than the reference")
    return df.sort_values(["quantity", "panel", "implementation"], kind="stable").reset_index(drop=True)
