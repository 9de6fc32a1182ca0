"""bietti2022 PP-SGD with the CNN (spec §2, §3): the vmapped round against a plain loop per config and per user with
autograd (the global part (Φ, w) clipped jointly, θ_i stepped unclipped, noise σC per tensor on the sum), the
representation's shapes and its initialization."""

from __future__ import annotations

import math

import pytest
import torch
from torch.func import functional_call

from dpfl.papers.bietti2022.cnn import Representation, cnn_round, initial
from dpfl.papers.bietti2022.ppsgd import Batch, Grid, grid_tensors


def test_representation_shapes_and_init():
    phi, w = initial(10)
    assert {k: tuple(v.shape) for k, v in phi.items()} == {
        "conv1.weight": (16, 1, 8, 8), "conv1.bias": (16,), "conv2.weight": (32, 16, 4, 4), "conv2.bias": (32,),
        "dense.weight": (32, 512), "dense.bias": (32,)}
    assert functional_call(Representation(), phi, (torch.rand(5, 784),)).shape == (5, 32)
    assert w.shape == (32, 10) and float(w.std()) == pytest.approx(1 / math.sqrt(32), rel=0.15)
    assert float(phi["conv2.weight"].std()) == pytest.approx(math.sqrt(2 / (256 + 512)), rel=0.05)
    assert float(phi["dense.bias"].abs().max()) < 1e-5
    again, _ = initial(10)
    assert all(torch.equal(phi[k], again[k]) for k in phi)


def test_cnn_round_matches_a_plain_loop():
    torch.manual_seed(0)
    N, K, m, clip, q = 5, 3, 4, 0.05, 0.6
    grid = Grid.product([0.5], [0.3, 3, math.inf], [2.0])
    G = len(grid)
    phi0, w0 = initial(K, dtype=torch.float64)
    phi = {k: v[None].repeat(G, *[1] * v.dim()) + 0.01 * torch.randn(G, *v.shape, dtype=torch.float64)
           for k, v in phi0.items()}
    w = w0[None].repeat(G, 1, 1)
    Th = 0.1 * torch.randn(N, G, 32, K, dtype=torch.float64)
    users = torch.tensor([4, 0, 2])
    X = torch.rand(3, m, 784, dtype=torch.float64)
    Y = torch.rand(3, m, K, dtype=torch.float64)
    valid = torch.tensor([True, True, False])
    noise = {k: torch.randn(v.shape[1:], dtype=torch.float64) for k, v in phi.items()}
    noise["_w"] = torch.randn(32, K, dtype=torch.float64)
    # reference: per config, per user, autograd
    module = Representation().double()
    want_phi = {k: v.clone() for k, v in phi.items()}
    want_w, want_th = w.clone(), Th.clone()
    clipped = 0
    for g in range(G):
        total = {k: torch.zeros_like(v[g]) for k, v in phi.items()}
        total["_w"] = torch.zeros_like(w[g])
        for j, i in enumerate(users.tolist()):
            if not valid[j]:
                continue
            p = {k: v[g].clone().requires_grad_() for k, v in phi.items()}
            wg, th = w[g].clone().requires_grad_(), Th[i, g].clone().requires_grad_()
            loss = ((functional_call(module, p, (X[j],)) @ (wg + th) - Y[j]) ** 2).mean()
            grads = torch.autograd.grad(loss, [*p.values(), wg, th])
            glob = dict(zip([*p, "_w"], grads[:-1]))
            norm = math.sqrt(sum(float((t ** 2).sum()) for t in glob.values()))
            clipped += norm > clip
            for k, t in glob.items():
                total[k] += t / max(1.0, norm / clip)
            want_th[i, g] = Th[i, g] - grid.eta_theta[g] * grads[-1]
        scale = grid.eta_w[g] / (q * N)
        for k in phi:
            want_phi[k][g] = phi[k][g] - scale * (total[k] + grid.sigma[g] * clip * noise[k])
        want_w[g] = w[g] - scale * (total["_w"] + grid.sigma[g] * clip * noise["_w"])
    assert clipped >= 2  # the clip was active
    cnn_round(phi, w, Th, Batch(users, X, Y, valid), grid_tensors(grid, torch.float64, "cpu"), clip=clip, q=q,
              n_users=N, noise=noise)
    for k in phi:
        assert torch.allclose(phi[k], want_phi[k], atol=1e-12, rtol=1e-9), k
    assert torch.allclose(w, want_w, atol=1e-12, rtol=1e-9)
    assert torch.allclose(Th, want_th, atol=1e-12, rtol=1e-9)
    assert torch.equal(Th[[1, 3]], want_th[[1, 3]]) and torch.equal(Th[2], want_th[2])  # unsampled / invalid users
