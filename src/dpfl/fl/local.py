"""Local training of many model copies at once: every (run, silo, user) pair of a round is one row of a parameter
matrix θ (P, D), trained on its own padded, masked records. No per-pair module copies and no Python loop over
pairs: one batched step per minibatch position. How gradients are computed is the model's `GradientPath`, chosen once
when its FlatModel is built: `GenericPath` (`torch.func`: `functional_call` + `grad` + `vmap`), `LinearPath` (closed
forms for a single linear score: Heart, TCGA) or `MlpPath` (a hand-written batched pass for Sequential MLPs:
Creditcard), the fast paths checked against the generic one in the tests.

- `FlatModel`: a torch module seen as a function of one flat parameter vector, with its loss (`ce`, `nll`, `bce`
  or the batch-coupled `cox`). Loss = mean over the valid (masked-in) rows of a batch.
- `Buckets`: pairs grouped by padded size (n ≤ B: the next power of two; n > B: whole batches), so padding costs
  at most 2×; within a bucket the pairs are ordered by size, and a step only touches those that still have a
  batch (`active_pairs`).
- `local_sgd`: Q epochs of shuffled minibatch SGD (batch B, lr η) for every pair (torch DataLoader semantics: the
  last batch of an epoch holds the remainder); returns θ_pair after training.
- `mean_grads`: each pair's gradient of its mean loss over all its records (ULDP-SGD).
- `dp_sgd`: Opacus-semantics DP-SGD for every pair (record level): Poisson sampling at rate q, per-example
  gradients clipped at C (one norm over all parameters), N(0, σ²C²) on the sum, divided by the expected batch size.
All randomness (shuffles, Poisson draws, dropout masks, noise) comes from one `torch.Generator` seeded by the
caller; the module stays in eval mode and dropout is applied through explicit masks (dpfl.models.nets).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from dpfl.fl.aggregate import clip_factor, clip_updates, weighted_clipped_sum
from dpfl.models.metrics import cox_partial_likelihood

LOSSES = ("ce", "nll", "bce", "cox")


def keep_mask(shape: tuple, p: float, gen: torch.Generator, device) -> torch.Tensor:
    """Bernoulli(1 − p) keep flags. For p = 1/2 (the dropout of the kato2024 models) each flag is one bit of a
    uniform 62-bit integer: 62 fair coins per draw, ~4× cheaper than a uniform float per flag compared with p."""
    if p != 0.5:
        return torch.rand(shape, generator=gen, device=device) >= p
    n = math.prod(shape)
    words = torch.randint(0, 2**62, (-(-n // 62),), generator=gen, device=device)
    bits = torch.bitwise_and(words[:, None], 1 << torch.arange(62, device=device)) != 0
    return bits.reshape(-1)[:n].reshape(shape)


class FlatModel:
    """A module as f(θ, X) for a flat θ (D,). `loss`: ce (logits, int labels), nll (log-probabilities), bce
    (one logit, 0/1 labels), cox (one risk score, y = (T, E) in the last axis; the loss couples a batch's rows), or
    any function (outputs, y) -> per-row losses (e.g. a GLM's `example_loss_t`).

    `path`: how its outputs and gradients are computed, chosen once here (`GradientPath`): "auto" picks `LinearPath`
    for a single linear score, `MlpPath` for a plain Sequential MLP with a ce/nll loss, else `GenericPath`;
    "generic" forces `GenericPath` (the reference the fast paths are tested against)."""

    def __init__(self, module: torch.nn.Module, loss, path: str = "auto"):
        if not callable(loss) and loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; known: {', '.join(LOSSES)} or a function (outputs, y) -> rows")
        if path not in ("auto", "generic"):
            raise ValueError(f"unknown gradient path {path!r}; expected auto or generic")
        self.module, self.loss = module, loss
        params = dict(module.named_parameters())
        self.names = list(params)
        self.shapes = [p.shape for p in params.values()]
        self.sizes = [p.numel() for p in params.values()]
        self.dim = sum(self.sizes)
        self.buffers = dict(module.named_buffers())
        # a single linear score x·w + b (Heart, TCGA): computed directly, without the module machinery (most of
        # the cost of a step on such a small model is per-op overhead)
        self.linear = self.names == ["linear.weight", "linear.bias"] and self.shapes[0][0] == 1
        self.mlp = mlp_layers(module) if loss in ("ce", "nll") else None
        if path == "generic" or not (self.linear or self.mlp is not None):
            self.path: GradientPath = GenericPath(self)
        else:
            self.path = LinearPath(self) if self.linear else MlpPath(self)

    @property
    def coupled(self) -> bool:
        """Whether a row's loss depends on the other rows of its batch (Cox)."""
        return self.loss == "cox"

    def initial(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def unflatten(self, theta: torch.Tensor) -> dict:
        return {n: t.reshape(s) for n, t, s in zip(self.names, torch.split(theta, self.sizes), self.shapes)}

    def forward(self, theta: torch.Tensor, X: torch.Tensor, masks=None) -> torch.Tensor:
        return self.apply(self.unflatten(theta), X, masks)

    def apply(self, params: dict, X: torch.Tensor, masks=None) -> torch.Tensor:
        """The module's output for parameters given as a dict."""
        return self.path.apply(params, X, masks)

    def draw_masks(self, shape: tuple, gen: torch.Generator, device) -> list | None:
        """Inverted-dropout masks (0 or 1/(1−p)) for inputs of batch shape `shape` (e.g. (pairs, rows)): one per
        dropout site of the module; None for a model without dropout."""
        sites = getattr(self.module, "dropout_sites", None)
        if sites is None:
            return None
        return [keep_mask((*shape[:-1], *site_shape), p, gen, device).to(torch.get_default_dtype()) / (1.0 - p)
                for site_shape, p in sites(shape[-1])]

    def row_losses(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-row losses of a non-coupled loss."""
        if callable(self.loss):
            return self.loss(out, y)
        if self.loss == "ce":
            return F.cross_entropy(out, y.long(), reduction="none")
        if self.loss == "nll":
            return F.nll_loss(out, y.long(), reduction="none")
        if self.loss == "bce":
            return F.binary_cross_entropy_with_logits(out, y.to(out.dtype), reduction="none")
        raise ValueError("the Cox loss has no per-row losses")

    def batch_loss_from_outputs(self, out: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean loss over the valid rows (0 for a batch without any)."""
        count = mask.sum().clamp(min=1).to(out.dtype)
        if self.loss == "cox":
            return cox_partial_likelihood(out, y[..., 0], y[..., 1], mask)
        return torch.where(mask, self.row_losses(out, y), torch.zeros((), dtype=out.dtype)).sum() / count

    def batch_loss(self, theta, X, y, mask, masks=None) -> torch.Tensor:
        return self.batch_loss_params(self.unflatten(theta), X, y, mask, masks)

    def batch_loss_params(self, params: dict, X, y, mask, masks=None) -> torch.Tensor:
        """`batch_loss` with the parameters as a dict of tensors (no flattening in the hot loop)."""
        return self.batch_loss_from_outputs(self.apply(params, X, masks), y, mask)

    def split(self, theta: torch.Tensor) -> dict:
        """(P, D) flat rows -> {name: (P, *shape)} contiguous copies."""
        return {n: t.reshape(theta.shape[0], *s).clone()
                for n, t, s in zip(self.names, torch.split(theta, self.sizes, dim=1), self.shapes)}

    def views(self, theta: torch.Tensor) -> dict:
        """(P, D) flat rows -> {name: (P, *shape)} views (no copies)."""
        return {n: t.reshape(theta.shape[0], *s)
                for n, t, s in zip(self.names, torch.split(theta, self.sizes, dim=1), self.shapes)}

    def join(self, params: dict) -> torch.Tensor:
        """{name: (P, *shape)} -> (P, D)."""
        return torch.cat([params[n].reshape(params[n].shape[0], -1) for n in self.names], dim=1)


def cox_score_grads(score, time, event, mask) -> torch.Tensor:
    """∂L/∂s of the masked Cox loss (dpfl.models.metrics.cox_partial_likelihood), batched over pairs (P, b), in closed form: with rows sorted by T descending and
    R_i = Σ_{j≤i} e^{s_j}, ∂L/∂s_k = −(1/|b|)·(E_k − Σ_{i≥k} E_i·e^{s_k}/R_i), evaluated in log space (the scores
    of an unnormalized Cox model can span hundreds of nats)."""
    key = torch.where(mask, time, torch.full_like(time, -math.inf))
    order = torch.argsort(key, dim=1, descending=True, stable=True)
    s, e, m = (torch.gather(t, 1, order) for t in (score, event.to(score.dtype), mask))
    minus_inf = torch.full_like(s, -math.inf)
    log_risk = torch.logcumsumexp(torch.where(m, s, minus_inf), dim=1)
    w = torch.where(m & (e > 0), -log_risk, minus_inf)  # log(E_i / R_i) for the events
    log_tail = torch.flip(torch.logcumsumexp(torch.flip(w, [1]), dim=1), [1])
    share = torch.where(m, torch.exp(torch.where(m, s, torch.zeros_like(s)) + log_tail), torch.zeros_like(s))
    n = m.sum(dim=1, keepdim=True).clamp(min=1).to(score.dtype)
    g = torch.where(m, -(e - share) / n, torch.zeros_like(s))
    return torch.zeros_like(g).scatter_(1, order, g)


# ------------------------------------------------------------------------------------------ linear models
# A single linear score s = x·w + b (Heart's logistic regression, TCGA's Cox score): gradients in closed form,
# batched over pairs with a handful of tensor ops per step (the generic vmap(grad) path costs ~10× more per step).


def _linear_scores(theta: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    return torch.einsum("pbd,pd->pb", X, theta[:, :-1]) + theta[:, -1:]


def _score_grads(fm: "FlatModel", out, y, mask, per_example: bool) -> torch.Tensor:
    """∂/∂s per row: of the masked-mean batch loss, or (per_example) Opacus's per-sample derivative: the row's own
    loss (BCE) or |b|·∂L_batch/∂s_i (Cox)."""
    count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(out.dtype)
    if fm.loss == "bce":
        r = torch.where(mask, torch.sigmoid(out) - y.to(out.dtype), torch.zeros_like(out))
        return r if per_example else r / count
    if fm.loss == "cox":
        d = cox_score_grads(out, y[..., 0], y[..., 1], mask)
        return d * count if per_example else d
    raise ValueError(f"no closed form for loss {fm.loss!r}")


def _linear_mean_grads(fm, theta, X, y, mask) -> torch.Tensor:
    r = _score_grads(fm, _linear_scores(theta, X), y, mask, per_example=False)
    return torch.cat([torch.einsum("pb,pbd->pd", r, X), r.sum(dim=1, keepdim=True)], dim=1)


def _linear_clipped_sum(fm, theta, X, y, mask, clip) -> torch.Tensor:
    """Σ_i clip_C(g_i) over the valid rows, g_i = r_i·[x_i, 1], ‖g_i‖ = |r_i|·sqrt(‖x_i‖² + 1)."""
    r = _score_grads(fm, _linear_scores(theta, X), y, mask, per_example=True)
    norms = r.abs() * torch.sqrt((X * X).sum(dim=-1) + 1.0)
    coef = r * clip_factor(norms, clip)
    return torch.cat([torch.einsum("pb,pbd->pd", coef, X), coef.sum(dim=1, keepdim=True)], dim=1)


# ------------------------------------------------------------------------------------------ plain MLPs
# An nn.Sequential of Linear / ReLU / GroupNorm(1, C) / Dropout layers (the Creditcard MLP), run batched over pairs
# with explicit tensor ops (baddbmm) and a hand-written backward pass: autograd's bookkeeping, the gradient tensors
# and a separate update pass cost more than the arithmetic at these sizes (30 units, a few rows per pair), so local
# SGD updates each layer in place (W ← W − η·bᵀa, one baddbmm) as soon as its input gradient has been computed.
# Per-example gradients (DP-SGD) use the activations a and the per-row output gradients b (as Opacus's hooks do):
# a linear layer's per-row weight gradient is b_i a_iᵀ, with norm ‖b_i‖·‖a_i‖, and the clipped sum Σ_i c_i b_i a_iᵀ
# is one batched product; no per-example tensors. Checked against autograd and plain loops in tests.


def mlp_layers(module) -> list | None:
    """[(kind, parameter prefix, layer)] when the module is such a Sequential (directly or as `.net`), else None."""
    from torch import nn

    seq = module if isinstance(module, nn.Sequential) else getattr(module, "net", None)
    if not isinstance(seq, nn.Sequential) or (seq is not module and set(dict(module.named_children())) != {"net"}):
        return None
    prefix = "" if seq is module else "net."
    out = []
    for i, layer in enumerate(seq):
        kind = {nn.Linear: "linear", nn.ReLU: "relu", nn.Dropout: "dropout"}.get(type(layer))
        if isinstance(layer, nn.GroupNorm) and layer.num_groups == 1 and layer.affine:
            kind = "groupnorm"
        if kind is None:
            return None
        out.append((kind, f"{prefix}{i}.", layer))
    return out


def _mlp_forward(fm: "FlatModel", params: dict, X: torch.Tensor, masks, keep: bool = False):
    """Logits (P, n, K) of every pair; with keep, also the tape the backward pass reads (layer inputs, ReLU
    outputs, normalized activations and statistics, dropout masks)."""
    x, site, tape = X, 0, []
    for kind, pre, layer in fm.mlp:
        if kind == "linear":
            if keep:
                tape.append(("linear", pre, x))
            x = torch.baddbmm(params[pre + "bias"][:, None, :], x, params[pre + "weight"].transpose(1, 2))
        elif kind == "relu":
            x = torch.relu(x) if x is X else torch.relu_(x)  # in place on a fresh activation
            if keep:
                tape.append(("relu", pre, x))
        elif kind == "groupnorm":  # GroupNorm(1, C) of a (rows, C) input = layer norm over C, then the affine map
            # two-pass statistics by hand: ~40% faster than native_layer_norm on (pairs, rows, 30) inputs
            mean = x.mean(-1, keepdim=True)
            xhat = x - mean
            rstd = (xhat * xhat).mean(-1, keepdim=True).add_(layer.eps).rsqrt_()
            xhat.mul_(rstd)
            if keep:
                tape.append(("groupnorm", pre, (x, xhat, mean, rstd)))
            x = torch.addcmul(params[pre + "bias"][:, None, :], xhat, params[pre + "weight"][:, None, :])
        elif kind == "dropout":
            if masks is not None:
                x = x * masks[site] if x is X else x.mul_(masks[site])  # (a ReLU output on the tape may be
                # scaled in place: masks are ≥ 0, so its sign pattern, all the backward pass reads, only changes
                # where the mask, applied to the gradient first, is 0)
                if keep:
                    tape.append(("dropout", pre, masks[site]))
            site += 1
    return (x, tape) if keep else x


def _mlp_output_grads(fm, logits, y, weight):
    """∂(Σ_i weight_i·loss_i)/∂logits (P, n, K); loss ce (softmax cross-entropy) or nll (outputs are log-probs)."""
    onehot = F.one_hot(y.long(), logits.shape[-1]).to(logits.dtype)
    d = torch.softmax(logits, dim=-1) - onehot if fm.loss == "ce" else -onehot
    return d.mul_(weight[..., None])


def _mlp_backward(fm, params: dict, tape: list, b: torch.Tensor):
    """Yields (kind, prefix, a, b) for each parameterized layer from the top down: a = the layer's input (linear)
    or normalized activations (group norm), b = ∂loss/∂(layer output) per row. A layer's input gradient is computed
    before it is yielded, so the caller may update that layer's parameters in place."""
    lowest = min(i for i, (kind, _, _) in enumerate(tape) if kind in ("linear", "groupnorm"))
    for i in range(len(tape) - 1, lowest - 1, -1):  # nothing below the lowest parameterized layer needs a gradient
        kind, pre, saved = tape[i]
        if kind == "dropout":
            b = b * saved
        elif kind == "relu":
            b = torch.ops.aten.threshold_backward(b, saved, 0)
        elif kind == "groupnorm":
            x, xhat, mean, rstd = saved
            dxhat = b * params[pre + "weight"][:, None, :]
            yield "groupnorm", pre, xhat, b
            if i == lowest:
                return
            b = torch.ops.aten.native_layer_norm_backward(dxhat, x, x.shape[-1:], mean, rstd, None, None,
                                                          [True, False, False])[0]
        else:
            below = None if i == lowest else torch.bmm(b, params[pre + "weight"])
            yield "linear", pre, saved, b
            b = below


def _mlp_param_grads(kind, a, b):
    """(weight, bias) gradients of one layer summed over rows, from its tape entry."""
    if kind == "linear":
        return torch.bmm(b.transpose(1, 2), a), b.sum(1)
    return (b * a).sum(1), b.sum(1)


def _row_weights(mask, dtype, mean: bool):
    w = mask.to(dtype)
    return w / mask.sum(dim=1, keepdim=True).clamp(min=1).to(dtype) if mean else w


def _mlp_mean_grads(fm, params: dict, X, y, mask, masks) -> dict:
    """Each pair's gradient of its masked-mean loss."""
    logits, tape = _mlp_forward(fm, params, X, masks, keep=True)
    out = {}
    for kind, pre, a, b in _mlp_backward(fm, params, tape, _mlp_output_grads(fm, logits, y, _row_weights(mask, logits.dtype, True))):
        out[pre + "weight"], out[pre + "bias"] = _mlp_param_grads(kind, a, b)
    return out


def _mlp_sgd_step(fm, params: dict, X, y, mask, masks, lr: float) -> None:
    """One SGD step on each pair's masked-mean loss, the parameters updated in place layer by layer."""
    logits, tape = _mlp_forward(fm, params, X, masks, keep=True)
    for kind, pre, a, b in _mlp_backward(fm, params, tape, _mlp_output_grads(fm, logits, y, _row_weights(mask, logits.dtype, True))):
        w = params[pre + "weight"]
        if kind == "linear":
            w.baddbmm_(b.transpose(1, 2), a, alpha=-lr)
        else:
            w.sub_((b * a).sum(1), alpha=lr)
        params[pre + "bias"].sub_(b.sum(1), alpha=lr)


def _mlp_clipped_sum(fm, params: dict, X, y, mask, masks, clip: float) -> dict:
    """Σ_i clip_C(g_i) over each pair's valid rows, g_i the gradient of row i's own loss (all parameters jointly)."""
    logits, tape = _mlp_forward(fm, params, X, masks, keep=True)
    layers = list(_mlp_backward(fm, params, tape, _mlp_output_grads(fm, logits, y, _row_weights(mask, logits.dtype, False))))
    sq = torch.zeros(mask.shape, dtype=logits.dtype, device=X.device)
    for kind, _, a, b in layers:
        if kind == "linear":  # weight b aᵀ and bias b
            sq = sq + (b * b).sum(-1) * ((a * a).sum(-1) + 1.0)
        else:  # group-norm affine: weight b ⊙ x̂, bias b
            sq = sq + (b * b * a * a).sum(-1) + (b * b).sum(-1)
    c = torch.where(mask, clip_factor(torch.sqrt(sq), clip), torch.zeros_like(sq))
    out = {}
    for kind, pre, a, b in layers:
        out[pre + "weight"], out[pre + "bias"] = _mlp_param_grads(kind, a, b * c[..., None])
    return out


# ------------------------------------------------------------------------------------------ pair data


@dataclass
class Bucket:
    pairs: torch.Tensor  # (Pb,) indices into the pair list
    X: torch.Tensor  # (Pb, n_pad, ...)
    y: torch.Tensor  # (Pb, n_pad, ...)
    mask: torch.Tensor  # (Pb, n_pad)
    counts: torch.Tensor  # (Pb,)
    active: dict = field(default_factory=dict, repr=False, compare=False)  # active_pairs per batch size (cached)


def padded_size(n: int, batch: int) -> int:
    """n ≤ B: the next power of two (at most B); n > B: whole batches."""
    if n > batch:
        return int(math.ceil(n / batch) * batch)
    return min(batch, 1 << max(0, int(n - 1).bit_length()))


def make_buckets(records: list[tuple[np.ndarray, np.ndarray]], batch: int, device, chunk: int | None = None,
                 single: bool = False) -> list[Bucket]:
    """Group pairs (X_p, y_p) by padded size; each bucket is padded and moved to `device` once, its pairs ordered by
    record count, largest first (stable), so that the pairs still holding a batch at any step of an epoch are a
    prefix of the bucket (`active_pairs`). `chunk` caps the pairs of a bucket (memory: a bucket's parameter copies
    are (pairs, D)). `single`: one bucket padded to the largest pair (silo-level training: a few pairs of unequal
    size, where separate buckets would multiply the number of sequential steps; the prefix skips finished pairs)."""
    sizes = np.array([padded_size(len(x), batch) for x, _ in records])
    counts = np.array([len(x) for x, _ in records])
    if single:
        sizes = np.full(len(sizes), sizes.max())
    out = []
    for size in np.unique(sizes):
        idx = np.flatnonzero(sizes == size)
        idx = idx[np.argsort(-counts[idx], kind="stable")]
        for start in range(0, len(idx), chunk or len(idx)):
            part = idx[start: start + (chunk or len(idx))]
            x0, y0 = records[part[0]]
            X = np.zeros((len(part), size, *x0.shape[1:]), dtype=np.float32)
            Y = np.zeros((len(part), size, *y0.shape[1:]), dtype=y0.dtype)
            M = np.zeros((len(part), size), dtype=bool)
            for i, p in enumerate(part):
                x, y = records[p]
                X[i, : len(x)], Y[i, : len(x)], M[i, : len(x)] = x, y, True
            out.append(Bucket(torch.as_tensor(part, device=device), torch.as_tensor(X, device=device),
                              torch.as_tensor(Y, device=device), torch.as_tensor(M, device=device),
                              torch.as_tensor(M.sum(1), device=device)))
    return out


def _per_pair(fn, masks):
    """vmap of fn(θ, X, y, mask, masks) over the pair axis (masks: None for a model without dropout)."""
    return vmap(fn, in_dims=(0, 0, 0, 0, None if masks is None else 0))


def _gather(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """t[p, idx[p, j]] for t (k, N, ...) and idx (k, w): whole rows by one index_select over the flattened pairs
    (~5× faster than torch.gather with an index expanded to every feature)."""
    k, n = t.shape[:2]
    flat = (idx + torch.arange(k, device=idx.device)[:, None] * n).reshape(-1)
    return t.reshape(k * n, *t.shape[2:]).index_select(0, flat).reshape(*idx.shape, *t.shape[2:])


# ------------------------------------------------------------------------------------------ training


def active_pairs(bucket: Bucket, batch: int) -> list[int]:
    """For each step j of an epoch, how many pairs still hold a batch (those with more than j·B records; at least
    one step for every pair): a prefix of the bucket, its pairs being ordered by count, largest first."""
    if batch not in bucket.active:  # read from the device once per bucket, not every round (a host sync on a GPU)
        counts = bucket.counts.cpu().numpy()
        steps = max(1, math.ceil(bucket.mask.shape[1] / batch))
        bucket.active[batch] = [len(counts)] + [int((counts > j * batch).sum()) for j in range(1, steps)]
    return bucket.active[batch]


def _epoch_batches(bucket: Bucket, batch: int, gen: torch.Generator, shuffle: bool, active: list[int]):
    """The (k, X, y, mask) minibatches of one epoch: a fresh shuffle of each pair's valid rows (padding last), cut
    into batches of B; step j involves only the first k = active[j] pairs (the others have no records left). Without
    `shuffle` (a bucket of one batch per epoch and a loss that is a mean of per-row terms, where the order of the
    rows changes nothing) no keys are drawn."""
    if not shuffle:
        yield len(bucket.counts), bucket.X, bucket.y, bucket.mask
        return
    keys = torch.rand(bucket.mask.shape, generator=gen, device=bucket.X.device)
    order = torch.argsort(torch.where(bucket.mask, keys, torch.full_like(keys, 2.0)), dim=1)
    for j, k in enumerate(active):
        idx = order[:k, j * batch: (j + 1) * batch]
        yield k, _gather(bucket.X[:k], idx), _gather(bucket.y[:k], idx), _gather(bucket.mask[:k], idx)


def local_sgd(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, *, epochs: int, batch: int, lr: float,
              gen: torch.Generator, optimizer: str = "sgd") -> torch.Tensor:
    """Q epochs of shuffled minibatch SGD for every pair of the bucket, from θ (Pb, D); returns the trained θ.
    Randomness per epoch: the shuffle keys (unless the bucket is one batch of an uncoupled loss), then per step
    the dropout masks of the pairs still active. `optimizer`: "sgd", or "adam" (torch.optim.Adam's update with its
    defaults β = (0.9, 0.999), ε = 1e-8, a fresh state per call and per pair: kato2024's published secure path, K7)."""
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"local optimizer {optimizer!r}: expected sgd or adam")
    fm.module.eval()
    shuffle = bucket.mask.shape[1] > batch or fm.coupled
    active = active_pairs(bucket, batch)
    adam = _Adam(lr) if optimizer == "adam" else None
    return fm.path.sgd(theta, bucket, epochs=epochs, batch=batch, lr=lr, gen=gen, shuffle=shuffle, active=active,
                       adam=adam)


class _Adam:
    """torch.optim.Adam's update for every pair at once, on the active prefix [:k] of each (Pb, …) parameter; each
    pair counts its own steps (a pair with fewer batches stops earlier in an epoch), so bias corrections are per pair."""

    def __init__(self, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        self.m, self.v, self.t = {}, {}, None

    def step(self, k: int, params: dict, grads: dict) -> None:
        first = next(iter(params.values()))
        if self.t is None:
            self.t = torch.zeros(first.shape[0], dtype=first.dtype, device=first.device)
        self.t[:k] += 1
        t = self.t[:k]
        bc1, bc2 = 1 - self.b1 ** t, 1 - self.b2 ** t
        for name, g in grads.items():
            p = params[name]
            if name not in self.m:
                self.m[name], self.v[name] = torch.zeros_like(p), torch.zeros_like(p)
            m, v = self.m[name][:k], self.v[name][:k]
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            shape = (k,) + (1,) * (p.dim() - 1)
            denom = (v.sqrt() / bc2.sqrt().view(shape)).add_(self.eps)
            p[:k].addcdiv_(m, denom * (bc1 / self.lr).view(shape), value=-1.0)


def mean_grads(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, gen: torch.Generator | None = None) -> torch.Tensor:
    """Each pair's gradient of its mean loss over all its records, at θ (Pb, D) (with dropout, as in training)."""
    fm.module.eval()
    return fm.path.mean_grads(theta, bucket, gen)


def clipped_mean_grad_sums(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, run_of: torch.Tensor,
                           weights: torch.Tensor, clip: float, gen: torch.Generator | None = None,
                           chunk_rows: int = 2048) -> torch.Tensor:
    """Σ_p w_p·clip_C(g_p) per run (R, D), g_p = pair p's gradient of its mean loss at its run's model θ[run_p]
    (θ: (R, D); run_of, weights: per pair of the bucket). Equals `weighted_clipped_sum(mean_grads(θ[run_of], …))`
    with the same draws (pairs whose gradient is not finite send nothing). Sequential MLPs (ULDP-SGD on Creditcard)
    take a path that never forms the per-pair gradients: the pairs of one run share their model, so the forward and
    backward passes are products over all of a run's rows; a pair's squared gradient norm comes from its rows'
    activations a and output gradients b (linear weight ‖Σ_i b_i a_iᵀ‖² = Σ_ij (a_i·a_j)(b_i·b_j) for small pairs,
    Ghost-clipping style, the product itself for large ones), and the clipped sum Σ_p c_p Σ_{i∈p} b_i a_iᵀ is one
    product over the run's rows scaled by their pair's coefficient."""
    fm.module.eval()
    return fm.path.clipped_mean_grad_sums(theta, bucket, run_of, weights, clip, gen, chunk_rows)


def _clipped_chunk(fm, params, X, y, row_w, masks, w, n: int, clip: float) -> torch.Tensor:
    """`clipped_mean_grad_sums` on c slots of n rows per run: X (R, c·n, F), w (R, c) -> (R, D)."""
    R, c = w.shape
    logits, tape = _mlp_forward(fm, params, X, masks, keep=True)
    dt = logits.dtype
    layers = list(_mlp_backward(fm, params, tape, _mlp_output_grads(fm, logits, y, row_w)))

    def per_pair(t):  # (R, c·n, d) -> (R·c, n, d)
        return t.reshape(R * c, n, t.shape[-1])

    sq = torch.zeros(R * c, dtype=dt, device=X.device)
    for kind, _, a, b in layers:
        a, b = per_pair(a), per_pair(b)
        if kind == "linear":
            if n == 1:
                sq += (a * a).sum((1, 2)) * (b * b).sum((1, 2))
            elif n <= 32:  # Gram form: n² per pair instead of d_a·d_b
                sq += (torch.bmm(a, a.transpose(1, 2)) * torch.bmm(b, b.transpose(1, 2))).sum((1, 2))
            else:
                sq += torch.bmm(b.transpose(1, 2), a).square().sum((1, 2))
        else:  # group-norm affine: weight Σ_i b_i ⊙ x̂_i
            sq += (b * a).sum(1).square().sum(1)
        sq += b.sum(1).square().sum(1)  # bias Σ_i b_i
    norms = torch.sqrt(sq)
    finite = torch.isfinite(norms)
    coef = torch.where(finite, w.reshape(-1) * clip_factor(norms, clip), torch.zeros_like(norms))
    row_coef = coef.repeat_interleave(n).reshape(R, c * n, 1)
    ok = bool(finite.all())
    out = {}
    for kind, pre, a, b in layers:
        if not ok:  # rows of a pair with a non-finite gradient send nothing (0·NaN would still be NaN)
            zero = torch.zeros((), dtype=dt, device=X.device)
            a, b = torch.where(row_coef != 0, a, zero), torch.where(row_coef != 0, b, zero)
        out[pre + "weight"], out[pre + "bias"] = _mlp_param_grads(kind, a, b * row_coef)
    return fm.join(out)


def run_outputs(fm: FlatModel, theta: torch.Tensor, X: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """The model outputs of every run on its own inputs, without dropout: θ (R, D), X (R, n, ...) -> (R, n, ...),
    batched over runs (evaluation on equal-sized test sets), `chunk` rows at a time (activations that stay in the
    cache: 1.6× faster than whole test sets on the Creditcard MLP)."""
    fm.module.eval()
    with torch.no_grad():
        return fm.path.outputs(theta, X, chunk)


def per_example_grads(fm: FlatModel, theta: torch.Tensor, X, y, mask, masks=None) -> torch.Tensor:
    """(n, D) gradients of each valid row of one batch, in Opacus's semantics for the batch-mean loss: the
    gradient of that row's own loss; for a coupled loss (Cox), |b|·(∂L_batch/∂out_i)·∂out_i/∂θ (Opacus's hooks
    on a linear layer). Padding rows give zero. `masks`: dropout masks with a leading row axis."""
    if not fm.coupled:
        def one(t, x, yy, mk):
            return fm.row_losses(fm.forward(t, x[None], None if mk is None else [m[None] for m in mk]), yy[None]).sum()
        g = vmap(grad(one), in_dims=(None, 0, 0, None if masks is None else 0))(theta, X, y, masks)
    else:
        out = fm.forward(theta, X).detach()
        dout = grad(lambda o: fm.batch_loss_from_outputs(o, y, mask))(out)
        c = (dout * mask.sum().to(out.dtype)).detach()

        def one(t, x, ci):
            return (fm.forward(t, x[None]) * ci).sum()
        g = vmap(grad(one), in_dims=(None, 0, 0))(theta, X, c)
    return torch.where(mask[:, None], g, torch.zeros_like(g))


def poisson_rows(counts: torch.Tensor, q: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Poisson sampling of each pair's records: record i of pair p joins with probability q_p, independently.
    Drawn as the positions of the successes of a Bernoulli(q_p) sequence, whose gaps are i.i.d. Geometric(q_p)
    (inverse CDF ⌊log U / log(1 − q)⌋ + 1, U uniform on (0, 1], float64): about N·q draws per pair instead of one
    per record (a silo of 15k records sampled at q = 1/236 per step). Returns (idx, valid), both (k, w): each pair's
    sampled rows in increasing order, then padding; w = the largest sample (at least 1)."""
    k, dev = counts.shape[0], counts.device
    n = counts.to(torch.float64)
    logq = torch.log1p(-q.to(torch.float64))[:, None]  # −inf at q = 1: every gap is 1
    mean = float((n * q.to(torch.float64)).max()) if k else 0.0
    width = int(mean + 6.0 * math.sqrt(mean) + 8)  # a second draw is rarely needed
    last, chunks = torch.full((k,), -1.0, dtype=torch.float64, device=dev), []
    while True:
        u = 1.0 - torch.rand((k, width), generator=gen, dtype=torch.float64, device=dev)
        pos = last[:, None] + torch.cumsum(torch.floor(torch.log(u) / logq) + 1.0, dim=1)
        chunks.append(pos)
        last = pos[:, -1]
        if not bool((last < n).any()):  # every pair has passed its last record
            break
    pos = torch.cat(chunks, dim=1) if len(chunks) > 1 else chunks[0]
    valid = pos < n[:, None]  # a prefix of each row: positions increase
    w = max(1, int(valid.sum(1).max()))
    idx = torch.where(valid[:, :w], pos[:, :w], torch.zeros((), dtype=pos.dtype, device=dev)).to(torch.int64)
    return idx, valid[:, :w]


def dp_sgd(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, *, epochs: int, batch: int, lr: float, clip: float,
           noise_std: float, gen: torch.Generator) -> torch.Tensor:
    """Opacus-semantics DP-SGD (record level) for every pair of the bucket, from θ (Pb, D): per pair with N records,
    q = 1/⌈N/B⌉ and ⌈N/B⌉ steps per epoch; each step samples every record with probability q, clips each
    per-example gradient at C, adds N(0, noise_std²) to the sum (Opacus: noise_std = σC for noise multiplier σ) and
    divides by the expected batch size ⌊N·q⌋."""
    fm.module.eval()
    counts = bucket.counts.to(theta.dtype)
    q = 1.0 / torch.ceil(counts / batch).clamp(min=1)
    expected = torch.floor(counts * q).clamp(min=1)[:, None]
    theta = theta.clone()
    active = active_pairs(bucket, batch)  # pairs with fewer steps per epoch are done: a prefix stays
    for _ in range(epochs):
        for k in active:
            idx, m = poisson_rows(bucket.counts[:k], q[:k], gen)
            Xb, yb = _gather(bucket.X[:k], idx), _gather(bucket.y[:k], idx)
            summed = fm.path.clipped_example_sums(theta, k, Xb, yb, m, gen, clip)  # (k, D); may draw dropout
            noise = torch.randn((k, fm.dim), generator=gen, device=theta.device, dtype=theta.dtype)
            theta[:k].sub_(summed.add_(noise, alpha=noise_std).div_(expected[:k]), alpha=lr)
    return theta


# ------------------------------------------------------------------------------------------ gradient paths


class GradientPath(abc.ABC):
    """How a FlatModel computes its outputs and gradients, chosen once when it is built (`FlatModel.path`). The
    functions above (local_sgd, mean_grads, clipped_mean_grad_sums, dp_sgd, run_outputs) do what every path shares
    (eval mode, batching, sampling, noise) and hand the model-specific work to it."""

    def __init__(self, fm: FlatModel):
        self.fm = fm

    def apply(self, params: dict, X: torch.Tensor, masks=None) -> torch.Tensor:
        """The module's output for parameters given as a dict."""
        return functional_call(self.fm.module, (params, self.fm.buffers), (X,) if masks is None else (X, masks))

    @abc.abstractmethod
    def sgd(self, theta, bucket: Bucket, *, epochs: int, batch: int, lr: float, gen, shuffle: bool,
            active: list[int], adam) -> torch.Tensor:
        """`local_sgd`'s epochs from θ (Pb, D) (`adam` None: plain SGD steps); returns the trained θ."""

    @abc.abstractmethod
    def mean_grads(self, theta, bucket: Bucket, gen) -> torch.Tensor:
        """Each pair's gradient of its mean loss over all its records (P, D), dropout drawn from `gen` (if any)."""

    def clipped_mean_grad_sums(self, theta, bucket: Bucket, run_of, weights, clip: float, gen,
                               chunk_rows: int) -> torch.Tensor:
        """`clipped_mean_grad_sums`: here by clipping and summing the per-pair mean gradients."""
        return weighted_clipped_sum(mean_grads(self.fm, theta[run_of], bucket, gen), weights, run_of, theta.shape[0],
                                    clip)

    @abc.abstractmethod
    def clipped_example_sums(self, theta, k: int, Xb, yb, m, gen, clip: float) -> torch.Tensor:
        """Σ_i clip_C(g_i) over the sampled valid rows of each of the first k pairs (k, D), g_i the per-example
        gradient in Opacus's semantics (`per_example_grads`), at θ[:k]; dropout drawn from `gen` (if any)."""

    @abc.abstractmethod
    def outputs(self, theta, X, chunk: int) -> torch.Tensor:
        """`run_outputs` (no dropout, no autograd)."""


class LinearPath(GradientPath):
    """A single linear score x·w + b (Heart, TCGA): closed-form gradients, no dropout, no module machinery."""

    def apply(self, params, X, masks=None):
        return X @ params["linear.weight"][0] + params["linear.bias"][0]

    def sgd(self, theta, bucket, *, epochs, batch, lr, gen, shuffle, active, adam):
        fm, theta = self.fm, theta.clone()
        for _ in range(epochs):
            for k, Xb, yb, m in _epoch_batches(bucket, batch, gen, shuffle, active):
                g = _linear_mean_grads(fm, theta[:k], Xb, yb, m)
                if adam is None:
                    theta[:k].sub_(g, alpha=lr)
                else:
                    adam.step(k, {"theta": theta}, {"theta": g})
        return theta

    def mean_grads(self, theta, bucket, gen):
        return _linear_mean_grads(self.fm, theta, bucket.X, bucket.y, bucket.mask)

    def clipped_example_sums(self, theta, k, Xb, yb, m, gen, clip):
        return _linear_clipped_sum(self.fm, theta[:k], Xb, yb, m, clip)

    def outputs(self, theta, X, chunk):
        return _linear_scores(theta, X)


class _ModulePath(GradientPath):
    """Local SGD on contiguous per-parameter copies, updated in place (batched products over views of the flat
    rows, row stride D, copy their operands: ~1.5× slower here); each step draws the active pairs' dropout masks."""

    def sgd(self, theta, bucket, *, epochs, batch, lr, gen, shuffle, active, adam):
        fm = self.fm
        params = fm.split(theta)
        for _ in range(epochs):
            for k, Xb, yb, m in _epoch_batches(bucket, batch, gen, shuffle, active):
                part = {name: value[:k] for name, value in params.items()}  # the active prefix
                masks = fm.draw_masks(m.shape, gen, theta.device)
                self.sgd_step(params, part, k, Xb, yb, m, masks, lr, adam)
        return fm.join(params)

    @abc.abstractmethod
    def sgd_step(self, params: dict, part: dict, k: int, Xb, yb, m, masks, lr: float, adam) -> None:
        """One step on the active prefix `part` (views of `params`' first k rows), in place."""

    def _masks(self, shape, gen, device):
        return self.fm.draw_masks(shape, gen, device) if gen is not None else None


class GenericPath(_ModulePath):
    """Any module: torch.func (`functional_call` + `grad` + `vmap` over the pairs)."""

    def sgd_step(self, params, part, k, Xb, yb, m, masks, lr, adam):
        g = _per_pair(grad(self.fm.batch_loss_params), masks)(part, Xb, yb, m, masks)
        if adam is not None:
            adam.step(k, params, g)
            return
        for name, value in part.items():
            value.sub_(g[name], alpha=lr)

    def mean_grads(self, theta, bucket, gen):
        masks = self._masks(bucket.mask.shape, gen, theta.device)
        return _per_pair(grad(self.fm.batch_loss), masks)(theta, bucket.X, bucket.y, bucket.mask, masks)

    def clipped_example_sums(self, theta, k, Xb, yb, m, gen, clip):
        fm = self.fm

        def per_pair(t, x, yy, mm, mk):
            return _per_pair(lambda *a: per_example_grads(fm, *a), mk)(t, x, yy, mm, mk)
        g = per_pair(theta[:k], Xb, yb, m, fm.draw_masks(m.shape, gen, theta.device))  # (k, width, D)
        return clip_updates(g, clip)[0].sum(1)

    def outputs(self, theta, X, chunk):
        parts = [vmap(self.fm.forward)(theta, X[:, a: a + chunk]) for a in range(0, X.shape[1], chunk)]
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]


class MlpPath(_ModulePath):
    """A plain Sequential MLP with a ce/nll loss (Creditcard): the hand-written batched forward and backward passes
    above (fused in-place SGD updates, per-example clipped sums from activations, ULDP-SGD's aggregate without
    per-pair gradients)."""

    def sgd_step(self, params, part, k, Xb, yb, m, masks, lr, adam):
        if adam is None:
            _mlp_sgd_step(self.fm, part, Xb, yb, m, masks, lr)
            return
        adam.step(k, params, _mlp_mean_grads(self.fm, part, Xb, yb, m, masks))

    def mean_grads(self, theta, bucket, gen):
        fm = self.fm
        masks = self._masks(bucket.mask.shape, gen, theta.device)
        return fm.join(_mlp_mean_grads(fm, fm.split(theta), bucket.X, bucket.y, bucket.mask, masks))

    def clipped_example_sums(self, theta, k, Xb, yb, m, gen, clip):
        fm = self.fm
        params = fm.views(theta)  # per-parameter views of the flat rows
        return fm.join(_mlp_clipped_sum(fm, {n: v[:k] for n, v in params.items()}, Xb, yb, m,
                                        fm.draw_masks(m.shape, gen, theta.device), clip))

    def outputs(self, theta, X, chunk):
        fm = self.fm
        params = fm.views(theta)
        parts = [_mlp_forward(fm, params, X[:, a: a + chunk], None) for a in range(0, X.shape[1], chunk)]
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    def clipped_mean_grad_sums(self, theta, bucket, run_of, weights, clip, gen, chunk_rows):
        """The pairs of one run share their model: forward and backward passes over all of a run's rows, a pair's
        squared gradient norm from its rows' activations and output gradients (see `clipped_mean_grad_sums`)."""
        fm = self.fm
        R = theta.shape[0]
        Pb, n = bucket.mask.shape
        masks = fm.draw_masks(bucket.mask.shape, gen, theta.device) if gen is not None else None  # as mean_grads draws
        # layout (R, slots, n): each run's pairs side by side, padded with empty slots
        runs_np = run_of.cpu().numpy()
        per_run = np.bincount(runs_np, minlength=R)
        slots = max(1, int(per_run.max()))
        pos = np.zeros(Pb, dtype=np.int64)
        for r in range(R):
            pos[runs_np == r] = np.arange(per_run[r])
        flat = torch.as_tensor(runs_np * slots + pos, device=theta.device)

        def lay(t, fill=0):  # (Pb, n, ...) -> (R, slots, n, ...)
            out = torch.full((R * slots, *t.shape[1:]), fill, dtype=t.dtype, device=t.device)
            out[flat] = t
            return out.reshape(R, slots, *t.shape[1:])

        dt = theta.dtype
        w = torch.zeros(R * slots, dtype=dt, device=theta.device)
        w[flat] = weights.to(dt)
        w = w.reshape(R, slots)
        X, y, mask = lay(bucket.X), lay(bucket.y), lay(bucket.mask, False)
        row_w = lay(bucket.mask.to(dt) / bucket.counts.clamp(min=1).to(dt)[:, None])  # the mean over the pair's rows
        masks = None if masks is None else [lay(m) for m in masks]
        params = fm.split(theta)
        total = torch.zeros_like(theta)
        step = max(1, chunk_rows // n)  # slots per chunk: ~chunk_rows rows per run, activations that stay in the cache
        for s0 in range(0, slots, step):
            c = min(step, slots - s0)

            def rows(t):  # (R, slots, n, ...) -> this chunk's (R, c·n, ...)
                return t[:, s0: s0 + c].reshape(R, c * n, *t.shape[3:])

            total += _clipped_chunk(fm, params, rows(X), rows(y), rows(row_w),
                                    None if masks is None else [rows(m) for m in masks], w[:, s0: s0 + c], n, clip)
        return total
