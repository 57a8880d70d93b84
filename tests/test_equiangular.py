"""The equiangular ODE of MODEL.md against the batched token engine, and the phase diagram's statistics."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from meanfield.config import load_config
from meanfield.particles.batch import run_batch
from meanfield.particles.prompts import prompt_batch
from meanfield.particles.statistics import cluster_counts, gram, prompt_statistics
from meanfield.problem import Problem
from meanfield.references.equiangular import equiangular, equiangular_rate, equiangular_time


@pytest.fixture(autouse=True)
def one_thread():
    """One BLAS thread: the shared machine's cores are busy, and many threads on few small products only wait."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def _batch(d: int, n: int, beta: float, prompts: int, attention: str = "softmax", **particles):
    config = {"name": "phase", "initial": {"kind": "uniform"}, "model": {"beta": beta, "attention": attention},
              "particles": {"n": n, "d": d, "seed": 0, **particles}}
    return prompt_batch(Problem(load_config(config)), prompts)


def _statistics(batch, times: list[float]) -> dict[str, np.ndarray]:
    """Per time, the statistics of every prompt: arrays (times, prompts)."""
    out: dict[str, np.ndarray] = {}

    def observe(chunk, k, x):
        for key, value in prompt_statistics(gram(np, x)).items():
            out.setdefault(key, np.zeros((len(times), batch.prompts)))[k, chunk.start:chunk.stop] = value

    run_batch(batch, times, observe)
    return out


def _orthonormal_errors(attention: str, beta: float, dt: float, times: list[float]) -> list[float]:
    """Largest distance of the inner products of n = 32 orthonormal tokens in d = 40 (exactly
    equiangular) moved by the engine's RK4 from the ODE's g, at each time."""
    n, d = 32, 40
    batch = _batch(d, n, beta, 1, attention, dt=dt)
    start = np.linalg.qr(np.random.default_rng(1).standard_normal((d, n)))[0].T  # orthonormal rows
    batch = dataclasses.replace(batch, initial=lambda chunk: start[None])
    got: dict[int, np.ndarray] = {}
    run_batch(batch, times, lambda chunk, k, x: got.setdefault(k, gram(np, x)[0]))
    g = equiangular(times, beta, n, attention)
    return [float(np.abs(got[k][~np.eye(n, dtype=bool)] - g[k]).max()) for k in range(len(times))]


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_orthonormal_tokens_follow_the_ode(attention: str, beta: float) -> None:
    """Orthonormal tokens follow the ODE to 1e-12 up to t = 0.5 (RK4, dt = 0.002), and to t = 1
    but under USA at beta = 4, where g climbs from 0.06 to 0.44 and RK4's own error is 2e-10."""
    early, late = _orthonormal_errors(attention, beta, 0.002, [0.5, 1.0])
    assert early < 1e-12
    assert late < (1e-9 if (attention, beta) == ("unnormalized", 4.0) else 1e-12)


def test_orthonormal_tokens_rk4_order() -> None:
    """USA, beta = 4, t = 1: the distance to the ODE is RK4's error, 16 times smaller at half the step."""
    coarse, fine = (_orthonormal_errors("unnormalized", 4.0, dt, [1.0])[0] for dt in (0.002, 0.001))
    assert 12 < coarse / fine < 20 and coarse > 1e-11


def test_rate_matches_a_direct_derivative() -> None:
    """g' of the ODE is the inner products' derivative of an equiangular configuration (one velocity evaluation)."""
    from meanfield.layers import LayerSchedule
    from meanfield.masks import NoMask
    from meanfield.particles.batch import LayerArrays, velocity

    n, d, g = 5, 6, 0.3
    L = np.linalg.cholesky(np.full((n, n), g) + (1 - g) * np.eye(n))  # rows with <x_i, x_j> = g
    x = np.zeros((1, n, d))
    x[0, :, :n] = L
    for attention in ("softmax", "unnormalized"):
        layer = LayerSchedule.build(d, {"beta": 2.5, "attention": attention}).layers[0]
        arrays = LayerArrays.stack([layer], NoMask(), n)
        v = velocity(np, arrays.structure, arrays.arrays, x)[0]
        derivative = (v @ x[0].T + x[0] @ v.T)[0, 1]
        assert derivative == pytest.approx(float(equiangular_rate(g, 2.5, n, attention)), rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_high_d_concentration(beta: float) -> None:
    """d = 1024, n = 32, SA: the mean inner product is within sqrt(log d / d) of g(t) at t = 1, 2, 5."""
    d, n = 1024, 32
    times = [1.0, 2.0, 5.0]
    stats = _statistics(_batch(d, n, beta, 4), times)
    band = np.sqrt(np.log(d) / d)
    g = equiangular(times, beta, n)
    mean = stats["mean_inner_product"].mean(axis=1)
    assert np.all(np.abs(mean - g) < band), (mean, g, band)


@pytest.mark.slow
@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_clustered_fraction_zero_then_one(beta: float) -> None:
    """d = 128, n = 32: no pair clustered at t = 0, all pairs and one cluster at t = 10."""
    stats = _statistics(_batch(128, 32, beta, 4), [0.0, 10.0])
    assert np.all(stats["clustered_fraction"][0] == 0.0) and np.all(stats["clusters"][0] == 32)
    assert np.all(stats["clustered_fraction"][1] == 1.0) and np.all(stats["clusters"][1] == 1)


def test_clusters_of_known_configurations() -> None:
    """Identical tokens are one cluster; two groups far apart, two; a chain of close tokens links into one."""
    rng = np.random.default_rng(2)
    one = np.repeat(rng.standard_normal((1, 1, 7)), 6, axis=1)
    one /= np.linalg.norm(one, axis=-1, keepdims=True)
    e = np.eye(7)
    two = np.stack([e[0], e[0], e[1], e[1], e[1], e[0]])[None]
    angle = 0.9 * np.sqrt(2e-4)  # neighbours at 1 - cos ~ 0.81e-4: linked; ends at 3 steps: not
    chain = np.array([[np.cos(k * angle), np.sin(k * angle)] for k in range(4)])[None]
    assert list(cluster_counts(gram(np, np.concatenate([one, two])))) == [1, 2]
    assert cluster_counts(gram(np, chain))[0] == 1 and gram(np, chain)[0, 0, 3] < 1 - 1e-4
    stats = prompt_statistics(gram(np, two))
    assert stats["clustered_fraction"][0] == pytest.approx((3 * 2 + 2 * 3) / 30)
    assert stats["mean_inner_product"][0] == pytest.approx(12 / 30)


def test_equiangular_time() -> None:
    """The crossing time (a quadrature of 1/g') solves the ODE: g at it is the level, for one beta
    and for an array of them (the phase diagram's curve), where a time past t_max is inf."""
    t = equiangular_time(0.999, 2.0, 32)
    assert isinstance(t, float) and equiangular([t], 2.0, 32)[0] == pytest.approx(0.999, abs=1e-9)
    assert equiangular_time(0.5, 1.0, 32, "unnormalized") < equiangular_time(0.5, 1.0, 32)
    betas = np.array([0.5, 2.0, 4.0])
    for attention in ("softmax", "unnormalized"):
        times = equiangular_time(0.99, betas, 8, attention)
        assert times.shape == (3,) and np.all(np.isfinite(times))
        for beta, crossing in zip(betas, times):
            assert equiangular([crossing], beta, 8, attention)[0] == pytest.approx(0.99, abs=1e-9)
        cut = equiangular_time(0.99, betas, 8, attention, t_max=float(np.median(times)))
        assert list(np.isfinite(cut)) == list(times <= np.median(times))
