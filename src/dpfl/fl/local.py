"""Local training of many model copies at once: every (run, silo, user) pair of a round is one row of a parameter
matrix θ (P, D), trained by `torch.func` (`functional_call` + `grad` + `vmap`) on its own padded, masked records.
No per-pair module copies and no Python loop over pairs: one batched step per minibatch position.

- `FlatModel`: a torch module seen as a function of one flat parameter vector, with its loss (`ce`, `nll`, `bce`
  or the batch-coupled `cox`). Loss = mean over the valid (masked-in) rows of a batch.
- `Buckets`: pairs grouped by padded size (n ≤ B: the next power of two; n > B: whole batches), so padding costs
  at most 2× and every pair of a bucket takes the same number of steps per epoch.
- `local_sgd`: Q epochs of shuffled minibatch SGD (batch B, lr η) for every pair (torch DataLoader semantics: the
  last batch of an epoch holds the remainder); returns θ_pair after training.
- `mean_grads`: each pair's gradient of its mean loss over all its records (ULDP-SGD).
- `dp_sgd`: Opacus-semantics DP-SGD for every pair (record level): Poisson sampling at rate q, per-example
  gradients clipped at C (one norm over all parameters), N(0, σ²C²) on the sum, divided by the expected batch size.
All randomness (shuffles, Poisson draws, dropout masks, noise) comes from one `torch.Generator` seeded by the
caller; the module stays in eval mode and dropout is applied through explicit masks (dpfl.models.nets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from dpfl.fl.aggregate import clip_factor, clip_updates
from dpfl.models.metrics import cox_partial_likelihood

LOSSES = ("ce", "nll", "bce", "cox")


class FlatModel:
    """A module as f(θ, X) for a flat θ (D,). `loss`: ce (logits, int labels), nll (log-probabilities), bce
    (one logit, 0/1 labels), cox (one risk score, y = (T, E) in the last axis; the loss couples a batch's rows), or
    any function (outputs, y) -> per-row losses (e.g. a GLM's `example_loss_t`)."""

    def __init__(self, module: torch.nn.Module, loss):
        if not callable(loss) and loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; known: {', '.join(LOSSES)} or a function (outputs, y) -> rows")
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
        if self.linear:
            return X @ params["linear.weight"][0] + params["linear.bias"][0]
        return functional_call(self.module, (params, self.buffers), (X,) if masks is None else (X, masks))

    def draw_masks(self, shape: tuple, gen: torch.Generator, device) -> list | None:
        """Inverted-dropout masks (0 or 1/(1−p)) for inputs of batch shape `shape` (e.g. (pairs, rows)): one per
        dropout site of the module; None for a model without dropout."""
        sites = getattr(self.module, "dropout_sites", None)
        if sites is None:
            return None
        out = []
        for site_shape, p in sites(shape[-1]):
            keep = torch.rand((*shape[:-1], *site_shape), generator=gen, device=device) >= p
            out.append(keep.to(torch.get_default_dtype()) / (1.0 - p))
        return out

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
# with explicit tensor ops (baddbmm) and ordinary autograd on the stacked parameters: far fewer ops per step than
# vmap over functional_call. Per-example gradients (DP-SGD) use the activations and the per-row output gradients
# (as Opacus's hooks do): for one row, a linear layer's weight gradient is the outer product b_i a_iᵀ, so its norm is
# ‖b_i‖·‖a_i‖ and the clipped sum Σ_i c_i b_i a_iᵀ is one batched product; no per-example tensors.


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
    """Logits (P, n, C) of every pair; with keep, also the per-layer tensors the per-example gradients need."""
    x, site, saved = X, 0, []
    for kind, pre, layer in fm.mlp:
        if kind == "linear":
            a = x
            x = torch.baddbmm(params[pre + "bias"][:, None, :], a, params[pre + "weight"].transpose(1, 2))
            if keep:
                saved.append(("linear", pre, a, x))
        elif kind == "relu":
            x = torch.relu(x)
        elif kind == "groupnorm":
            xhat = F.layer_norm(x, x.shape[-1:], eps=layer.eps)  # GroupNorm(1, C) of a (rows, C) input, fused
            x = torch.addcmul(params[pre + "bias"][:, None, :], xhat, params[pre + "weight"][:, None, :])
            if keep:
                saved.append(("groupnorm", pre, xhat, x))
        elif kind == "dropout" and masks is not None:
            x = x * masks[site]
            site += 1
        elif kind == "dropout":
            site += 1
    return (x, saved) if keep else x


def _mlp_row_losses(fm, logits, y):
    flat = logits.reshape(-1, logits.shape[-1])
    loss = F.cross_entropy(flat, y.reshape(-1).long(), reduction="none") if fm.loss == "ce" else \
        F.nll_loss(flat, y.reshape(-1).long(), reduction="none")
    return loss.reshape(y.shape)


def _mlp_mean_grads(fm, params: dict, X, y, mask, masks) -> dict:
    """Each pair's gradient of its masked-mean loss (autograd on the sum over pairs: the pairs do not interact)."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    with torch.enable_grad():
        rows = _mlp_row_losses(fm, _mlp_forward(fm, leaves, X, masks), y)
        count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(rows.dtype)
        total = (torch.where(mask, rows, torch.zeros_like(rows)) / count).sum()
        grads = torch.autograd.grad(total, list(leaves.values()))
    return dict(zip(leaves, grads))


def _mlp_clipped_sum(fm, params: dict, X, y, mask, masks, clip: float) -> dict:
    """Σ_i clip_C(g_i) over each pair's valid rows, g_i the gradient of row i's own loss (all parameters jointly)."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    with torch.enable_grad():
        logits, saved = _mlp_forward(fm, leaves, X, masks, keep=True)
        rows = _mlp_row_losses(fm, logits, y)
        total = torch.where(mask, rows, torch.zeros_like(rows)).sum()
        outs = torch.autograd.grad(total, [out for *_, out in saved])
    saved = [(kind, pre, a.detach(), None) for kind, pre, a, _ in saved]
    sq = torch.zeros(mask.shape, dtype=X.dtype, device=X.device)
    for (kind, _, a, _), b in zip(saved, outs):
        if kind == "linear":  # weight b aᵀ and bias b
            sq = sq + (b * b).sum(-1) * ((a * a).sum(-1) + 1.0)
        else:  # group-norm affine: weight b ⊙ x̂, bias b
            sq = sq + (b * b * a * a).sum(-1) + (b * b).sum(-1)
    c = torch.where(mask, clip_factor(torch.sqrt(sq), clip), torch.zeros_like(sq))
    out = {}
    for (kind, pre, a, _), b in zip(saved, outs):
        cb = b * c[..., None]
        if kind == "linear":
            out[pre + "weight"] = torch.bmm(cb.transpose(1, 2), a)
        else:
            out[pre + "weight"] = (cb * a).sum(1)
        out[pre + "bias"] = cb.sum(1)
    return out


# ------------------------------------------------------------------------------------------ pair data


@dataclass
class Bucket:
    pairs: torch.Tensor  # (Pb,) indices into the pair list
    X: torch.Tensor  # (Pb, n_pad, ...)
    y: torch.Tensor  # (Pb, n_pad, ...)
    mask: torch.Tensor  # (Pb, n_pad)
    counts: torch.Tensor  # (Pb,)


def padded_size(n: int, batch: int) -> int:
    """n ≤ B: the next power of two (at most B); n > B: whole batches."""
    if n > batch:
        return int(math.ceil(n / batch) * batch)
    return min(batch, 1 << max(0, int(n - 1).bit_length()))


def make_buckets(records: list[tuple[np.ndarray, np.ndarray]], batch: int, device, chunk: int | None = None,
                 single: bool = False) -> list[Bucket]:
    """Group pairs (X_p, y_p) by padded size; each bucket is padded and moved to `device` once. `chunk` caps the
    pairs of a bucket (memory: a bucket's parameter copies are (pairs, D)). `single`: one bucket padded to the
    largest pair (silo-level training: a few pairs of similar size, where separate buckets would only multiply the
    number of sequential steps; a pair with fewer batches idles through the extra ones)."""
    sizes = np.array([padded_size(len(x), batch) for x, _ in records])
    if single:
        sizes = np.full(len(sizes), sizes.max())
    out = []
    for size in np.unique(sizes):
        idx = np.flatnonzero(sizes == size)
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
    return torch.gather(t, 1, idx.reshape(*idx.shape, *([1] * (t.dim() - 2))).expand(*idx.shape, *t.shape[2:]))


# ------------------------------------------------------------------------------------------ training


def local_sgd(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, *, epochs: int, batch: int, lr: float,
              gen: torch.Generator) -> torch.Tensor:
    """Q epochs of shuffled minibatch SGD for every pair of the bucket, from θ (Pb, D); returns the trained θ."""
    fm.module.eval()
    n_pad = bucket.mask.shape[1]
    steps = max(1, math.ceil(n_pad / batch))
    if fm.linear:
        theta = theta.clone()
        for _ in range(epochs):
            keys = torch.rand(bucket.mask.shape, generator=gen, device=theta.device)
            order = torch.argsort(torch.where(bucket.mask, keys, torch.full_like(keys, 2.0)), dim=1)
            for j in range(steps):
                idx = order[:, j * batch: (j + 1) * batch]
                g = _linear_mean_grads(fm, theta, _gather(bucket.X, idx), _gather(bucket.y, idx), _gather(bucket.mask, idx))
                theta.sub_(g, alpha=lr)
        return theta
    params = fm.split(theta)  # a dict of per-pair tensors, updated in place (no flat copies per step)
    for _ in range(epochs):
        keys = torch.rand(bucket.mask.shape, generator=gen, device=theta.device)
        order = torch.argsort(torch.where(bucket.mask, keys, torch.full_like(keys, 2.0)), dim=1)
        for j in range(steps):
            idx = order[:, j * batch: (j + 1) * batch]
            m = _gather(bucket.mask, idx)
            masks = fm.draw_masks(idx.shape, gen, theta.device)
            Xb, yb = _gather(bucket.X, idx), _gather(bucket.y, idx)
            if fm.mlp is not None:
                g = _mlp_mean_grads(fm, params, Xb, yb, m, masks)
            else:
                g = _per_pair(grad(fm.batch_loss_params), masks)(params, Xb, yb, m, masks)
            for name, value in params.items():
                value.sub_(g[name], alpha=lr)
    return fm.join(params)


def mean_grads(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, gen: torch.Generator | None = None) -> torch.Tensor:
    """Each pair's gradient of its mean loss over all its records, at θ (Pb, D) (with dropout, as in training)."""
    fm.module.eval()
    if fm.linear:
        return _linear_mean_grads(fm, theta, bucket.X, bucket.y, bucket.mask)
    masks = fm.draw_masks(bucket.mask.shape, gen, theta.device) if gen is not None else None
    if fm.mlp is not None:
        return fm.join(_mlp_mean_grads(fm, fm.split(theta), bucket.X, bucket.y, bucket.mask, masks))
    return _per_pair(grad(fm.batch_loss), masks)(theta, bucket.X, bucket.y, bucket.mask, masks)


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


def dp_sgd(fm: FlatModel, theta: torch.Tensor, bucket: Bucket, *, epochs: int, batch: int, lr: float, clip: float,
           sigma: float, gen: torch.Generator) -> torch.Tensor:
    """Opacus-semantics DP-SGD (record level) for every pair of the bucket, from θ (Pb, D): per pair with N records,
    q = 1/⌈N/B⌉ and ⌈N/B⌉ steps per epoch; each step samples every record with probability q, clips each
    per-example gradient at C, adds N(0, σ²C²) to the sum and divides by the expected batch size ⌊N·q⌋."""
    fm.module.eval()
    counts = bucket.counts.to(theta.dtype)
    steps_per_epoch = torch.ceil(counts / batch).clamp(min=1)
    q = 1.0 / steps_per_epoch
    expected = torch.floor(counts * q).clamp(min=1)
    theta = theta.clone()
    def per_pair(t, x, yy, m, mk):
        return _per_pair(lambda *a: per_example_grads(fm, *a), mk)(t, x, yy, m, mk)
    for _ in range(epochs):
        for j in range(int(steps_per_epoch.max())):
            active = j < steps_per_epoch  # pairs with fewer steps per epoch are done
            take = (torch.rand(bucket.mask.shape, generator=gen, device=theta.device) < q[:, None]) & bucket.mask
            width = max(1, int(take.sum(1).max()))
            idx = torch.argsort((~take).to(torch.int8), dim=1, stable=True)[:, :width]  # sampled rows first
            m = _gather(take, idx)
            Xb, yb = _gather(bucket.X, idx), _gather(bucket.y, idx)
            if fm.linear:
                summed = _linear_clipped_sum(fm, theta, Xb, yb, m, clip)
            elif fm.mlp is not None:
                summed = fm.join(_mlp_clipped_sum(fm, fm.split(theta), Xb, yb, m,
                                                  fm.draw_masks(idx.shape, gen, theta.device), clip))
            else:
                g = per_pair(theta, Xb, yb, m, fm.draw_masks(idx.shape, gen, theta.device))  # (Pb, width, D)
                summed = clip_updates(g, clip)[0].sum(1)
            noise = torch.randn(summed.shape, generator=gen, device=theta.device, dtype=theta.dtype)
            update = (summed + sigma * clip * noise) / expected[:, None]
            theta = torch.where(active[:, None], theta - lr * update, theta)
    return theta
