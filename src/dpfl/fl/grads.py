"""Per-example gradients of any torch model through `torch.func` (functional_call + grad + vmap): the generic
path for models without a closed form (kato2024's and bietti2022's networks). GLMs use their closed form
(dpfl.models.glm), and the tests check that both agree."""

from __future__ import annotations


def per_example_grads(module, params: dict, loss_fn, X, y):
    """{name: (n, *shape)} gradients of loss_fn(module(x), y) for each row (x, y) of (X, y), at `params`."""
    import torch
    from torch.func import functional_call, grad, vmap

    def one(p, x, t):
        return loss_fn(functional_call(module, p, (x[None],)), t[None]).sum()

    return vmap(grad(one), in_dims=(None, 0, 0))(params, X, y)


def clip_rows(grads: dict, clip):
    """Clip each row's gradient (all parameters together) to norm ≤ clip: min(1, clip/‖g‖)."""
    import torch

    from dpfl.fl.aggregate import clip_factor

    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(dim=1) for g in grads.values()))
    factor = clip_factor(norms, clip)
    return {k: g * factor.reshape(-1, *([1] * (g.dim() - 1))) for k, g in grads.items()}, norms
