"""kato2024's MNIST CNN (spec §3) in the engine's batched training (dpfl.fl.local: every (user, silo) pair of a round
is one row of a parameter matrix, trained by torch.func.vmap(grad(functional_call)); dropout through explicit masks
drawn from the run's generator) against plain per-pair loops with torch.autograd.grad on ordinary modules, fed the
same masks; pairs draw their own dropout; ULDP-AVG's clipped, weighted sum of pair updates (dpfl.fl.aggregate) on
the CNN's flat parameters against a loop; one full ULDP-AVG / AVG-w / SGD round
(dpfl.papers.kato2024.training.rules) against the per-silo, per-user loop of spec §4.

Randomness is replayed by re-seeding a torch.Generator and repeating the engine's draws in its order: per bucket
(pairs grouped by padded size, sizes ascending; within a bucket by record count, largest first), per epoch the
shuffle keys (only for a bucket of more than one batch), then per step the dropout masks of the pairs still holding
a batch; for ULDP-SGD one set of masks over all of a bucket's rows; after the buckets, the silo noise. The masks
are built here from the spec rather than from the model's `dropout_sites`: Dropout2d(p=1/2) after conv2, one flag
per (row, channel) broadcast over the 8×8 map, then Dropout(p=1/2) over the 50 fc1 units, each flag a
`keep_mask` bit scaled by 2. Everything runs in float64 (the pixels are float32-exact: make_buckets stores X as
float32).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from dpfl.fl.aggregate import pair_weights, weighted_clipped_sum
from dpfl.fl.buckets import make_buckets
from dpfl.fl.flat_model import FlatModel, keep_mask
from dpfl.fl.local import local_sgd
from dpfl.models.nets import MnistCNN, build_model
from dpfl.papers.kato2024.methods import BY_ID
from dpfl.papers.kato2024.federation import Federation
from dpfl.papers.kato2024.training.rules import round_rule
from reference_aggregate import silo_messages

DT = torch.float64
TOL = 1e-10  # float64 throughout: batched and looped arithmetic agree to rounding
SEED = 0  # build_model("mnist_cnn", SEED)


# ------------------------------------------------------------------------------------------ data and layout


def images(n, rng):
    """n normalized 28×28 images (float32-exact values) and labels 0..9."""
    X = ((rng.random((n, 28, 28)) - 0.13) / 0.31).astype(np.float32).astype(np.float64)
    return X, rng.integers(0, 10, n).astype(np.int64)


def to64(buckets):
    for b in buckets:
        b.X = b.X.to(DT)
    return buckets


def padded(n, batch):
    return math.ceil(n / batch) * batch if n > batch else min(batch, 1 << (n - 1).bit_length())


def layout(counts, batch, single=False):
    """The documented buckets: pairs grouped by padded size (sizes ascending; `single`: one bucket padded to the
    largest pair), within a bucket by record count, largest first (stable)."""
    counts = np.asarray(counts)
    pads = np.array([padded(int(n), batch) for n in counts])
    if single:
        pads = np.full(len(pads), pads.max())
    return [(idx[np.argsort(-counts[idx], kind="stable")].tolist(), int(s))
            for s in sorted(set(pads.tolist())) for idx in [np.flatnonzero(pads == s)]]


def assert_layout(buckets, lay):
    assert [(b.pairs.tolist(), b.mask.shape[1]) for b in buckets] == lay


# ------------------------------------------------------------------------------------------ plain references


def draw_masks(gen, pairs, rows):
    """The dropout masks of one step for `pairs` pairs of `rows` rows each, in the engine's order (spec §3)."""
    return [keep_mask((pairs, rows, 20, 1, 1), 0.5, gen, "cpu").to(DT) * 2.0,  # Dropout2d: whole channels
            keep_mask((pairs, rows, 50), 0.5, gen, "cpu").to(DT) * 2.0]  # Dropout


def module_at(template, theta):
    m = copy.deepcopy(template)
    vector_to_parameters(theta.detach().clone(), m.parameters())
    return m


def flat_grad(loss, m):
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(m.parameters()))])


def ref_local_sgd(template, starts, recs, pairs, n_pad, *, epochs, batch, lr, gen, shift=0):
    """One bucket's pairs trained one at a time: per epoch a shuffle (if the bucket holds more than one batch), per
    step a batch of B rows (the last one ragged), the mean NLL of `model(x, masks)` with the pair's own masks, a
    step θ ← θ − η·∇ by torch.autograd.grad. `shift`: a deliberately wrong reference that feeds each pair the masks
    of the next active pair. Returns {pair: θ after training}."""
    counts = [len(recs[p][1]) for p in pairs]
    width, n_steps = min(batch, n_pad), max(1, math.ceil(n_pad / batch))
    models = {p: module_at(template, starts[p]) for p in pairs}
    data = {p: (torch.as_tensor(recs[p][0], dtype=DT), torch.as_tensor(recs[p][1])) for p in pairs}
    for _ in range(epochs):
        if n_pad > batch:
            keys = torch.rand((len(pairs), n_pad), generator=gen)
            perms = [torch.argsort(keys[i, :n]) for i, n in enumerate(counts)]
        else:  # one batch per epoch: the rows in their order, no draw
            perms = [torch.arange(n) for n in counts]
        for j in range(n_steps):
            live = [i for i, n in enumerate(counts) if j == 0 or n > j * batch]
            assert live == list(range(len(live)))  # the pairs holding a batch are a prefix of the bucket
            masks = draw_masks(gen, len(live), width)
            for i in live:
                m, (X, y) = models[pairs[i]], data[pairs[i]]
                idx = perms[i][j * batch: (j + 1) * batch]
                k = (i + shift) % len(live)
                loss = F.nll_loss(m(X[idx], [mk[k, : len(idx)] for mk in masks]), y[idx])
                grads = torch.autograd.grad(loss, list(m.parameters()))
                with torch.no_grad():
                    for t, g in zip(m.parameters(), grads):
                        t.sub_(lr * g)
    return {p: parameters_to_vector(models[p].parameters()).detach() for p in pairs}


def ref_mean_grads(template, starts, recs, pairs, n_pad, gen):
    """ULDP-SGD's per-pair gradient of the mean NLL over all the pair's records, one set of masks per bucket (rows in
    the pair's order)."""
    masks = draw_masks(gen, len(pairs), n_pad)
    out = {}
    for i, p in enumerate(pairs):
        X, y = torch.as_tensor(recs[p][0], dtype=DT), torch.as_tensor(recs[p][1])
        m = module_at(template, starts[p])
        out[p] = flat_grad(F.nll_loss(m(X, [mk[i, : len(X)] for mk in masks]), y), m)
    return out


def clip_ref(v, c):
    n = float(torch.linalg.vector_norm(v))
    return v * min(1.0, c / n) if n > 0 else v


def cnn(seed=SEED):
    template = build_model("mnist_cnn", seed, dtype=DT)
    return template, FlatModel(template, "nll")


# ------------------------------------------------------------------------------------------ 1. local training

SIZES = [11, 10, 6, 3, 2]  # B = 4: 11 and 10 take 3 steps per epoch (ragged last batch), 6 two, 3 and 2 one
BATCH = 4


@pytest.mark.parametrize("single", [False, True], ids=["user-level buckets", "one silo-level bucket"])
def test_local_sgd_equals_a_per_pair_autograd_loop_with_the_same_dropout_masks(single):
    """Q = 2 epochs of minibatch SGD, every pair its own start: the engine's vmap over pairs equals the loop pair by
    pair (user-level buckets: two pairs of 3 steps per epoch side by side, a pair of one padded batch; one silo-level
    bucket padded to 12 rows: pairs leave the active prefix after their last batch, 5 → 3 → 2 pairs)."""
    epochs, lr = 2, 0.1
    template, fm = cnn()
    rng = np.random.default_rng(1)
    recs = [images(n, rng) for n in SIZES]
    buckets = to64(make_buckets(recs, BATCH, "cpu", single=single))
    lay = layout(SIZES, BATCH, single)
    assert_layout(buckets, lay)
    assert any(len(b.pairs) > 1 for b in buckets)
    g = torch.Generator().manual_seed(2)
    theta = fm.initial()[None] + 0.02 * torch.randn((len(SIZES), fm.dim), generator=g, dtype=DT)
    out = torch.empty_like(theta)
    gen = torch.Generator().manual_seed(7)
    for b in buckets:
        out[b.pairs] = local_sgd(fm, theta[b.pairs], b, epochs=epochs, batch=BATCH, lr=lr, gen=gen)

    def reference(shift):
        ref = torch.Generator().manual_seed(7)
        want = {}
        for pairs, n_pad in lay:
            want.update(ref_local_sgd(template, theta, recs, pairs, n_pad, epochs=epochs, batch=BATCH, lr=lr,
                                      gen=ref, shift=shift))
        return torch.stack([want[p] for p in range(len(SIZES))]), ref

    want, ref = reference(0)
    assert torch.equal(torch.rand(3, generator=gen), torch.rand(3, generator=ref))  # the same number of draws
    delta, want_delta = out - theta, want - theta
    assert (delta.norm(dim=1) > 1e-2).all()  # every pair moved
    assert torch.allclose(delta, want_delta, atol=TOL, rtol=0), (delta - want_delta).abs().max()
    # the comparison sees the masks: feeding each pair its neighbour's masks misses by far more than TOL
    wrong, _ = reference(1)
    assert (wrong - want).abs().max() > 1e-4


# ------------------------------------------------------------------------------------------ 2. per-pair dropout


class NoSites(MnistCNN):
    """The CNN without `dropout_sites`: the engine passes no masks and the module's own nn.Dropout layers apply."""

    dropout_sites = None


def test_each_pair_draws_its_own_dropout():
    """Pairs 0 and 1 hold the same 4 images (one unshuffled batch per epoch) and start from the same model: with
    dropout on they end apart (their masks differ: randomness "different"); with every mask 1 (p = 0), or with no
    masks at all (the module in eval mode, which local_sgd sets even on a module left in train mode) they end
    equal, and both ways agree."""
    template, fm = cnn()
    rng = np.random.default_rng(3)
    X, y = images(4, rng)
    recs = [(X, y), (X, y), images(4, rng)]
    b = to64(make_buckets(recs, 4, "cpu"))[0]
    assert b.pairs.tolist() == [0, 1, 2] and b.mask.shape == (3, 4)
    theta = fm.initial()[None].repeat(3, 1)

    def train(module):
        return local_sgd(FlatModel(module, "nll"), theta, b, epochs=2, batch=4, lr=0.1,
                         gen=torch.Generator().manual_seed(4)) - theta

    dropped = train(template)
    assert (dropped.norm(dim=1) > 1e-2).all()
    assert (dropped[0] - dropped[1]).abs().max() > 1e-4
    # each pair got exactly its own masks (the reference with the replayed draws, pair by pair)
    want = ref_local_sgd(template, theta, recs, [0, 1, 2], 4, epochs=2, batch=4, lr=0.1,
                         gen=torch.Generator().manual_seed(4))
    for p in range(3):
        assert torch.allclose(dropped[p], want[p] - theta[p], atol=TOL, rtol=0), p

    ones = copy.deepcopy(template)
    ones.drop2d.p, ones.drop.p = 0.0, 0.0
    kept = train(ones)
    assert torch.allclose(kept[0], kept[1], atol=1e-13, rtol=0)
    assert (kept[0] - kept[2]).abs().max() > 1e-4 and (kept[0] - dropped[0]).abs().max() > 1e-4

    plain = NoSites().to(DT)
    plain.load_state_dict(template.state_dict())
    plain.train()
    no_masks = train(plain)
    assert not plain.training
    assert torch.allclose(no_masks, kept, atol=1e-13, rtol=0)


# ------------------------------------------------------------------------------------------ 3. clipped weighted sum


def test_weighted_clipped_sum_of_cnn_updates_equals_a_loop():
    """ULDP-AVG's aggregate Σ_u w_{s,u}·min(1, C/‖Δ_{s,u}‖)·Δ_{s,u} per silo, on the CNN's flat (21,840) parameter
    updates of local training: the pair-list form (weighted_clipped_sum), the dense (S, U) form with the silo noise
    (silo_messages), both weightings (avg 1/S, avg_w n_{s,u}/n_u), C between the updates' norms so both sides of
    the clip occur, and a pair whose update is NaN (it sends nothing)."""
    S, U, batch = 2, 3, 4
    # (silo, user, records): user 0 in both silos, user 1 only in silo 1, user 2 in both
    pairs = [(0, 0, 6), (0, 2, 3), (1, 0, 2), (1, 1, 5), (1, 2, 1)]
    template, fm = cnn()
    rng = np.random.default_rng(5)
    recs = [images(n, rng) for *_, n in pairs]
    buckets = to64(make_buckets(recs, batch, "cpu"))
    theta = fm.initial()[None].repeat(len(pairs), 1)
    delta = torch.empty_like(theta)
    gen = torch.Generator().manual_seed(6)
    for b in buckets:
        delta[b.pairs] = local_sgd(fm, theta[b.pairs], b, epochs=2, batch=batch, lr=0.1, gen=gen) - theta[b.pairs]
    assert fm.dim == 21840
    norms = delta.norm(dim=1)
    C = float(norms.median())
    assert (norms > C).sum() == 2 and (norms < C).sum() == 2
    silo = torch.tensor([s for s, _, _ in pairs])
    counts = np.array([n for *_, n in pairs])
    n_u = np.bincount([u for _, u, _ in pairs], weights=counts, minlength=U)
    for kind in ("avg", "avg_w"):
        hand = [1.0 / S if kind == "avg" else n / n_u[u] for _, u, n in pairs]
        w = torch.as_tensor(pair_weights(counts, n_u[[u for _, u, _ in pairs]], S, kind), dtype=DT)
        assert torch.allclose(w, torch.tensor(hand, dtype=DT), atol=1e-15, rtol=0)
        for bad in (None, 3):
            upd = delta.clone()
            if bad is not None:
                upd[bad, 17] = math.nan
            want = torch.zeros((S, fm.dim), dtype=DT)
            for p, (s, _, _) in enumerate(pairs):
                if p != bad:
                    want[s] += w[p] * clip_ref(upd[p], C)
            got = weighted_clipped_sum(upd, w, silo, S, C)
            assert torch.allclose(got, want, atol=1e-14, rtol=1e-12), (kind, bad)
            # dense (S, U) layout, absent pairs zero, with the silo's noise N(0, (σC/√S)²)
            dense, dw = torch.zeros((S, U, fm.dim), dtype=DT), torch.zeros((S, U), dtype=DT)
            for p, (s, u, _) in enumerate(pairs):
                dense[s, u], dw[s, u] = upd[p], w[p]
            sigma = 0.8
            z = torch.randn((S, fm.dim), generator=torch.Generator().manual_seed(8), dtype=DT)
            msg = silo_messages(dense, dw, C, sigma, z)
            assert torch.allclose(msg, want + sigma * C / math.sqrt(S) * z, atol=1e-14, rtol=1e-12), (kind, bad)
    # one pair alone: its clipped update has norm min(‖Δ‖, C)
    each = weighted_clipped_sum(delta, torch.ones(len(pairs), dtype=DT), torch.arange(len(pairs)), len(pairs), C)
    assert torch.allclose(each.norm(dim=1), norms.clamp(max=C), atol=1e-14, rtol=1e-12)


# ------------------------------------------------------------------------------------------ 4. one ULDP round

S_, U_, R_ = 2, 3, 2
CELLS = {(0, 0): 9, (0, 1): 3, (0, 2): 1, (1, 0): 5, (1, 1): 4, (1, 2): 2}  # B = 4: pads 12, 4, 1, 8, 4, 2


def round_runs():
    """R runs of the same (silo, user) record counts, in a shuffled local order, different images."""
    rng = np.random.default_rng(9)
    runs = []
    for _ in range(R_):
        cells = np.array([c for c, n in CELLS.items() for _ in range(n)])[rng.permutation(sum(CELLS.values()))]
        X, y = images(len(cells), rng)
        runs.append({"X": X, "y": y, "silo": cells[:, 0], "user": cells[:, 1]})
    return runs


@pytest.mark.parametrize("mid", ["uldp_avg", "uldp_avg_w", "uldp_sgd"])
def test_uldp_round_on_the_cnn_equals_the_per_silo_per_user_loop(mid):
    """θ ← θ + η_g/(U·S)·(Σ_{s,u} w_{s,u}·clip_C(Δ_{s,u}) + Σ_s N(0, (σC/√S)²)) (AVG: Δ = Q epochs of local SGD;
    SGD: θ − …, Δ = the mean gradient) for 2 runs of 2 silos × 3 users, as a loop over runs, silos and users."""
    method, batch, sigma = BY_ID[mid], 4, 0.5
    hyper = {"eta_g": 5.0, "eta_l": 0.1, "epochs": 2}
    template, fm = cnn()
    runs = round_runs()
    fed = Federation.build(runs, S_, U_, "user", batch, "cpu")
    to64(fed.buckets)
    # the pair list (run, silo, user) in key order, each pair's records in the silo's local order
    meta = [(r, s, u) for r in range(R_) for (s, u) in sorted(CELLS)]
    assert list(zip(fed.run.tolist(), fed.silo.tolist(), fed.user.tolist())) == meta
    recs = []
    for r, s, u in meta:
        idx = np.flatnonzero((runs[r]["silo"] == s) & (runs[r]["user"] == u))
        recs.append((runs[r]["X"][idx], runs[r]["y"][idx]))
    counts = [len(y) for _, y in recs]
    lay = layout(counts, batch)
    assert_layout(fed.buckets, lay)
    g = torch.Generator().manual_seed(10)
    theta = fm.initial()[None] + 0.02 * torch.randn((R_, fm.dim), generator=g, dtype=DT)
    starts = theta[[r for r, _, _ in meta]]

    # reference: every pair's update with the replayed draws, then the silo noise
    ref = torch.Generator().manual_seed(11)
    upd = {}
    for pairs, n_pad in lay:
        if method.scheme == "sgd":
            upd.update(ref_mean_grads(template, starts, recs, pairs, n_pad, ref))
        else:
            trained = ref_local_sgd(template, starts, recs, pairs, n_pad, epochs=hyper["epochs"], batch=batch,
                                    lr=hyper["eta_l"], gen=ref)
            upd.update({p: v - starts[p] for p, v in trained.items()})
    z = torch.randn((R_, S_, fm.dim), generator=ref, dtype=DT)
    norms = [float(upd[p].norm()) for p in range(len(meta))]
    C = float(np.median(norms))  # both sides of the clip
    hyper["clip"] = C
    want = torch.empty_like(theta)
    for r in range(R_):
        n_u = np.bincount(runs[r]["user"], minlength=U_)
        total = sigma * C / math.sqrt(S_) * z[r].sum(0)
        for p, (rr, s, u) in enumerate(meta):
            if rr == r:
                w = 1.0 / S_ if method.weighting == "avg" else counts[p] / n_u[u]
                total = total + w * clip_ref(upd[p], C)
        scale = hyper["eta_g"] / (U_ * S_)
        want[r] = theta[r] - scale * total if method.scheme == "sgd" else theta[r] + scale * total

    gen = torch.Generator().manual_seed(11)
    block = hyper if method.scheme == "avg" else {"eta_g": hyper["eta_g"], "clip": C}  # SGD: no local training
    got = round_rule(method, block, fed, fm, sigma=sigma, batch=batch, gen=gen)(theta.clone())
    assert torch.equal(torch.rand(3, generator=gen), torch.rand(3, generator=ref))  # the same number of draws
    assert torch.allclose(got - theta, want - theta, atol=TOL, rtol=0), (got - want).abs().max()
    assert (got - theta).abs().max() > 1e-3
