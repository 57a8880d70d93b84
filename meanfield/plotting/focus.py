"""Where a density picture of a hybrid run looks, and which densities set its colour scale.

After captures, a hybrid run's density is a residual (often 1e-9 of the uniform density or
less) beside atoms that hold nearly all the mass.  Two rules keep its pictures about the
clusters:

* **centre**: the orthographic view looks at the heaviest cluster, density or atom
  (:func:`heaviest_direction`): the density's clusters are the basins of its significant
  peaks above the uniform density (:func:`meanfield.peaks.cluster_labels`, prominence 1%),
  weighed by their cell masses; the heaviest atom wins when it holds more;
* **colour floor**: densities below :data:`RESIDUAL_FLOOR` times the uniform density are
  residual (:func:`residual_floor`) and do not set the colour scale
  (:func:`colour_limits`): a log scale starts no lower than the floor, and the top is at
  least the uniform density (the least height of a cluster peak in the cluster analysis), so
  a residual is drawn in the lowest colours instead of being stretched over the whole scale.
"""

from __future__ import annotations

import numpy as np

from ..peaks import LEVEL, PROMINENCE, cell_graph, cluster_labels
from ..sphere import cell_measure, sphere_area

#: Densities below this multiple of the uniform density are residual (colour scale).
RESIDUAL_FLOOR = 1e-2


def residual_floor(d: int = 3) -> float:
    """The colour floor on S^{d-1}: ``RESIDUAL_FLOOR / |S^{d-1}|``."""
    return RESIDUAL_FLOOR / sphere_area(d)


def colour_limits(d: int = 3) -> dict[str, float]:
    """``floor`` and ``least_top`` of :func:`~meanfield.plotting.style.color_norm` for a hybrid run."""
    return {"floor": residual_floor(d), "least_top": 1.0 / sphere_area(d)}


def heaviest_direction(vertices: np.ndarray, cells: np.ndarray, values: np.ndarray,
                       points: np.ndarray | None = None, masses: np.ndarray | None = None) -> np.ndarray:
    """Unit vector to the heaviest cluster: a density cluster's top cell or an atom (module docstring).

    Parameters
    ----------
    vertices, cells
        (V, 3) mesh vertices, (C, 3) triangles.
    values
        (C,) cell averages or (C, 3) vertex values (DG1).
    points, masses
        The atoms (k, 3) and (k,), if any.
    """
    corners = vertices[cells]
    centroids = corners.mean(axis=1)
    averages = np.asarray(values, float).reshape(len(cells), -1).mean(axis=1)
    labels, peaks = cluster_labels(averages, cell_graph(cells), LEVEL / sphere_area(3), PROMINENCE)
    best, where = -1.0, centroids[int(np.argmax(averages))]
    if len(peaks):
        weights = np.bincount(labels[labels >= 0], (averages * cell_measure(corners))[labels >= 0], len(peaks))
        best, where = float(weights.max()), centroids[peaks[int(np.argmax(weights))]]
    if points is not None and masses is not None and len(masses) and float(np.max(masses)) > best:
        where = np.asarray(points, float)[int(np.argmax(masses))]
    return where / np.linalg.norm(where)
