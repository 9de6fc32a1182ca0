"""How a model's outputs and gradients are computed for many copies θ (P, D) at once (the (run, silo, user) pairs
that dpfl.fl.local trains), given as a `FlatModel` (dpfl.fl.flat_model: the model as f(θ, X), its loss and dropout
masks), which picks its `GradientPath` once when it is built: `GenericPath` (`torch.func`: `functional_call` +
`grad` + `vmap`; `per_example_grads` for DP-SGD), `LinearPath` (closed forms for a single linear score: Heart, TCGA;
`cox_score_grads`) or `MlpPath` (hand-written batched forward and backward passes for Sequential MLPs, in
dpfl.fl.mlp: Creditcard), the fast paths checked against the generic one in the tests.
The paths do the model-specific work (local SGD's steps, mean gradients, clipped sums, outputs); the functions of
dpfl.fl.local do what every path shares (eval mode, batching, sampling, noise).
"""

from __future__ import annotations

import abc
import math

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from dpfl.fl.aggregate import clip_factor, clip_updates, weighted_clipped_sum
from dpfl.fl.buckets import Bucket, epoch_batches
from dpfl.fl.mlp import (  # the plain-MLP pass (MlpPath)
    MlpPlan,
    _clipped_chunk,
    _join,
    _mlp_clipped_sum,
    _mlp_forward,
    _mlp_mean_grads,
    _mlp_sgd_epochs,
    _mlp_step,
    _onehot,
    _row_weights,
)

# fm: a dpfl.fl.flat_model.FlatModel throughout (it imports this module to pick its path)


def cox_score_grads(score, time, event, mask) -> torch.Tensor:
    """∂L/∂s of the masked Cox loss (dpfl.models.metrics.cox_partial_likelihood), batched over pairs (P, b), in
    closed form: with rows sorted by T descending and R_i = Σ_{j≤i} e^{s_j},
    ∂L/∂s_k = −(1/|b|)·(E_k − Σ_{i≥k} E_i·e^{s_k}/R_i), evaluated in log space (the scores of an unnormalized Cox
    model can span hundreds of nats)."""
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


def _score_grads(fm, out, y, mask, per_example: bool) -> torch.Tensor:
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


# ------------------------------------------------------------------------------------------ per-example gradients


def per_example_grads(fm, theta: torch.Tensor, X, y, mask, masks=None) -> torch.Tensor:
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


def _per_pair(fn, masks):
    """vmap of fn(θ, X, y, mask, masks) over the pair axis (masks: None for a model without dropout)."""
    return vmap(fn, in_dims=(0, 0, 0, 0, None if masks is None else 0))


# ------------------------------------------------------------------------------------------ gradient paths


class GradientPath(abc.ABC):
    """How a FlatModel computes its outputs and gradients, chosen once when it is built (`FlatModel.path`). The
    functions of dpfl.fl.local (local_sgd, mean_grads, clipped_mean_grad_sums, dp_sgd, run_outputs) do what every
    path shares (eval mode, batching, sampling, noise) and hand the model-specific work to it."""

    #: whether its gradients are computed without autograd, so DP-SGD's steps may run in inference mode (no view and
    #: version bookkeeping on every small operation); torch.func's transforms need autograd
    inference_ok = False

    def __init__(self, fm):
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
        """`clipped_mean_grad_sums` (dpfl.fl.local): here by clipping and summing the per-pair mean gradients."""
        return weighted_clipped_sum(self.mean_grads(theta[run_of], bucket, gen), weights, run_of, theta.shape[0],
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

    inference_ok = True

    def apply(self, params, X, masks=None):
        return X @ params["linear.weight"][0] + params["linear.bias"][0]

    def sgd(self, theta, bucket, *, epochs, batch, lr, gen, shuffle, active, adam):
        fm, theta = self.fm, theta.clone()
        for _ in range(epochs):
            for k, Xb, yb, m in epoch_batches(bucket, batch, gen, shuffle, active):
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
            for k, Xb, yb, m in epoch_batches(bucket, batch, gen, shuffle, active):
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
    per-pair gradients), read through the model's `MlpPlan`."""

    inference_ok = True

    def __init__(self, fm):
        super().__init__(fm)
        self.plan = MlpPlan.of(fm)
        self._views = None  # (θ, {k: the first k rows of each parameter view}) of the last clipped_example_sums

    def sgd(self, theta, bucket, *, epochs, batch, lr, gen, shuffle, active, adam):
        if adam is not None:
            return super().sgd(theta, bucket, epochs=epochs, batch=batch, lr=lr, gen=gen, shuffle=shuffle,
                               active=active, adam=adam)
        return _mlp_sgd_epochs(self.fm, self.plan, theta, bucket, epochs=epochs, batch=batch, lr=lr, gen=gen,
                               shuffle=shuffle, active=active)

    def sgd_step(self, params, part, k, Xb, yb, m, masks, lr, adam):
        """Adam's step (`sgd` runs the plain SGD steps itself), or one plain SGD step."""
        plan, views = self.plan, list(part.values())
        if adam is None:
            dt = views[0].dtype
            _mlp_step(plan, views, Xb, _onehot(plan, yb, dt), _row_weights(m, dt, True), masks, lr)
            return
        adam.step(k, params, dict(zip(self.fm.names, _mlp_mean_grads(plan, views, Xb, yb, m, masks))))

    def mean_grads(self, theta, bucket, gen):
        fm = self.fm
        masks = self._masks(bucket.mask.shape, gen, theta.device)
        return _join(_mlp_mean_grads(self.plan, list(fm.split(theta).values()), bucket.X, bucket.y, bucket.mask,
                                     masks))

    def clipped_example_sums(self, theta, k, Xb, yb, m, gen, clip):
        # per-parameter views of the flat rows, made once per θ (dp_sgd updates one θ in place) and active prefix
        if self._views is None or self._views[0] is not theta:
            self._views = (theta, {})
        views = self._views[1]
        if k not in views:
            views[k] = [v[:k] for v in self.fm.views(theta).values()]
        return _mlp_clipped_sum(self.plan, views[k], Xb, yb, m, self.fm.draw_masks(m.shape, gen, theta.device), clip)

    def outputs(self, theta, X, chunk):
        part = list(self.fm.views(theta).values())
        parts = [_mlp_forward(self.plan, part, X[:, a: a + chunk], None) for a in range(0, X.shape[1], chunk)]
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    def clipped_mean_grad_sums(self, theta, bucket, run_of, weights, clip, gen, chunk_rows):
        """The pairs of one run share their model: forward and backward passes over all of a run's rows, a pair's
        squared gradient norm from its rows' activations and output gradients (see
        dpfl.fl.local.clipped_mean_grad_sums)."""
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
        X, y = lay(bucket.X), lay(bucket.y)
        row_w = lay(bucket.mask.to(dt) / bucket.counts.clamp(min=1).to(dt)[:, None])  # the mean over the pair's rows
        masks = None if masks is None else [lay(m) for m in masks]
        part = list(fm.split(theta).values())
        total = torch.zeros_like(theta)
        step = max(1, chunk_rows // n)  # slots per chunk: ~chunk_rows rows per run, activations that stay in the cache
        for s0 in range(0, slots, step):
            c = min(step, slots - s0)

            def rows(t):  # (R, slots, n, ...) -> this chunk's (R, c·n, ...)
                return t[:, s0: s0 + c].reshape(R, c * n, *t.shape[3:])

            total += _clipped_chunk(self.plan, part, rows(X), rows(y), rows(row_w),
                                    None if masks is None else [rows(m) for m in masks], w[:, s0: s0 + c], n, clip)
        return total
