"""A model as a function of one flat parameter vector, and how its outputs and gradients are computed for many copies
θ (P, D) at once (the (run, silo, user) pairs that dpfl.fl.local trains).

- `FlatModel`: a torch module seen as f(θ, X), with its loss (`ce`, `nll`, `bce` or the batch-coupled `cox`; loss =
  mean over the valid (masked-in) rows of a batch) and its dropout masks (`keep_mask`).
- `GradientPath`: how a FlatModel computes outputs and gradients, chosen once when it is built: `GenericPath`
  (`torch.func`: `functional_call` + `grad` + `vmap`; `per_example_grads` for DP-SGD), `LinearPath` (closed forms
  for a single linear score: Heart, TCGA; `cox_score_grads`) or `MlpPath` (hand-written batched forward and
  backward passes for Sequential MLPs, in dpfl.fl.mlp: Creditcard), the fast paths checked against the generic one
  in the tests.
The paths do the model-specific work (local SGD's steps, mean gradients, clipped sums, outputs); the functions of
dpfl.fl.local do what every path shares (eval mode, batching, sampling, noise).
"""

from __future__ import annotations

import abc
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from dpfl.fl.aggregate import clip_factor, clip_updates, weighted_clipped_sum
from dpfl.fl.buckets import Bucket, epoch_batches
from dpfl.fl.mlp import (  # the plain-MLP pass (MlpPath); _row_mean is re-exported for the tests
    MlpPlan,
    _clipped_chunk,
    _join,
    _mlp_clipped_sum,
    _mlp_forward,
    _mlp_mean_grads,
    _mlp_sgd_epochs,
    _mlp_step,
    _onehot,
    _row_mean,  # noqa: F401
    _row_weights,
    mlp_layers,
)
from dpfl.models.metrics import cox_partial_likelihood

LOSSES = ("ce", "nll", "bce", "cox")
#: `fair_masks` reads the words' bytes in memory order: bit j of a word is bit j % 8 of byte j // 8 on little-endian
_FAIR_CPU = sys.byteorder == "little"


def keep_mask(shape: tuple, p: float, gen: torch.Generator, device) -> torch.Tensor:
    """Bernoulli(1 − p) keep flags. For p = 1/2 (the dropout of the kato2024 models) each flag is one bit of a
    uniform 62-bit integer: 62 fair coins per draw, ~4× cheaper than a uniform float per flag compared with p."""
    if p != 0.5:
        return torch.rand(shape, generator=gen, device=device) >= p
    n = math.prod(shape)
    words = torch.randint(0, 2**62, (-(-n // 62),), generator=gen, device=device)
    bits = torch.bitwise_and(words[:, None], 1 << torch.arange(62, device=device)) != 0
    return bits.reshape(-1)[:n].reshape(shape)


def fair_masks(shapes: list[tuple], scale: float, gen: torch.Generator) -> list[torch.Tensor]:
    """`keep_mask(shape, 0.5, gen, "cpu")` for each shape in turn, as float masks (0 or `scale`), from one draw: the
    CPU generator fills a draw serially, so one draw of every site's words equals the per-site draws in a row, and
    the bits are unpacked by numpy (~4× cheaper than the shifts and compares, per step of the Creditcard MLP)."""
    ns = [math.prod(shape) for shape in shapes]
    ws = [-(-n // 62) for n in ns]
    words = torch.randint(0, 2**62, (sum(ws),), generator=gen)
    bits = np.unpackbits(words.numpy().view(np.uint8), bitorder="little").reshape(-1, 64)[:, :62]  # bit j of word
    flags = bits.astype(torch.empty((), dtype=torch.get_default_dtype()).numpy().dtype)
    flags *= scale  # 0 or scale, exactly as keep.to(dtype) / (1 - p)
    flat, out, start = torch.from_numpy(flags).view(-1), [], 0
    for shape, n, w in zip(shapes, ns, ws):
        out.append(flat[start * 62: start * 62 + n].view(shape))
        start += w
    return out


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
        sites = [((*shape[:-1], *site_shape), p) for site_shape, p in sites(shape[-1])]
        if _FAIR_CPU and all(p == 0.5 for _, p in sites) and torch.device(device).type == "cpu":
            return fair_masks([site_shape for site_shape, _ in sites], 1.0 / (1.0 - 0.5), gen)
        return [keep_mask(site_shape, p, gen, device).to(torch.get_default_dtype()) / (1.0 - p)
                for site_shape, p in sites]

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


# ------------------------------------------------------------------------------------------ per-example gradients


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

    def __init__(self, fm: FlatModel):
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
