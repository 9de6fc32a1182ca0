"""A model as a function of one flat parameter vector (dpfl.fl.local trains many copies θ (P, D) at once, one per
(run, silo, user) pair): `FlatModel`, a torch module seen as f(θ, X), with its loss (`ce`, `nll`, `bce` or the
batch-coupled `cox`; loss = mean over the valid (masked-in) rows of a batch), its dropout masks (`keep_mask`,
`fair_masks`) and the flat/dict views of its parameters. How its outputs and gradients are computed is its gradient
path (dpfl.fl.gradients), chosen once here when it is built.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

from dpfl.fl.gradients import GenericPath, GradientPath, LinearPath, MlpPath
from dpfl.fl.mlp import mlp_layers
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
