"""The federated round engine (dpfl.fl): padded silo data with masks, the round loop (evaluation schedule, failure
rules, rows, progress lines), the device choice, the generic per-example gradients through torch.func, and the torch
twins of the GLM maths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpfl.fl.data import SiloData, pad
from dpfl.fl.device import DeviceError, resolve_device
from dpfl.fl.engine import (Divergence, Evaluation, FreezeNonFinite, IterateAverage, NoFreeze, RoundRule,
                            progress_rounds, run_rounds)
from dpfl.fl.aggregate import clip_updates
from dpfl.fl.flat_model import FlatModel
from dpfl.fl.gradients import per_example_grads
from dpfl.models.glm import GLM

KINDS = ["logistic", "linear", "softmax"]


def glm_data(kind, n=7, d=4, seed=0):
    rng = np.random.default_rng(seed)
    model = GLM(kind, classes=3 if kind == "softmax" else 1)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, 3, n).astype(float) if kind == "softmax" else (rng.random(n) < 0.5).astype(float)
    if kind == "linear":
        y = rng.normal(size=n) * 2
    W = rng.normal(size=(d, model.out_dim))
    return model, X, y, W


def test_pad_and_silo_masks():
    Xs = [np.ones((3, 2)), 2 * np.ones((1, 2)), np.zeros((0, 2))]
    out, mask = pad(Xs)
    assert out.shape == (3, 3, 2) and mask.sum(axis=1).tolist() == [3, 1, 0]
    data = SiloData.from_lists(Xs, [np.arange(3.0), np.array([7.0]), np.zeros(0)])
    assert data.mask.tolist() == mask.tolist()
    assert data.pooled_y.tolist() == [0.0, 1.0, 2.0, 7.0] and data.pooled_X.shape == (4, 2)


@pytest.mark.parametrize("kind", KINDS)
def test_generic_per_example_grads_match_the_closed_form(kind):
    """vmap(grad(functional_call)) on the GLM as a torch module gives x ⊗ r(x), the closed form."""
    model, X, y, W = glm_data(kind)
    fm = FlatModel(model.module(X.shape[1]), model.example_loss_t)
    theta = torch.from_numpy(W).reshape(-1)  # the module's one parameter, weight (d, C), flattened
    mask = torch.ones(len(X), dtype=torch.bool)
    flat = per_example_grads(fm, theta, torch.from_numpy(X), torch.from_numpy(y), mask)
    grads = {"weight": flat.reshape(len(X), *W.shape)}
    closed = X[:, :, None] * model.residual(X @ W, y)[:, None, :]
    np.testing.assert_allclose(grads["weight"].numpy(), closed, rtol=1e-10, atol=1e-12)
    clipped, norms = clip_updates(flat, 0.5)
    clipped = {"weight": clipped.reshape(len(X), *W.shape)}
    np.testing.assert_allclose(norms.numpy(), np.linalg.norm(closed.reshape(len(X), -1), axis=1), rtol=1e-10)
    assert (np.linalg.norm(clipped["weight"].numpy().reshape(len(X), -1), axis=1) <= 0.5 + 1e-12).all()


@pytest.mark.parametrize("kind", KINDS)
def test_torch_twins_match_the_numpy_reference(kind):
    model, X, y, W = glm_data(kind, n=9)
    Wb = np.stack([W, 2 * W, -W])  # three runs
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    np.testing.assert_allclose(model.residual_t(torch.from_numpy(X @ W), yt).numpy(), model.residual(X @ W, y),
                               rtol=1e-12)
    batch = torch.from_numpy(Wb).permute(1, 0, 2)[None]  # (reps=1, d, G=3, C)
    np.testing.assert_allclose(model.mean_loss_t(Xt, yt, batch).numpy()[0], [model.loss(X, y, w) for w in Wb],
                               rtol=1e-12)


# ------------------------------------------------------------------------------------------ the round loop


class AddRound(RoundRule):
    """θ ← θ + step every round; `poison` {round: run}: that run's new state is NaN in that round."""

    def __init__(self, step, poison=None):
        self.step_size, self.poison, self.seen = step, poison or {}, []

    def step(self, state, t):
        self.seen.append(t)
        new = state + self.step_size
        if t in self.poison:
            new = new.clone()
            new[self.poison[t]] = float("nan")
        return new


class Values(Evaluation):
    """Each run's first coordinate and its square, as evaluated values."""

    def __init__(self):
        self.evaluated = []

    def evaluate(self, state, t):
        self.evaluated.append(t)
        x = state[:, 0].numpy().copy()
        return {"x": x, "x2": x**2}

    def summary(self, values, failed):
        return f"max x {np.nanmax(values['x']):g}"


def test_round_loop_evaluates_on_its_schedule_and_makes_one_row_per_run_and_evaluation():
    state = torch.zeros((2, 3), dtype=torch.float64)
    rule, ev = AddRound(torch.tensor([[1.0], [2.0]], dtype=torch.float64)), Values()
    run = run_rounds(state, rule, ev, rounds=5, schedule={0, 2, 5}, failure=NoFreeze("x"))
    assert rule.seen == [1, 2, 3, 4, 5] and ev.evaluated == [0, 2, 5]
    assert run.evaluations == 3 and run.rounds == 5 and run.seconds >= run.evaluation_seconds >= 0
    rows = run.rows([{"seed": 10}, {"seed": 11}])
    assert [(r["seed"], r["round"], r["x"]) for r in rows] == [(10, 0, 0.0), (11, 0, 0.0), (10, 2, 2.0), (11, 2, 4.0),
                                                               (10, 5, 5.0), (11, 5, 10.0)]
    assert list(rows[0]) == ["seed", "round", "x", "x2", "failed"]
    assert all(type(r["x"]) is float and r["failed"] is False for r in rows)
    assert torch.equal(run.state, torch.tensor([[5.0] * 3, [10.0] * 3], dtype=torch.float64))


def test_a_non_finite_run_is_frozen_failed_and_blanked_while_the_others_go_on():
    """FreezeNonFinite (kato2024): run 1 turns NaN in round 2: it keeps its round-1 state, its rows from round 2 on
    are failed with NaN values; run 0 is untouched."""
    state = torch.zeros((2, 1), dtype=torch.float64)
    run = run_rounds(state, AddRound(1.0, poison={2: 1}), Values(), rounds=4, schedule=range(1, 5),
                     failure=FreezeNonFinite("x"))
    assert run.state[:, 0].tolist() == [4.0, 3.0]  # frozen in round 2 only, then trained on (its rows stay failed)
    rows = run.rows([{"seed": 0}, {"seed": 1}])
    by_seed = {s: [r for r in rows if r["seed"] == s] for s in (0, 1)}
    assert [r["failed"] for r in by_seed[1]] == [False, True, True, True]
    assert by_seed[1][0]["x"] == 1.0 and all(np.isnan(r["x"]) and np.isnan(r["x2"]) for r in by_seed[1][1:])
    assert [r["x"] for r in by_seed[0]] == [1.0, 2.0, 3.0, 4.0] and not any(r["failed"] for r in by_seed[0])
    assert run.failed.tolist() == [False, True]


def spoiled(run: int, at: int, value: float) -> Values:
    """Values whose metric x of run `run` is `value` at round `at`."""
    class Spoiled(Values):
        def evaluate(self, state, t):
            out = super().evaluate(state, t)
            out["x"][run] = value if t == at else out["x"][run]
            return out

    return Spoiled()


def test_an_evaluation_that_is_not_finite_fails_the_run_from_then_on():
    run = run_rounds(torch.zeros((2, 1), dtype=torch.float64), AddRound(1.0), spoiled(0, 2, np.inf), rounds=3,
                     schedule={1, 2, 3}, failure=FreezeNonFinite("x"))
    assert [r["failed"] for r in run.rows([{"r": 0}, {"r": 1}]) if r["r"] == 0] == [False, True, True]


def test_no_freeze_marks_only_the_rows_whose_metric_is_not_finite():
    run = run_rounds(torch.zeros((2, 1)), AddRound(1.0), spoiled(1, 1, np.nan), rounds=2, schedule={1, 2},
                     failure=NoFreeze("x"))
    assert [r["failed"] for r in run.rows([{}, {}])] == [False, True, False, False]
    assert np.isnan(run.rows([{}, {}])[1]["x"])  # not blanked: the measured value


def test_iterate_average_and_divergence_freeze():
    """lowy2023's rule: the output is the mean of the last iterates; every `every` rounds a run whose loss at that
    mean exceeds the threshold is frozen; at the last (non-check) evaluation only a non-finite loss counts."""
    W0 = torch.zeros((1, 1, 2, 1), dtype=torch.float64)  # two runs of a scalar model (reps, d, G, C)
    step = torch.tensor([1.0, 10.0], dtype=torch.float64).reshape(1, 1, 2, 1)
    average = IterateAverage(W0, lambda W: W[:, 0, :, 0] ** 2, average_last=2)
    run = run_rounds(W0, AddRound(step), average, rounds=4, schedule={1, 2, 3, 4},
                     failure=Divergence("train_loss", 50.0, 1, axes=(0, 2)))
    # run 0: iterates 1, 2, 3, 4 -> mean of the last two = 3.5; run 1: 10, 20 (loss of mean 15² > 50: frozen)
    W = average.average()
    assert W[0, 0, 0, 0] == pytest.approx(3.5) and W[0, 0, 1, 0] == pytest.approx(20.0)
    assert run.failed.tolist() == [[False, True]]
    # checks every 2 rounds only: at round 2, run 1's loss (mean of 1, 2)² > 1 freezes it; run 0's 0.15² does not,
    # nor does its 0.25² at round 3 (no check round)
    average = IterateAverage(W0, lambda W: W[:, 0, :, 0] ** 2, average_last=2)
    run = run_rounds(W0, AddRound(step * 0.1), average, rounds=3, schedule={2, 3},
                     failure=Divergence("train_loss", 1.0, 2, axes=(0, 2)))
    assert run.failed.tolist() == [[False, True]]
    average = IterateAverage(W0, lambda W: W[:, 0, :, 0] ** 2, average_last=1)
    run = run_rounds(W0, AddRound(step), average, rounds=3, schedule={2, 3},
                     failure=Divergence("train_loss", 500.0, 2, axes=(0, 2)))
    assert run.failed.tolist() == [[False, False]]  # run 1: 20² ≤ 500 at the check; 30² > 500 at round 3, no check


def test_progress_lines_follow_tenths_of_the_run():
    assert progress_rounds(20) == [1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert progress_rounds(3) == [1, 2, 3]
    lines = []

    class Log:
        def step(self, message=""):
            lines.append(message)

    run_rounds(torch.zeros((2, 1)), AddRound(1.0, poison={2: 1}), Values(), rounds=3, schedule={1, 2, 3},
               failure=FreezeNonFinite("x"), progress=Log(), label="seed 0")
    assert lines[0] == "seed 0, round 1/3, max x 1"
    assert lines[-1] == "seed 0, round 3/3, max x 3, 1 failed run(s)"


def test_device_choice():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="no CUDA GPU"):
            resolve_device("cuda")
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")
