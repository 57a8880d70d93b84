"""Initial densities: normalisation, orthonormal harmonics, safe expressions, bad input."""

import numpy as np
import pytest

from meanfield.expression import ExpressionError, compile_expression
from meanfield.initial import InitialDensityError, make_initial_density, real_harmonic, vmf_density
from meanfield.mesh import circle, icosphere
from meanfield.sphere import cell_measure, cell_rule


def sphere_quadrature(sphere: str) -> tuple[np.ndarray, np.ndarray]:
    """Points and weights that integrate over S^1 / S^2 exactly up to the cell rule's error:
    flat-cell quadrature points mapped radially, weighted by the radial map's Jacobian
    (solid angle: dS = |x . n| / |x|^d dA)."""
    m = icosphere(5) if sphere == "S2" else circle(2000)
    verts = m.points[m.cells]
    d = verts.shape[2]
    bary, weights = cell_rule(d)
    flat = np.einsum("qv,cvd->cqd", bary, verts)
    if d == 3:
        normal = np.cross(verts[:, 1] - verts[:, 0], verts[:, 2] - verts[:, 0])
    else:
        tangent = verts[:, 1] - verts[:, 0]
        normal = np.stack([tangent[:, 1], -tangent[:, 0]], axis=1)
    normal /= np.linalg.norm(normal, axis=1)[:, None]
    radius = np.linalg.norm(flat, axis=2)
    jac = np.abs(np.einsum("cqd,cd->cq", flat, normal)) / radius**d
    w = cell_measure(verts)[:, None] * weights * jac
    return (flat / radius[..., None]).reshape(-1, d), w.ravel()


@pytest.mark.parametrize("sphere", ["S1", "S2"])
def test_quadrature_measures_the_sphere(sphere):
    _, w = sphere_quadrature(sphere)
    assert abs(w.sum() - (4 * np.pi if sphere == "S2" else 2 * np.pi)) < 1e-8


@pytest.mark.parametrize("sphere, kappa", [("S1", 0.0), ("S1", 5.0), ("S2", 2.0), ("S2", 50.0)])
def test_vmf_is_normalised(sphere, kappa):
    x, w = sphere_quadrature(sphere)
    center = np.eye(x.shape[1])[0]
    assert abs(vmf_density(x, center, kappa) @ w - 1.0) < 1e-6


@pytest.mark.parametrize("sphere, modes", [("S1", [(1, 0, 0.0), (2, 0, 0.3), (4, 0, 0.0)]),
                                           ("S2", [(1, -1, 0), (1, 0, 0), (2, 1, 0), (3, -2, 0), (3, 3, 0)])])
def test_real_harmonics_are_orthonormal(sphere, modes):
    x, w = sphere_quadrature(sphere)
    Y = np.array([real_harmonic(x, l, m, ph) for l, m, ph in modes])
    gram = (Y * w) @ Y.T
    assert np.abs(gram - np.eye(len(modes))).max() < 1e-6


def test_expressions_are_parsed_not_evaluated():
    f = compile_expression("1 + 0.5*z + exp(-x**2) * (y > 0)")
    p = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, -0.6, 0.8]])
    assert np.allclose(f(p), [2.0, 1.0, 1.4])
    assert np.array_equal(compile_expression("1 + (pi > 3)")(np.zeros((4, 3))), np.full(4, 2.0))
    for bad in ("__import__('os')", "x.real", "open(1)", "[x]", "lambda: 1", "exp(x, out=y)"):
        with pytest.raises(ExpressionError, match="initial.expression"):
            compile_expression(bad)


@pytest.mark.parametrize("spec, field", [
    ({"kind": "blob"}, "initial.kind"),
    ({"kind": "vmf"}, "initial.centers"),
    ({"kind": "vmf", "centers": [[1, 0, 0]], "kappas": [-1.0]}, "initial.kappas"),
    ({"kind": "vmf", "centers": [[1, 0, 0]], "weights": [0.0]}, "initial.weights"),
    ({"kind": "harmonic", "degree": 2, "order": 3}, "initial.order"),
    ({"kind": "harmonic", "degree": -1}, "initial.degree"),
    ({"kind": "uniform", "amplitude": 1.0}, "unknown key"),
    ({"kind": "expression"}, "initial.expression"),
])
def test_bad_initial_specs_name_the_field(spec, field):
    with pytest.raises(InitialDensityError, match=field):
        make_initial_density(spec, 3)
