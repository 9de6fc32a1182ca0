"""The neural models of kato2024 §3 as torch modules, built by name with a seeded default init. Their parameters
are read and written through `torch.func.functional_call`, so one module serves every (user, silo) pair of a round
(dpfl.fl.local): no per-user copies.

Dropout: a model with dropout lists its sites (`dropout_sites(rows)`: per site the mask shape for `rows` inputs and
the drop probability) and takes the masks as a second forward argument. The batched trainer draws them from its
own generator (reproducible, and fast: PyTorch's dropout under vmap(randomness="different") is slow on the CPU);
without masks the modules' own nn.Dropout layers apply (train/eval semantics as usual)."""

from __future__ import annotations

import torch
from torch import nn


class CreditcardMLP(nn.Module):
    """Linear(30,30)→ReLU→GroupNorm(1,30); 4 × [Linear(30,30)→ReLU→GroupNorm(1,30)→Dropout(0.5)]; Linear(30,2):
    5,012 parameters (the authors' published architecture; the paper says "about 4K", inferred)."""

    def __init__(self):
        super().__init__()
        layers = [nn.Linear(30, 30), nn.ReLU(), nn.GroupNorm(1, 30)]
        for _ in range(4):
            layers += [nn.Linear(30, 30), nn.ReLU(), nn.GroupNorm(1, 30), nn.Dropout(0.5)]
        layers.append(nn.Linear(30, 2))
        self.net = nn.Sequential(*layers)

    def forward(self, x, masks=None):
        if masks is None:
            return self.net(x)
        site = 0
        for layer in self.net:
            if isinstance(layer, nn.Dropout):
                x = x * masks[site]
                site += 1
            else:
                x = layer(x)
        return x

    def dropout_sites(self, rows: int) -> list[tuple[tuple, float]]:
        return [((rows, 30), layer.p) for layer in self.net if isinstance(layer, nn.Dropout)]


class MnistCNN(nn.Module):
    """Conv(1→10,k5)→MaxPool2→ReLU; Conv(10→20,k5)→Dropout2d→MaxPool2→ReLU; Linear(320,50)→ReLU→Dropout(0.5);
    Linear(50,10)→log_softmax: 21,840 parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.drop2d = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x, masks=None):
        x = torch.relu(torch.max_pool2d(self.conv1(x.reshape(-1, 1, 28, 28)), 2))
        x = self.conv2(x)
        x = self.drop2d(x) if masks is None else x * masks[0]
        x = torch.relu(torch.max_pool2d(x, 2))
        x = torch.relu(self.fc1(x.flatten(1)))
        x = self.drop(x) if masks is None else x * masks[1]
        return torch.log_softmax(self.fc2(x), dim=-1)

    def dropout_sites(self, rows: int) -> list[tuple[tuple, float]]:
        return [((rows, 20, 1, 1), self.drop2d.p), ((rows, 50), self.drop.p)]


class LinearScore(nn.Module):
    """One linear score x·w + b: Heart's logistic regression (13 → 1, read through a sigmoid) and TCGA's Cox risk
    score (39 → 1)."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, 1)

    def forward(self, x):
        return self.linear(x)[..., 0]


def artificial_mlp(hidden: int) -> nn.Module:
    """kato2024 Fig 12's model on make_classification data: Linear(4, h)→ReLU→Linear(h, 2), 8h + h + 2h + 2
    parameters (h = 2, 4, 8, 15: 16, 30, 58, 107)."""
    return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 2))


#: kato2024 Fig 12's hidden widths, by model name
ARTIFICIAL_HIDDEN = (2, 4, 8, 15)

BUILDERS = {
    "creditcard_mlp": CreditcardMLP,
    "mnist_cnn": MnistCNN,
    "heart_logistic": lambda: LinearScore(13),
    "tcga_cox": lambda: LinearScore(39),
    **{f"artificial_mlp_h{h}": (lambda h=h: artificial_mlp(h)) for h in ARTIFICIAL_HIDDEN},
}


def build_model(name: str, seed: int, dtype=torch.float32) -> nn.Module:
    """The model `name` with PyTorch's default init after `torch.manual_seed(seed)` (spec §3), on the CPU; move it
    with `.to(device)`. The global torch RNG is restored afterwards, so building a model never shifts other draws."""
    if name not in BUILDERS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(sorted(BUILDERS))}")
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return BUILDERS[name]().to(dtype)
    finally:
        torch.random.set_rng_state(state)


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
