"""Point transforms (ducc0 NUFFT) and the coefficient algebra of the transform evaluator,
each against an independent computation: explicit sums of scipy's spherical harmonics,
transforms of other weights, the addition theorem, moved points."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.sphere import random_sphere_points
from scipy.spatial.transform import Rotation
from scipy.special import eval_legendre, sph_harm_y

from meanfield.nonlocal_field import transforms
from meanfield.nonlocal_field.harmonics import harmonic_basis
from meanfield.nonlocal_field.spectral import euler_zyz
from meanfield.nonlocal_field.transforms import (
    DirectTransform,
    PointTransform,
    point_transform,
    spherical_angles,
    theta_series,
)

EPS = 1e-12
#: Both kinds of transform of a point set (the NUFFT and the direct sums).
KINDS = [PointTransform, DirectTransform]


def explicit_coefficients(y: np.ndarray, w: np.ndarray, L: int) -> np.ndarray:
    """sum_j w_j exp(-i n psi_j) (S^1) or sum_j w_j conj(Y_lm(y_j)) (S^2), by scipy."""
    if y.shape[1] == 2:
        psi = np.arctan2(y[:, 1], y[:, 0])
        return np.array([np.sum(w * np.exp(-1j * n * psi)) for n in range(L + 1)])
    theta, phi = spherical_angles(y).T
    out = np.zeros((L + 1, L + 1), dtype=complex)
    for l in range(L + 1):
        for m in range(l + 1):
            out[l, m] = np.sum(w * np.conj(sph_harm_y(l, m, theta, phi)))
    return out


def explicit_series(c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The real function with coefficients c (negative orders by conjugate symmetry) at x."""
    if x.shape[1] == 2:
        psi = np.arctan2(x[:, 1], x[:, 0])
        return np.real(c[0] + 2 * sum(c[n] * np.exp(1j * n * psi) for n in range(1, c.shape[0])))
    theta, phi = spherical_angles(x).T
    f = np.zeros(x.shape[0])
    for l in range(c.shape[0]):
        f += np.real(c[l, 0] * sph_harm_y(l, 0, theta, phi))
        for m in range(1, l + 1):
            f += 2 * np.real(c[l, m] * sph_harm_y(l, m, theta, phi))
    return f


def real_coefficients(rng, d: int, L: int) -> np.ndarray:
    """Random coefficients of a real function (c_l0 real on S^2, c_0 real on S^1)."""
    shape = (L + 1,) if d == 2 else (L + 1, L + 1)
    c = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if d == 2:
        c[0] = c[0].real
    else:
        c = np.tril(c)
        c[:, 0] = c[:, 0].real
    return c


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("d", [2, 3])
def test_adjoint_matches_explicit_sums(rng, d, kind):
    y, w = random_sphere_points(rng, 300, d), rng.uniform(-1, 1, 300)
    y[:3] = np.eye(d)[:3] if d == 3 else y[:3]  # include the poles' neighbourhood exactly
    L = 11
    got = kind(y, L, EPS).adjoint(w)
    np.testing.assert_allclose(got, explicit_coefficients(y, w, L), rtol=0, atol=20 * EPS * np.abs(w).sum())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("count", [1, 2, 5])
def test_adjoint_of_several_weight_vectors_is_each_ones(rng, d, kind, count):
    """k measures on the same points at once (two to a complex NUFFT, an odd count leaves one
    alone): each one's coefficients, to round-off of the one-measure transform and to the
    NUFFT's accuracy of the explicit sums."""
    y, w = random_sphere_points(rng, 300, d), rng.uniform(-1, 1, (count, 300))
    L = 11
    transform = kind(y, L, EPS)
    got = transform.adjoint(w)
    assert got.shape == (count, *transform.spectrum.shape)
    for k in range(count):
        one = transform.adjoint(w[k])
        np.testing.assert_allclose(got[k], one, rtol=0, atol=1e-13 * np.abs(w[k]).sum())
        np.testing.assert_allclose(got[k], explicit_coefficients(y, w[k], L), rtol=0,
                                   atol=20 * EPS * np.abs(w[k]).sum())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("d", [2, 3])
def test_adjoint_up_to_a_degree(rng, d, kind):
    """``adjoint(w, degree)``: the coefficients up to that degree are the full transform's (the
    NUFFT's all of them; the direct sums leave the higher ones 0, computing only what is asked
    for), each against the explicit sums."""
    y, w = random_sphere_points(rng, 300, d), rng.uniform(-1, 1, (3, 300))
    L, degree = 11, 7
    transform = kind(y, L, EPS)
    full, part = transform.adjoint(w), transform.adjoint(w, degree)
    low = np.arange(L + 1) <= degree  # the degree is the first index (S^2: [l, m]; S^1: [n])
    np.testing.assert_allclose(part[:, low], full[:, low], rtol=0, atol=1e-13 * np.abs(w).sum())
    np.testing.assert_allclose(part[0], explicit_coefficients(y, w[0], L) * np.where(
        low, 1.0, 0.0 if kind is DirectTransform else 1.0).reshape((-1,) + (1,) * (d - 2)), rtol=0,
        atol=20 * EPS * np.abs(w[0]).sum())
    if kind is DirectTransform:
        assert not part[:, ~low].any()


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("count", [1, 3, 4])
@pytest.mark.parametrize("kind", KINDS)
def test_synthesis_matches_explicit_series(rng, d, count, kind):
    """Several real functions share complex transforms (an odd count leaves one alone)."""
    L = 9
    x = random_sphere_points(rng, 200, d)
    c = np.stack([real_coefficients(rng, d, L) for _ in range(count)])
    got = kind(x, L, EPS, adjoint=False).synthesis(c)
    for k in range(count):
        ref = explicit_series(c[k], x)
        np.testing.assert_allclose(got[k], ref, rtol=0, atol=50 * EPS * np.abs(c[k]).sum())


@pytest.mark.parametrize("kind", KINDS)
def test_synthesis_pads_lower_degrees(rng, kind):
    x = random_sphere_points(rng, 50, 3)
    c = real_coefficients(rng, 3, 4)
    got = kind(x, 12, EPS).synthesis(np.pad(c, ((0, 8), (0, 8)))[None])[0]
    np.testing.assert_allclose(got, explicit_series(c, x), atol=1e-10)


def test_theta_series_reproduces_spherical_harmonics(rng):
    L = 7
    T = theta_series(L)
    theta, phi = rng.uniform(0, np.pi, 20), rng.uniform(-np.pi, np.pi, 20)
    k = np.arange(-L, L + 1)
    for l in range(L + 1):
        for m in range(l + 1):
            got = np.exp(1j * m * phi) * (T[m, :, l] @ np.exp(1j * np.outer(k, theta)))
            np.testing.assert_allclose(got, sph_harm_y(l, m, theta, phi), atol=1e-13)


@pytest.mark.parametrize("d", [2, 3])
def test_vector_moments_are_coordinate_moments(rng, d):
    """Coefficients of w y_k from those of w (recurrences) = transforms of the weights w y_k."""
    y, w = random_sphere_points(rng, 250, d), rng.uniform(0.1, 1, 250)
    L = 13
    plan = PointTransform(y, L, EPS)
    vector = plan.spectrum.vector_moments(plan.adjoint(w))
    for k in range(d):
        ref = explicit_coefficients(y, w * y[:, k], L - 1)
        np.testing.assert_allclose(vector[k], ref, rtol=0, atol=1e-10)


def rotations(rng) -> list[np.ndarray]:
    about_z = Rotation.from_euler("z", 0.7).as_matrix()
    flip = Rotation.from_euler("y", np.pi).as_matrix() @ about_z  # theta = pi
    return [Rotation.random(random_state=5).as_matrix(), about_z, np.eye(3), flip]


def test_euler_angles_reconstruct_rotations(rng):
    def Rz(a):
        return Rotation.from_euler("z", a).as_matrix()

    def Ry(a):
        return Rotation.from_euler("y", a).as_matrix()

    for P in rotations(rng):
        psi, theta, phi = euler_zyz(P)
        np.testing.assert_allclose(Rz(phi) @ Ry(theta) @ Rz(psi), P, atol=1e-14)


@pytest.mark.parametrize("d", [2, 3])
def test_rotation_moves_the_measure(rng, d):
    """Coefficients of the measure moved by R (proper and improper) = coefficients of the
    moved points."""
    y, w = random_sphere_points(rng, 200, d), rng.uniform(0.1, 1, 200)
    L = 10
    if d == 3:
        cases = rotations(rng) + [-Rotation.random(random_state=9).as_matrix()]
    else:
        a = 0.9
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        cases = [rot, rot @ np.diag([1.0, -1.0])]
    plan = PointTransform(y, L, EPS)
    for R in cases:
        moved = plan.spectrum.rotate(plan.adjoint(w), R)
        ref = PointTransform(y @ R.T, L, EPS).adjoint(w)
        np.testing.assert_allclose(moved, ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("d", [2, 3])
def test_real_moments_match_the_real_basis(rng, d):
    y, w = random_sphere_points(rng, 100, d), rng.uniform(-1, 1, 100)
    L = 8
    plan = PointTransform(y, L, EPS)
    np.testing.assert_allclose(plan.spectrum.real_moments(plan.adjoint(w)), harmonic_basis(y, L) @ w, atol=1e-10)


@pytest.mark.parametrize("d", [2, 3])
def test_pairing_is_the_addition_theorem(rng, d):
    """sum_m conj(a_lm) a_lm = sum_ij w_i w_j (2l+1)/(4 pi) P_l(<y_i, y_j>) (S^2), and
    sum_ij w_i w_j cos(n (psi_i - psi_j)) on S^1 (both orders n and -n)."""
    y, w = random_sphere_points(rng, 60, d), rng.uniform(0.1, 1, 60)
    L = 6
    plan = PointTransform(y, L, EPS)
    a = plan.adjoint(w)
    pair = plan.spectrum.pairing(a, a)
    t = np.clip(y @ y.T, -1, 1)
    for l in range(L + 1):
        if d == 3:
            ref = w @ ((2 * l + 1) / (4 * np.pi) * eval_legendre(l, t)) @ w
        else:
            ref = (1 if l == 0 else 2) * w @ np.cos(l * np.arccos(t)) @ w
        assert pair[l] == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("d", [2, 3])
def test_split_points_sum_to_the_whole(rng, d):
    """The NUFFT kernel does not depend on how many points a rank holds: the coefficients of
    a few points plus those of the rest equal the coefficients of all to round-off, at a
    loose accuracy where a different kernel would show."""
    y, w = random_sphere_points(rng, 20000, d), rng.uniform(0.1, 1, 20000)
    L, eps = 15, 1e-5
    whole = PointTransform(y, L, eps).adjoint(w)
    parts = PointTransform(y[:3], L, eps).adjoint(w[:3]) + PointTransform(y[3:], L, eps).adjoint(w[3:])
    assert np.abs(parts - whole).max() <= 1e-13 * np.abs(whole).max()
    x = random_sphere_points(rng, 5, d)
    c = real_coefficients(rng, d, L)[None]
    alone = PointTransform(x, L, eps, adjoint=False).synthesis(c)
    among = PointTransform(np.vstack([x, y]), L, eps, adjoint=False).synthesis(c)[:, :5]
    np.testing.assert_allclose(alone, among, rtol=0, atol=1e-13 * np.abs(among).max())


@pytest.mark.parametrize("kind", KINDS)
def test_empty_point_sets(kind):
    for d in (2, 3):
        plan = kind(np.zeros((0, d)), 5, 1e-8)
        assert not plan.adjoint(np.zeros(0)).any()
        assert plan.synthesis(np.zeros((2,) + plan.spectrum.shape, dtype=complex)).shape == (2, 0)


@pytest.mark.parametrize("d", [2, 3])
def test_few_points_are_summed_directly(rng, d, monkeypatch):
    """point_transform: a rank's few fixed points take the exact sums (no NUFFT's fixed grid
    FFT), many points, points that move (a matrix built at every call) and a basis matrix beyond
    DIRECT_BYTES a NUFFT; the two agree to the NUFFT's accuracy, and the direct sums report an
    accuracy of 0."""
    L, eps = 14, 1e-7
    few, many = random_sphere_points(rng, 20, d), random_sphere_points(rng, 40000, d)
    direct = point_transform(few, L, eps)
    assert isinstance(direct, DirectTransform) and direct.epsilon == 0.0
    assert isinstance(point_transform(few, L, eps, fixed=False), PointTransform)
    assert isinstance(point_transform(many, L, eps), PointTransform)
    w = rng.uniform(0.1, 1, 20)
    nufft = PointTransform(few, L, eps)
    assert nufft.epsilon == eps
    np.testing.assert_allclose(direct.adjoint(w), nufft.adjoint(w), rtol=0, atol=eps * w.sum())
    monkeypatch.setattr(transforms, "DIRECT_BYTES", 0)
    assert isinstance(point_transform(few, L, eps), PointTransform)
