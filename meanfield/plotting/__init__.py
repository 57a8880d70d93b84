"""Pictures of runs: S^2 maps, S^1 line plots and space-time images, time series and movies.

Everything is built on :class:`matplotlib.figure.Figure` objects (returned, so a notebook shows
them inline); nothing here imports pyplot or changes matplotlib's backend.  Importing this
package is cheap: matplotlib is imported with the first function used.

* :func:`plot_run` -- all pictures of a run into a folder; :func:`plot_run_directory` reads a run
  directory first and never overwrites anything but its own pictures (``meanfield plot RUN``).
* :func:`sphere_map`, :func:`token_map` -- a density / tokens on S^2 (Mollweide + orthographic).
* :func:`circle_density`, :func:`circle_spacetime` -- a density on S^1 against theta, and in time.
* :func:`time_series` -- order parameter, energy, extreme densities, mass drift, cluster count
  against t, with the ends of a layered model's layers.
* :func:`write_movie` -- record a redrawable figure (:class:`SphereMaps`, :class:`CircleLines`).
* :func:`run_data` -- the adapter from run results to what the plots read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "CircleLines",
    "RunData",
    "SphereMaps",
    "circle_density",
    "circle_spacetime",
    "color_norm",
    "plot_run",
    "plot_run_directory",
    "run_data",
    "sphere_map",
    "time_series",
    "token_map",
    "write_movie",
]

_LAZY = {
    "plot_run": "run_plots",
    "plot_run_directory": "run_plots",
    "sphere_map": "sphere_maps",
    "token_map": "sphere_maps",
    "SphereMaps": "sphere_maps",
    "circle_density": "circle",
    "circle_spacetime": "circle",
    "CircleLines": "circle",
    "time_series": "series",
    "write_movie": "movie",
    "run_data": "data",
    "RunData": "data",
    "color_norm": "style",
}

if TYPE_CHECKING:
    from .circle import CircleLines, circle_density, circle_spacetime
    from .data import RunData, run_data
    from .movie import write_movie
    from .run_plots import plot_run, plot_run_directory
    from .series import time_series
    from .sphere_maps import SphereMaps, sphere_map, token_map
    from .style import color_norm


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'meanfield.plotting' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
