"""The four methods of lowy2023 (spec §3): ISRL-DP MB-SGD and ISRL-DP Local SGD, and their non-private twins.

Each is one object (dpfl.fl.methods.Method): label, update rule (dpfl.papers.lowy2023.isrl), random draws,
accounting (the per-silo mechanism and its number of compositions, spec §4), sensitivity and the paper's noise
formula. Import-light at module level (the DAG builder reads the registry); the numerics import on use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfl.fl.methods import Accounting, GlmProbeMethod, register
from dpfl.papers.lowy2023.settings import Implementation


@dataclass(frozen=True)
class Certification:
    """What the exact accountant certifies a variant for: the mechanism its noise actually runs as, for the
    sensitivity its messages actually have (spec §9, "Accounting of the authors' variants").

    `accounting` None means no bound holds (ε = ∞: e.g. silo messages without noise, or unclipped gradients);
    otherwise the accountant is evaluated at `z_factor` × the multiplier the run uses. `why` says in a sentence how
    this differs from the paper's accounting (empty when it does not)."""

    accounting: Accounting | None
    z_factor: float = 1.0
    why: str = ""

    def epsilon(self, z: float) -> float:
        """The certified ε for a run whose noise has multiplier z (std / the paper's sensitivity 2L)."""
        if self.accounting is None:
            return math.inf
        from dpfl.privacy.rdp import epsilon

        acc = self.accounting
        return epsilon(acc.mechanism, z * self.z_factor, int(acc.steps), acc.delta)


def paper_sigma(L: float, steps: int, n: int, eps: float, delta: float) -> float:
    """σ² = 8 L² T ln(1/δ) / (n² ε²): std on a silo's mean gradient (T = R for MB-SGD), or per step
    (T = K·R for Local SGD) (paper App. I)."""
    return math.sqrt(8 * L**2 * steps * math.log(1 / delta)) / (n * eps)


@dataclass(frozen=True)
class IsrlMethod(GlmProbeMethod):
    """update: "minibatch" (each silo sends one noisy minibatch gradient per round) or "local" (each silo takes
    K noisy single-record steps per round and sends its model). The non-private twins share the class (and its
    accounting hooks, unused) and run with noise 0."""

    update: str = "minibatch"
    probe_sizes: tuple = (("n", 40), ("K", 4), ("R", 3))

    # ---- accounting (spec §4) ---------------------------------------------------------------------

    def accounting(self, n: int, K: int, R: int) -> Accounting:
        """Per silo of n records, δ = 1/n²: MB-SGD = R steps of a size-K batch sampled without replacement;
        Local SGD = K·R steps of single records."""
        from dpfl.privacy.rdp import SampledGaussian

        if self.update == "minibatch":
            return Accounting(SampledGaussian("without_replacement", population=n, batch_size=K), R, 1.0 / n**2)
        return Accounting(SampledGaussian("without_replacement", population=n, batch_size=1), K * R, 1.0 / n**2)

    def certification(self, impl: Implementation, n: int, K: int, R: int, clipped: bool) -> Certification:
        """The accounting that holds for the noise this method adds under the `implementation` settings (the
        paper's, or one or more of the authors' items), for a silo of n records. The paper's accounting
        (`accounting`) assumes per-example clipping at L, K-of-n batches without replacement and per-silo noise;
        each item that breaks an assumption changes what the accountant may certify:

        - unclipped gradients (`clip_at_lipschitz: false`, MNIST and obesity in the authors' code): a replaced
          record can move the message arbitrarily far, so no ε holds (∞);
        - Q9 (`noise_at: server`): silo messages carry no noise; ISRL-DP ε is ∞;
        - Q7 (`mb_clip: batch_mean`): the batch *mean* is clipped at C, so one record moves the message by up to 2C
          instead of 2C/K: the multiplier is z/K; with Q3 as well no subsampling amplification is claimed (a
          with-replacement batch), so the bound is the plain Gaussian mechanism over R rounds;
        - Q3 alone (`batch_sampling: with_replacement`, per-example clipping): a record may be drawn several times.
          The batch sum plus N(0, σ²) equals K single-draw sums, each with N(0, σ²/K): K·R single-record steps
          sampled without replacement (1 of n) at multiplier z/√K, a valid (post-processing) bound;
        - Q8 (`local_noise_n: share`): the noise uses ⌈1338/N⌉ records, but the silo holds n: the accountant uses
          the silo's own n and δ = 1/n²."""
        from dpfl.privacy.rdp import SampledGaussian

        if not clipped:
            return Certification(None, why="gradients are not clipped: the bound 2L (L from the data) does not hold "
                                           "for an arbitrary replaced record, so no ε is certified")
        if self.update != "minibatch":
            return Certification(self.accounting(n=n, K=K, R=R),
                                 why="" if impl.local_noise_n != "share" else
                                 "Q8: the noise is set for ⌈1338/N⌉ records; certified for the silo's own n")
        if impl.noise_at == "server":
            return Certification(None, why="Q9: silo messages carry no noise (one draw is added to the server's "
                                           "average), so the silo-level ISRL-DP ε is ∞")
        replace = impl.batch_sampling == "with_replacement"
        if impl.mb_clip == "batch_mean":
            if replace:
                return Certification(Accounting(SampledGaussian("none"), R, 1.0 / n**2), 1.0 / K,
                                     why="Q7: the batch mean is clipped at C, so one record moves the message by 2C, "
                                         "not 2C/K (multiplier z/K); Q3: batches drawn with replacement, no "
                                         "subsampling amplification claimed")
            return Certification(self.accounting(n=n, K=K, R=R), 1.0 / K,
                                 why="Q7: the batch mean is clipped at C, so one record moves the message by 2C, "
                                     "not 2C/K (multiplier z/K)")
        if replace:
            return Certification(
                Accounting(SampledGaussian("without_replacement", population=n, batch_size=1), K * R, 1.0 / n**2),
                1.0 / math.sqrt(K),
                why="Q3: batches drawn with replacement; bound: K single-draw steps per round at multiplier z/√K")
        return Certification(self.accounting(n=n, K=K, R=R))

    def sensitivity(self, clip):
        """Replace-one sensitivity of a sum of per-example gradients clipped at `clip` (= L): 2·clip. The noise is
        added to that sum (MB-SGD: the batch sum, then divided by K; Local SGD: the single-record gradient)."""
        return 2 * clip

    def paper_multiplier(self, n: int, K: int, R: int, eps: float) -> float:
        """z of the paper's noise formula (App. I): σ_MB·K/(2L) for MB-SGD, σ_loc/(2L) for Local SGD (L cancels)."""
        delta = 1.0 / n**2
        if self.update == "minibatch":
            return paper_sigma(1.0, R, n, eps, delta) * K / 2
        return paper_sigma(1.0, K * R, n, eps, delta) / 2

    # ---- update rule ------------------------------------------------------------------------------

    def settings_overrides(self, impl: Implementation) -> dict:
        """How the `implementation` settings (spec §9) change this method's update: MB-SGD's server step (Q2),
        batch-mean clipping (Q7: private MB-SGD clips the batch mean; non-private MB-SGD applies the clip factor
        of an independent batch), batch sums and one server-side noise draw (Q9). Local SGD: unchanged."""
        if self.update != "minibatch":
            return {}
        clip = {"per_example": "example", "batch_mean": "batch_mean" if self.private else "batch_mean_other"}
        return {"aggregation": impl.server, "batch": {"batch_mean": "mean", "batch_sum": "sum"}[impl.mb_message],
                "noise_at": impl.noise_at, "clip": clip[impl.mb_clip]}

    def draws(self, rngs, data, settings, out_dim: int, impl: Implementation):
        from dpfl.papers.lowy2023 import isrl

        if self.update == "minibatch":
            return isrl.minibatch_draws(rngs, data, settings, out_dim, noise=self.private,
                                        replace=impl.batch_sampling == "with_replacement")  # Q3
        return isrl.local_draws(rngs, data, settings, out_dim, noise=self.private)

    def run(self, model, data, settings, grid, draws, reps: int, device=None):
        from dpfl.papers.lowy2023 import isrl

        fn = isrl.minibatch_sgd if self.update == "minibatch" else isrl.local_sgd
        return fn(model, data, settings, grid, draws, reps, device=device)

    # ---- hooks of the registry-wide privacy test --------------------------------------------------

    def query(self, model, X, y, W, clip):
        """The per-silo sum of per-example gradients clipped at `clip`, at W (d, C)."""
        r = model.residual(X @ W, y)  # (n, C)
        g = X[:, :, None] * r[:, None, :]  # (n, d, C)
        norms = np.linalg.norm(g.reshape(len(X), -1), axis=1)
        factor = np.minimum(1.0, clip / np.where(norms > 0, norms, np.inf))
        return (g * factor[:, None, None]).sum(axis=0)

    def noise_probe(self, model, dim, z, clip, sizes, samples, rng):
        """Runs one round of this method's own update on all-zero features (zero gradients) from W = 0 with step 1,
        one silo, `samples` repetitions; the update then moves W by the injected noise only. MB-SGD:
        W₁ = −(σZ)/K, so the noise on the batch sum is −K·W₁. Local SGD: W₁ = −Σ_k σZ_k over K steps, so
        −W₁/√K has the per-step std σ."""
        from dpfl.fl.data import SiloData
        from dpfl.papers.lowy2023 import isrl

        n, K = int(sizes["n"]), int(sizes["K"])
        data = SiloData.from_lists([np.zeros((n, dim))], [np.zeros(n)])
        std = np.full((1, 1), self.noise_std(z, clip))
        grid = isrl.Grid(eta=np.ones(1), clip=np.full(1, clip), noise_std=std)
        settings = isrl.Settings(rounds=1, silos_per_round=1, local=K, average_last=1)
        rngs = [np.random.default_rng(rng.integers(2**63)) for _ in range(samples)]
        draws = self.draws(rngs, data, settings, model.out_dim, Implementation.paper())
        res = self.run(model, data, settings, grid, draws, samples)
        W1 = res.W[:, 0]  # (samples, d, C)
        return (-K * W1 if self.update == "minibatch" else -W1 / math.sqrt(K)).reshape(-1)


METHODS = (
    IsrlMethod("noisy_mb_sgd", "ISRL-DP MB-SGD", private=True, update="minibatch"),
    IsrlMethod("noisy_local_sgd", "ISRL-DP Local SGD", private=True, update="local"),
    IsrlMethod("mb_sgd", "MB-SGD", private=False, update="minibatch"),
    IsrlMethod("local_sgd", "Local SGD (FedAvg)", private=False, update="local"),
)
register(*METHODS)
BY_ID = {m.id: m for m in METHODS}
