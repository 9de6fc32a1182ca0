"""The model strategies of a bietti2022 cell (spec §2): how a batch of G configs is stored, started, stepped one
PP-SGD round and evaluated. `LinearModel` (dense rows: the synthetic task, EMNIST; dpfl.papers.bietti2022.ppsgd),
`SparseModel` (bag-of-words rows: Stackoverflow; dpfl.papers.bietti2022.sparse) and `CnnModel` (EMNIST;
dpfl.papers.bietti2022.cnn). Each round draws its noise ξ from the run's noise Generator in float32, whatever the
run's precision.
"""

from __future__ import annotations

import math

import numpy as np

from dpfl.papers.bietti2022.tasks import Setup


class Storage:
    """Zeroed storage reused by the models of successive config batches and seeds: allocating a multi-GiB Θ anew
    costs seconds of page faults each time (Stackoverflow: ≈ 4 s per 4 GiB batch)."""

    def __init__(self):
        self.flat = None

    def zeros(self, shape, dtype, device):
        import torch

        n = math.prod(shape)
        if self.flat is None or self.flat.numel() < n or self.flat.dtype != dtype:
            self.flat = None  # free the old storage first
            self.flat = torch.empty(n, dtype=dtype, device=device)
        return self.flat[:n].view(shape).zero_()


class LinearModel:
    """The linear models (spec §2): W (G, d, K), Θ (N, d, G, K), both zero at the start."""

    def __init__(self, setup: Setup, G: int, grid_t, clip: float, dtype, device, storage: Storage | None = None,
                 local_times_users: bool = False):
        self.setup, self.G, self.gt, self.clip, self.dtype, self.device = setup, G, grid_t, clip, dtype, device
        self.storage = storage or Storage()
        self.local_times_users = local_times_users

    def memory_mib(self) -> float:
        s = self.setup
        return self.G * s.N * s.d * s.K * torch_bytes(self.dtype) / 2**20

    def start(self):
        import torch

        s = self.setup
        return (torch.zeros((self.G, s.d, s.K), dtype=self.dtype, device=self.device),
                self.storage.zeros((s.N, s.d, self.G, s.K), self.dtype, self.device))

    def step(self, state, batch, noise_gen, q: float) -> None:
        import torch

        from dpfl.papers.bietti2022.ppsgd import ppsgd_round

        s = self.setup
        xi = torch.randn((s.d, s.K), generator=noise_gen, device=self.device).to(self.dtype)  # float32 draws
        ppsgd_round(*state, batch, self.gt, clip=self.clip, q=q, n_users=s.N, xi=xi)

    def evaluate(self, state) -> dict:
        return self.setup.evaluate(*state)


class CnnModel(LinearModel):
    """The CNN (spec §2, EMNIST): Φ and w global (Glorot / N(0,1)/√32 init, key 42), Θ (N, G, 32, K) zero."""

    def memory_mib(self) -> float:
        from dpfl.papers.bietti2022.cnn import FEATURES

        return self.G * self.setup.N * FEATURES * self.setup.K * torch_bytes(self.dtype) / 2**20

    def start(self):
        import torch

        from dpfl.papers.bietti2022.cnn import FEATURES, initial

        phi0, w0 = initial(self.setup.K, seed=42, dtype=self.dtype)
        phi = {k: v.to(self.device)[None].repeat(self.G, *[1] * v.dim()).contiguous() for k, v in phi0.items()}
        w = w0.to(self.device)[None].repeat(self.G, 1, 1).contiguous()
        return phi, w, torch.zeros((self.setup.N, self.G, FEATURES, self.setup.K), dtype=self.dtype, device=self.device)

    def step(self, state, batch, noise_gen, q: float) -> None:
        import torch

        from dpfl.papers.bietti2022.cnn import cnn_round

        phi, w, _ = state
        noise = {k: torch.randn(v.shape[1:], generator=noise_gen, device=self.device).to(self.dtype)
                 for k, v in [*phi.items(), ("_w", w)]}
        local_scale = float(len(batch.users)) if self.local_times_users else 1.0  # B2: L·η_θ
        cnn_round(*state, batch, self.gt, clip=self.clip, q=q, n_users=self.setup.N, noise=noise,
                  local_scale=local_scale)

    def evaluate(self, state) -> dict:
        from dpfl.papers.bietti2022.cnn import cnn_accuracy

        acc = cnn_accuracy(self.setup.data, *state).cpu().numpy()
        return {"accuracy": np.where(np.isfinite(acc), acc, np.nan)}


class SparseModel(LinearModel):
    """The linear model on bag-of-words rows: W (G, d, K) and the compact Θ (Σ_i |V_i| + 1, G, K)."""

    def memory_mib(self) -> float:
        return self.G * (self.setup.data.theta_rows() + self.setup.d) * self.setup.K * torch_bytes(self.dtype) / 2**20

    def start(self):
        from dpfl.papers.bietti2022.sparse import SparseState

        s = self.setup
        return SparseState.zeros(s.d, s.K, s.data.theta_rows(), self.gt, clip=self.clip, q=s.q, n_users=s.N,
                                 dtype=self.dtype, device=self.device,
                                 theta=self.storage.zeros((s.data.theta_rows() + 1, self.G, s.K), self.dtype,
                                                          self.device))

    def step(self, state, batch, noise_gen, q: float) -> None:
        import torch

        from dpfl.papers.bietti2022.sparse import sparse_round

        s = self.setup
        xi = torch.randn((s.d, s.K), generator=noise_gen, device=self.device).to(self.dtype)
        sparse_round(state, batch, self.gt, clip=self.clip, q=q, n_users=s.N, xi=xi)

    def evaluate(self, state) -> dict:
        from dpfl.papers.bietti2022.sparse import sparse_accuracy

        acc = sparse_accuracy(self.setup.data, state).cpu().numpy()
        return {"accuracy": np.where(np.isfinite(acc), acc, np.nan)}


def model_class(model: str, sparse: bool) -> type[LinearModel]:
    """The strategy of a grid's `model` on its task's rows: the CNN, the sparse linear model or the dense one."""
    return CnnModel if model == "cnn" else SparseModel if sparse else LinearModel


def torch_bytes(dtype) -> int:
    import torch

    return torch.finfo(dtype).bits // 8
