"""One cell of kato2024 Figs 11 and 12: ULDP-AVG-w through the private weighting protocol
(dpfl.papers.kato2024.protocol.secure: Paillier + Diffie-Hellman + blinded histograms + secure aggregation, separate
parties) for every run (seed) and round of one setting with one implementation of the silos' encrypted weighting and
one security level (the paper's protocol, or the secure mode: dpfl.papers.kato2024.protocol.security), each phase
timed with perf_counter, single-threaded:
  key exchange        once per run (the silos' DH key generation and the server's Paillier keys are not timed)
  blinded histogram   once per run (-w: the histograms do not change between rounds)
  local training      per silo and round: its users' local SGD, clipping, encoding and encrypted weighting
  aggregation         per round: the server multiplies the silos' ciphertexts, decrypts and decodes
Every round also checks the protocol: the decrypted aggregate against the plaintext sum of the same messages.
Fig 12's data: sklearn's make_classification, 4 features and 2 classes, `records_per_silo` records in every silo,
users drawn uniformly per record, the model Linear(4,h)-ReLU-Linear(h,2). Timings are hardware-specific: the rows
record the CPU.
"""

from __future__ import annotations

import numpy as np

from dpfl.figure import CellResult
from dpfl.fl.engine import Evaluation, RoundRule
from dpfl.papers.kato2024.protocol.security import Security
from dpfl.papers.kato2024.protocol.settings import ArtificialData, ProtocolSettings


class SecureRounds(RoundRule, Evaluation):
    """One run's rounds of ULDP-AVG-w through the private weighting protocol (kato2024 Figs 11-12,
    dpfl.papers.kato2024.protocol.secure.secure_round), as both the round rule of dpfl.fl.engine.run_rounds and its
    evaluation: after each round, the phase times (seconds per phase; local training one entry per silo), each
    silo's full-size exponentiations, and the relative error of the decrypted aggregate against the plaintext sum of
    the same messages (one run: every value a list of one)."""

    def __init__(self, fed, fm, hyper, *, noise_std: float, batch: int, gen, server, silos: list, reference: bool,
                 optimizer: str):
        self.fed, self.fm, self.hyper, self.server, self.silos = fed, fm, hyper, server, silos
        self.noise_std, self.batch, self.gen = noise_std, batch, gen
        self.reference, self.optimizer = reference, optimizer
        self.state: dict = {}  # secure_round's across the rounds of the run (-w: the blinded histograms)
        self.last: dict = {}

    def step(self, theta, t: int):
        from dpfl.papers.kato2024.protocol.secure import secure_round

        fed, times = self.fed, {}
        new, plain = secure_round(theta, fed, self.fm, self.hyper, noise_std=self.noise_std, batch=self.batch,
                                  gen=self.gen, server=self.server, silos=self.silos, round_=t,
                                  reference=self.reference, optimizer=self.optimizer, times=times, state=self.state)
        got = (new - theta).numpy() / (self.hyper.eta_g / (fed.n_users * fed.n_silos))
        self.last = {"decrypted_rel_err": float(np.max(np.abs(got - plain)) / max(np.max(np.abs(plain)), 1e-300)),
                     "phases": times, "full_exponentiations": [silo.full_exponentiations for silo in self.silos]}
        return new

    def evaluate(self, state, t: int) -> dict:
        return {k: [v] for k, v in self.last.items()}

    def summary(self, values: dict, failed) -> str:
        return f"decrypted vs plaintext relative error {values['decrypted_rel_err'][0]:.1e}"


def artificial_run(data: ArtificialData, silos: int, record_bound: int, users: int, seed: int, streams) -> dict:
    """Fig 12's data of one run: make_classification (4 features, 2 classes) with `records_per_silo` records in each
    of the `silos` silos, silo s holding records [s·m, (s+1)·m), each record's user drawn uniformly from the `users`
    users, no user above `record_bound` records. Both
    draws come from the global seed (`streams`: dpfl.papers.kato2024.streams.Streams) and the run's `seed`; the
    records do not depend on the number of users, so a sweep's points share them."""
    from sklearn.datasets import make_classification

    S, m = silos, data.records_per_silo
    X, y = make_classification(n_samples=m * S, n_features=data.features, n_informative=2, n_redundant=2,
                               n_classes=data.classes, random_state=streams.fig12_records(m, S, seed))
    rng = streams.fig12_users(users, m, S, seed)
    user = rng.integers(0, users, m * S)
    # the protocol needs n_u ≤ N̄ (L = lcm(1..N̄) must cancel n_u): a user above it keeps a uniform random N̄ of its
    # records (at 10 users × 30,000 records a user would hold ≈ 3,000 > N̄ = 2,000)
    order = rng.permutation(len(user))
    rank = np.empty(len(user), np.int64)
    sorted_users = user[order]
    first = np.searchsorted(np.sort(sorted_users, kind="stable"), sorted_users, side="left")
    by_user = np.argsort(sorted_users, kind="stable")
    rank[order[by_user]] = np.arange(len(user)) - first[by_user]
    keep = rank < record_bound
    return {"X": X[keep].astype(np.float32), "y": y[keep].astype(np.int64), "silo": np.repeat(np.arange(S), m)[keep],
            "user": user[keep], "dropped": int((~keep).sum())}


def protocol_parties(security: Security, key_bits: int, record_bound: int, S: int, U: int, rng, times: dict) -> tuple:
    """The server and the S silos of one run after the key exchange (appended to times["key exchange"]), at the
    cell's `security` level on a `key_bits`-bit Paillier key, no user above `record_bound` records. The paper's mode
    draws R from `rng`, the run's seeded stream (as this reproduction always has, so the paper's timings keep their
    numbers); the secure mode never gives it `rng`: R comes from `secrets`. Key generation is not timed."""
    from dpfl.papers.kato2024.protocol.encoding import user_masks
    from dpfl.papers.kato2024.protocol.keys import key_exchange
    from dpfl.papers.kato2024.protocol.secure import Server, Silo

    server = Server(S, bits=key_bits, record_bound=record_bound, security=security)
    keys, shared, _ = key_exchange(S, None if security.secure else rng, times, security)
    silos = [Silo(s, server.public, keys[s], user_masks(shared[s], U, server.public.n), record_bound=record_bound,
                  security=security) for s in range(S)]
    return server, silos


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


def run_cell(job, inputs: dict, log) -> CellResult:
    """One cell of Figs 11-12 (see the module's docstring): its table of measured phase seconds per run and round."""
    import pandas as pd
    import torch

    from dpfl.fl.device import describe, resolve_device
    from dpfl.fl.engine import NoFreeze, progress_rounds, run_rounds
    from dpfl.fl.flat_model import FlatModel
    from dpfl.io import Progress
    from dpfl.models.nets import build_model
    from dpfl.papers.kato2024.federation import Federation
    from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves
    from dpfl.papers.kato2024.streams import Streams
    from dpfl.papers.kato2024.tasks import TASKS, load_run_data
    from dpfl.seeds import torch_generator

    settings = ProtocolSettings.from_job(job)  # the boundary: below, typed settings only
    torch.set_num_threads(1)  # the paper's timings are single-threaded
    device = resolve_device("cpu")  # the protocol's arithmetic is on the CPU; so is the (tiny) local training
    method = BY_ID["uldp_avg_w"]
    impl, T, hyper = settings.implementation, settings.rounds, settings.hyper
    sigma, delta, bits = settings.sigma, settings.delta, settings.key_bits
    security, panel, setting = settings.security, settings.panel, settings.setting
    streams = Streams(job.seed)
    S, U, B = settings.silos, settings.users, settings.batch
    if panel is not None:
        dataset = panel.dataset
        model, loss = TASKS[dataset]["model"], TASKS[dataset]["loss"]  # as the training figures
        prepared = dict(np.load(inputs["prepared"][dataset], allow_pickle=False))
        meta = {"panel": setting, "dataset": dataset, "distribution": panel.distribution}
    else:
        model, loss, dataset = f"artificial_mlp_h{settings.hidden}", "ce", "artificial"
        meta = {"panel": setting, "dataset": dataset, "distribution": "uniform", "hidden": settings.hidden}
    dim = FlatModel(build_model(model, 0), loss).dim
    log(f"{setting} ({impl} weighting, security {security.level}{', a simulation' if security.simulation else ''}): "
        f"{len(settings.seeds)} run(s) × {T} round(s), U = {U}, S = {S}, {dim} params, {bits}-bit Paillier, "
        f"optimizer {settings.optimizer}, 1 thread, CPU {cpu_name()}")

    rows, checks, dropped = [], [], []
    progress = Progress(len(settings.seeds) * len(progress_rounds(T)), log, setting)
    for seed in settings.seeds:
        if panel is not None:
            alloc = dict(np.load(inputs["allocations"][panel.allocation_name(seed)], allow_pickle=False))
            run = load_run_data(dataset, prepared, alloc)
        else:
            run = artificial_run(settings.data, S, settings.record_bound, U, seed, streams)
            if run["dropped"]:
                log(f"run {seed}: {run['dropped']} records dropped so that no user holds more than "
                    f"N̄ = {settings.record_bound} (the protocol's bound)")
            dropped.append(run["dropped"])
        fed = Federation.build([run], S, U, "user", B, device)  # ULDP-AVG-w's (silo, user) pairs
        fm = FlatModel(build_model(model, seed, dtype=torch.float64), loss)
        theta = fm.initial().double()
        for b in fed.buckets:
            b.X = b.X.double()
            b.y = b.y.double() if b.y.is_floating_point() else b.y
        rng = streams.protocol(setting, seed)
        gen = torch_generator(rng)
        times: dict = {}
        server, silos = protocol_parties(security, bits, settings.record_bound, S, U, rng, times)
        rows.append({"seed": seed, "round": 0, "phase": "key exchange", "silo": -1,
                     "seconds": times.pop("key exchange")[0], "full_exponentiations": 0})
        rounds = SecureRounds(fed, fm, hyper, noise_std=method.round_noise_std(sigma, hyper.clip), batch=B, gen=gen,
                              server=server, silos=silos,
                              reference=impl == "reference", optimizer=settings.optimizer)
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
    df = df.assign(**meta, users=U, silos=S, params=dim, implementation=impl, security=security.level,
                   simulation=security.simulation, optimizer=settings.optimizer,
                   key_bits=bits, rounds=T, threads=1, device=describe(device), cpu=cpu_name(),
                   decrypted_rel_err=max(checks), eps=float(nominal[-1]), eps_certified=float(certified[-1]),
                   records_dropped=int(sum(dropped)))
    return CellResult(df)  # the phases' seconds are the figure's results: columns of the table, no RunTiming
