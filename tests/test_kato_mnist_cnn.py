"""kato2024's MNIST CNN (spec §3) under the engine's batched local training (dpfl.fl.local.local_sgd: vmap over
(user, silo) pairs, dropout through masks drawn from the run's generator) equals a plain per-pair loop with autograd
that replays the same masks; pairs do not share dropout draws."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from dpfl.fl.local import FlatModel, keep_mask, local_sgd, make_buckets
from dpfl.models.nets import build_model

DT = torch.float64


def records(sizes, seed=0):
    """Images with float32-exact pixels (make_buckets stores X as float32) and labels 0..9."""
    rng = np.random.default_rng(seed)
    return [(rng.random((n, 784)).astype(np.float32).astype(np.float64), rng.integers(0, 10, n)) for n in sizes]


def buckets64(recs, batch):
    out = make_buckets(recs, batch, "cpu")
    for b in out:
        b.X = b.X.to(DT)
    return out


def masks_for(rows_shape, model, gen):
    """The masks one step draws, in the engine's order: one per dropout site (Dropout2d over channels, then Dropout)."""
    return [keep_mask((*rows_shape, *site[1:]), p, gen, "cpu").to(DT) / (1 - p)
            for site, p in model.dropout_sites(rows_shape[-1])]


def test_mnist_cnn_local_sgd_equals_a_per_pair_loop_with_the_same_dropout_masks():
    sizes, batch, epochs, lr = [6, 3, 5, 2], 4, 2, 0.05  # pairs above and below the batch size
    template = build_model("mnist_cnn", 0, dtype=DT)
    fm = FlatModel(template, "nll")
    recs = records(sizes)
    theta = fm.initial()[None].repeat(len(sizes), 1).to(DT)
    theta = theta + 0.01 * torch.randn(theta.shape, generator=torch.Generator().manual_seed(1), dtype=DT)  # distinct
    out = torch.empty_like(theta)
    gen, ref = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    for b in buckets64(recs, batch):
        pairs, n_pad = b.pairs.tolist(), b.mask.shape[1]
        out[b.pairs] = local_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=batch, lr=lr, gen=gen)
        want = {}
        for epoch in range(epochs):
            keys = torch.rand((len(pairs), n_pad), generator=ref) if n_pad > batch \
                else torch.arange(n_pad, dtype=torch.float32).repeat(len(pairs), 1)  # one batch: not shuffled
            steps = [masks_for((len(pairs), min(batch, n_pad)), template, ref)
                     for _ in range(max(1, math.ceil(n_pad / batch)))]
            for i, p in enumerate(pairs):
                X, y = torch.as_tensor(recs[p][0], dtype=DT), torch.as_tensor(recs[p][1])
                m = copy.deepcopy(template)
                vector_to_parameters((theta[p] if epoch == 0 else want[p]).clone(), m.parameters())
                perm = torch.argsort(keys[i, : len(X)])
                opt = torch.optim.SGD(m.parameters(), lr=lr)
                for j in range(0, len(perm), batch):
                    idx = perm[j: j + batch]
                    step = [mk[i, : len(idx)] for mk in steps[j // batch]]
                    opt.zero_grad()
                    F.nll_loss(m(X[idx], step), y[idx]).backward()
                    opt.step()
                want[p] = parameters_to_vector(m.parameters()).detach()
        for p in pairs:
            assert torch.allclose(out[p], want[p], atol=1e-10, rtol=0), p
    assert torch.equal(torch.rand(3, generator=gen), torch.rand(3, generator=ref))  # the same number of draws


def test_pairs_draw_their_own_dropout():
    """Two pairs with the same images and the same start end apart (each draws its own masks); with the module's
    masks all ones (p → 0) they end equal."""
    template = build_model("mnist_cnn", 0, dtype=DT)
    fm = FlatModel(template, "nll")
    X, y = records([4])[0]
    b = buckets64([(X, y), (X, y)], 4)[0]
    theta = fm.initial()[None].repeat(2, 1).to(DT)
    out = local_sgd(fm, theta, b, epochs=1, batch=4, lr=0.1, gen=torch.Generator().manual_seed(3))
    assert not torch.allclose(out[0], out[1])
    no_drop = copy.deepcopy(template)
    no_drop.drop2d.p, no_drop.drop.p = 0.0, 0.0
    out = local_sgd(FlatModel(no_drop, "nll"), theta, b, epochs=1, batch=4, lr=0.1, gen=torch.Generator().manual_seed(3))
    assert torch.allclose(out[0], out[1], atol=1e-12, rtol=0) and not torch.allclose(out[0], theta[0])
