"""The kato2024 training engine (dpfl.fl.local, dpfl.papers.kato2024.training.rules/methods) against independent
references: plain per-pair / per-silo / per-user Python loops on ordinary torch modules (torch.autograd,
torch.optim.SGD, as the authors' code does) fed the same pre-drawn randomness, Opacus's GradSampleModule + DPOptimizer
for GROUP's DP-SGD, the privacy-facing bounds (clipping, sensitivity, noise std), and the ε curves against dp-accounting
and by hand.

Randomness is replayed by re-seeding a torch.Generator and repeating the engine's draw calls in its order: per
bucket (pairs grouped by padded size), per epoch the shuffle keys; DP-SGD per step the Poisson uniforms then the
noise (a model with dropout draws its masks in between, and per local_sgd step); a round: AVG-ws user sampling
first, then per bucket the local draws (+ NAIVE's noise), then the silo noise.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import dp_accounting
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dp_accounting.rdp import rdp_privacy_accountant
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from dpfl.fl.buckets import make_buckets, poisson_rows
from dpfl.fl.flat_model import FlatModel, keep_mask
from dpfl.fl.gradients import MlpPath, per_example_grads
from dpfl.fl.local import clipped_mean_grad_sums, dp_sgd, local_sgd, mean_grads
from dpfl.models.metrics import cox_partial_likelihood
from dpfl.models.nets import LinearScore, build_model
from dpfl.papers.kato2024.methods import BY_ID, HYPER_BLOCKS, epsilon_curves
from dpfl.fl.aggregate import weighted_clipped_sum
from dpfl.papers.kato2024.federation import Federation
from dpfl.papers.kato2024.training.rules import round_rule, silo_noise
from dpfl.privacy.rdp import STANDARD_ORDERS
from conftest import masked_sequential_forward


def hyper_for(method, block: dict):
    """The method's typed hyper-parameters from a block that may hold keys its family does not take (tests share
    one block across families)."""
    names = {f.name for f in dataclasses.fields(HYPER_BLOCKS[method.hyper])}
    return method.hyper_params({k: v for k, v in block.items() if k in names})


DT = torch.float64
TOL = 1e-5


# ------------------------------------------------------------------------------------------ models and data


class TinyMLP(nn.Module):
    """Two layers, two logits (CE): several parameter tensors, so the flat-vector order matters."""

    def __init__(self, d=3, h=4, k=2):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, k)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def _seeded(factory, seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory().to(DT)


MODELS = {  # loss -> (module factory, features); no dropout anywhere
    "bce": (lambda: build_model("heart_logistic", 0, dtype=DT), 13),
    "cox": (lambda: build_model("tcga_cox", 1, dtype=DT), 39),
    "ce": (lambda: _seeded(TinyMLP, 2), 3),
    "seq": (lambda: build_model("artificial_mlp_h4", 3, dtype=DT), 4),  # CE through the engine's Sequential path
}


def make_xy(kind, n, d, rng):
    """Features exactly representable in float32 (make_buckets stores X as float32)."""
    X = rng.normal(size=(n, d)).astype(np.float32).astype(np.float64)
    if kind == "bce":
        y = (rng.random(n) < 0.5).astype(np.float64)
    elif kind in ("ce", "seq"):
        y = rng.integers(0, 2, n).astype(np.int64)
    else:  # cox: (T, E)
        y = np.stack([rng.exponential(size=n) + 0.01, rng.random(n) < 0.7], axis=1).astype(np.float64)
    return X, y


def to64(buckets):
    """The engine pads X as float32; the float64 models need float64 inputs (the values are exact)."""
    for b in buckets:
        b.X = b.X.to(DT)
        if b.y.is_floating_point():
            b.y = b.y.to(DT)
    return buckets


def tensors(X, y):
    return torch.as_tensor(X, dtype=DT), torch.as_tensor(y)


# ------------------------------------------------------------------------------------------ plain references


def module_at(template, theta):
    m = copy.deepcopy(template)
    vector_to_parameters(theta.detach().clone().to(DT), m.parameters())
    return m


def flat(m):
    return parameters_to_vector(m.parameters()).detach()


def ref_loss(kind, out, y):
    if kind == "bce":
        return F.binary_cross_entropy_with_logits(out, y.to(out.dtype))
    if kind in ("ce", "seq"):
        return F.cross_entropy(out, y.long())
    if len(out) < 2:  # a one-record Cox batch: s − log e^s = 0
        return out.sum() * 0.0
    return cox_partial_likelihood(out, y[:, 0], y[:, 1])


def clip_ref(v, c):
    n = float(torch.linalg.vector_norm(v))
    return v * min(1.0, c / n) if n > 0 else v


def ref_train(template, kind, theta, X, y, perms, batch, lr, optimizer=torch.optim.SGD):
    """Q epochs of minibatch training with the given per-epoch permutations (ragged last batch) by a fresh
    `optimizer(params, lr=lr)` per pair (torch.optim.SGD; torch.optim.Adam with its defaults is kato2024's secure
    path, K7)."""
    m = module_at(template, theta)
    opt = optimizer(m.parameters(), lr=lr)
    for perm in perms:
        for j in range(0, len(perm), batch):
            idx = perm[j: j + batch]
            opt.zero_grad()
            ref_loss(kind, m(X[idx]), y[idx]).backward()
            opt.step()
    return flat(m)


def ref_mean_grad(template, kind, theta, X, y):
    m = module_at(template, theta)
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(ref_loss(kind, m(X), y), list(m.parameters()))])


def ref_authors_grad(template, kind, theta, X, y, batch):
    """K1: Σ over consecutive batches of (batch-mean gradient)/|batch|."""
    return sum(ref_mean_grad(template, kind, theta, X[j: j + batch], y[j: j + batch]) / len(X[j: j + batch])
               for j in range(0, len(X), batch))


def ref_per_sample(m, kind, Xb, yb):
    """Per-sample gradients one row at a time; Cox: |b|·∂L_batch/∂s_i·∂s_i/∂θ (Opacus hook semantics)."""
    params = list(m.parameters())

    def g_of(t):
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(t, params)])

    if kind != "cox":
        return [g_of(ref_loss(kind, m(Xb[i: i + 1]), yb[i: i + 1])) for i in range(len(Xb))]
    out = m(Xb)
    dL = torch.autograd.grad(ref_loss(kind, out, yb), out)[0]
    return [len(Xb) * dL[i] * g_of(m(Xb[i: i + 1]).sum()) for i in range(len(Xb))]


def ref_dp_sgd(template, kind, theta, X, y, tape, lr, clip, sigma, expected):
    """Per step: the Poisson-chosen rows, per-sample clip at C, + σC·z, / expected batch size, an SGD step."""
    m = module_at(template, theta)
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    for take, z in tape:
        idx = torch.as_tensor(np.flatnonzero(take.numpy()))
        summed = torch.zeros_like(z)
        for g in (ref_per_sample(m, kind, X[idx], y[idx]) if len(idx) else []):
            summed += clip_ref(g, clip)
        update = (summed + sigma * clip * z) / expected
        opt.zero_grad()
        for p, u in zip(m.parameters(), torch.split(update, [p.numel() for p in m.parameters()])):
            p.grad = u.reshape(p.shape).clone()
        opt.step()
    return flat(m)


def expected_batch(n, batch):
    return max(1, math.floor(n * (1.0 / max(1, math.ceil(n / batch)))))


# ------------------------------------------------------------------------------------------ replayed randomness


def padded(n, batch):
    assert n >= 1
    return math.ceil(n / batch) * batch if n > batch else min(batch, 1 << (n - 1).bit_length())


def layout(counts, batch, single=False):
    """Buckets as the engine documents them: pairs grouped by padded size, sizes ascending, pairs by record count
    (largest first, stable); silo-level training (`single`): one bucket padded to the largest pair."""
    counts = np.asarray(counts)
    pads = np.array([padded(int(n), batch) for n in counts])
    if single:
        pads = np.full(len(pads), pads.max())
    out = []
    for s in sorted(set(pads.tolist())):
        idx = np.flatnonzero(pads == s)
        out.append((idx[np.argsort(-counts[idx], kind="stable")], int(s)))
    return out


def assert_layout(buckets, lay):
    assert [(b.pairs.tolist(), b.mask.shape[1]) for b in buckets] == [(p.tolist(), s) for p, s in lay]


def draw_shuffles(gen, pairs, counts, n_pad, epochs, tape, batch, kind):
    """The engine's epoch shuffles; a bucket of one batch per epoch is not shuffled unless the loss couples rows."""
    for _ in range(epochs):
        if n_pad <= batch and kind != "cox":
            for p in pairs:
                tape[p].append(torch.arange(counts[p]))
            continue
        keys = torch.rand((len(pairs), n_pad), generator=gen)
        for i, p in enumerate(pairs):
            tape[p].append(torch.argsort(keys[i, : counts[p]]))


def replay_poisson(gen, counts, qs):
    """The engine's Poisson draw (dpfl.fl.buckets.poisson_rows, tested on its own below) as per-record flags."""
    idx, valid = poisson_rows(torch.as_tensor(counts), torch.as_tensor(qs, dtype=DT), gen)
    takes = []
    for i, n in enumerate(counts):
        t = torch.zeros(n, dtype=torch.bool)
        t[idx[i][valid[i]]] = True
        takes.append(t)
    return takes


def draw_dp(gen, pairs, counts, n_pad, epochs, batch, dim, tape):
    """The engine's DP-SGD draws: per step, the Poisson flags then the noise of the pairs that still have a step
    (a prefix of the bucket's pairs, which are ordered by count, largest first)."""
    steps = {p: max(1, math.ceil(counts[p] / batch)) for p in pairs}
    for _ in range(epochs):
        for j in range(max(steps.values())):
            live = [p for p in pairs if j < steps[p]]
            assert live == pairs[: len(live)]
            takes = replay_poisson(gen, [counts[p] for p in live], [1.0 / steps[p] for p in live])
            z = torch.randn((len(live), dim), generator=gen, dtype=DT)
            for i, p in enumerate(live):
                tape[p].append((takes[i], z[i]))


# ------------------------------------------------------------------------------------------ 1. per-pair kernels

SIZES = [1, 2, 3, 4, 6, 7, 11, 12]  # B = 4: pads 1, 2, 4, 4, 8, 8, 12, 12; 6, 7, 11 end in a ragged batch


def pair_problem(kind, seed=0, sizes=SIZES, batch=4):
    template, d = MODELS[kind]
    template = template()
    rng = np.random.default_rng(seed)
    records = [make_xy(kind, n, d, rng) for n in sizes]
    buckets = to64(make_buckets(records, batch, "cpu"))
    assert_layout(buckets, layout(sizes, batch))
    fm = FlatModel(template, "ce" if kind == "seq" else kind)
    g = torch.Generator().manual_seed(seed + 100)
    theta = fm.initial()[None] + 0.3 * torch.randn((len(sizes), fm.dim), generator=g, dtype=DT)
    return template, fm, records, buckets, theta


@pytest.mark.parametrize("kind", ["bce", "cox", "ce"])
def test_local_sgd_matches_a_plain_loop(kind):
    """Q epochs of shuffled minibatch SGD per pair, several batches and a ragged last one, as torch.optim.SGD."""
    batch, epochs, lr = 4, 3, 0.3
    template, fm, records, buckets, theta = pair_problem(kind)
    gen, ref_gen = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    tape = {p: [] for p in range(len(records))}
    out = torch.empty_like(theta)
    for b in buckets:
        out[b.pairs] = local_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=batch, lr=lr, gen=gen)
        draw_shuffles(ref_gen, b.pairs.tolist(), SIZES, b.mask.shape[1], epochs, tape, batch, kind)
    for p, (X, y) in enumerate(records):
        want = ref_train(template, kind, theta[p], *tensors(X, y), tape[p], batch, lr)
        assert torch.allclose(out[p], want, atol=TOL, rtol=0), p
    assert not torch.allclose(out, theta)


@pytest.mark.parametrize("kind", ["bce", "cox", "ce", "seq"])
def test_local_adam_matches_torch_optim_adam(kind):
    """optimizer="adam": per pair, torch.optim.Adam over the same shuffled batches; pairs with fewer batches take
    fewer steps, so each keeps its own bias correction (linear, Cox, generic and Sequential-MLP paths)."""
    batch, epochs, lr = 4, 3, 0.05
    template, fm, records, buckets, theta = pair_problem(kind)
    gen, ref_gen = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    tape = {p: [] for p in range(len(records))}
    out = torch.empty_like(theta)
    for b in buckets:
        out[b.pairs] = local_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=batch, lr=lr, gen=gen, optimizer="adam")
        draw_shuffles(ref_gen, b.pairs.tolist(), SIZES, b.mask.shape[1], epochs, tape, batch, kind)
    for p, (X, y) in enumerate(records):
        want = ref_train(template, kind, theta[p], *tensors(X, y), tape[p], batch, lr, torch.optim.Adam)
        assert torch.allclose(out[p], want, atol=TOL, rtol=0), p
    sgd = torch.empty_like(theta)
    for b in buckets:
        sgd[b.pairs] = local_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=batch, lr=lr,
                                 gen=torch.Generator().manual_seed(7))
    assert not torch.allclose(out, sgd, atol=1e-3)
    with pytest.raises(ValueError, match="sgd or adam"):
        local_sgd(fm, theta[buckets[0].pairs], buckets[0], epochs=1, batch=batch, lr=lr, gen=gen, optimizer="rmsprop")


@pytest.mark.parametrize("kind", ["bce", "cox", "ce"])
def test_mean_grads_match_autograd(kind):
    """ULDP-SGD's per-pair gradient = autograd of the mean loss over all of the pair's records."""
    template, fm, records, buckets, theta = pair_problem(kind, seed=1)
    for b in buckets:
        got = mean_grads(fm, theta[b.pairs], b)
        for i, p in enumerate(b.pairs.tolist()):
            want = ref_mean_grad(template, kind, theta[p], *tensors(*records[p]))
            assert torch.allclose(got[i], want, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("kind", ["bce", "cox", "ce"])
def test_dp_sgd_matches_a_plain_loop(kind):
    """Opacus-semantics DP-SGD per pair (Poisson rows, per-sample clip, σC noise, ⌊N·q⌋) as a per-row loop."""
    batch, epochs, lr, clip, sigma = 4, 2, 0.2, 0.8, 0.9
    template, fm, records, buckets, theta = pair_problem(kind, seed=2)
    gen, ref_gen = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    tape = {p: [] for p in range(len(records))}
    out = torch.empty_like(theta)
    for b in buckets:
        out[b.pairs] = dp_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=batch, lr=lr, clip=clip,
                              noise_std=sigma * clip, gen=gen)
        draw_dp(ref_gen, b.pairs.tolist(), SIZES, b.mask.shape[1], epochs, batch, fm.dim, tape)
    for p, (X, y) in enumerate(records):
        want = ref_dp_sgd(template, kind, theta[p], *tensors(X, y), tape[p], lr, clip, sigma,
                          expected_batch(len(X), batch))
        assert torch.allclose(out[p], want, atol=TOL, rtol=0), p


class TinyDropMLP(TinyMLP):
    """TinyMLP with one dropout site taking explicit masks (the dpfl.models.nets protocol)."""

    p = 0.5

    def forward(self, x, masks=None):
        h = torch.tanh(self.fc1(x))
        return self.fc2(h if masks is None else h * masks[0])

    def dropout_sites(self, rows):
        return [((rows, 4), self.p)]


def drop_mask(shape, gen):
    return keep_mask((*shape, 4), TinyDropMLP.p, gen, "cpu").to(DT) / (1 - TinyDropMLP.p)


def test_dropout_masks_come_from_the_generator_in_order():
    """Dropout masks are drawn from the one generator (local_sgd: after the epoch keys, if any, one per step; dp_sgd:
    between the Poisson draw and the noise; mean_grads: one per call) and applied row by row, as a plain loop replays
    them."""
    batch, epochs, lr, clip, sigma = 4, 2, 0.3, 0.5, 0.8
    template = _seeded(TinyDropMLP, 4)
    fm = FlatModel(template, "ce")
    rng = np.random.default_rng(3)
    records = [make_xy("ce", n, 3, rng) for n in SIZES]
    buckets = to64(make_buckets(records, batch, "cpu"))
    theta = fm.initial()[None].repeat(len(SIZES), 1)
    out_sgd, out_dp, out_g = (torch.empty_like(theta) for _ in range(3))
    gen, ref = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    for b in buckets:
        pairs, n_pad = b.pairs.tolist(), b.mask.shape[1]
        out_sgd[b.pairs] = local_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=batch, lr=lr, gen=gen)
        out_dp[b.pairs] = dp_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=batch, lr=lr, clip=clip,
                                 noise_std=sigma * clip, gen=gen)
        out_g[b.pairs] = mean_grads(fm, theta[b.pairs], b, gen)
        # replay: local_sgd
        out_ref = {}
        for epoch in range(epochs):
            keys = torch.rand((len(pairs), n_pad), generator=ref) if n_pad > batch \
                else torch.arange(n_pad, dtype=torch.float32).repeat(len(pairs), 1)  # one batch: not shuffled
            steps = [drop_mask((len(pairs), min(batch, n_pad)), ref) for _ in range(max(1, math.ceil(n_pad / batch)))]
            for i, p in enumerate(pairs):
                X, y = tensors(*records[p])
                m = module_at(template, theta[p] if epoch == 0 else out_ref[p])
                perm = torch.argsort(keys[i, : len(X)])
                opt = torch.optim.SGD(m.parameters(), lr=lr)
                for j in range(0, len(perm), batch):
                    idx = perm[j: j + batch]
                    opt.zero_grad()
                    F.cross_entropy(m(X[idx], [steps[j // batch][i, : len(idx)]]), y[idx]).backward()
                    opt.step()
                out_ref[p] = flat(m)
        for p in pairs:
            assert torch.allclose(out_sgd[p], out_ref[p], atol=TOL, rtol=0), p
        # replay: dp_sgd (one step per epoch for n ≤ B; ⌈n/B⌉ otherwise; all pairs of a bucket alike)
        n_steps = max(1, math.ceil(records[pairs[0]][0].shape[0] / batch))
        cur = {p: module_at(template, theta[p]) for p in pairs}
        for _ in range(epochs * n_steps):
            takes = replay_poisson(ref, [len(records[p][0]) for p in pairs], [1.0 / n_steps] * len(pairs))
            width = max(1, max(int(t.sum()) for t in takes))
            masks = drop_mask((len(pairs), width), ref)
            z = torch.randn((len(pairs), fm.dim), generator=ref, dtype=DT)
            for i, p in enumerate(pairs):
                X, y = tensors(*records[p])
                m = cur[p]
                params = list(m.parameters())
                summed = torch.zeros(fm.dim, dtype=DT)
                for k, r in enumerate(np.flatnonzero(takes[i].numpy())):
                    loss = F.cross_entropy(m(X[r: r + 1], [masks[i, k: k + 1]]), y[r: r + 1])
                    summed += clip_ref(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]), clip)
                new = flat(m) - lr * (summed + sigma * clip * z[i]) / expected_batch(len(X), batch)
                vector_to_parameters(new, m.parameters())
        for p in pairs:
            assert torch.allclose(out_dp[p], flat(cur[p]), atol=TOL, rtol=0), p
        # replay: mean_grads
        masks = drop_mask((len(pairs), n_pad), ref)
        for i, p in enumerate(pairs):
            X, y = tensors(*records[p])
            m = module_at(template, theta[p])
            loss = F.cross_entropy(m(X, [masks[i, : len(X)]]), y)
            want = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(m.parameters()))])
            assert torch.allclose(out_g[p], want, atol=1e-10, rtol=1e-8), p
    assert torch.equal(torch.rand(3, generator=gen), torch.rand(3, generator=ref))  # same number of draws


class TinySeqMLP(nn.Module):
    """A Sequential of Linear / ReLU / GroupNorm(1, C) / Dropout as `.net` (the shape of the Creditcard MLP, which
    takes the hand-written batched path of dpfl.fl.gradients), with a ReLU → Dropout block (in-place masking of a
    taped ReLU output) and a GroupNorm → Dropout block; explicit dropout masks (the dpfl.models.nets protocol)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.GroupNorm(1, 5), nn.Linear(5, 5), nn.ReLU(),
                                 nn.Dropout(0.5), nn.Linear(5, 5), nn.ReLU(), nn.GroupNorm(1, 5), nn.Dropout(0.5),
                                 nn.Linear(5, 2))
        with torch.no_grad():  # non-trivial affine group-norm parameters
            for layer in self.net:
                if isinstance(layer, nn.GroupNorm):
                    layer.weight.uniform_(0.5, 1.5)
                    layer.bias.uniform_(-0.3, 0.3)

    def forward(self, x, masks=None):
        return masked_sequential_forward(self.net, x, masks)

    def dropout_sites(self, rows):
        return [((rows, 5), 0.5), ((rows, 5), 0.5)]


@pytest.mark.parametrize("loss", ["ce", "nll"])
def test_batched_mlp_path_equals_the_generic_vmap_path(loss):
    """The hand-written forward/backward of Sequential MLPs (fused in-place SGD updates, per-example clipped sums
    from activations) gives the numbers of vmap(grad(functional_call)) with the same draws, for local SGD,
    mean gradients and DP-SGD."""
    template = _seeded(TinySeqMLP, 6)
    fast = FlatModel(template, loss)
    slow = FlatModel(template, loss, path="generic")
    assert isinstance(fast.path, MlpPath) and not isinstance(slow.path, MlpPath)
    rng = np.random.default_rng(4)
    records = [make_xy("ce", n, 3, rng) for n in SIZES]
    # user-level buckets, and one silo-level bucket where pairs drop out of the active prefix as steps go on
    buckets = to64(make_buckets(records, 4, "cpu")) + to64(make_buckets(records, 4, "cpu", single=True))
    g = torch.Generator().manual_seed(1)
    theta = fast.initial()[None] + 0.3 * torch.randn((len(SIZES), fast.dim), generator=g, dtype=DT)
    for b in buckets:
        t = theta[b.pairs]
        runs = {}
        for name, fm in (("fast", fast), ("slow", slow)):
            runs[name] = (local_sgd(fm, t, b, epochs=3, batch=4, lr=0.2, gen=torch.Generator().manual_seed(2)),
                          mean_grads(fm, t, b, torch.Generator().manual_seed(3)),
                          dp_sgd(fm, t, b, epochs=2, batch=4, lr=0.2, clip=0.7, noise_std=0.5 * 0.7,
                                 gen=torch.Generator().manual_seed(4)))
        for got, want in zip(runs["fast"], runs["slow"]):
            assert torch.allclose(got, want, atol=1e-10, rtol=1e-9)
        assert not torch.allclose(runs["fast"][0], t)


@pytest.mark.parametrize("model", ["mlp", "linear"])
def test_clipped_mean_grad_sums_equal_clipping_the_per_pair_gradients(model):
    """ULDP-SGD's aggregate without per-pair gradients (shared-model passes over each run's rows, Gram-form norms
    for small pairs, the product itself for pairs of more than 32 rows) equals clipping and summing the per-pair
    mean gradients, with the same dropout draws: runs with unequal numbers of pairs, pairs inside and outside the
    clip ball, a pair whose gradient is NaN (it sends nothing), and the fallback for models off the MLP path."""
    sizes = [1, 1, 2, 3, 5, 9, 16, 33, 40, 1, 6, 70]  # pairs 4 and 10 share a bucket
    n_runs = 3
    run_of_pair = torch.tensor([0, 1, 2, 0, 0, 1, 2, 0, 1, 0, 0, 2])
    if model == "mlp":
        fm = FlatModel(_seeded(TinySeqMLP, 7), "ce")
        assert fm.mlp is not None
        records = [make_xy("ce", n, 3, np.random.default_rng(n)) for n in sizes]
    else:
        fm = FlatModel(MODELS["bce"][0](), "bce")
        records = [make_xy("bce", n, 13, np.random.default_rng(n)) for n in sizes]
    records[4][0][2, 0] = np.nan  # pair 4: a NaN feature, so a NaN gradient
    g = torch.Generator().manual_seed(0)
    theta = fm.initial()[None] + 0.5 * torch.randn((n_runs, fm.dim), generator=g, dtype=DT)
    weights = torch.rand(len(sizes), generator=g, dtype=DT)
    for clip in (0.05, 100.0):  # most pairs clipped / none
        for b in to64(make_buckets(records, 8, "cpu")):
            run_of, w = run_of_pair[b.pairs], weights[b.pairs]
            want = weighted_clipped_sum(mean_grads(fm, theta[run_of], b, torch.Generator().manual_seed(1)), w, run_of,
                                        n_runs, clip)
            for chunk_rows in (2048, 1):  # one chunk, and one pair per run at a time
                got = clipped_mean_grad_sums(fm, theta, b, run_of, w, clip, torch.Generator().manual_seed(1),
                                             chunk_rows=chunk_rows)
                assert torch.isfinite(got).all()
                assert torch.allclose(got, want, atol=1e-12, rtol=1e-9), (clip, b.X.shape, chunk_rows)


def test_poisson_rows_include_each_record_independently_with_probability_q():
    """The geometric-gap sampler: every position (early or late) is included at rate q_p, inclusions of two
    positions are uncorrelated, sample sizes are Binomial(N, q); q = 1 takes every record, N = 0 none; and a
    sample larger than the first draw's width (q near 1 over many records) is completed by further draws."""
    P = 20000
    counts = torch.tensor([7, 300, 1, 0, 50] * (P // 5))
    q = torch.tensor([0.3, 1 / 50, 1.0, 0.5, 1.0] * (P // 5), dtype=DT)
    idx, valid = poisson_rows(counts, q, torch.Generator().manual_seed(0))
    flags = torch.zeros((P, 300))
    flags[torch.arange(P)[:, None].expand_as(idx)[valid], idx[valid]] = 1.0
    for c, qq, j in ((7, 0.3, 0), (300, 1 / 50, 1)):
        f = flags[j::5, :c]
        rate = f.mean(0)
        se = math.sqrt(qq * (1 - qq) / f.shape[0])
        assert float((rate - qq).abs().max()) < 5 * se, (c, rate)
        size = f.sum(1)
        assert float(size.var()) == pytest.approx(c * qq * (1 - qq), rel=0.1)
        cov = ((f[:, 0] - qq) * (f[:, c - 1] - qq)).mean()
        assert abs(float(cov)) < 5 * qq * (1 - qq) / math.sqrt(f.shape[0])
        assert torch.all(f[:, c:] == 0)
    assert torch.all(flags[2::5, 0] == 1) and torch.all(flags[2::5, 1:] == 0)  # q = 1, N = 1
    assert torch.all(flags[3::5] == 0)  # N = 0
    assert torch.all(flags[4::5, :50] == 1)  # q = 1 over 50 records
    assert torch.all(idx[~valid] == 0)
    many, ok = poisson_rows(torch.tensor([5000]), torch.tensor([0.999], dtype=DT), torch.Generator().manual_seed(1))
    assert int(ok.sum()) > 4950 and torch.all(many[0, 1:][ok[0, 1:]] > many[0, :-1][ok[0, 1:]])


def test_fair_coin_dropout_masks_are_unbiased_and_independent():
    """keep_mask at p = 1/2 (62 fair bits per random integer): keep rate 1/2, no correlation between neighbours
    (bits of one word) or between sites, and reproducible from the generator."""
    a = keep_mask((400, 64, 30), 0.5, torch.Generator().manual_seed(0), "cpu").double()
    assert abs(float(a.mean()) - 0.5) < 0.003  # 768k flags: std 0.00057
    flat_a = a.reshape(-1) - 0.5
    for lag in (1, 2, 31, 61, 62):  # within a word and across word boundaries
        assert abs(float((flat_a[:-lag] * flat_a[lag:]).mean())) < 0.003, lag
    assert torch.equal(a, keep_mask((400, 64, 30), 0.5, torch.Generator().manual_seed(0), "cpu").double())
    other = keep_mask((200, 30), 0.3, torch.Generator().manual_seed(1), "cpu").double()
    assert abs(float(other.mean()) - 0.7) < 0.02


# ------------------------------------------------------------------------------------------ 1. full rounds

S_, U_, R_ = 3, 5, 2


def tiny_runs(kind, d, n=28, seed=0, R=R_, S=S_, U=U_):
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(R):
        X, y = make_xy(kind, n, d, rng)
        silo = rng.integers(0, S, n)
        silo[:S] = np.arange(S)  # no empty silo
        user = rng.choice(U, n, p=[0.4, 0.2, 0.2, 0.1, 0.1])
        runs.append({"X": X, "y": y, "silo": silo, "user": user})
    return runs


def pairs_of(runs, S, U, level):
    out = []
    for r, d in enumerate(runs):
        for s in range(S):
            if level == "silo":
                out.append((r, s, -1, np.flatnonzero(d["silo"] == s)))
                continue
            for u in range(U):
                idx = np.flatnonzero((d["silo"] == s) & (d["user"] == u))
                if len(idx):
                    out.append((r, s, u, idx))
    return out


def ref_round(method, hyper, runs, S, U, template, kind, theta, *, sigma, batch, seed, q=1.0,
              sgd_gradient="mean"):
    """One round by plain loops over runs, silos and users (spec §4), with the engine's draws replayed."""
    fam = method.scheme
    level = "silo" if fam in ("default", "naive", "group") else "user"
    Q, lr, eta_g = int(hyper.get("epochs", 0)), float(hyper.get("eta_l", 0.0)), float(hyper["eta_g"])
    C = float(hyper.get("clip") or 0.0)
    R, D = theta.shape
    pairs = pairs_of(runs, S, U, level)
    index = {(r, s, u): p for p, (r, s, u, _) in enumerate(pairs)}
    counts = [len(idx) for *_, idx in pairs]
    gen = torch.Generator().manual_seed(seed)
    tape = {p: [] for p in range(len(pairs))}
    naive_z, keep = {}, np.ones(len(pairs), bool)
    if level == "silo":
        for pb, n_pad in layout(counts, batch, single=True):
            if fam == "group":
                draw_dp(gen, pb.tolist(), counts, n_pad, Q, batch, D, tape)
            else:
                draw_shuffles(gen, pb.tolist(), counts, n_pad, Q, tape, batch, kind)
            if fam == "naive":
                z = torch.randn((len(pb), D), generator=gen, dtype=DT)
                naive_z.update({p: z[i] for i, p in enumerate(pb.tolist())})
    else:
        if method.sampled:
            chosen = torch.rand((R, U), generator=gen) < q
            keep = np.array([bool(chosen[r, u]) for r, _, u, _ in pairs])
        for pb, n_pad in layout(counts, batch):
            pb = pb[keep[pb]]
            if len(pb) and fam == "avg":
                draw_shuffles(gen, pb.tolist(), counts, n_pad, Q, tape, batch, kind)
        z_silo = torch.randn((R, S, D), generator=gen, dtype=DT)

    clipped = []

    def clip_log(v):
        clipped.append(float(torch.linalg.vector_norm(v)) > C)
        return clip_ref(v, C)

    new = theta.clone()
    for r in range(R):
        X, y = tensors(runs[r]["X"], runs[r]["y"])
        if level == "silo":
            acc = torch.zeros(D, dtype=DT)
            for s in range(S):
                p = index[(r, s, -1)]
                idx = torch.as_tensor(pairs[p][3])
                if fam == "group":
                    local = ref_dp_sgd(template, kind, theta[r], X[idx], y[idx], tape[p], lr, C, sigma,
                                       expected_batch(counts[p], batch))
                else:
                    local = ref_train(template, kind, theta[r], X[idx], y[idx], tape[p], batch, lr)
                d = local - theta[r]
                if fam == "naive":
                    d = clip_log(d) + sigma * C * math.sqrt(S) * naive_z[p]
                acc += d
            new[r] = theta[r] + eta_g * acc / S
            continue
        n_u = np.bincount(runs[r]["user"], minlength=U)
        total = torch.zeros(D, dtype=DT)
        for s in range(S):
            for u in range(U):
                p = index.get((r, s, u))
                if p is None or not keep[p]:
                    continue
                idx = torch.as_tensor(pairs[p][3])
                w = 1.0 / S if method.weighting == "avg" else counts[p] / n_u[u]
                if fam == "sgd" and sgd_gradient == "authors":
                    d = ref_authors_grad(template, kind, theta[r], X[idx], y[idx], batch)
                elif fam == "sgd":
                    d = ref_mean_grad(template, kind, theta[r], X[idx], y[idx])
                else:
                    d = ref_train(template, kind, theta[r], X[idx], y[idx], tape[p], batch, lr) - theta[r]
                total += w * clip_log(d)
        total += sigma * C / math.sqrt(S) * z_silo[r].sum(0)
        scale = eta_g / (U * S * (q if method.sampled else 1.0))
        new[r] = theta[r] - scale * total if fam == "sgd" else theta[r] + scale * total
    return new, {"clipped": clipped, "counts": counts}


def engine_round(method, hyper, runs, S, U, template, kind, theta, *, sigma, batch, seed, q=1.0,
                 sgd_gradient="mean"):
    level = "silo" if method.scheme in ("default", "naive", "group") else "user"
    fed = Federation.build(runs, S, U, level, batch, "cpu")
    to64(fed.buckets)
    gen = torch.Generator().manual_seed(seed)
    step = round_rule(method, hyper_for(method, hyper), fed, FlatModel(template, kind), sigma=sigma, batch=batch,
                      gen=gen, q=q,
                    sgd_gradient=sgd_gradient)
    return step(theta.clone()), fed


ROUNDS = [  # method id, hyper, clip C per loss (bce, cox: both sides of the clip occur), extra
    ("default", {"eta_g": 1.0, "eta_l": 0.2, "epochs": 2}, (None, None), {}),
    ("uldp_naive", {"eta_g": 1.0, "eta_l": 0.2, "epochs": 2}, (0.6, 0.8), {}),
    ("uldp_group_2", {"eta_g": 0.7, "eta_l": 0.2, "epochs": 2}, (1.0, 1.0), {}),
    ("uldp_sgd", {"eta_g": 10.0}, (1.0, 1.5), {}),
    ("uldp_sgd", {"eta_g": 10.0}, (0.6, 0.6), {"sgd_gradient": "authors"}),
    ("uldp_avg", {"eta_g": 10.0, "eta_l": 0.3, "epochs": 2}, (0.6, 0.6), {}),
    ("uldp_avg_w", {"eta_g": 10.0, "eta_l": 0.3, "epochs": 2}, (0.6, 0.6), {}),
    ("uldp_avg_ws", {"eta_g": 10.0, "eta_l": 0.3, "epochs": 2}, (0.6, 0.6), {"q": 0.5}),
]


@pytest.mark.parametrize("kind", ["bce", "cox"])
@pytest.mark.parametrize("mid, hyper, clips, extra", ROUNDS,
                         ids=["-".join([m, *map(str, e.values())]) for m, _, _, e in ROUNDS])
def test_round_matches_plain_loops(mid, hyper, clips, extra, kind):
    """Every family's round (2 runs, 3 silos, 5 users) equals the per-silo/per-user loop of spec §4."""
    hyper = {**hyper, "clip": clips[kind == "cox"]}
    method, batch, sigma, seed = BY_ID[mid], 3, 0.7, 5
    factory, d = MODELS[kind]
    template = factory()
    runs = tiny_runs(kind, d, seed=1)
    base = FlatModel(template, kind).initial()
    theta = base[None] + 0.1 * torch.randn((R_, base.numel()), generator=torch.Generator().manual_seed(3), dtype=DT)
    got, fed = engine_round(method, hyper, runs, S_, U_, template, kind, theta, sigma=sigma, batch=batch, seed=seed,
                            **extra)
    want, info = ref_round(method, hyper, runs, S_, U_, template, kind, theta, sigma=sigma, batch=batch, seed=seed,
                           **extra)
    # the engine's pair list and buckets are the documented ones
    level = "silo" if method.scheme in ("default", "naive", "group") else "user"
    pairs = pairs_of(runs, S_, U_, level)
    assert fed.run.tolist() == [p[0] for p in pairs] and fed.silo.tolist() == [p[1] for p in pairs]
    assert fed.user.tolist() == [p[2] for p in pairs]
    assert_layout(fed.buckets, layout(info["counts"], batch, single=level == "silo"))
    # the problem exercises several batches, a ragged last batch, and both sides of the clip
    assert any(n > batch and n % batch for n in info["counts"])
    if method.scheme in ("naive", "sgd", "avg"):
        assert any(info["clipped"]) and not all(info["clipped"]), info["clipped"]
    assert torch.allclose(got, want, atol=TOL, rtol=0), (got - want).abs().max()
    assert not torch.allclose(got, theta, atol=1e-3)


# ------------------------------------------------------------------------------------------ 2. Opacus


def opacus_dp_sgd(template, kind, theta, X, y, tape, lr, clip, sigma, expected, monkeypatch):
    """Opacus's own DP-SGD step (GradSampleModule + DPOptimizer, loss_reduction mean) on the engine's batches,
    with Opacus's noise replaced by the engine's draws."""
    import opacus.optimizers.optimizer as opt_mod
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    model = module_at(template, theta)
    sizes = [p.numel() for p in model.parameters()]
    gsm = GradSampleModule(model, loss_reduction="mean").train()  # Opacus records activations in train mode only
    opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=lr), noise_multiplier=sigma, max_grad_norm=clip,
                      expected_batch_size=expected, loss_reduction="mean")
    for take, z in tape:
        idx = torch.as_tensor(np.flatnonzero(take.numpy()))
        assert len(idx) > 0  # Opacus's mean loss of an empty batch is NaN; the seeds avoid it
        chunks = list(torch.split(z, sizes))

        def noise(std, reference, generator=None, secure_mode=False):
            assert std == pytest.approx(sigma * clip)
            return std * chunks.pop(0).reshape(reference.shape)

        monkeypatch.setattr(opt_mod, "_generate_noise", noise)
        opt.zero_grad()
        ref_loss(kind, gsm(X[idx]), y[idx]).backward()
        opt.step()
        assert not chunks
    return flat(model)


def small_linear(kind, d=4, seed=3):
    return _seeded(lambda: LinearScore(d), seed)


@pytest.mark.filterwarnings("ignore:Full backward hook")
@pytest.mark.parametrize("kind", ["bce", "cox"])
def test_per_example_grads_equal_opacus_grad_samples(kind):
    """GROUP's per-sample gradients are Opacus's (incl. the Cox hook rule g_i = |b|·∂L/∂s_i·[x_i, 1])."""
    from opacus import GradSampleModule

    model = small_linear(kind)
    rng = np.random.default_rng(4)
    X, y = tensors(*make_xy(kind, 6, 4, rng))
    fm = FlatModel(model, kind)
    theta = fm.initial()
    # the engine sees the batch padded with two masked rows
    Xp = torch.cat([X, torch.randn(2, 4, dtype=DT)])
    yp = torch.cat([y, y[:2]])
    mask = torch.arange(8) < 6
    got = per_example_grads(fm, theta, Xp, yp, mask)
    gsm = GradSampleModule(copy.deepcopy(model), loss_reduction="mean").train()
    ref_loss(kind, gsm(X), y).backward()
    lin = gsm._module.linear
    want = torch.cat([lin.weight.grad_sample.reshape(6, -1), lin.bias.grad_sample.reshape(6, -1)], dim=1)
    assert torch.allclose(got[:6], want, atol=1e-10, rtol=1e-8)
    assert torch.equal(got[6:], torch.zeros_like(got[6:]))


@pytest.mark.filterwarnings("ignore:Full backward hook")
@pytest.mark.parametrize("kind", ["bce", "cox"])
@pytest.mark.parametrize("sigma", [0.0, 1.3])
def test_dp_sgd_equals_opacus_dpoptimizer(kind, sigma, monkeypatch):
    """dp_sgd = Opacus's DPOptimizer (clip at C, noise σC, / expected batch ⌊N·q⌋), same batches and noise."""
    n, batch, epochs, lr, clip = 10, 4, 2, 0.5, 0.6  # q = 1/3, 3 steps per epoch, expected batch 3
    model = small_linear(kind)
    X, y = tensors(*make_xy(kind, n, 4, np.random.default_rng(5)))
    fm = FlatModel(model, kind)
    theta = fm.initial()[None]
    b = to64(make_buckets([(X.numpy(), y.numpy())], batch, "cpu"))[0]
    got = dp_sgd(fm, theta, b, epochs=epochs, batch=batch, lr=lr, clip=clip, noise_std=sigma * clip,
                 gen=torch.Generator().manual_seed(21))[0]
    tape = {0: []}
    draw_dp(torch.Generator().manual_seed(21), [0], [n], b.mask.shape[1], epochs, batch, fm.dim, tape)
    assert len(tape[0]) == 6 and expected_batch(n, batch) == 3
    want = opacus_dp_sgd(model, kind, theta[0], X, y, tape[0], lr, clip, sigma, 3, monkeypatch)
    # Opacus clips with C/(‖g‖ + 1e-6), the engine with C/‖g‖: equal to ~1e-7
    assert torch.allclose(got, want, atol=TOL, rtol=0), (got - want).abs().max()


def test_dp_sgd_noise_std_is_sigma_c_over_expected_batch():
    """The noise on each step's update has std σC/⌊N·q⌋ (one epoch = 3 steps here, so √3 of that)."""
    n, batch, lr, clip, sigma, P = 10, 4, 1e-6, 0.7, 1.5, 3000
    model = small_linear("bce")
    X, y = make_xy("bce", n, 4, np.random.default_rng(6))
    fm = FlatModel(model, "bce")
    b = to64(make_buckets([(X, y)] * P, batch, "cpu"))[0]
    theta = fm.initial()[None].repeat(P, 1)
    runs = [dp_sgd(fm, theta, b, epochs=1, batch=batch, lr=lr, clip=clip, noise_std=s * clip,
                   gen=torch.Generator().manual_seed(8)) for s in (sigma, 0.0)]
    noise = (runs[1] - runs[0]) / lr  # = Σ_steps σC·z / 3
    want = sigma * clip * math.sqrt(3) / 3
    assert abs(noise.mean().item()) < 0.05 * want
    assert noise.std().item() == pytest.approx(want, rel=0.03)


def test_poisson_sampling_rate_is_q():
    """Each record joins a step's batch independently with probability q = 1/⌈N/B⌉ (not a fixed batch size)."""
    n, batch, lr, P = 10, 4, 1e-6, 4000
    fm = FlatModel(small_linear("bce"), "bce")
    X, y = np.zeros((n, 4)), np.zeros(n)  # every row's gradient is (0, σ(b)) = (0, 1/2) at θ = 0
    b = to64(make_buckets([(X, y)] * P, batch, "cpu"))[0]
    theta = torch.zeros((P, fm.dim), dtype=DT)
    out = dp_sgd(fm, theta, b, epochs=1, batch=batch, lr=lr, clip=1e6, noise_std=0.0,
                 gen=torch.Generator().manual_seed(9))
    taken = -out[:, -1] * 3 / (0.5 * lr)  # rows taken over the 3 steps, per pair
    assert torch.allclose(taken, taken.round(), atol=1e-3)
    q = 1 / 3
    assert (taken.mean() / (3 * n)).item() == pytest.approx(q, abs=0.01)
    assert taken.var().item() == pytest.approx(3 * n * q * (1 - q), rel=0.15)  # Binomial(30, 1/3)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("n", [10, 196, 412])
def test_expected_batch_size_is_opacus_int_n_times_q(n):
    """The divisor is Opacus's int(N·q), q = 1/⌈N/B⌉ in floats (make_private): 3, not 196/49 = 4, at N = 196."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    batch, lr = 4, 1e-6
    fm = FlatModel(small_linear("bce"), "bce")
    b = to64(make_buckets([(np.zeros((n, 4)), np.zeros(n))], batch, "cpu"))[0]
    out = dp_sgd(fm, torch.zeros((1, fm.dim), dtype=DT), b, epochs=1, batch=batch, lr=lr, clip=1e6, noise_std=0.0,
                 gen=torch.Generator().manual_seed(3))
    tape = {0: []}
    draw_dp(torch.Generator().manual_seed(3), [0], [n], b.mask.shape[1], 1, batch, fm.dim, tape)
    taken = sum(int(t.sum()) for t, _ in tape[0])
    divisor = lr * 0.5 * taken / -out[0, -1].item()  # every row's bias gradient is σ(0) = 1/2
    assert divisor == pytest.approx(round(divisor), abs=1e-3)
    model = small_linear("bce")
    _, opt, _ = PrivacyEngine().make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=lr),
                                             data_loader=DataLoader(TensorDataset(torch.zeros(n, 4)),
                                                                    batch_size=batch),
                                             noise_multiplier=1.0, max_grad_norm=1.0)
    assert round(divisor) == opt.expected_batch_size == expected_batch(n, batch)


# ------------------------------------------------------------------------------------------ 3. privacy-facing


def test_weighted_clipped_sum_clips_every_pair_to_c():
    """Every per-pair update entering the aggregate has norm ≤ C; small ones pass unchanged; non-finite send 0."""
    g = torch.Generator().manual_seed(0)
    C = 1.0
    upd = torch.randn((40, 7), generator=g, dtype=DT) * torch.logspace(-2, 2, 40, dtype=DT)[:, None]
    upd[3, 2], upd[5, 0] = math.nan, math.inf
    each = weighted_clipped_sum(upd, torch.ones(40, dtype=DT), torch.arange(40), 40, C)
    norms = torch.linalg.vector_norm(each, dim=1)
    assert (norms <= C * (1 + 1e-12)).all()
    for p in range(40):
        if p in (3, 5):
            assert torch.equal(each[p], torch.zeros(7, dtype=DT))
        else:
            assert torch.allclose(each[p], clip_ref(upd[p], C), atol=2e-6 * C, rtol=0)  # C/‖v‖ or C/(‖v‖+1e-6)
    w = torch.rand(40, generator=g, dtype=DT)
    groups = torch.arange(40) % 3
    summed = weighted_clipped_sum(upd, w, groups, 3, C)
    assert torch.allclose(summed, torch.stack([(w[:, None] * each)[groups == k].sum(0) for k in range(3)]))


def test_silo_noise_sums_to_std_sigma_c():
    """S silos each adding N(0, (σC/√S)²) give the aggregate noise std σC."""
    R, S, D, sigma, C = 40, 5, 500, 2.0, 0.3
    z = silo_noise(R, S, D, sigma * C / math.sqrt(S), torch.Generator().manual_seed(1), torch.zeros(1, dtype=DT))
    assert z.shape == (R, D)
    assert z.std().item() == pytest.approx(sigma * C, rel=0.03)
    assert abs(z.mean().item()) < 0.05 * sigma * C


@pytest.mark.parametrize("mid, want_scale", [("uldp_naive", lambda S, U: 1.0), ("uldp_avg", lambda S, U: 1 / (U * S)),
                                             ("uldp_sgd", lambda S, U: 1 / (U * S))])
def test_round_noise_std(mid, want_scale):
    """With zero updates a round's change is pure noise: std η_g·σC (NAIVE), η_g·σC/(U·S) (AVG, SGD)."""
    R, S, U, sigma, C, eta_g = 1000, 3, 4, 1.7, 0.4, 2.0
    rng = np.random.default_rng(2)
    X, y = make_xy("bce", 9, 4, rng)
    runs = [{"X": X, "y": y, "silo": np.arange(9) % S, "user": np.arange(9) % U}] * R
    method = BY_ID[mid]
    fm = FlatModel(small_linear("bce"), "bce")
    level = "silo" if method.scheme == "naive" else "user"
    fed = Federation.build(runs, S, U, level, 4, "cpu")
    to64(fed.buckets)
    if method.scheme == "sgd":  # a zero gradient: labels equal to the prediction at θ = 0
        for b in fed.buckets:
            b.X.zero_()
            b.y.fill_(0.5)
    hyper = {"eta_g": eta_g, "eta_l": 0.0, "epochs": 1, "clip": C}
    theta = torch.zeros((R, fm.dim), dtype=DT)
    out = round_rule(method, hyper_for(method, hyper), fed, fm, sigma=sigma, batch=4,
                     gen=torch.Generator().manual_seed(4))(theta)
    assert out.std().item() == pytest.approx(eta_g * sigma * C * want_scale(S, U), rel=0.05)


def sensitivity_runs():
    """1 run, 3 silos, 5 users; user 0 holds the same 2 records in every silo (so its updates align)."""
    rng = np.random.default_rng(12)
    X0 = np.array([[2.0, -1.0, 0.5, 1.0]] * 2)
    y0 = np.array([1.0, 1.0])
    Xo, yo = make_xy("bce", 18, 4, rng)
    X = np.concatenate([X0, X0, X0, Xo])
    y = np.concatenate([y0, y0, y0, yo])
    silo = np.concatenate([[0, 0, 1, 1, 2, 2], np.arange(18) % 3])
    user = np.concatenate([[0] * 6, 1 + rng.integers(0, 4, 18)])
    return {"X": X, "y": y, "silo": silo, "user": user}


def pre_noise_aggregate(method, run, hyper, S, U):
    """Σ_s Σ_u w·clip(Δ) (AVG, SGD) through the round rule at σ = 0, η_g = 1, full batches (shuffles do not matter)."""
    fed = Federation.build([run], S, U, "user", 16, "cpu")
    to64(fed.buckets)
    fm = FlatModel(small_linear("bce", seed=5), "bce")
    theta = fm.initial()[None]
    out = round_rule(method, hyper_for(method, {**hyper, "eta_g": 1.0}), fed, fm, sigma=0.0, batch=16,
                   gen=torch.Generator().manual_seed(0))(theta.clone())
    return ((theta - out) if method.scheme == "sgd" else (out - theta))[0] * U * S


def without(run, u):
    keep = run["user"] != u
    return {k: v[keep] for k, v in run.items()}


@pytest.mark.parametrize("mid", ["uldp_avg", "uldp_avg_w", "uldp_sgd"])
def test_removing_a_user_moves_the_aggregate_by_at_most_c(mid):
    """User-level sensitivity C with real local training; attained (≈ C) by a user whose clipped updates align."""
    S, U, C = 3, 5, 0.05
    hyper = {"eta_l": 0.5, "epochs": 3, "clip": C}
    method, run = BY_ID[mid], sensitivity_runs()
    full = pre_noise_aggregate(method, run, hyper, S, U)
    changes = [float(torch.linalg.vector_norm(full - pre_noise_aggregate(method, without(run, u), hyper, S, U)))
               for u in range(U)]
    assert max(changes) <= C * (1 + 1e-9), changes
    assert changes[0] == pytest.approx(C, rel=1e-5)
    assert all(0 < c < C * 0.999 for c in changes[1:]), changes  # other users: partial weight or unclipped


def test_naive_sensitivity_is_2c_not_c():
    """NAIVE's mean over silos of clip_C(Δ_s) can move by 2C when one user leaves: the method declares 2C and
    the multiplier σ/2 its noise σC actually gives."""
    m = BY_ID["uldp_naive"]
    assert m.sensitivity(0.1) == pytest.approx(0.2) and m.multiplier_used(5.0) == pytest.approx(2.5)
    for mid in ("uldp_avg", "uldp_avg_w", "uldp_avg_ws", "uldp_sgd", "uldp_group_8"):
        assert BY_ID[mid].sensitivity(0.1) == pytest.approx(0.1) and BY_ID[mid].multiplier_used(5.0) == 5.0
    # every silo: user 0 has 4 records (x = 1, y = 1), user 1 one record (x = 1, y = 0): with user 0 the silo's
    # update points along +(1, 1), without it along −(1, 1); both are clipped to C
    S, U, C = 3, 2, 0.1
    run = {"X": np.ones((15, 1)), "y": np.tile([1.0, 1, 1, 1, 0], 3), "silo": np.repeat(np.arange(S), 5),
           "user": np.tile([0, 0, 0, 0, 1], 3)}
    hyper = {"eta_l": 1.0, "epochs": 1, "clip": C}

    def agg(r):
        fed = Federation.build([r], S, U, "silo", 8, "cpu")
        to64(fed.buckets)
        fm = FlatModel(_seeded(lambda: LinearScore(1), 0), "bce")
        return round_rule(m, {**hyper, "eta_g": 1.0}, fed, fm, sigma=0.0, batch=8,
                        gen=torch.Generator().manual_seed(0))(torch.zeros((1, fm.dim), dtype=DT))[0]

    change = float(torch.linalg.vector_norm(agg(run) - agg(without(run, 0))))
    assert C < change <= 2 * C * (1 + 1e-9)
    assert change == pytest.approx(2 * C, rel=1e-5)


# ------------------------------------------------------------------------------------------ 4. ε curves


def dp_accounting_curve(event, rounds, delta):
    out = []
    for t in range(1, rounds + 1):
        acc = rdp_privacy_accountant.RdpAccountant(list(STANDARD_ORDERS),
                                                   dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
        acc.compose(event, t)
        out.append(acc.get_epsilon(delta))
    return np.array(out)


def hand_gaussian_curve(sigma, rounds, delta):
    a = np.array(STANDARD_ORDERS)
    t = np.arange(1, rounds + 1)[:, None]
    rdp = t * a / (2 * sigma**2)
    return (rdp + np.log((a - 1) / a) - (np.log(delta) + np.log(a)) / (a - 1)).min(axis=1)


def test_user_level_gaussian_curves_identical_and_match_dp_accounting_and_hand():
    """AVG/AVG-w/SGD/NAIVE (nominal) share one curve: t Gaussian steps (σ), Balle conversion, standard orders."""
    T, sigma, delta = 25, 5.0, 1e-5
    curves = {mid: epsilon_curves(BY_ID[mid], T, sigma, delta) for mid in ("uldp_avg", "uldp_avg_w", "uldp_sgd",
                                                                           "uldp_naive")}
    nominal = curves["uldp_avg"][0]
    for mid, (nom, cert) in curves.items():
        assert np.array_equal(nom, nominal), mid
        if mid != "uldp_naive":
            assert np.array_equal(cert, nominal), mid
    np.testing.assert_allclose(nominal, dp_accounting_curve(dp_accounting.GaussianDpEvent(sigma), T, delta),
                               rtol=1e-6)
    np.testing.assert_allclose(nominal, hand_gaussian_curve(sigma, T, delta), rtol=1e-6)
    assert np.all(np.diff(nominal) > 0)


def test_naive_certified_curve_is_the_nominal_curve_at_half_sigma():
    T, sigma, delta = 25, 5.0, 1e-5
    nom, cert = epsilon_curves(BY_ID["uldp_naive"], T, sigma, delta)
    np.testing.assert_array_equal(cert, epsilon_curves(BY_ID["uldp_avg"], T, sigma / 2, delta)[0])
    np.testing.assert_allclose(cert, hand_gaussian_curve(sigma / 2, T, delta), rtol=1e-6)
    assert np.all(cert > nom)


def test_avg_ws_curve_matches_poisson_subsampled_gaussian():
    """AVG-ws: t Poisson-subsampled Gaussian steps (user rate q) per round."""
    T, sigma, delta, q = 20, 5.0, 1e-5, 0.3
    nom, cert = epsilon_curves(BY_ID["uldp_avg_ws"], T, sigma, delta, q=q)
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    np.testing.assert_allclose(nom, dp_accounting_curve(event, T, delta), rtol=1e-4)
    np.testing.assert_array_equal(cert, nom)
    assert np.all(nom < epsilon_curves(BY_ID["uldp_avg_w"], T, sigma, delta)[0])


def test_group_nominal_rounds_k_down_and_certified_rounds_k_up():
    """GROUP-k: nominal at k' = 2^⌊log2 k⌋ (paper), certified at 2^⌈log2 k⌉; so nominal(5) = nominal(4) <
    certified(5) = nominal(8)."""
    m, T, sigma, delta = BY_ID["uldp_group_8"], 4, 5.0, 1e-5
    kw = {"silo_records": (20, 13, 7), "batch": 4, "epochs": 2}
    nom5, cert5 = epsilon_curves(m, T, sigma, delta, group_k=5, **kw)
    nom4, cert4 = epsilon_curves(m, T, sigma, delta, group_k=4, **kw)
    nom8, cert8 = epsilon_curves(m, T, sigma, delta, group_k=8, **kw)
    np.testing.assert_array_equal(nom5, nom4)
    np.testing.assert_array_equal(cert4, nom4)
    np.testing.assert_array_equal(cert5, nom8)
    np.testing.assert_array_equal(cert8, nom8)
    assert np.all(nom5 < cert5)
    assert np.all(np.isnan(epsilon_curves(BY_ID["default"], T, sigma, delta)[0]))


def test_cox_closed_form_gradient_is_stable_for_large_scores():
    """TCGA's covariates are not normalized: noisy models reach scores of hundreds of nats, where e^{s}/R underflows
    in linear space. The closed form (log space) equals autograd of the Cox loss there, and stays finite."""
    from dpfl.fl.gradients import cox_score_grads

    gen = torch.Generator().manual_seed(0)
    s = (torch.randn(3, 9, generator=gen, dtype=torch.float64) * 300).requires_grad_(True)
    T = torch.rand(3, 9, generator=gen, dtype=torch.float64)
    E = (torch.rand(3, 9, generator=gen) < 0.6).double()
    m = torch.rand(3, 9, generator=gen) < 0.8
    ref = torch.stack([torch.autograd.grad(cox_partial_likelihood(s[i], T[i], E[i], m[i]), s)[0][i] for i in range(3)])
    got = cox_score_grads(s.detach(), T, E, m)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
