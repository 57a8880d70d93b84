"""Clusters at the density level: peaks, basins, tracking and crossing times.

For PDE runs (FV cell averages or the DG1 state, S^1 and S^2) and particle runs (a kernel
density estimate on a mesh), with one definition of a cluster, the basin of a significant peak
(:mod:`meanfield.peaks.basins`; the other variants: :mod:`meanfield.analysis`).  Modules, one
job each:

* :mod:`meanfield.peaks`: cell adjacency of a mesh, watershed and persistence;
  :mod:`.coords`: geodesics, normal coordinates, angles;
* :mod:`.cells`: the analysis mesh (flat and curved cell quadrature);
* :mod:`.fields`: PDE data (peaks by :mod:`.reconstruction`, basin moments);
  :mod:`.particles`: token densities (:mod:`.noise`: their bandwidth and prominence for n
  tokens); :mod:`.spectral`: the spectral S^1 reference;
* :mod:`.atoms`: atoms of hybrid runs as clusters; :mod:`.frame`: the clusters at one time;
* :mod:`.tracking`: ids and events; :mod:`.crossing`: crossing times; :mod:`.history`;
* :mod:`.compare`: cluster-by-cluster agreement; :mod:`.files`, :mod:`.plots`;
* :mod:`.api`: :func:`analyse_run`, :func:`analyse_positions` (causal runs), :func:`cluster_study`
  (``meanfield clusters``).

Serial and pure numpy/scipy (no dolfinx).
"""

from .api import (
    PROMINENCE,
    analyse_fields,
    analyse_positions,
    analyse_run,
    analyse_spectral,
    cluster_study,
    format_summary,
)
from .compare import FrameComparison, compare_frames, crossing_differences, frame_comparisons
from .frame import Frame
from .history import FACTORS, BasinHistory, Crossing

__all__ = [
    "FACTORS",
    "PROMINENCE",
    "BasinHistory",
    "Crossing",
    "Frame",
    "FrameComparison",
    "analyse_fields",
    "analyse_run",
    "analyse_positions",
    "cluster_study",
    "compare_frames",
    "frame_comparisons",
    "crossing_differences",
    "format_summary",
    "analyse_spectral",
]
