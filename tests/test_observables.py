"""Observables of weighted point sets against naive formulas (MODEL.md's definitions)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.sphere import random_sphere_points

from meanfield.model import AttentionModel, Head
from meanfield.nonlocal_field import make_evaluator
from meanfield.observables import interaction_energy, measure_observables


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("method", ["direct", "fast", "auto"])
def test_measure_observables_match_naive_sums(rng, d, method):
    x, w = random_sphere_points(rng, 400, d), rng.uniform(0.1, 1.0, 400)
    w /= w.sum()
    heads = (Head(np.eye(d), np.eye(d), np.eye(d), 1.0), Head(2 * np.eye(d), np.eye(d), np.eye(d), 0.5))
    model = AttentionModel(d, 3.0, "softmax", heads)
    out = measure_observables(make_evaluator(model, None, method, 1e-6), x, w, fixed_sources=True)
    energy = sum(h.weight * w @ np.exp(3.0 * (x @ h.Q.T) @ (x @ h.K.T).T) @ w for h in heads) / 6.0
    assert out["energy"] == pytest.approx(energy, rel=1e-12)
    assert out["mass"] == pytest.approx(1.0, abs=1e-15)
    mean = w @ x
    assert [out[f"mean_{k}"] for k in range(d)] == pytest.approx(list(mean), abs=1e-15)
    assert out["order"] == pytest.approx(np.linalg.norm(mean), abs=1e-15)
    second = (x.T * w) @ x
    assert out[f"m2_0{d - 1}"] == pytest.approx(second[0, d - 1], abs=1e-15)


def test_energy_of_a_moving_measure_repeated(rng):
    """Fixed promise kept across calls with changing weights; a new array is not served stale."""
    model = AttentionModel(3, 4.0)
    ev = make_evaluator(model, None, "fast", 1e-6)
    x = random_sphere_points(rng, 300, 3)
    for _ in range(2):
        w = rng.uniform(0.1, 1.0, 300)
        ref = w @ np.exp(4.0 * x @ x.T) @ w / 8.0
        assert interaction_energy(ev, x, w, fixed_sources=True) == pytest.approx(ref, rel=1e-12)
    y = random_sphere_points(rng, 300, 3)
    assert interaction_energy(ev, y, w, fixed_sources=True) == pytest.approx(w @ np.exp(4.0 * y @ y.T) @ w / 8.0,
                                                                              rel=1e-12)
