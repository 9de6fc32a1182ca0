"""Generalized linear models with closed-form (per-example) gradients, batched over leading axes.

Parameters are always shaped (..., d, C): C = 1 for logistic and linear regression, C = classes for
softmax regression. A per-example gradient is the outer product x ⊗ r(x) of the features and a
"residual" r ∈ R^C, so its norm is ‖x‖·‖r‖ and clipping needs no gradient materialized (lowy2023 §8).

Two twins of the same maths: the numpy methods (`residual`, `loss`, `grad`, `hessian`, ...) are the reference
used by Newton's method and the tests; the torch methods (`residual_t`, `example_loss_t`, `mean_loss_t`) run in
the training loops on any device. `module()` gives the model as a torch module for `torch.func.functional_call`
(the generic per-example gradient path of dpfl.fl.gradients, checked against the closed form in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_softmax, softmax


@dataclass(frozen=True)
class GLM:
    """kind: "logistic" (labels 0/1), "linear" (real targets), "softmax" (labels 0..C−1)."""

    kind: str
    classes: int = 1

    @property
    def out_dim(self) -> int:
        return self.classes if self.kind == "softmax" else 1

    @property
    def max_loss(self) -> float:
        """Largest possible per-example loss (the logistic loss is bounded by its 1e-12 guard)."""
        return float(-np.log(1e-12)) if self.kind == "logistic" else float("inf")

    def residual(self, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
        """∂loss/∂score for each example: scores (..., C), y (...) -> (..., C)."""
        if self.kind == "logistic":
            return expit(np.clip(scores, -15.0, 15.0)) - y[..., None]
        if self.kind == "linear":
            return scores - y[..., None]
        if self.kind == "softmax":
            p = softmax(scores, axis=-1)
            return p - _one_hot(y, self.classes)
        raise ValueError(f"unknown model kind {self.kind!r}")

    def example_loss(self, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Loss per example: scores (..., C), y (...) -> (...)."""
        if self.kind == "logistic":
            s = expit(np.clip(scores[..., 0], -15.0, 15.0))
            return -(y * np.log(1e-12 + s) + (1 - y) * np.log(1e-12 + 1 - s))
        if self.kind == "linear":
            return 0.5 * (y - scores[..., 0]) ** 2
        if self.kind == "softmax":
            return -np.take_along_axis(log_softmax(scores, axis=-1), y[..., None].astype(np.int64), axis=-1)[..., 0]
        raise ValueError(f"unknown model kind {self.kind!r}")

    def loss(self, X: np.ndarray, y: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Mean loss over the rows of X (n, d) for parameters W (..., d, C) -> (...)."""
        return self.example_loss(np.einsum("nd,...dc->...nc", X, W), y).mean(axis=-1)

    def grad(self, X: np.ndarray, y: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Mean gradient over rows, W (d, C) -> (d, C)."""
        return X.T @ self.residual(X @ W, y) / len(X)

    def hessian(self, X: np.ndarray, y: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Hessian of the mean loss w.r.t. vec(W) (row-major over (d, C)) -> (dC, dC)."""
        n, d = X.shape
        scores = X @ W
        if self.kind == "logistic":
            s = expit(np.clip(scores[:, 0], -15.0, 15.0))
            return (X * (s * (1 - s))[:, None]).T @ X / n
        if self.kind == "linear":
            return X.T @ X / n
        p = softmax(scores, axis=-1)  # (n, C)
        C = p.shape[1]
        # Σ_i (diag(p_i) − p_i p_iᵀ) ⊗ x_i x_iᵀ, arranged for vec over (d, C)
        A = np.einsum("nc,ne->nce", -p, p)
        A[:, np.arange(C), np.arange(C)] += p
        B = (X[:, :, None] * A.reshape(n, 1, C * C)).reshape(n, d * C * C)
        H = (B.T @ X / n).reshape(d, C, C, d)  # one matrix product: H[d, c, e, f] = Σ_n x_d A_ce x_f / n
        return H.transpose(0, 1, 3, 2).reshape(d * C, d * C)

    # ---- torch twins (the hot loops) ------------------------------------------------------------------

    def residual_t(self, scores, y):
        """Torch twin of `residual`: scores (..., C), y (...) -> (..., C)."""
        import torch

        if self.kind == "logistic":
            return torch.sigmoid(torch.clamp(scores, -15.0, 15.0)) - y[..., None]
        if self.kind == "linear":
            return scores - y[..., None]
        onehot = torch.nn.functional.one_hot(y.long(), self.classes).to(scores.dtype)
        return torch.softmax(scores, dim=-1) - onehot

    def example_loss_t(self, scores, y):
        """Torch twin of `example_loss`: scores (..., C), y (...) -> (...)."""
        import torch

        if self.kind == "logistic":  # labels are 0/1: one log per entry, p = s or 1 − s
            s = torch.sigmoid(torch.clamp(scores[..., 0], -15.0, 15.0))
            return -torch.log(1e-12 + torch.where(y > 0.5, s, 1 - s))
        if self.kind == "linear":
            return 0.5 * (y - scores[..., 0]) ** 2
        return -torch.gather(torch.log_softmax(scores, dim=-1), -1, y.long()[..., None])[..., 0]

    def mean_loss_t(self, X, y, W):
        """Mean loss over the rows of X (n, d) for every parameter set of a batch of runs W (reps, d, G, C)
        -> (reps, G), as one matrix product (it runs every few rounds on all training rows)."""
        reps, d, G, C = W.shape
        scores = (X @ W.permute(1, 0, 2, 3).reshape(d, -1)).reshape(len(X), reps * G, C)
        loss = self.example_loss_t(scores, y[:, None].expand(-1, reps * G))
        return loss.mean(dim=0).reshape(reps, G)

    def module(self, dim: int):
        """The model as a torch module (scores = x @ weight, weight (d, C)), for functional_call/grad/vmap."""
        import torch

        model = self

        class _GLMModule(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.zeros(dim, model.out_dim, dtype=torch.float64))

            def forward(self, x):
                return x @ self.weight

        return _GLMModule()

    def predict_error(self, X: np.ndarray, y: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Misclassification rate (logistic: predict 1 iff sigmoid > 0.5; softmax: argmax) -> (...)."""
        scores = np.einsum("nd,...dc->...nc", X, W)
        if self.kind == "logistic":
            pred = (expit(np.clip(scores[..., 0], -15.0, 15.0)) > 0.5).astype(float)
        elif self.kind == "softmax":
            pred = scores.argmax(axis=-1)
        else:
            raise ValueError("predict_error is for classifiers")
        return (pred != y).mean(axis=-1)

    def mse(self, X: np.ndarray, y: np.ndarray, W: np.ndarray) -> np.ndarray:
        return ((np.einsum("nd,...dc->...nc", X, W)[..., 0] - y) ** 2).mean(axis=-1)


def _one_hot(y: np.ndarray, classes: int) -> np.ndarray:
    return (y[..., None] == np.arange(classes)).astype(float)


def newton_optimum(model: GLM, X: np.ndarray, y: np.ndarray, max_iter: int = 1000, tol: float = 1e-6):
    """Minimizer of the mean training loss (lowy2023 §2): start at 0, Newton steps H⁻¹g taken with a step length
    that starts at the spec's damping 0.5 and is halved until the loss does not increase (a step that would raise
    the loss is never accepted), stop when the Newton decrement sqrt(gᵀH⁻¹g) ≤ tol. Linear regression uses the
    closed form.

    Softmax is fitted with the last class's column fixed at 0: adding the same vector to every column does not
    change the loss, so the full Hessian is singular; with a reference class it is not (unless the data are
    separable). The optimum is *certified* (converged = True) only when the decrement reached tol at a finite
    loss with a Hessian that is numerically positive definite; otherwise (separable data: the loss has no
    minimizer, ‖W‖ → ∞; or a vanishing Hessian) converged = False and callers report the optimum as n/a.
    Returns (W*, F*, iterations, converged)."""
    d, C = X.shape[1], model.out_dim
    if model.kind == "linear":
        w, *_ = np.linalg.lstsq(X, y, rcond=None)
        W = w.reshape(d, 1)
        return W, float(model.loss(X, y, W)), 0, True
    free = C - 1 if model.kind == "softmax" else C  # softmax: the last column is the reference (fixed at 0)

    def full(V):
        return np.concatenate([V, np.zeros((d, C - free))], axis=1) if free < C else V

    def reduced(M):
        """Gradient (d, C) / Hessian (dC, dC) restricted to the free columns (vec row-major over (d, C))."""
        if free == C:
            return M
        if M.ndim == 2 and M.shape == (d, C):
            return M[:, :free]
        keep = (np.arange(d)[:, None] * C + np.arange(free)[None, :]).ravel()
        return M[np.ix_(keep, keep)]

    V = np.zeros((d, free))
    loss = float(model.loss(X, y, full(V)))
    for it in range(1, max_iter + 1):
        g = reduced(model.grad(X, y, full(V))).reshape(-1)
        H = reduced(model.hessian(X, y, full(V)))
        eig_min = float(np.linalg.eigvalsh(H)[0]) if np.all(np.isfinite(H)) else -np.inf
        if not eig_min > 1e-12 * max(1.0, float(np.abs(H).max())):
            return full(V), loss, it, False  # vanishing or indefinite Hessian: no certified optimum
        step = np.linalg.solve(H, g)
        decrement = np.sqrt(max(float(g @ step), 0.0))
        if decrement <= tol:
            return full(V), loss, it, bool(np.isfinite(loss))
        t = 0.5
        while t > 1e-12:
            cand = V - t * step.reshape(d, free)
            new = float(model.loss(X, y, full(cand)))
            if np.isfinite(new) and new <= loss:
                V, loss = cand, new
                break
            t /= 2
        else:
            return full(V), loss, it, False  # no step length lowers the loss: stuck, not certified
    return full(V), loss, max_iter, False
