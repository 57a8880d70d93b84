"""Colour scales shared by all frames of a picture or a movie, labels and marker styles."""

from __future__ import annotations

from typing import TypedDict

import numpy as np
from matplotlib.colors import LogNorm, Normalize

from ..spheres import Sphere


class MarkerStyle(TypedDict, total=False):
    """Keyword arguments of :meth:`matplotlib.axes.Axes.scatter` that style point markers."""

    facecolors: str
    edgecolors: str
    color: str
    alpha: float
    linewidths: float


LOG_DECADES = 4.0  # a log scale spans at most this many decades below the maximum (unless vmin is given)
DENSITY_LABEL = "density \N{GREEK SMALL LETTER RHO}"
ATOM_SCALE = 600.0  # marker area (points^2) of a point of mass 1: area proportional to mass
ATOM_STYLE: MarkerStyle = {"facecolors": "none", "edgecolors": "red", "linewidths": 1.2}
TOKEN_SIZE = 3.0  # marker area of a token
TOKEN_STYLE: MarkerStyle = {"color": "k", "alpha": 0.5, "linewidths": 0}
COLOURED_TOKEN_STYLE: MarkerStyle = {"alpha": 0.8, "linewidths": 0}  # coloured by the tokens' density
TOKEN_DENSITY_LABEL = "token density [1/sr]\n(fraction of tokens in a cap around each)"


def density_label(sphere: Sphere) -> str:
    """Colour-bar / axis label with the density's unit (the sphere's): per steradian on S^2, per radian on S^1."""
    return f"{DENSITY_LABEL} [1/{sphere.density_unit}]"


def color_norm(values: np.ndarray, *, log: bool = False, vmin: float | None = None,
               vmax: float | None = None, floor: float = 0.0, least_top: float = 0.0) -> Normalize:
    """One colour scale covering ``values`` (any shape, e.g. every frame of a movie).

    Linear: from min(0, smallest value) to the largest.  Log: from the smallest positive
    value, but at most :data:`LOG_DECADES` decades below the largest; values below (a DG1
    undershoot, say) take the lowest colour (see :func:`clip_to`); with no positive value at
    all (a hybrid run whose density went to the atoms) the scale ends at 1.  A hybrid run's
    residual density (:mod:`meanfield.plotting.focus`) does not set the scale: a log scale
    starts no lower than ``floor`` and the top is at least ``least_top``.  ``vmin``/``vmax``
    override.
    """
    finite = np.asarray(values, float)
    finite = finite[np.isfinite(finite)]
    hi = float(vmax) if vmax is not None else max(float(finite.max()) if finite.size else 1.0, least_top)
    if log:
        hi = hi if hi > 0 else 1.0
        positive = finite[finite > max(floor, 0.0)]
        lowest = max(hi * 10.0**-LOG_DECADES, floor)
        lo = float(vmin) if vmin is not None else max(float(positive.min()) if positive.size else lowest, lowest)
        return LogNorm(lo, max(hi, lo * (1 + 1e-9)))
    lo = float(vmin) if vmin is not None else min(float(finite.min()) if finite.size else 0.0, 0.0)
    return Normalize(lo, max(hi, lo + 1e-300))


def clip_to(norm: Normalize, values: np.ndarray) -> np.ndarray:
    """Values clipped into the scale's range (a log scale would mask values <= 0)."""
    return np.clip(values, norm.vmin, norm.vmax)


def marker_sizes(count: int, masses: np.ndarray | None) -> np.ndarray:
    """Marker areas of point masses: ATOM_SCALE * mass (mass 1 each when not given)."""
    return ATOM_SCALE * (np.ones(count) if masses is None else np.asarray(masses, float))
