"""The fast nonlocal evaluator (transforms for spectral heads, per-target expansion for the
others) against the direct one.

Error measure throughout: max_i |X_fast - X_direct| / max_i |X_direct| (see fast.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.sphere import random_sphere_points
from scipy.spatial.transform import Rotation
from scipy.special import eval_legendre, ive, spherical_in

from meanfield.model import AttentionModel, Head
from meanfield.nonlocal_field import (
    METHODS,
    AutoEvaluator,
    DirectEvaluator,
    FastEvaluator,
    PointGroup,
    direct_sums,
    make_evaluator,
    transforms,
)
from meanfield.nonlocal_field.base import components
from meanfield.nonlocal_field.expansion import block_points
from meanfield.nonlocal_field.fast import TRANSFORM_TOL_FLOOR, orthogonal_factor
from meanfield.nonlocal_field.harmonics import (
    basis_size,
    degree_offsets,
    harmonic_basis,
    kernel_coefficients,
    truncation_degree,
)
from meanfield.observables import interaction_energy

BETAS = (0.5, 1.0, 4.0, 9.0, 25.0)
TOLS = (1e-6, 1e-10)


def quadrature_points(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic quasi-uniform points (equispaced circle / Fibonacci sphere) with weights
    ``area * rho``, rho a smooth non-uniform probability density."""
    if d == 2:
        t = 2 * np.pi * (np.arange(n) + 0.5) / n
        x = np.column_stack([np.cos(t), np.sin(t)])
        area = 2 * np.pi / n
    else:
        i = np.arange(n) + 0.5
        z = 1 - 2 * i / n
        phi = np.pi * (3 - np.sqrt(5)) * i
        r = np.sqrt(1 - z * z)
        x = np.column_stack([r * np.cos(phi), r * np.sin(phi), z])
        area = 4 * np.pi / n
    rho = 1 + 0.6 * x[:, 0] + 0.3 * x[:, 1] * x[:, -1]
    w = area * rho
    return x, w / w.sum()


def random_heads(rng: np.random.Generator, d: int, count: int) -> tuple[Head, ...]:
    """Random Q, K, V scaled so that ||Q^T K||_2 = ||V||_2 = 1."""
    heads = []
    for h in range(count):
        Q, K, V = (rng.standard_normal((d, d)) for _ in range(3))
        s = np.sqrt(np.linalg.norm(Q.T @ K, 2))
        heads.append(Head(Q / s, K / s, V / np.linalg.norm(V, 2), 1.0 / (h + 1)))
    return tuple(heads)


def velocity_error(model: AttentionModel, fast_vals, direct_vals, targets: np.ndarray) -> float:
    X = direct_vals.velocity(model, targets)
    return float(np.abs(fast_vals.velocity(model, targets) - X).max() / np.abs(X).max())


def make_case(rng, d: int, beta: float, attention: str, heads: int, sources: str):
    model = AttentionModel(d, beta, attention, random_heads(rng, d, heads))
    if sources == "mesh":
        y, w = quadrature_points(600 if d == 3 else 200, d)
    else:
        y = random_sphere_points(rng, 400, d)
        w = rng.random(400)
        w /= w.sum()
    x = random_sphere_points(rng, 150, d)
    return model, x, y, w


# -- harmonics ----------------------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 3])
def test_addition_theorem(rng, d):
    L = 25
    u, v = random_sphere_points(rng, 7, d), random_sphere_points(rng, 7, d)
    Bu, Bv, off = harmonic_basis(u, L), harmonic_basis(v, L), degree_offsets(d, L)
    t = np.sum(u * v, axis=1)
    for l in range(L + 1):
        got = np.sum(Bu[off[l] : off[l + 1]] * Bv[off[l] : off[l + 1]], axis=0)
        if d == 3:
            ref = (2 * l + 1) / (4 * np.pi) * eval_legendre(l, t)
        else:
            ref = np.cos(l * np.arccos(np.clip(t, -1, 1)))
        np.testing.assert_allclose(got, ref, atol=1e-12)


def test_kernel_coefficients_match_scipy():
    k = np.array([0.0, 1e-12, 0.3, 1.0, 9.0, 60.0, 250.0])
    L = 40
    l = np.arange(L + 1)[:, None]
    s1 = np.where(l == 0, 1.0, 2.0) * ive(l, k)
    np.testing.assert_allclose(kernel_coefficients(2, L, k), s1, rtol=1e-12, atol=1e-300)
    pos = k[2:]
    s2 = 4 * np.pi * spherical_in(l, pos) * np.exp(-pos)
    np.testing.assert_allclose(kernel_coefficients(3, L, pos), s2, rtol=1e-12, atol=1e-300)
    at_zero = kernel_coefficients(3, L, np.zeros(1))[:, 0]
    assert at_zero[0] == pytest.approx(4 * np.pi) and not at_zero[1:].any()


def test_truncation_degree_growth():
    assert [truncation_degree(2, k, 1e-10) for k in (1, 4, 9, 25, 100)] == [10, 16, 23, 36, 71]
    assert truncation_degree(3, 0.0, 1e-10) == 0


# -- fast vs direct -----------------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("sources", ["mesh", "particles"])
def test_fast_matches_direct(rng, d, attention, sources):
    """All betas and tolerances, one and two heads; the halved degree fails somewhere."""
    worst_halved = 0.0
    for beta in BETAS:
        for heads in (1, 2):
            model, x, y, w = make_case(rng, d, beta, attention, heads, sources)
            direct = direct_sums(model, x, y, w)
            for tol in TOLS:
                fast = FastEvaluator(model, tol=tol)
                err = velocity_error(model, fast.evaluate(x, y, w), direct, x)
                assert err < tol, (beta, heads, tol, err)
                halved = FastEvaluator(model, tol=tol)
                halved.degrees = tuple(L // 2 for L in fast.degrees)
                worst_halved = max(
                    worst_halved, velocity_error(model, halved.evaluate(x, y, w), direct, x) / tol
                )
    assert worst_halved > 1.0  # the rule is tight: half the degree violates tol


@pytest.mark.parametrize("d", [2, 3])
def test_field_values_match_direct(rng, d):
    """N/Z (softmax) and exp(log_scale) N, exp(log_scale) Z (unnormalised) agree with direct."""
    for attention in ("softmax", "unnormalized"):
        model, x, y, w = make_case(rng, d, 4.0, attention, 2, "particles")
        f, g = FastEvaluator(model, tol=1e-10).evaluate(x, y, w), direct_sums(model, x, y, w)
        ratio_f, ratio_g = f.N / f.Z[..., None], g.N / g.Z[..., None]
        np.testing.assert_allclose(ratio_f, ratio_g, rtol=1e-9, atol=1e-10)
        Nf, Ng = np.exp(f.log_scale)[..., None] * f.N, np.exp(g.log_scale)[..., None] * g.N
        np.testing.assert_allclose(Nf, Ng, atol=1e-10 * np.abs(Ng).max())
        np.testing.assert_allclose(f.partition_function(), g.partition_function(), rtol=1e-9)


@pytest.mark.parametrize("d", [2, 3])
def test_large_beta_no_overflow(rng, d):
    """beta = 250: scaled sums stay finite; softmax velocity still matches direct."""
    model = AttentionModel(d, 250.0, "softmax")
    y, w = quadrature_points(2000, d) if d == 2 else quadrature_points(3000, d)
    x = random_sphere_points(rng, 40, d)
    f = FastEvaluator(model, tol=1e-8)
    vals = f.evaluate(x, y, w)
    assert np.all(np.isfinite(vals.N)) and np.all(np.isfinite(vals.Z))
    assert velocity_error(model, vals, direct_sums(model, x, y, w), x) < 1e-8


def test_degenerate_interaction(rng):
    """Q^T K singular: kappa(x) = 0 on a line of targets; rank-0 interaction gives L = 0."""
    d = 3
    Q = np.diag([1.0, 1.0, 0.0])
    model = AttentionModel(d, 3.0, "softmax", (Head(Q, np.eye(d), rng.standard_normal((d, d))),))
    x = np.vstack([[0.0, 0.0, 1.0], random_sphere_points(rng, 50, d)])
    y, w = quadrature_points(300, d)
    f = FastEvaluator(model, tol=1e-10)
    assert velocity_error(model, f.evaluate(x, y, w), direct_sums(model, x, y, w), x) < 1e-10
    zero = AttentionModel(d, 3.0, "unnormalized", (Head(np.zeros((d, d)), np.eye(d), np.eye(d)),))
    assert FastEvaluator(zero).degrees == (0,)
    vals = FastEvaluator(zero).evaluate(x, y, w)
    assert velocity_error(zero, vals, direct_sums(zero, x, y, w), x) < 1e-13


def test_fixed_sources_cache_and_diagnostics(rng):
    model, x, y, w = make_case(rng, 3, 9.0, "softmax", 1, "mesh")
    f = FastEvaluator(model, tol=1e-10)
    first = f.evaluate(x, y, w, fixed_sources=True)
    w2 = w * (1 + 0.5 * y[:, 2])
    again = f.evaluate(x, y, w2, fixed_sources=True)
    assert velocity_error(model, again, direct_sums(model, x, y, w2), x) < 1e-10
    assert not np.allclose(first.N, again.N)
    diag = f.diagnostics()
    assert diag["method"] == "fast" and diag["tol"] == 1e-10 and diag["degree"] == f.degrees[0]
    assert diag["a_priori_tail"] <= 1e-10
    assert 0 < diag["error_estimate"] < 1e-10


# -- selection ----------------------------------------------------------------------------
def test_make_evaluator_methods(rng):
    model = AttentionModel(3, 4.0)
    assert METHODS == ("direct", "fast", "auto")
    assert isinstance(make_evaluator(model, None, "fast", 1e-8), FastEvaluator)
    with pytest.raises(ValueError, match="nonlocal.method"):
        make_evaluator(model, None, "fmm")
    x, w = quadrature_points(30, 3)
    small = make_evaluator(model, None, "auto", 1e-8)
    small.evaluate(x, x, w)
    assert isinstance(small.chosen, DirectEvaluator)
    assert small.diagnostics()["method"] == "direct"
    x, w = quadrature_points(20000, 3)
    big = AutoEvaluator(model, None, 1e-8)
    big.evaluate(x[:10], x, w)  # decision by counts: many sources, few targets -> direct
    assert isinstance(big.chosen, DirectEvaluator)
    big = AutoEvaluator(model, None, 1e-8)
    big.evaluate(x, x, w)
    assert isinstance(big.chosen, FastEvaluator)
    assert make_evaluator(AttentionModel(4, 1.0), None, "auto").velocity(
        random_sphere_points(rng, 5, 4), random_sphere_points(rng, 5, 4), np.full(5, 0.2)
    ).shape == (5, 4)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("d", [2, 3])
def test_partition_sums_of_several_measures_are_each_ones(rng, d, method, monkeypatch):
    """``partition_sums`` (signed weights, k columns at once: one transform or one matrix
    product) equals one evaluation per column to round-off (the fast field's batch with NUFFTs,
    as one evaluation's), and the direct sums to the tolerance; spectral heads (one rotated, one
    scaled) and a general head."""
    import meanfield.nonlocal_field.fast as fast

    monkeypatch.setattr(fast, "BATCH_DIRECT_BYTES", 0)
    R = Rotation.random(random_state=3).as_matrix()[:d, :d] if d == 3 else np.array([[0.6, -0.8], [0.8, 0.6]])
    heads = (Head(np.eye(d), 1.3 * R, np.eye(d), 1.0), Head(np.eye(d), np.eye(d), np.eye(d), 0.5),
             Head(np.eye(d), np.diag(np.linspace(0.5, 1.5, d)), np.eye(d), 0.7))
    x, y, columns = random_sphere_points(rng, 150, d), random_sphere_points(rng, 200, d), rng.normal(size=(200, 5))
    for model in (AttentionModel(d, 3.0, "unnormalized", heads[:2]), AttentionModel(d, 3.0, "unnormalized", heads)):
        evaluator = make_evaluator(model, None, method, 1e-8)
        got = evaluator.partition_sums(x, y, columns, fixed_sources=True, fixed_targets=True)
        one = [evaluator.evaluate(x, y, columns[:, k], fixed_sources=True, fixed_targets=True).partition_function()
               for k in range(columns.shape[1])]
        scale = np.abs(got).max()
        np.testing.assert_allclose(got, np.stack(one, axis=-1), rtol=0, atol=1e-13 * scale)
        exact = DirectEvaluator(model).partition_sums(x, y, columns)
        np.testing.assert_allclose(got, exact, rtol=0, atol=1e-7 * scale)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("d", [2, 3])
def test_velocities_of_several_measures_are_each_ones(rng, d, attention, monkeypatch):
    """``velocities`` (k measures at once, a causal run's slices) equals one evaluation per
    measure: to round-off for direct and for the fast field's batch with NUFFTs, to the
    tolerance for its batch by exact harmonic sums (taken here for any number of measures); a
    rotated head with a general V beside a plain one.  Their components along given directions
    (a scheme's normals, one a target; or its tangent frames, j a target) are those of the
    velocities, also for a head that is not spectral (one evaluation after the other); by the
    exact sums they come from 1 + j products a measure (F, and N . P_x n from matrices built
    once; a few targets a block here; or, where those matrices would not fit their budget, the
    batch's ``[G, F]`` projected), equal to the batch's velocities to round-off.  Measures
    given as a mixing of the columns (a causal run's prefix sums) are those of the mixed
    columns."""
    import meanfield.nonlocal_field.fast as fast

    monkeypatch.setattr(fast, "BATCH_DIRECT_FUNCTIONS_PER_BASIS", 0.0)
    monkeypatch.setattr(fast, "COMPONENTS_BLOCK", 5 * 2 * 7)  # 7 targets a block, the last one shorter
    R = Rotation.random(random_state=4).as_matrix()[:d, :d] if d == 3 else np.array([[0.6, -0.8], [0.8, 0.6]])
    model = AttentionModel(d, 3.0, attention, (Head(np.eye(d), 1.3 * R, rng.normal(size=(d, d)), 1.0),
                                               Head(np.eye(d), np.eye(d), np.eye(d), 0.5)))
    x, y, columns = random_sphere_points(rng, 150, d), random_sphere_points(rng, 200, d), rng.random((200, 5))
    # not tangent: the components keep the projection's radial part
    directions, frames = rng.normal(size=(150, d)), rng.normal(size=(150, 2, d))
    mixing = np.tril(rng.random((5, 5)))  # prefix sums with weights
    exact = np.stack([DirectEvaluator(model).velocity(x, y, columns[:, k]) for k in range(5)])
    for method, budget, tol in (("direct", 0, 1e-13), ("fast", 0, 1e-13), ("fast", fast.BATCH_DIRECT_BYTES, 1e-7)):
        monkeypatch.setattr(fast, "BATCH_DIRECT_BYTES", budget)
        evaluator = make_evaluator(model, None, method, 1e-8)
        got = evaluator.velocities(x, y, columns, fixed_sources=True, fixed_targets=True)
        one = np.stack([evaluator.velocity(x, y, columns[:, k], fixed_sources=True, fixed_targets=True)
                        for k in range(5)])
        scale = np.abs(one).max()
        assert np.abs(got - one).max() <= tol * scale, (method, budget)
        assert np.abs(got - exact).max() <= 1e-7 * np.abs(exact).max(), (method, budget)
        for n in (directions, frames):
            along = evaluator.velocities(x, y, columns, fixed_sources=True, fixed_targets=True, directions=n)
            assert along.shape == (5,) + n.shape[:-1]
            bound = scale * np.abs(n).max() * d
            assert np.abs(along - components(one, n)).max() <= tol * bound
            # the exact sums' components (F and N . P_x n from matrices built once) equal the batch's velocities'
            assert np.abs(along - components(got, n)).max() <= 1e-12 * bound, (method, budget)
        mixed = evaluator.velocities(x, y, columns, fixed_sources=True, fixed_targets=True, directions=frames,
                                     mixing=mixing)
        alone = evaluator.velocities(x, y, columns @ mixing.T, fixed_sources=True, fixed_targets=True,
                                     directions=frames)
        assert np.abs(mixed - alone).max() <= 1e-12 * np.abs(alone).max(), (method, budget)
    # components' matrices beyond COMPONENT_BYTES: the exact sums' [G, F], projected (none kept)
    monkeypatch.setattr(fast, "COMPONENT_BYTES", 0)
    evaluator = make_evaluator(model, None, "fast", 1e-8)
    got = evaluator.velocities(x, y, columns, fixed_sources=True, fixed_targets=True)
    along = evaluator.velocities(x, y, columns, fixed_sources=True, fixed_targets=True, directions=frames)
    assert np.abs(along - components(got, frames)).max() <= 1e-13 * np.abs(got).max() * np.abs(frames).max() * d
    assert not evaluator._component_sums
    general = AttentionModel(d, 3.0, attention, (Head(np.eye(d), np.diag(np.linspace(0.5, 1.5, d)), np.eye(d), 1.0),))
    evaluator = make_evaluator(general, None, "fast", 1e-8)  # not spectral: one measure after the other
    one = np.stack([evaluator.velocity(x, y, columns[:, k]) for k in range(5)])
    for n in (directions, frames):
        along = evaluator.velocities(x, y, columns, directions=n)
        assert np.abs(along - components(one, n)).max() <= 1e-13 * np.abs(one).max() * 3 * d
    mixed = evaluator.velocities(x, y, columns, mixing=mixing)
    assert np.abs(mixed - evaluator.velocities(x, y, columns @ mixing.T)).max() <= 1e-13 * np.abs(mixed).max()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("d", [2, 3])
def test_linear_sums_are_the_explicit_double_sums(rng, d, method):
    """``linear_sums``: sum_j exp(beta <Q x, K y_j>) (<A x, b_j> - s_j) for k columns, against the
    explicit double sum (to round-off for direct, to the tolerance for the transforms, whose
    sum over the components is taken on the coefficients), with and without scalars, and for
    a constant kernel (beta Q^T K = 0)."""
    R = Rotation.random(random_state=5).as_matrix()[:d, :d] if d == 3 else np.array([[0.6, -0.8], [0.8, 0.6]])
    x, y = random_sphere_points(rng, 120, d), random_sphere_points(rng, 160, d)
    vectors, scalars, A = rng.normal(size=(160, d, 3)), rng.normal(size=(160, 3)), rng.normal(size=(d, d))
    for heads in ((Head(np.eye(d), 1.3 * R, np.eye(d), 1.0), Head(np.eye(d), np.eye(d), np.eye(d), 0.5)),
                  (Head(np.eye(d), np.zeros((d, d)), np.eye(d), 1.0),)):
        model = AttentionModel(d, 3.0, "unnormalized", heads)
        kernel = np.stack([np.exp(model.beta * (x @ h.Q.T) @ (y @ h.K.T).T) for h in heads])  # (H, m, n)
        values = np.einsum("md,ndk->mnk", x @ A.T, vectors)
        for s in (scalars, None):
            exact = np.einsum("hmn,mnk->hmk", kernel, values - (s[None] if s is not None else 0.0))
            got = make_evaluator(model, None, method, 1e-9).linear_sums(x, y, vectors, s, A, fixed_sources=True,
                                                                          fixed_targets=True)
            scale = np.einsum("hmn,mnk->hmk", kernel, np.abs(values) + (np.abs(s)[None] if s is not None else 0)).max()
            np.testing.assert_allclose(got, exact, rtol=0, atol=(1e-13 if method == "direct" else 1e-8) * scale)


# -- MPI ----------------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("d", [2, 3])
def test_fast_mpi_matches_serial(parallel_comm, d):
    """Sources and targets split over COMM_WORLD give the COMM_SELF result to 1e-12."""
    comm = parallel_comm
    from mpi4py import MPI

    rng = np.random.default_rng(7)  # same data on every rank
    model = AttentionModel(d, 9.0, "softmax", random_heads(rng, d, 2))
    y, w = random_sphere_points(rng, 500, d), rng.random(500)
    x = random_sphere_points(rng, 120, d)
    serial = FastEvaluator(model, MPI.COMM_SELF, 1e-10).evaluate(x, y, w)
    parts = lambda n: np.array_split(np.arange(n), comm.size)[comm.rank]  # noqa: E731
    mine, src = parts(x.shape[0]), parts(y.shape[0])
    split = FastEvaluator(model, comm, 1e-10).evaluate(x[mine], y[src], w[src])
    ref = serial.velocity(model, x)[mine]
    got = split.velocity(model, x[mine])
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_allclose(split.Z, serial.Z[:, mine], rtol=1e-12)


def _planned_transforms(monkeypatch) -> list[int]:
    """The sizes of the point sets the fast evaluator plans a transform for (a NUFFT or the
    direct sums), in the order planned."""
    import meanfield.nonlocal_field.fast as fast

    planned: list[int] = []
    real = fast.point_transform

    def counting(points, *args, **kwargs):
        planned.append(len(points))
        return real(points, *args, **kwargs)

    monkeypatch.setattr(fast, "point_transform", counting)
    return planned


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("asked", [False, True])
def test_direct_sums_at_a_few_fixed_points_only_when_asked(rng, d, asked, monkeypatch):
    """nonlocal.direct_sums: a few fixed points (a rank's share on many ranks) are summed
    exactly instead of by a NUFFT only when asked, so by default every rank count takes the
    same kind of transform; either way the velocity meets the tolerance."""
    import meanfield.nonlocal_field.fast as fast_module
    from meanfield.nonlocal_field.transforms import DirectTransform

    kinds: set[type] = set()
    real = fast_module.point_transform

    def recording(*args, **kwargs):
        plan = real(*args, **kwargs)
        kinds.add(type(plan))
        return plan

    monkeypatch.setattr(fast_module, "point_transform", recording)
    model = AttentionModel(d, 4.0, "softmax")
    y, w = quadrature_points(60, d)
    x = random_sphere_points(rng, 40, d)
    values = FastEvaluator(model, tol=1e-8, direct_sums=asked).evaluate(x, y, w, fixed_sources=True,
                                                                        fixed_targets=True)
    assert velocity_error(model, values, direct_sums(model, x, y, w), x) < 1e-8
    assert (DirectTransform in kinds) == asked


@pytest.mark.parametrize("d", [2, 3])
def test_cached_fixed_points_give_the_same_sums(rng, d, monkeypatch):
    """Fixed targets and sources (the PDE's use) are planned once; changing weights still counts
    (against a fresh evaluator given the same points as fixed: the same kind of transform)."""
    model = AttentionModel.build(d, 4.0, "softmax", heads=[{}, {"Q": 2 * np.eye(d), "weight": 0.5}])
    x, y = random_sphere_points(rng, 300, d), random_sphere_points(rng, 200, d)
    ev = FastEvaluator(model, tol=1e-10)
    planned = _planned_transforms(monkeypatch)
    first = []
    for k in range(3):
        w = rng.uniform(0.1, 1.0, 200)
        start = len(planned)
        cached = ev.evaluate(x, y, w, fixed_sources=True, fixed_targets=True)
        if k == 0:
            first = planned[start:]
            assert 200 in first and 300 in first  # the sources and the targets (both heads: one plan)
        else:
            assert planned[start:] == []  # nothing planned again
        fresh = FastEvaluator(model, tol=1e-10).evaluate(x, y, w, fixed_sources=True, fixed_targets=True)
        for a, b in ((cached.N, fresh.N), (cached.Z, fresh.Z), (cached.log_scale, fresh.log_scale)):
            assert np.array_equal(a, b)
    # a different target array is planned anew (not served stale values); the sources are kept
    x2 = random_sphere_points(rng, 300, d)
    start = len(planned)
    again = ev.evaluate(x2, y, w, fixed_sources=True, fixed_targets=True)
    assert planned[start:] and 200 not in planned[start:]
    fresh = FastEvaluator(model, tol=1e-10).evaluate(x2, y, w, fixed_sources=True, fixed_targets=True)
    assert np.array_equal(again.Z, fresh.Z)


@pytest.mark.parametrize("d", [2, 3])
def test_tokens_as_targets_and_sources_by_value_not_by_object(rng, d):
    """The particle solver evaluates the field of the tokens at the tokens.  Passing one array
    twice, two equal arrays, or an array restored through pickling (an MPI scatter of a
    checkpoint: ``np.asarray`` wraps it in a new view) gives the same velocity bit for bit
    (targets that are not the sources get a transform plan of their own, whose NUFFT error
    differs at the level of the tolerance)."""
    import pickle

    model = AttentionModel.build(d, 4.0, "softmax")
    x, w = random_sphere_points(rng, 300, d), np.full(300, 1.0 / 300)
    same = FastEvaluator(model).velocity(x, x, w)
    restored = pickle.loads(pickle.dumps(x))
    for targets, sources in ((x.copy(), x), (x, x.copy()), (restored, restored)):
        got = FastEvaluator(model).velocity(targets, sources, w)
        assert np.array_equal(got, same), np.abs(got - same).max()


# -- spectral heads (transforms) ----------------------------------------------------------
def spectral_heads(d: int) -> dict[str, tuple[Head, ...]]:
    """Heads with Q^T K a multiple of an orthogonal matrix, and one mixed with a general head."""
    eye = np.eye(d)
    if d == 3:
        R = Rotation.random(random_state=4).as_matrix()
    else:
        R = np.array([[np.cos(0.8), -np.sin(0.8)], [np.sin(0.8), np.cos(0.8)]])
    V = np.diag(np.linspace(0.5, 1.0, d))
    general = Head(np.diag(np.linspace(0.3, 1.0, d)), eye, eye, 0.5)
    return {
        "identity": (Head(eye, eye, eye),),
        "rotated": (Head(2.0 * R, 0.5 * eye, V, 1.0), Head(eye, -eye, eye, 0.5)),
        "reflected": (Head(R @ np.diag([1.0] * (d - 1) + [-1.0]), eye, V),),
        "mixed": (Head(eye, eye, eye), general),
    }


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_spectral_heads_match_direct(rng, d, attention, monkeypatch):
    """Transform heads (identity, rotated, reflected, mixed with a general head) give the direct
    velocity to the tolerance at every beta; the estimate follows the error (truncation and
    NUFFT: NUFFTs throughout, however few the points); halving the degree breaks the tolerance
    somewhere (the rule is tight)."""
    monkeypatch.setattr(transforms, "DIRECT_BYTES", 0)
    worst_halved = 0.0
    for name, heads in spectral_heads(d).items():
        for beta in (0.5, 4.0, 25.0):
            model = AttentionModel(d, beta, attention, heads)
            y, w = quadrature_points(600 if d == 3 else 200, d)
            x = random_sphere_points(rng, 150, d)
            direct = direct_sums(model, x, y, w)
            for tol in (1e-4, 1e-7, 1e-10):
                fast = FastEvaluator(model, tol=tol)
                assert fast.spectral_heads == ([0] if name == "mixed" else list(range(len(heads))))
                err = velocity_error(model, fast.evaluate(x, y, w), direct, x)
                assert err < tol, (name, beta, tol, err)
                estimate = fast.diagnostics()["error_estimate"]
                # never far below the error, never alarming (above tol) when the error is far below
                assert err / 10 < estimate < max(100 * err, tol), (name, beta, tol, err, estimate)
                halved = FastEvaluator(model, tol=tol)
                halved.degrees = tuple(L // 2 for L in fast.degrees)
                worst_halved = max(worst_halved, velocity_error(model, halved.evaluate(x, y, w), direct, x) / tol)
    assert worst_halved > 1.0


def test_orthogonal_factor():
    R = Rotation.random(random_state=2).as_matrix()
    c, O = orthogonal_factor(3.0 * R)
    assert c == pytest.approx(3.0) and np.allclose(O, R, atol=1e-14)
    c, O = orthogonal_factor(-R)
    assert c == pytest.approx(1.0) and np.allclose(O, -R, atol=1e-14)
    assert orthogonal_factor(np.zeros((3, 3)))[0] == 0.0
    assert orthogonal_factor(np.diag([1.0, 1.0, 1.001])) is None


def test_below_the_transform_floor_every_head_is_exact(rng):
    """tol < TRANSFORM_TOL_FLOOR: no NUFFT; the exact expansion meets the tolerance."""
    model = AttentionModel(3, 4.0, "softmax")
    y, w = quadrature_points(500, 3)
    x = random_sphere_points(rng, 50, 3)
    fast = FastEvaluator(model, tol=1e-13)
    assert 1e-13 < TRANSFORM_TOL_FLOOR and fast.spectral_heads == []
    assert velocity_error(model, fast.evaluate(x, y, w), direct_sums(model, x, y, w), x) < 1e-13


@pytest.mark.parametrize("method", ["fast", "direct"])
def test_point_groups_equal_one_concatenated_measure(rng, method, monkeypatch):
    """Mesh sources (fixed) plus a few moving atoms, evaluated at fixed mesh targets and at the
    atoms, equal one evaluation of the concatenated measure; the fixed groups' plans survive
    while the atoms move."""
    d = 3
    model = AttentionModel(d, 4.0, "softmax")
    y, w = quadrature_points(400, d)
    x = random_sphere_points(rng, 120, d)
    ev = make_evaluator(model, None, method, 1e-10)
    planned = _planned_transforms(monkeypatch)
    for k in range(3):
        atoms, masses = random_sphere_points(rng, 3, d), rng.uniform(0.01, 0.1, 3)
        start = len(planned)
        got = ev.evaluate_groups(
            [PointGroup(x, None, True), PointGroup(atoms)],
            [PointGroup(y, w, True), PointGroup(atoms, masses)],
        )
        points, weights = np.vstack([y, atoms]), np.concatenate([w, masses])
        for values, targets in zip(got, (x, atoms)):
            ref = direct_sums(model, targets, points, weights)
            assert velocity_error(model, values, ref, targets) < 1e-10
        if method == "fast" and k > 0:  # only the atoms (3 points) are planned again
            assert planned[start:] and max(planned[start:]) <= 3, planned[start:]


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_an_empty_target_group_gives_empty_values(rng, d, attention):
    """A group of no targets (the atoms on ranks other than 0) beside the mesh targets: empty
    values, the other group's unchanged, the estimate still defined.  (A numpy reshape that
    could not size an empty group raised on those ranks alone, and the job hung.)"""
    model = AttentionModel(d, 9.0, attention)
    y, w = quadrature_points(200, d)
    x = random_sphere_points(rng, 40, d)
    fast = FastEvaluator(model, tol=1e-10)
    mesh, empty = fast.evaluate_groups([PointGroup(x, None, True), PointGroup(x[:0])], [PointGroup(y, w, True)])
    assert empty.N.shape == (1, 0, d) and empty.Z.shape == (1, 0) and empty.velocity(model, x[:0]).shape == (0, d)
    assert velocity_error(model, mesh, direct_sums(model, x, y, w), x) < 1e-10
    assert 0 < fast.diagnostics()["error_estimate"] < 1e-8


@pytest.mark.parametrize("d", [2, 3])
def test_energy_matches_the_double_sum(rng, d):
    """The energy from coefficients (spectral heads, rotated and reflected) and from the field
    at the points (a general head) equals the direct double sum to 1e-12."""
    y = random_sphere_points(rng, 1500, d)
    y[:, 0] += 1.0
    y /= np.linalg.norm(y, axis=1)[:, None]
    w = rng.uniform(0.1, 1.0, 1500)
    w /= w.sum()
    for name, heads in spectral_heads(d).items():
        model = AttentionModel(d, 9.0, "softmax", heads)
        ref = interaction_energy(DirectEvaluator(model), y, w)
        naive = sum(h.weight * w @ np.exp(9.0 * (y @ h.Q.T) @ (y @ h.K.T).T) @ w for h in heads) / 18.0
        assert ref == pytest.approx(naive, rel=1e-12)
        fast = FastEvaluator(model, tol=1e-4)
        assert interaction_energy(fast, y, w, fixed_sources=True) == pytest.approx(ref, rel=1e-12), name
        assert interaction_energy(fast, y, w, fixed_sources=True) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("d", [2, 3])
def test_expansion_streams_without_a_cache(rng, d):
    """General heads: with no cache budget the basis is built and contracted block by block,
    with the same sums as with the cache; the cache keeps fixed blocks within its budget."""
    model = AttentionModel(d, 4.0, "softmax", random_heads(rng, d, 2))
    x, y = random_sphere_points(rng, 5000 if d == 3 else 40000, d), random_sphere_points(rng, 300, d)
    w = rng.uniform(0.1, 1.0, 300)
    streamed = FastEvaluator(model, tol=1e-8, cache_bytes=0)
    cached = FastEvaluator(model, tol=1e-8, cache_bytes=1 << 30)
    for _ in range(2):
        a = streamed.evaluate(x, y, w, fixed_targets=True)
        b = cached.evaluate(x, y, w, fixed_targets=True)
        np.testing.assert_array_equal(a.N, b.N)
    assert streamed.cache.nbytes == 0 and 0 < cached.cache.nbytes <= 1 << 30
    rows = [basis_size(d, L + 1) for L in cached.degrees]
    assert cached.cache.nbytes == 8 * sum(rows) * x.shape[0]
    assert all(block_points(r) < x.shape[0] for r in rows)  # several blocks per head


def test_auto_builds_only_the_evaluator_it_chooses(rng, monkeypatch):
    """Choosing direct (few points) builds no fast evaluator: the choice reads the fast field's
    plan (degrees, heads) from the model alone; many points build the fast one."""
    import meanfield.nonlocal_field.auto as auto

    built = []
    monkeypatch.setattr(auto, "FastEvaluator", lambda *args, **kwargs: built.append(args) or FastEvaluator(*args,
                                                                                                            **kwargs))
    model = AttentionModel(3, 4.0, "softmax", (Head(np.eye(3), np.eye(3), np.eye(3), 1.0),))
    few = AutoEvaluator(model)
    few.evaluate(random_sphere_points(rng, 20, 3), random_sphere_points(rng, 20, 3), np.ones(20))
    assert isinstance(few.chosen, DirectEvaluator) and built == []
    many = AutoEvaluator(model)
    points = random_sphere_points(rng, 20000, 3)
    many.evaluate(points, points, np.ones(20000), fixed_sources=True, fixed_targets=True)
    assert isinstance(many.chosen, FastEvaluator) and len(built) == 1


def test_auto_chooses_fast_for_small_circles():
    """The issue's case: 512 S^1 cells (fixed mesh points) go to fast; 20 cells stay direct."""
    model = AttentionModel(2, 4.0)
    for n, expected in ((512, FastEvaluator), (20, DirectEvaluator)):
        x, w = quadrature_points(n, 2)
        auto = AutoEvaluator(model, None, 1e-6)
        auto.evaluate(x, x, w, fixed_sources=True, fixed_targets=True)
        assert isinstance(auto.chosen, expected), n


@pytest.mark.mpi
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("kind", ["identity", "rotated"])
def test_spectral_mpi_matches_serial(parallel_comm, d, kind):
    """Spectral heads (the default Q = K = I, and rotated ones) with sources and targets split
    over COMM_WORLD give the COMM_SELF result to 1e-12 (the NUFFT kernel does not depend on the
    number of points per rank); so does the energy."""
    comm = parallel_comm
    from mpi4py import MPI

    rng = np.random.default_rng(11)
    model = AttentionModel(d, 9.0, "softmax", spectral_heads(d)[kind])
    y, w = random_sphere_points(rng, 3000, d), rng.random(3000)
    x = random_sphere_points(rng, 500, d)
    serial = FastEvaluator(model, MPI.COMM_SELF, 1e-6)
    ref = serial.evaluate(x, y, w).velocity(model, x)
    parts = lambda n: np.array_split(np.arange(n), comm.size)[comm.rank]  # noqa: E731
    mine, src = parts(x.shape[0]), parts(y.shape[0])
    split = FastEvaluator(model, comm, 1e-6)
    got = split.evaluate(x[mine], y[src], w[src]).velocity(model, x[mine])
    np.testing.assert_allclose(got, ref[mine], rtol=0, atol=1e-12 * np.abs(ref).max())
    energy = interaction_energy(split, y[src], w[src])
    assert energy == pytest.approx(interaction_energy(serial, y, w), rel=1e-13)
