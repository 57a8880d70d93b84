"""Initial densities on S^{d-1}: pure functions of Cartesian points, no mesh.

Kinds (the ``[initial]`` config section):

``uniform``
    1 / |S^{d-1}|.
``vmf``
    Mixture of von Mises-Fisher densities ``sum_k w_k C_d(kappa_k) exp(kappa_k <mu_k, x>)``
    with keys ``centers`` (list of d-vectors, normalised), ``kappas`` (>= 0) and ``weights``
    (>= 0, default equal; normalised to sum 1).
``harmonic``
    ``1/|S^{d-1}| + amplitude * Y(x)`` with an orthonormal real harmonic Y: on S^2 the real
    spherical harmonic of ``degree`` l and ``order`` m (``sqrt 2 Re Y_l^m`` for m > 0,
    ``sqrt 2 Im Y_l^|m|`` for m < 0); on S^1 ``cos(k (theta - phase)) / sqrt(pi)`` with
    k = ``degree``.
``expression``
    A safe expression in x, y, z (see :mod:`meanfield.expression`), e.g. ``"1 + 0.5*z"``; in a
    causal run (``model.mask = "causal"``) also in the token position s in [0, 1], e.g.
    ``"exp(4 * (1 - s) * x)"`` (the density of position s; without s every position has the same).

The PDE integrates these into cell averages and normalises them to mass 1; the particle
sampler draws from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import pi

import numpy as np
from scipy import special

from .expression import ExpressionError, compile_positional_expression, uses_position
from .sphere import sphere_area

KINDS: tuple[str, ...] = ("uniform", "vmf", "harmonic", "expression")
PARAMETERS: dict[str, tuple[str, ...]] = {
    "uniform": (),
    "vmf": ("centers", "kappas", "weights"),
    "harmonic": ("degree", "order", "amplitude", "phase"),
    "expression": ("expression",),
}


class InitialDensityError(ValueError):
    """Invalid initial-density parameters or data; the message names the field."""


def vmf_density(points: np.ndarray, center: np.ndarray, kappa: float) -> np.ndarray:
    """Normalised von Mises-Fisher density on S^{d-1}, overflow-safe for large kappa."""
    d = points.shape[1]
    if kappa == 0:
        return np.full(len(points), 1.0 / sphere_area(d))
    nu = d / 2 - 1
    log_c = nu * np.log(kappa) - (d / 2) * np.log(2 * pi) - np.log(special.ive(nu, kappa))
    return np.exp(log_c + kappa * (points @ center - 1.0))


def real_harmonic(points: np.ndarray, degree: int, order: int = 0, phase: float = 0.0) -> np.ndarray:
    """Orthonormal real harmonic at points on S^1 (d = 2) or S^2 (d = 3).

    S^2: ``Y_lm`` with l = degree, m = order (see module docstring); S^1:
    ``cos(k (theta - phase)) / sqrt(pi)`` for k = degree >= 1, ``1 / sqrt(2 pi)`` for k = 0.
    """
    if points.shape[1] == 2:
        theta = np.arctan2(points[:, 1], points[:, 0])
        if degree == 0:
            return np.full(len(points), 1.0 / np.sqrt(2 * pi))
        return np.cos(degree * (theta - phase)) / np.sqrt(pi)
    polar = np.arccos(np.clip(points[:, 2], -1.0, 1.0))
    azimuth = np.arctan2(points[:, 1], points[:, 0])
    y = special.sph_harm_y(degree, abs(order), polar, azimuth)
    if order > 0:
        return np.sqrt(2.0) * y.real
    if order < 0:
        return np.sqrt(2.0) * y.imag
    return y.real


@dataclass(frozen=True)
class InitialDensity:
    """A density on S^{d-1} given by kind and parameters; call it on points (n, d).

    ``params`` holds the kind's parameters as given, except for ``vmf``, whose centers
    (unit rows), kappas and weights (summing to 1) are the parsed arrays, and ``harmonic``,
    whose degree, order, amplitude and phase are given with their defaults filled in.

    An ``expression`` in the position s (a causal run) depends on the position: evaluate it
    with :meth:`at`; calling it without a position raises :class:`InitialDensityError`.
    """

    kind: str
    d: int
    params: dict = field(default_factory=dict)
    _function: Callable[[np.ndarray, float | np.ndarray], np.ndarray] | None = field(default=None, repr=False,
                                                                                     compare=False)
    depends_on_position: bool = False

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """Density values (not yet normalised for ``expression``) at ``points``."""
        if self.depends_on_position:
            raise InitialDensityError("initial.expression: depends on the position s; evaluate it at a position "
                                      "(InitialDensity.at)")
        return self.at(points, 0.0)

    def at(self, points: np.ndarray, s: float | np.ndarray) -> np.ndarray:
        """Density values (not yet normalised) of position ``s`` in [0, 1] at ``points`` (``s``: one
        position, or one per point); the same for every s unless :attr:`depends_on_position`."""
        assert self._function is not None
        return self._function(points, s)


def _vectors(value: object, d: int, name: str) -> np.ndarray:
    try:
        a = np.atleast_2d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise InitialDensityError(f"{name}: must be a list of {d}-vectors") from None
    if a.ndim != 2 or a.shape[1] != d or a.shape[0] == 0:
        raise InitialDensityError(f"{name}: must be a list of {d}-vectors, got shape {a.shape}")
    norms = np.linalg.norm(a, axis=1)
    if not np.all(np.isfinite(a)) or np.any(norms == 0):
        raise InitialDensityError(f"{name}: vectors must be finite and nonzero")
    return a / norms[:, None]


def _numbers(value: object, n: int, name: str, default: float | None = None) -> np.ndarray:
    if value is None and default is not None:
        return np.full(n, default)
    try:
        a = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise InitialDensityError(f"{name}: must be {_numbers_wanted(n)}") from None
    if a.size == 1:
        a = np.full(n, float(a[0]))
    if a.shape != (n,) or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise InitialDensityError(f"{name}: must be {_numbers_wanted(n, 'finite ', ' >= 0')}, got {value!r}")
    return a


def _numbers_wanted(n: int, qualifier: str = "", bound: str = "") -> str:
    """``a finite number >= 0`` for one value, ``a finite number >= 0 or a list of 3 of them`` for more."""
    one = f"a {qualifier}number{bound}"
    return one if n == 1 else f"{one} or a list of {n} of them"


def make_initial_density(spec: dict, d: int, causal: bool = False) -> InitialDensity:
    """Validate an ``[initial]`` section and build the density.

    Parameters
    ----------
    spec
        Mapping with ``kind`` and the kind's parameters (see module docstring).
    d
        Ambient dimension.
    causal
        A causal run (``model.mask = "causal"``): an expression may use the position ``s``.
    """
    kind = spec.get("kind", "uniform")
    if kind not in KINDS:
        raise InitialDensityError(f"initial.kind: must be one of {KINDS}, got {kind!r}")
    unknown = set(spec) - {"kind", *PARAMETERS[kind]}
    if unknown:
        raise InitialDensityError(
            f"initial: unknown key(s) {sorted(unknown)} for kind {kind!r}; allowed: {list(PARAMETERS[kind])}"
        )
    area = sphere_area(d)
    params = {k: v for k, v in spec.items() if k != "kind"}
    if kind == "uniform":
        fn: Callable[[np.ndarray], np.ndarray] = lambda p: np.full(len(p), 1.0 / area)  # noqa: E731
    elif kind == "vmf":
        if "centers" not in spec:
            raise InitialDensityError("initial.centers: required for kind 'vmf'")
        centers = _vectors(spec["centers"], d, "initial.centers")
        kappas = _numbers(spec.get("kappas", 10.0), len(centers), "initial.kappas")
        weights = _numbers(spec.get("weights"), len(centers), "initial.weights", default=1.0)
        if weights.sum() <= 0:
            raise InitialDensityError("initial.weights: must not all be zero")
        weights = weights / weights.sum()
        params = {"centers": centers, "kappas": kappas, "weights": weights}  # parsed and normalised
        fn = lambda p: sum(w * vmf_density(p, c, k) for c, k, w in zip(centers, kappas, weights))  # noqa: E731
    elif kind == "harmonic":
        if d not in (2, 3):
            raise InitialDensityError(f"initial.kind: 'harmonic' needs d = 2 or 3, got d = {d}")
        degree = spec.get("degree", 1)
        order = spec.get("order", 0)
        if not isinstance(degree, int) or degree < 0:
            raise InitialDensityError(f"initial.degree: must be an integer >= 0, got {degree!r}")
        if not isinstance(order, int) or abs(order) > degree or (d == 2 and order != 0):
            raise InitialDensityError(
                f"initial.order: must be an integer with |order| <= degree (and 0 on S1; use phase), got {order!r}"
            )
        amplitude = float(_numbers(spec.get("amplitude", 0.01), 1, "initial.amplitude")[0])
        phase = float(spec.get("phase", 0.0))
        if d == 3 and phase != 0.0:
            raise InitialDensityError("initial.phase: only for S1 harmonics; on S2 choose the order m")
        params = {"degree": degree, "order": order, "amplitude": amplitude, "phase": phase}  # with defaults
        fn = lambda p: 1.0 / area + amplitude * real_harmonic(p, degree, order, phase)  # noqa: E731
    else:
        text = spec.get("expression")
        if not isinstance(text, str):
            raise InitialDensityError("initial.expression: required for kind 'expression' (a string)")
        try:
            positional = compile_positional_expression(text)
        except ExpressionError as exc:
            raise InitialDensityError(str(exc)) from None
        if uses_position(text):
            if not causal:
                raise InitialDensityError("initial.expression: uses the position s, which only a causal run has "
                                          "(model.mask = 'causal')")
            return InitialDensity(kind, d, params, positional, depends_on_position=True)
        return InitialDensity(kind, d, params, lambda points, s: positional(points, 0.0))
    return InitialDensity(kind, d, params, lambda points, s: fn(points))
