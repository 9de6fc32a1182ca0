"""The hand-written batched forward and backward passes of plain Sequential MLPs (the Creditcard MLP), which
dpfl.fl.gradients.MlpPath runs: at 30 units and a few rows per pair, autograd's bookkeeping costs more than the
arithmetic (docs/papers/kato2024.md, where the time goes)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from dpfl.fl.aggregate import clip_factor
from dpfl.fl.buckets import Bucket, gather_rows

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


@dataclass(frozen=True)
class MlpPlan:
    """The MLP's layers as the batched passes read them, built once per FlatModel: per layer (kind, weight index,
    bias index, eps), the indices into fm.names (None for ReLU and dropout); the lowest parameterized layer (nothing
    below it needs a gradient); the logits' width; whether the loss is ce (else nll). The passes take the parameters
    as a list in fm.names' order (`part`: each (P, *shape), or its active prefix)."""

    layers: tuple
    lowest: int
    classes: int
    ce: bool

    @classmethod
    def of(cls, fm) -> "MlpPlan":  # fm: dpfl.fl.flat_model.FlatModel
        index = {name: i for i, name in enumerate(fm.names)}
        layers = tuple((kind, index.get(pre + "weight"), index.get(pre + "bias"), getattr(layer, "eps", None))
                       for kind, pre, layer in fm.mlp)
        lowest = min(i for i, (kind, *_) in enumerate(layers) if kind in ("linear", "groupnorm"))
        classes = fm.shapes[[wi for kind, wi, _, _ in layers if kind == "linear"][-1]][0]
        return cls(layers, lowest, classes, fm.loss == "ce")


def _row_mean(x: torch.Tensor) -> torch.Tensor:
    """x.mean(-1, keepdim=True): on the CPU ATen computes it as sum(-1).div_(n), written out here to skip the
    dispatches around it (the same values); elsewhere the mean itself (CUDA reduces differently)."""
    return x.sum(-1, keepdim=True).div_(x.shape[-1]) if x.is_cpu else x.mean(-1, keepdim=True)


def _mlp_forward(plan: MlpPlan, part: list, X: torch.Tensor, masks, keep: bool = False):
    """Logits (P, n, K) of every pair; with keep, also the tape the backward pass reads, one entry per layer (layer
    input, ReLU output, normalized activations and statistics, dropout mask or None)."""
    x, site, tape = X, 0, []
    for kind, wi, bi, eps in plan.layers:
        if kind == "linear":
            if keep:
                tape.append(x)
            x = torch.baddbmm(part[bi][:, None, :], x, part[wi].transpose(1, 2))
        elif kind == "relu":
            x = torch.relu(x) if x is X else torch.relu_(x)  # in place on a fresh activation
            if keep:
                tape.append(x)
        elif kind == "groupnorm":  # GroupNorm(1, C) of a (rows, C) input = layer norm over C, then the affine map
            # two-pass statistics by hand: ~40% faster than native_layer_norm on (pairs, rows, 30) inputs
            mean = _row_mean(x)
            xhat = x - mean
            rstd = _row_mean(xhat * xhat).add_(eps).rsqrt_()
            xhat.mul_(rstd)
            if keep:
                tape.append((x, xhat, mean, rstd))
            x = torch.addcmul(part[bi][:, None, :], xhat, part[wi][:, None, :])
        else:  # dropout
            mask = None if masks is None else masks[site]
            if mask is not None:
                x = x * mask if x is X else x.mul_(mask)  # (a ReLU output on the tape may be scaled in place: masks
                # are ≥ 0, so its sign pattern, all the backward pass reads, only changes where the mask, applied to
                # the gradient first, is 0)
            if keep:
                tape.append(mask)
            site += 1
    return (x, tape) if keep else x


def _onehot(plan: MlpPlan, y: torch.Tensor, dtype) -> torch.Tensor:
    return F.one_hot(y.long(), plan.classes).to(dtype)


def _mlp_output_grads(plan: MlpPlan, logits, onehot, weight):
    """∂(Σ_i weight_i·loss_i)/∂logits (P, n, K); loss ce (softmax cross-entropy) or nll (outputs are log-probs)."""
    d = torch.softmax(logits, dim=-1) - onehot if plan.ce else -onehot
    return d.mul_(weight[..., None])


def _mlp_backward(plan: MlpPlan, part: list, tape: list, b: torch.Tensor, lr: float | None = None):
    """The backward pass from the output gradients b, from the top layer down. lr None: returns [(kind, weight
    index, bias index, a, b)] for each parameterized layer, a = its input (linear) or normalized activations (group
    norm), b = ∂loss/∂(its output) per row. lr given: one SGD step instead, each layer's parameters updated in place
    (W ← W − η·bᵀa, one baddbmm) as soon as its input gradient has been computed."""
    layers = []
    for i in range(len(plan.layers) - 1, plan.lowest - 1, -1):
        kind, wi, bi, _ = plan.layers[i]
        saved = tape[i]
        if kind == "dropout":
            if saved is not None:
                b = b * saved
        elif kind == "relu":
            b = torch.ops.aten.threshold_backward(b, saved, 0)
        elif kind == "groupnorm":
            x, xhat, mean, rstd = saved
            w = part[wi]
            dxhat = b * w[:, None, :]
            if lr is None:
                layers.append((kind, wi, bi, xhat, b))
            else:
                w.sub_((b * xhat).sum(1), alpha=lr)
                part[bi].sub_(b.sum(1), alpha=lr)
            if i == plan.lowest:
                break
            b = torch.ops.aten.native_layer_norm_backward(dxhat, x, x.shape[-1:], mean, rstd, None, None,
                                                          [True, False, False])[0]
        else:
            w = part[wi]
            below = None if i == plan.lowest else torch.bmm(b, w)
            if lr is None:
                layers.append((kind, wi, bi, saved, b))
            else:
                w.baddbmm_(b.transpose(1, 2), saved, alpha=-lr)
                part[bi].sub_(b.sum(1), alpha=lr)
            b = below
    return layers


def _mlp_param_grads(kind, a, b):
    """(weight, bias) gradients of one layer summed over rows, from its tape entry."""
    if kind == "linear":
        return torch.bmm(b.transpose(1, 2), a), b.sum(1)
    return (b * a).sum(1), b.sum(1)


def _grads(part: list, layers: list, scale=None) -> list:
    """Each parameter's gradient summed over rows (fm.names' order), b scaled by `scale` per row if given."""
    grads = [None] * len(part)
    for kind, wi, bi, a, b in layers:
        grads[wi], grads[bi] = _mlp_param_grads(kind, a, b if scale is None else b * scale)
    return grads


def _join(grads: list) -> torch.Tensor:
    """[(P, *shape)] in fm.names' order -> (P, D) (FlatModel.join)."""
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads], dim=1)


def _row_weights(mask, dtype, mean: bool):
    w = mask.to(dtype)
    return w / mask.sum(dim=1, keepdim=True).clamp(min=1).to(dtype) if mean else w


def _mlp_mean_grads(plan: MlpPlan, part: list, X, y, mask, masks) -> list:
    """Each pair's gradient of its masked-mean loss (fm.names' order)."""
    logits, tape = _mlp_forward(plan, part, X, masks, keep=True)
    dt = logits.dtype
    b = _mlp_output_grads(plan, logits, _onehot(plan, y, dt), _row_weights(mask, dt, True))
    return _grads(part, _mlp_backward(plan, part, tape, b))


def _mlp_step(plan: MlpPlan, part: list, X, onehot, row_w, masks, lr: float) -> None:
    """One SGD step on each pair's weighted loss (row weights `row_w`: a mask over its batch's valid rows), the
    parameters `part` updated in place layer by layer."""
    logits, tape = _mlp_forward(plan, part, X, masks, keep=True)
    _mlp_backward(plan, part, tape, _mlp_output_grads(plan, logits, onehot, row_w), lr)


def _mlp_sgd_epochs(fm, plan: MlpPlan, theta, bucket: Bucket, *, epochs: int, batch: int, lr: float,
                    gen, shuffle: bool, active: list[int]) -> torch.Tensor:
    """`local_sgd` on the MLP path: the steps of `_ModulePath.sgd` (each epoch's shuffle, then per step the active
    pairs' dropout masks and one `_mlp_step`), with the same draws and operations, and less work around them: each
    epoch's rows are gathered once in their shuffled order (a step's batch is a slice of them), the one-hot targets
    and the row weights mask / (valid rows of the step's batch) are built once per epoch (once per call without a
    shuffle), the active prefixes' parameter views once per call, and no autograd bookkeeping (inference mode)."""
    params = fm.split(theta)  # contiguous per-parameter copies (batched products over the flat rows' views copy their
    # operands: ~1.5× slower), updated in place
    n_pad = bucket.mask.shape[1]
    width = min(batch, n_pad) if shuffle else n_pad  # rows per step (a pair's last batch may hold padding)
    dt, views, targets = theta.dtype, {}, None
    with torch.inference_mode():
        for _ in range(epochs):
            if shuffle:  # epoch_batches's keys and order; each pair's rows gathered once, in that order
                keys = torch.rand(bucket.mask.shape, generator=gen, device=bucket.X.device)
                order = torch.argsort(torch.where(bucket.mask, keys, torch.full_like(keys, 2.0)), dim=1)
                X, y, mask = (gather_rows(t, order) for t in (bucket.X, bucket.y, bucket.mask))
                targets = None
            else:
                X, y, mask = bucket.X, bucket.y, bucket.mask
            if targets is None:
                P = mask.shape[0]
                counts = mask.reshape(P, -1, width).sum(dim=2, keepdim=True).clamp(min=1).to(dt)
                targets = _onehot(plan, y, dt), (mask.to(dt).reshape(P, -1, width) / counts).reshape(P, n_pad)
            onehot, row_w = targets
            for j, k in enumerate(active):
                if k not in views:
                    views[k] = [t[:k] for t in params.values()]
                rows = slice(j * width, (j + 1) * width)
                masks = fm.draw_masks((k, width), gen, theta.device)
                _mlp_step(plan, views[k], X[:k, rows], onehot[:k, rows], row_w[:k, rows], masks, lr)
    return fm.join(params)


def _mlp_clipped_sum(plan: MlpPlan, part: list, X, y, mask, masks, clip: float) -> torch.Tensor:
    """Σ_i clip_C(g_i) over each pair's valid rows (P, D), g_i the gradient of row i's own loss (all parameters
    jointly)."""
    logits, tape = _mlp_forward(plan, part, X, masks, keep=True)
    dt = logits.dtype
    layers = _mlp_backward(plan, part, tape, _mlp_output_grads(plan, logits, _onehot(plan, y, dt), mask.to(dt)))
    sq = torch.zeros(mask.shape, dtype=dt, device=X.device)
    for kind, _, _, a, b in layers:
        bb = b * b
        if kind == "linear":  # weight b aᵀ and bias b
            sq.add_(bb.sum(-1) * ((a * a).sum(-1) + 1.0))
        else:  # group-norm affine: weight b ⊙ x̂, bias b
            sq.add_((bb * a * a).sum(-1)).add_(bb.sum(-1))
    c = torch.where(mask, clip_factor(torch.sqrt(sq), clip), torch.zeros_like(sq))
    return _join(_grads(part, layers, c[..., None]))


def _clipped_chunk(plan: MlpPlan, part: list, X, y, row_w, masks, w, n: int, clip: float) -> torch.Tensor:
    """`MlpPath.clipped_mean_grad_sums` on c slots of n rows per run: X (R, c·n, F), w (R, c) -> (R, D)."""
    R, c = w.shape
    logits, tape = _mlp_forward(plan, part, X, masks, keep=True)
    dt = logits.dtype
    layers = _mlp_backward(plan, part, tape, _mlp_output_grads(plan, logits, _onehot(plan, y, dt), row_w))

    def per_pair(t):  # (R, c·n, d) -> (R·c, n, d)
        return t.reshape(R * c, n, t.shape[-1])

    sq = torch.zeros(R * c, dtype=dt, device=X.device)
    for kind, _, _, a, b in layers:
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
    if not bool(finite.all()):  # rows of a pair with a non-finite gradient send nothing (0·NaN would still be NaN)
        zero = torch.zeros((), dtype=dt, device=X.device)
        layers = [(kind, wi, bi, torch.where(row_coef != 0, a, zero), torch.where(row_coef != 0, b, zero))
                  for kind, wi, bi, a, b in layers]
    return _join(_grads(part, layers, row_coef))
