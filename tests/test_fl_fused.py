"""The fused local-training loops of dpfl.fl.gradients and dpfl.fl.flat_model (the same numbers, less work per step)
against the per-step paths they replace, bit for bit: one draw of every dropout site's fair coins (`fair_masks`) against
`keep_mask` per site, `MlpPath.sgd` (each epoch's rows gathered once, targets and row weights once per epoch) against
`_ModulePath.sgd` (epoch_batches and one `sgd_step` per step) on the Creditcard MLP and a Sequential with an in-place
masked ReLU, DP-SGD's cached parameter views, and the CPU mean written as sum / n."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dpfl.fl.buckets import active_pairs, make_buckets
from dpfl.fl.device import keep_freed_memory
from dpfl.fl.flat_model import FlatModel, fair_masks, keep_mask
from dpfl.fl.gradients import MlpPath, _ModulePath
from dpfl.fl.local import dp_sgd, local_sgd
from dpfl.fl.mlp import _row_mean
from dpfl.models.nets import build_model
from conftest import masked_sequential_forward


class ReluDropMLP(nn.Module):
    """A Sequential whose dropout follows a ReLU (the taped ReLU output is masked in place) and a GroupNorm."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Dropout(0.5), nn.Linear(6, 6), nn.ReLU(),
                                 nn.GroupNorm(1, 6), nn.Dropout(0.5), nn.Linear(6, 3))

    def forward(self, x, masks=None):
        return masked_sequential_forward(self.net, x, masks)

    def dropout_sites(self, rows):
        return [((rows, 6), 0.5), ((rows, 6), 0.5)]


def _records(sizes, features, classes, seed):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(n, features)).astype(np.float32), rng.integers(0, classes, n)) for n in sizes]


def test_fair_masks_equal_keep_mask_per_site_in_a_row():
    """One draw of every site's words, unpacked by numpy: the masks and the generator's state after them are those
    of keep_mask site by site (0 or 1/(1 − p) = 2), whatever the sites' sizes (not multiples of 62)."""
    for shapes in ([(25, 64, 30)] * 4, [(3, 7), (1, 1), (5, 100), (2, 61)], [(4, 9, 20, 1, 1), (4, 9, 50)]):
        gen, ref = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
        got = fair_masks(shapes, 2.0, gen)
        want = [keep_mask(shape, 0.5, ref, "cpu").to(torch.get_default_dtype()) / 0.5 for shape in shapes]
        assert all(g.shape == w.shape and g.dtype == w.dtype and torch.equal(g, w) for g, w in zip(got, want))
        assert torch.equal(torch.rand(5, generator=gen), torch.rand(5, generator=ref))


@pytest.mark.parametrize("model", ["creditcard_mlp", "mnist_cnn"])
def test_draw_masks_equal_the_per_site_draws(model):
    fm = FlatModel(build_model(model, 0), "ce" if model == "creditcard_mlp" else "nll")
    for shape in [(25, 64), (3, 5), (1, 1)]:
        gen, ref = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
        got = fm.draw_masks(shape, gen, "cpu")
        want = [keep_mask((*shape[:-1], *site), p, ref, "cpu").to(torch.get_default_dtype()) / (1 - p)
                for site, p in fm.module.dropout_sites(shape[-1])]
        assert all(torch.equal(g, w) for g, w in zip(got, want))
        assert torch.equal(torch.rand(3, generator=gen), torch.rand(3, generator=ref))


def test_row_mean_is_the_cpu_mean_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        for shape in [(25, 64, 30), (3, 5, 7), (2, 1, 2), (4, 9, 50)]:
            x = torch.randn(shape, generator=g, dtype=dtype) * 7 + 0.3
            assert torch.equal(_row_mean(x), x.mean(-1, keepdim=True))
            assert torch.equal(_row_mean(x[:, :, 1:]), x[:, :, 1:].mean(-1, keepdim=True))


def _per_step_sgd(fm, theta, b, *, epochs, batch, lr, gen):
    """local_sgd through the per-step loop (_ModulePath.sgd: epoch_batches, draw_masks and one sgd_step a step)."""
    shuffle = b.mask.shape[1] > batch or fm.coupled
    return _ModulePath.sgd(fm.path, theta, b, epochs=epochs, batch=batch, lr=lr, gen=gen, shuffle=shuffle,
                           active=active_pairs(b, batch), adam=None)


@pytest.mark.parametrize("case", ["creditcard", "relu_dropout_nll"])
def test_fused_local_sgd_equals_the_per_step_loop_bit_for_bit(case):
    """MlpPath.sgd's fused epochs give exactly the per-step loop's numbers and leave the generator where it leaves
    it: user-level buckets (one batch, not shuffled; several batches), and a silo-level bucket whose pairs leave the
    active prefix as the epoch goes on."""
    if case == "creditcard":
        fm, dtype = FlatModel(build_model("creditcard_mlp", 3), "ce"), torch.float32
        records, batch = _records([1, 3, 8, 8, 20, 64, 65, 150, 230], 30, 2, 0), 16
    else:
        with torch.random.fork_rng():
            torch.manual_seed(4)
            module = ReluDropMLP().double()
        fm, dtype = FlatModel(module, "nll"), torch.float64
        records, batch = _records([2, 5, 7, 12, 30, 31], 4, 3, 1), 4
    assert isinstance(fm.path, MlpPath)
    buckets = make_buckets(records, batch, "cpu") + make_buckets(records, batch, "cpu", single=True)
    g = torch.Generator().manual_seed(5)
    theta = (fm.initial()[None] + 0.2 * torch.randn((len(records), fm.dim), generator=g)).to(dtype)
    for b in buckets:
        b.X = b.X.to(dtype)
        t = theta[b.pairs]
        gen, ref = torch.Generator().manual_seed(6), torch.Generator().manual_seed(6)
        got = local_sgd(fm, t, b, epochs=3, batch=batch, lr=0.3, gen=gen)
        want = _per_step_sgd(fm, t, b, epochs=3, batch=batch, lr=0.3, gen=ref)
        assert torch.equal(got, want), tuple(b.X.shape)
        assert not torch.equal(got, t)
        assert torch.equal(torch.rand(3, generator=gen), torch.rand(3, generator=ref))


def test_dp_sgd_views_follow_theta():
    """DP-SGD's parameter views are cached per θ: a second call with another θ (and a fresh path) gives the same
    numbers as a fresh model."""
    records = _records([40, 33, 20, 7], 30, 2, 2)
    b = make_buckets(records, 8, "cpu", single=True)[0]
    fm = FlatModel(build_model("creditcard_mlp", 1), "ce")
    theta = fm.initial()[None].repeat(len(records), 1)
    kwargs = dict(epochs=2, batch=8, lr=0.1, clip=0.5, noise_std=0.4)
    first = dp_sgd(fm, theta, b, gen=torch.Generator().manual_seed(1), **kwargs)
    second = dp_sgd(fm, first, b, gen=torch.Generator().manual_seed(2), **kwargs)
    fresh = FlatModel(build_model("creditcard_mlp", 1), "ce")
    assert torch.equal(second, dp_sgd(fresh, first, b, gen=torch.Generator().manual_seed(2), **kwargs))


def test_keep_freed_memory_is_harmless():
    assert isinstance(keep_freed_memory(), bool)
    assert float(torch.ones(3 << 20).sum()) == 3 << 20
