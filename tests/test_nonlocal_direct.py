"""The direct evaluator against a naive double loop, overflow safety and MPI gathering."""

import numpy as np
import pytest
from helpers.sphere import random_sphere_points

from meanfield.model import AttentionModel
from meanfield.nonlocal_field import DirectEvaluator, direct_sums


def naive_velocity(model: AttentionModel, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """MODEL.md's formulas, one target and one source at a time."""
    out = np.zeros_like(x)
    for i, xi in enumerate(x):
        for head in model.heads:
            N, Z = np.zeros(model.d), 0.0
            for yj, wj in zip(y, w):
                k = np.exp(model.beta * np.dot(head.Q @ xi, head.K @ yj))
                N += wj * k * (head.V @ yj)
                Z += wj * k
            v = N / Z if model.attention == "softmax" else N
            out[i] += head.weight * (v - np.dot(xi, v) * xi)
    return out


def random_model(rng, d, attention, heads=1, beta=2.0):
    specs = [
        {"Q": rng.standard_normal((d, d)) / np.sqrt(d), "K": rng.standard_normal((d, d)) / np.sqrt(d),
         "V": rng.standard_normal((d, d)), "weight": float(rng.uniform(0.5, 1.5))}
        for _ in range(heads)
    ]
    return AttentionModel.build(d, beta, attention, heads=specs)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("heads", [1, 2])
def test_direct_matches_double_loop(rng, d, attention, heads):
    model = random_model(rng, d, attention, heads)
    x, y = random_sphere_points(rng, 23, d), random_sphere_points(rng, 41, d)
    w = rng.uniform(0.1, 1.0, 41)
    # tiny blocks exercise the online rescaling across source blocks
    X = DirectEvaluator(model, block_targets=5, block_sources=7).velocity(x, y, w)
    ref = naive_velocity(model, x, y, w)
    assert np.abs(X - ref).max() <= 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_large_beta_stays_finite_and_exact(rng, attention):
    beta = 200.0
    model = AttentionModel.build(3, beta, attention)
    x, y = random_sphere_points(rng, 50, 3), random_sphere_points(rng, 300, 3)
    w = np.full(300, 1 / 300)
    values = direct_sums(model, x, y, w, block_targets=16, block_sources=64)
    X = values.velocity(model, x)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(values.N)) and np.all(values.Z > 0)
    # the shift is the largest exponent, so the scaled Z lies in [min weight, total weight]
    assert np.all(values.Z >= w.min() * (1 - 1e-12)) and np.all(values.Z <= 1 + 1e-12)
    # compare with a log-domain evaluation of the same sums
    E = beta * x @ y.T
    shift = E.max(axis=1, keepdims=True)
    P = np.exp(E - shift) * w
    N = P @ y
    raw = N / P.sum(1, keepdims=True) if attention == "softmax" else np.exp(shift) * N
    ref = raw - np.einsum("ij,ij->i", x, raw)[:, None] * x
    assert np.abs(X - ref).max() <= 1e-11 * np.abs(ref).max()


@pytest.mark.mpi
def test_distributed_sources_match_serial(rng, parallel_comm):
    """Each rank owns a slice of targets and sources; the result equals the serial one."""
    comm = parallel_comm
    from mpi4py import MPI

    model = random_model(rng, 3, "softmax", heads=2)
    x, y = random_sphere_points(rng, 40, 3), random_sphere_points(rng, 57, 3)
    w = rng.uniform(0.1, 1.0, 57)
    serial = DirectEvaluator(model, MPI.COMM_SELF).velocity(x, y, w)
    tx = np.array_split(np.arange(40), comm.size)[comm.rank]
    sy = np.array_split(np.arange(57), comm.size)[comm.rank]
    ev = DirectEvaluator(model, comm)
    local_sources = y[sy]
    for _ in range(2):  # second call reuses the gathered fixed sources
        X = ev.velocity(x[tx], local_sources, w[sy], fixed_sources=True)
        assert np.abs(X - serial[tx]).max() <= 1e-13 * np.abs(serial).max()
